#!/bin/sh
# Builds the libFuzzer targets of Fuzz/ (Kiln's modules and the targets with
# -sanitize=fuzzer,address; C code with ASan and coverage), links one binary per target, makes
# seed corpora from the fixtures and runs each target for FUZZ_RUNS executions (default 1,000,000)
# or FUZZ_SECONDS seconds, whichever comes first; FUZZ_SEED for a repeatable run. A crash stops with libFuzzer's report and the input in
# .build/fuzz/crashes/; make it a regression file in Tests/Fixtures.
set -eu
cd "$(dirname "$0")/.."
SWIFT=${SWIFT:-swift}
B=.build/fuzz/release
OUT=.build/fuzz
KILN=.build/release/kiln
TARGETS=${FUZZ_TARGETS:-"FuzzNPY FuzzConfig FuzzPackage FuzzONNX FuzzArtifact FuzzAssets FuzzDeploy FuzzCompile"}
"$SWIFT" build -c release --package-path Fuzz --build-path "$OUT" \
  -Xswiftc -sanitize=fuzzer,address -Xcc -fsanitize=fuzzer-no-link,address
"$SWIFT" build -c release -Xswiftc -enable-testing --product kiln >/dev/null
# The seeds: fixtures, the examples, and artifacts compiled from them.
C="$OUT/corpus"
rm -rf "$C" "$OUT/seed"; mkdir -p "$C" "$OUT/seed" "$OUT/crashes"
for t in FuzzNPY FuzzConfig FuzzPackage FuzzONNX FuzzArtifact FuzzAssets FuzzDeploy FuzzCompile; do mkdir -p "$C/$t"; done
cp Tests/Fixtures/npy/*.npy "$C/FuzzNPY/"
cp Tests/Fixtures/compression/*.json examples/compression.json "$C/FuzzConfig/" 2>/dev/null || true
find Tests/Fixtures/onnx -name '*.onnx' -size -256k -exec cp {} "$C/FuzzONNX/" \;
# Packages with subgraphs (format 2): the control-flow fixtures, converted.
mkdir -p "$OUT/seed/pkg"
for n in if_nested_then loop_early_exit scan_reverse_axes; do
  "$KILN" convert "Tests/Fixtures/onnx/models/$n.onnx" -o "$OUT/seed/pkg/$n.kiln" >/dev/null
done
python3 - "$C/FuzzPackage" Tests/Fixtures/malformed examples "$OUT/seed/pkg" <<'PY'
import os, struct, sys
out = sys.argv[1]
for root in sys.argv[2:]:
    for d in sorted(os.listdir(root)):
        m, w = os.path.join(root, d, "manifest.pb"), os.path.join(root, d, "weights.bin")
        if os.path.isfile(m):
            a = open(m, "rb").read()
            b = open(w, "rb").read() if os.path.isfile(w) else b""
            open(os.path.join(out, d.replace(".kiln", "") + ".bin"), "wb").write(struct.pack("<I", len(a)) + a + b)
PY
"$KILN" compile examples/TinyClassifier.kiln --arch x86_64 -o "$OUT/seed/c" >/dev/null
"$KILN" compile examples/TinyEncoder.kiln --arch x86_64 -o "$OUT/seed/e" >/dev/null
cp "$OUT/seed/c/TinyClassifier.x86_64.compiled" "$OUT/seed/e/TinyEncoder.x86_64.compiled" "$C/FuzzArtifact/"
# Small artifacts, one per op and whole-model fixture (control flow included) that converts and compiles, so mutations reach every kernel
# family quickly (the examples are 72 and 201 KiB; these are mostly under 4 KiB). FUZZ_OP_SEEDS=0
# leaves them out.
mkdir -p "$OUT/seed/ops"
[ "${FUZZ_OP_SEEDS:-1}" = 0 ] || for f in Tests/Fixtures/onnx/ops/*.onnx Tests/Fixtures/onnx/models/*.onnx; do
  n=$(basename "$f" .onnx)
  "$KILN" convert "$f" -o "$OUT/seed/ops/$n.kiln" >/dev/null 2>&1 || continue
  "$KILN" compile "$OUT/seed/ops/$n.kiln" --arch x86_64 -o "$OUT/seed/ops/$n" >/dev/null 2>&1 || continue
  cp "$OUT/seed/ops/$n/$n.x86_64.compiled" "$C/FuzzArtifact/op-$n.compiled" 2>/dev/null || true
done
cp "$OUT/seed/c/assets.json" "$C/FuzzAssets/classifier.json"
# Deployment seeds, each behind its mode byte: a manifest (0), an archive (1) and an encrypted
# artifact (2) of a small op fixture, and a key file (3).
"$KILN" convert Tests/Fixtures/onnx/ops/abs.onnx -o "$OUT/seed/abs.kiln" >/dev/null
"$KILN" compile "$OUT/seed/abs.kiln" --arch x86_64,arm64 -o "$OUT/seed/abs" >/dev/null
"$KILN" archive "$OUT/seed/abs" -o "$OUT/seed/abs.kilnarchive" >/dev/null
rm -f "$OUT/seed/fuzz.kilnkey"; "$KILN" keygen -o "$OUT/seed/fuzz.kilnkey" >/dev/null
"$KILN" compile "$OUT/seed/abs.kiln" --arch x86_64 --encrypt "$OUT/seed/fuzz.kilnkey" -o "$OUT/seed/abs-enc" >/dev/null
{ printf '\000'; cat "$OUT/seed/abs/assets.json"; } > "$C/FuzzDeploy/manifest"
{ printf '\001'; cat "$OUT/seed/abs.kilnarchive"; } > "$C/FuzzDeploy/archive"
{ printf '\002'; cat "$OUT/seed/abs-enc/abs.x86_64.compiled"; } > "$C/FuzzDeploy/encrypted"
{ printf '\003'; cat "$OUT/seed/fuzz.kilnkey"; } > "$C/FuzzDeploy/key"
# Compiler seeds, each behind a header byte (0: no mutations; see Fuzz/Sources/FuzzCompile): the
# op fixtures, the small model fixtures, and graphs where a binary op meets an NHWC activation and
# a tensor with run-time dims (tools/make_fuzz_seeds.py), those also with a mutation or two.
for f in Tests/Fixtures/onnx/ops/*.onnx Tests/Fixtures/onnx/models/*.onnx Tests/Fixtures/fuzz/compile-seeds/*.onnx; do
  [ "$(wc -c <"$f")" -lt 65000 ] || continue
  { printf '\000'; cat "$f"; } > "$C/FuzzCompile/$(basename "$(dirname "$f")")-$(basename "$f" .onnx)"
done
for f in Tests/Fixtures/fuzz/compile-seeds/*.onnx; do
  n=$(basename "$f" .onnx)
  # The first input's first dim made the symbol 'n'; the binary op's operands swapped, then
  # input 1's last dim made 1 with the declared types kept.
  { printf '\001\000\000\000\010'; cat "$f"; } > "$C/FuzzCompile/$n-symbolic"
  { printf '\012\007\002\000\001\000\001\003\002'; cat "$f"; } > "$C/FuzzCompile/$n-swapped"
done
export KILN_FUZZ_KEY="$PWD/$OUT/seed/fuzz.kilnkey"
export KILN_FUZZ_ARTIFACT="$PWD/$OUT/seed/c/TinyClassifier.x86_64.compiled"
objects() { for m in KilnFormat KilnReference KilnCompiler KilnCompression KilnONNX KilnRuntime KilnStore CKilnSpecs CKilnHash CKilnKernels CKilnCompression FuzzSupport "$1"; do ls "$B/$m.build/"*.o; done; }
for t in $TARGETS; do
  rm -f "$B/$t.build/main.swift.o" "$OUT/$t"
  swiftc -sanitize=fuzzer,address $(objects "$t") -lz -lprotobuf-c -lcrypto -lFoundationNetworking -o "$OUT/$t" 2>&1 | grep -v "Cannot export local symbol" || true
  # A target that does not link fails the run (an old binary must never be fuzzed in its place).
  [ -x "$OUT/$t" ] || { echo "$t: did not link"; exit 1; }
  # FUZZ_RUNS (default 1,000,000) executions, or FUZZ_SECONDS, whichever comes first.
  limit="-runs=${FUZZ_RUNS:-1000000}"
  if [ -n "${FUZZ_SECONDS:-}" ]; then limit="$limit -max_total_time=$FUZZ_SECONDS"; fi
  # FUZZ_SEED fixes libFuzzer's mutation sequence (CI uses one, so a run is repeatable).
  if [ -n "${FUZZ_SEED:-}" ]; then limit="$limit -seed=$FUZZ_SEED"; fi
  rm -f "$OUT/crashes/$t-"*
  echo "== $t"
  # Artifacts are larger than the other inputs: their seeds must fit whole.
  max_len=65536; [ "$t" = FuzzArtifact ] && max_len=262144
  # The report goes to a file, not a pipe: a crashing input can leave helper processes (the
  # symbolizer) holding a pipe open. Swift's own backtracer is off: libFuzzer and ASan report
  # the crash, and the backtracer's memory reads trip ASan.
  SWIFT_BACKTRACE=enable=no "$OUT/$t" "$C/$t" $limit -max_len=$max_len -rss_limit_mb=4096 -artifact_prefix="$OUT/crashes/$t-" \
    -print_final_stats=1 >"$OUT/$t.log" 2>&1 || true
  grep -E "^(#[0-9]+ +DONE|Done|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY|artifact_prefix|Test unit written)" "$OUT/$t.log" || true
  if ls "$OUT/crashes/$t-"* >/dev/null 2>&1; then
    # What stopped it, for a log that shows only this output: the runtime's message and the
    # innermost frames.
    grep -E "Fatal error|Illegal instruction|ERROR: libFuzzer|^ +#[0-9]+ " "$OUT/$t.log" | head -40 || true
    echo "$t: crash inputs in $OUT/crashes"
    exit 1
  fi
done
echo "fuzzing: no crashes"
