#!/usr/bin/env python3
"""Kiln compiled artifacts vs onnxruntime and OpenVINO, in one run, on 2 threads.

For each test model (`make models`; golden inputs from Tests/Fixtures/models) and each built model
(built_models.py: ResNet-18, a TensorFlow-style NHWC ResNet, a YOLO-style backbone and neck, seeded
weights): compiles the converted package for the host arch, measures Kiln with `kiln bench --json` (load = mapping the artifact and preparing the
function; latency = median of the timed runs around run(inputs:)), and onnxruntime with a session
of the same thread count (load = session creation; latency = median of as many runs), and
OpenVINO compiled for the CPU with the same thread count, the latency hint and float32 precision
(a model OpenVINO cannot compile gets no OpenVINO time); the ratio that counts is against the
faster of the two. Examples
(Kiln packages without an ONNX source) are reported for Kiln alone. Not part of `make test`.

It also measures the machine's ceilings with bench/probe/peak.c (float32 FMA peak, read bandwidth;
built with the toolchain's clang) and, per model, the GFLOP/s Kiln achieves in its convolution and
GEMM steps: their FLOPs from the node shapes onnxruntime's profiler records, their time from
`KILN_PROFILE`.

    make build && python3 bench/runtime/run.py [--kiln .build/release/kiln] [--repeat 30] [--threads 2]
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PEERS = ["numpy", "onnx", "onnxruntime==1.32.0", "openvino==2026.4.1"]


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import peers  # noqa: E402

# The peer is always the same version, whatever the machine has installed.
peers.ensure("bench-venv", PEERS, "onnxruntime", "1.32.0")
peers.ensure("bench-venv", PEERS, "openvino", "2026.4.1")
import numpy as np  # noqa: E402

# The trained test models as the tests find them (`make models`), and their committed goldens.
SHARED = os.environ.get("KILN_TEST_MODELS") or (os.path.join(ROOT, "..", "shared", "models")
                                                if os.path.exists(os.path.join(ROOT, "..", "shared", "models", "SHA256SUMS"))
                                                else os.path.join(ROOT, ".build", "models"))
GOLDEN = os.path.join(ROOT, "Tests", "Fixtures", "models", "golden")
MODELS = ["mobilenetv3_orientation", "magika_v3_3", "minilm_l3_paraphrase"]
EXAMPLES = [("TinyClassifier", "main", ["--dim", "batch=8"]), ("TinyEncoder", "encode", ["--dim", "batch=1", "--dim", "seq=64"])]


def kiln_bench(kiln, artifact, extra, repeat, threads):
    out = subprocess.run([kiln, "bench", artifact, "--json", "--repeat", str(repeat), "--warmup", "5",
                          "--threads", str(threads)] + extra, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def ort_bench(model, inputs, repeat, threads):
    import onnxruntime as ort
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    start = time.perf_counter()
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    load = time.perf_counter() - start
    for _ in range(5):
        session.run(None, inputs)
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        session.run(None, inputs)
        samples.append(time.perf_counter() - t)
    return load, float(np.median(samples))


def ov_bench(model, inputs, repeat, threads):
    """OpenVINO's median latency in seconds, or None when it cannot compile or run the model."""
    try:
        import openvino as ov
        compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_NUM_THREADS": threads, "PERFORMANCE_HINT": "LATENCY",
                                                          "INFERENCE_PRECISION_HINT": "f32"})
        request = compiled.create_infer_request()
        for _ in range(5):
            request.infer(inputs)
    except Exception:
        return None
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        request.infer(inputs)
        samples.append(time.perf_counter() - t)
    return float(np.median(samples))


def paired(kiln, artifact, extra, onnx_path, inputs, repeat, threads, rounds, openvino=False):
    """Kiln and onnxruntime (and, with `openvino`, OpenVINO) measured in alternating rounds (the
    machine's speed drifts by tens of percent over minutes): the median of each side's per-round
    medians, of the per-round ratios to onnxruntime and to the faster peer, and of the loads."""
    ks, os_, vs, ratios, best, kload, oload = [], [], [], [], [], [], []
    for _ in range(rounds):
        k = kiln_bench(kiln, artifact, extra, repeat, threads)
        ol, om = ort_bench(onnx_path, inputs, repeat, threads)
        vm = ov_bench(onnx_path, inputs, repeat, threads) if openvino else None
        ks.append(k["latencySeconds"]["median"])
        os_.append(om)
        ratios.append(ks[-1] / om)
        best.append(ks[-1] / min(om, vm) if vm else ks[-1] / om)
        if vm:
            vs.append(vm)
        kload.append(k["loadSeconds"])
        oload.append(ol)
    if not openvino:
        return float(np.median(ks)), float(np.median(os_)), float(np.median(ratios)), float(np.median(kload)), float(np.median(oload))
    return (float(np.median(ks)), float(np.median(os_)), float(np.median(ratios)), float(np.median(kload)), float(np.median(oload)),
            float(np.median(vs)) if vs else None, float(np.median(best)))


# Compressed variants of MiniLM compiled for the host, each timed against the float32 artifact in
# alternating rounds: int8 per channel, and 4-bit k-means tables per group of 16 output channels.
COMPRESSED = [
    ("int8 per channel", {"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}),
    ("4-bit palettized per 16 channels", {"global": {"mode": "kmeans", "nbits": 4, "granularity": "per_grouped_channel",
                                                     "group_size": 16}}),
]


def compressed_rows(kiln, tmp, stem, float_artifact, extra, repeat, threads, rounds):
    """(label, median ms, float32 median ms, median ratio, package bytes, float32 package bytes) per variant."""
    out = []
    for label, config in COMPRESSED:
        tag = "".join(ch for ch in label if ch.isalnum())
        cfg = os.path.join(tmp, f"{stem}-{tag}.json")
        json.dump(config, open(cfg, "w"))
        package = os.path.join(tmp, f"{stem}-{tag}.kiln")
        subprocess.run([kiln, "optimize", os.path.join(tmp, f"{stem}.kiln"), "--config", cfg, "-o", package], check=True, capture_output=True)
        assets = json.loads(subprocess.run([kiln, "compile", package, "--arch", "host", "-o", os.path.join(tmp, f"{stem}-{tag}"), "--json"],
                                           check=True, capture_output=True, text=True).stdout)
        artifact = os.path.join(tmp, f"{stem}-{tag}", assets["artifacts"][0]["file"])
        ks, fs, ratios = [], [], []
        for _ in range(rounds):
            f = kiln_bench(kiln, float_artifact, extra, repeat, threads)["latencySeconds"]["median"]
            k = kiln_bench(kiln, artifact, extra, repeat, threads)["latencySeconds"]["median"]
            ks.append(k)
            fs.append(f)
            ratios.append(k / f)
        out.append((label, float(np.median(ks)), float(np.median(fs)), float(np.median(ratios)), tree_bytes(package),
                    tree_bytes(os.path.join(tmp, f"{stem}.kiln"))))
    return out


def tree_bytes(path):
    """Bytes of a file, or of every file under a directory (a package)."""
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def qdq_model(source, path):
    """The ONNX model with every 2-D float32 initializer that feeds MatMul, Gemm or Gather replaced by
    int8 values behind DequantizeLinear (symmetric, per output channel: axis 1 for MatMul's right
    operand, 0 for Gemm with transB and for embedding rows): weight-only int8, as exporters write it."""
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.load(source)
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    axis_of = {}
    for n in g.node:
        for i, name in enumerate(n.input):
            if name in inits and len(inits[name].dims) == 2 and inits[name].data_type == onnx.TensorProto.FLOAT:
                if n.op_type == "MatMul" and i == 1:
                    axis_of[name] = 1
                elif n.op_type == "Gemm" and i == 1:
                    axis_of[name] = 0 if any(a.name == "transB" and a.i for a in n.attribute) else 1
                elif n.op_type == "Gather" and i == 0:
                    axis_of[name] = 0
    nodes = []
    for name, axis in axis_of.items():
        w = numpy_helper.to_array(inits[name])
        scale = np.abs(w).max(axis=1 - axis) / 127
        scale[scale == 0] = 1
        q = np.clip(np.round(w / np.expand_dims(scale, 1 - axis)), -127, 127).astype(np.int8)
        g.initializer.remove(inits[name])
        g.initializer.extend([numpy_helper.from_array(q, name + "_q"), numpy_helper.from_array(scale.astype(np.float32), name + "_scale")])
        nodes.append(helper.make_node("DequantizeLinear", [name + "_q", name + "_scale"], [name], axis=axis))
    for n in reversed(nodes):
        g.node.insert(0, n)
    if model.opset_import[0].version < 13:
        model.opset_import[0].version = 13
    onnx.save(model, path)
    return len(nodes)


def qdq_row(kiln, tmp, stem, onnx_path, inputs, extra, repeat, threads, rounds):
    """A weight-only int8 (QDQ) ONNX model: converted package size against the float32 package,
    largest output difference from onnxruntime's exact (unoptimized) result, and Kiln's compiled
    latency against onnxruntime's (optimized) session."""
    import onnxruntime as ort
    path = os.path.join(tmp, f"{stem}-qdq.onnx")
    count = qdq_model(onnx_path, path)
    package = os.path.join(tmp, f"{stem}-qdq.kiln")
    subprocess.run([kiln, "convert", path, "-o", package], check=True, capture_output=True)
    assets = json.loads(subprocess.run([kiln, "compile", package, "--arch", "host", "-o", os.path.join(tmp, f"{stem}-qdq"), "--json"],
                                       check=True, capture_output=True, text=True).stdout)
    artifact = os.path.join(tmp, f"{stem}-qdq", assets["artifacts"][0]["file"])
    out_dir = os.path.join(tmp, f"{stem}-qdq-out")
    subprocess.run([kiln, "run", artifact, "--output-dir", out_dir] + extra, check=True, capture_output=True)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
    diff = 0.0
    listing = {o["name"]: o["file"] for o in json.load(open(os.path.join(out_dir, "outputs.json")))["outputs"]}
    for o, want in zip(session.get_outputs(), session.run(None, inputs)):
        got = np.load(os.path.join(out_dir, listing[o.name]))
        if want.dtype.kind == "f":
            diff = max(diff, float(np.abs(got - want).max()))
    km, om, ratio, _, _ = paired(kiln, artifact, extra, path, inputs, repeat, threads, rounds)
    return count, tree_bytes(package), tree_bytes(os.path.join(tmp, f"{stem}.kiln")), diff, km, om, ratio


def machine_peak(tmp, threads):
    """The probe's JSON (FMA GFLOP/s, read GB/s), or None without a C compiler or off x86-64."""
    cc = shutil.which("clang") or shutil.which("cc")
    if not cc:
        return None
    exe = os.path.join(tmp, "peak")
    try:
        subprocess.run([cc, "-O2", "-pthread", os.path.join(ROOT, "bench", "probe", "peak.c"), "-o", exe], check=True, capture_output=True)
        return json.loads(subprocess.run([exe, str(threads)], check=True, capture_output=True, text=True).stdout)
    except (subprocess.CalledProcessError, json.JSONDecodeError) as e:
        print(f"machine probe skipped: {e}")  # e.g. not x86-64: the probe uses x86 intrinsics
        return None


def model_flops(model, inputs, tmp):
    """FLOPs of the Conv, MatMul and Gemm nodes in one run: output shapes from onnxruntime's
    profile (it records the shapes of non-constant inputs and outputs), weight shapes and Gemm's
    transA from the model."""
    import onnx
    import onnxruntime as ort
    graph = onnx.load(model).graph
    dims = {i.name: list(i.dims) for i in graph.initializer}
    nodes = {n.name: n for n in graph.node}
    opts = ort.SessionOptions()
    opts.enable_profiling = True
    opts.profile_file_prefix = os.path.join(tmp, "flops")
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    session.run(None, inputs)
    total = 0
    for e in json.load(open(session.end_profiling())):
        args = e.get("args", {})
        node = nodes.get(e["name"][:-len("_kernel_time")]) if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") else None
        if node is None or node.op_type not in ("Conv", "MatMul", "Gemm"):
            continue
        out = [list(d.values())[0] for d in args.get("output_type_shape", [])]
        first = [list(d.values())[0] for d in args.get("input_type_shape", [])]
        if not out:
            continue
        if node.op_type == "Conv":
            w = dims.get(node.input[1])
            if w:
                total += 2 * int(np.prod(out[0])) * int(np.prod(w[1:]))
        else:
            a = first[0] if first else dims.get(node.input[0])
            trans = any(at.name == "transA" and at.i for at in node.attribute)
            if a:
                total += 2 * int(np.prod(out[0])) * (a[-2] if trans else a[-1])
    return total


def gemm_seconds(kiln, artifact, extra, threads):
    """Seconds per run Kiln spends in convolution and GEMM steps (`KILN_PROFILE`)."""
    env = dict(os.environ, KILN_PROFILE="1", KILN_PROFILE_TOP="100000")
    err = subprocess.run([kiln, "bench", artifact, "--repeat", "50", "--warmup", "5", "--threads", str(threads)] + extra,
                         capture_output=True, text=True, check=True, env=env).stderr
    ms = 0.0
    for line in err.splitlines():
        m = re.match(r"\s+[\d.]+%\s+([\d.]+) ms\s+.*\[(\w+)\]$", line)
        if m and re.match(r"f32_(gemm|conv2d|dwconv2d|matmul|conv_transpose)", m.group(2)):
            ms += float(m.group(1))
    return ms / 1e3


def chain_model(path, steps):
    """An ONNX model of `steps` one-element Adds in a chain: its latency over steps is the per-step overhead."""
    import onnx
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Add", [f"v{i}", "c"], [f"v{i + 1}"], name=f"add{i}") for i in range(steps)]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info(f"v{steps}", TensorProto.FLOAT, [1])],
                              [helper.make_tensor("c", TensorProto.FLOAT, [1], [0.5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, ".build/release/kiln"))
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="alternating Kiln/onnxruntime rounds per model")
    ap.add_argument("--no-built", action="store_true", help="skip the built ResNet/NHWC/YOLO models (built_models.py)")
    ap.add_argument("--only", action="append", default=[], metavar="MODEL",
                    help="bench only this model (repeatable; e.g. magika_v3_3, resnet18); skips the examples and overhead rows")
    args = ap.parse_args()
    rows = []
    achieved = []
    variants, qdq = [], None
    with tempfile.TemporaryDirectory() as tmp:
        peak = machine_peak(tmp, args.threads)
        cases = []
        for name in MODELS:
            golden = os.path.join(GOLDEN, name)
            manifest = json.load(open(os.path.join(golden, "manifest.json")))
            cases.append((name, os.path.join(SHARED, f"{name}.onnx"), {i["name"]: os.path.join(golden, i["file"]) for i in manifest["inputs"]}))
        if not args.no_built:
            import built_models
            for name in built_models.BUILT:
                path, files = built_models.write(name, tmp)
                cases.append((f"{name} (built)", path, files))
        if args.only:
            cases = [c for c in cases if c[0].split(" ")[0] in args.only]
        for name, onnx_path, files in cases:
            stem = name.split(" ")[0]
            subprocess.run([args.kiln, "convert", onnx_path, "-o", f"{tmp}/{stem}.kiln"], check=True, capture_output=True)
            assets = json.loads(subprocess.run([args.kiln, "compile", f"{tmp}/{stem}.kiln", "--arch", "host", "-o", f"{tmp}/{stem}",
                                                "--json"], check=True, capture_output=True, text=True).stdout)
            artifact = os.path.join(tmp, stem, assets["artifacts"][0]["file"])
            extra = []
            inputs = {}
            for input_name, file in files.items():
                extra += ["--input", f"{input_name}={file}"]
                inputs[input_name] = np.load(file)
            km, om, ratio, kl, ol, vm, best = paired(args.kiln, artifact, extra, onnx_path, inputs, args.repeat, args.threads, args.rounds,
                                                     openvino=True)
            rows.append((name, assets["artifacts"][0]["arch"], km, om, kl, ol, ratio, vm, best))
            if stem == "minilm_l3_paraphrase":
                variants = compressed_rows(args.kiln, tmp, stem, artifact, extra, args.repeat, args.threads, args.rounds)
                qdq = qdq_row(args.kiln, tmp, stem, onnx_path, inputs, extra, args.repeat, args.threads, args.rounds)
            achieved.append((name, assets["artifacts"][0]["arch"], model_flops(onnx_path, inputs, tmp),
                             gemm_seconds(args.kiln, artifact, extra, args.threads)))
        for name, function, extra in ([] if args.only else EXAMPLES):
            assets = json.loads(subprocess.run([args.kiln, "compile", os.path.join(ROOT, "examples", f"{name}.kiln"), "--arch", "host",
                                                "-o", f"{tmp}/{name}", "--json"], check=True, capture_output=True, text=True).stdout)
            artifact = os.path.join(tmp, name, assets["artifacts"][0]["file"])
            k = kiln_bench(args.kiln, artifact, ["--function", function] + extra, args.repeat, args.threads)
            rows.append((f"{name}.{function}", assets["artifacts"][0]["arch"], k["latencySeconds"]["median"], None, k["loadSeconds"], None, None,
                         None, None))
        cold = warm = overhead = None
        if not args.only:
            # Loading a directory that holds only the MiniLM package: cold = specialize into an empty
            # cache, warm = cache hit (each a fresh `kiln bench` process; medians of 3).
            name = "minilm_l3_paraphrase"
            golden = os.path.join(GOLDEN, name)
            manifest = json.load(open(os.path.join(golden, "manifest.json")))
            extra = []
            for i in manifest["inputs"]:
                extra += ["--input", f"{i['name']}={os.path.join(golden, i['file'])}"]
            os.makedirs(f"{tmp}/package-only")
            subprocess.run(["cp", "-r", f"{tmp}/{name}.kiln", f"{tmp}/package-only/MiniLM.kiln"], check=True)
            env = dict(os.environ, XDG_CACHE_HOME=f"{tmp}/xdg")
            cold, warm = [], []
            for _ in range(3):
                subprocess.run(["rm", "-rf", f"{tmp}/xdg"], check=True)
                for bucket in (cold, warm, warm):
                    out = subprocess.run([args.kiln, "bench", f"{tmp}/package-only", "--json", "--repeat", "1", "--warmup", "0"] + extra,
                                         capture_output=True, text=True, check=True, env=env)
                    bucket.append(json.loads(out.stdout)["loadSeconds"])
            # Per-step overhead: a chain of one-element adds, Kiln's shape plan vs onnxruntime's session.
            steps = 1000
            chain = f"{tmp}/chain.onnx"
            chain_model(chain, steps)
            subprocess.run([args.kiln, "convert", chain, "-o", f"{tmp}/chain.kiln"], check=True, capture_output=True)
            assets = json.loads(subprocess.run([args.kiln, "compile", f"{tmp}/chain.kiln", "--arch", "host", "-o", f"{tmp}/chain",
                                                "--json"], check=True, capture_output=True, text=True).stdout)
            np.save(f"{tmp}/v0.npy", np.array([1.0], dtype=np.float32))
            k = kiln_bench(args.kiln, os.path.join(tmp, "chain", assets["artifacts"][0]["file"]), ["--input", f"v0={tmp}/v0.npy"],
                           args.repeat, args.threads)
            _, ort_chain = ort_bench(chain, {"v0": np.array([1.0], dtype=np.float32)}, args.repeat, args.threads)
            overhead = (k["latencySeconds"]["median"] / steps * 1e9, ort_chain / steps * 1e9)
    if peak:
        parts = [f"AVX-512 {peak['fma_avx512_gflops']:.0f}" if "fma_avx512_gflops" in peak else None,
                 f"AVX2 {peak['fma_avx2_gflops']:.0f}" if "fma_avx2_gflops" in peak else None]
        print(f"machine ({args.threads} threads): float32 FMA peak {', '.join(p for p in parts if p)} GFLOP/s; "
              f"read bandwidth {peak.get('read_gbs', 0):.1f} GB/s")
    if achieved:
        print("GFLOP/s count the direct convolution's operations; Winograd convolutions do fewer, so the effective "
              "rate of a model that runs them can exceed the FMA peak")
    for name, arch, flops, seconds in achieved:
        ceiling = (peak or {}).get("fma_avx512_gflops" if arch.endswith("_v4") else "fma_avx2_gflops")
        rate = flops / seconds / 1e9 if seconds else 0
        share = f", {rate / ceiling * 100:.0f}% of peak" if ceiling else ""
        print(f"{name}: convolutions and GEMMs {flops / 1e9:.3f} GFLOP per run in {seconds * 1e3:.3f} ms = {rate:.0f} GFLOP/s{share}")
    if overhead:
        print(f"per-step overhead ({steps} one-element adds): Kiln {overhead[0]:.0f} ns, onnxruntime {overhead[1]:.0f} ns")
        print(f"MiniLM package load: cold (specialize) {np.median(cold) * 1e3:.0f} ms, warm (cache hit) {np.median(warm) * 1e3:.1f} ms, "
              f"{np.median(cold) / np.median(warm):.0f}x")
    for label, km, fm, r, size, fsize in variants:
        print(f"MiniLM {label}: {km * 1e3:.3f} ms vs its float32 artifact {fm * 1e3:.3f} ms = {r:.2f}x "
              f"(median of per-round ratios); package {size / 2**20:.1f} MiB vs {fsize / 2**20:.1f} MiB")
    if qdq:
        count, size, fsize, diff, km, om, r = qdq
        print(f"MiniLM as weight-only int8 ONNX ({count} DequantizeLinear weights): package {size / 2**20:.1f} MiB vs float32 "
              f"{fsize / 2**20:.1f} MiB ({size / fsize * 100:.0f}%); largest output difference from onnxruntime (exact) {diff:.2e}; "
              f"Kiln {km * 1e3:.3f} ms, onnxruntime {om * 1e3:.3f} ms = {r:.2f}x")
    print(f"kiln/ort, kiln/best: median over {args.rounds} alternating rounds of the per-round ratio of medians ({args.repeat} runs each); "
          "best = the faster of onnxruntime and OpenVINO in that round")
    print(f"{'model':<26} {'arch':<10} {'kiln ms':>9} {'ort ms':>9} {'ov ms':>9} {'kiln/ort':>9} {'kiln/best':>10} {'kiln load ms':>13} "
          f"{'ort load ms':>12}")
    for name, arch, km, om, kl, ol, r, vm, best in rows:
        ratio = f"{r:8.2f}x" if r else "       —"
        versus = f"{best:9.2f}x" if best else "        —"
        ov_ms = f"{vm * 1e3:9.3f}" if vm else "        —"
        print(f"{name:<26} {arch:<10} {km * 1e3:9.3f} {(om or 0) * 1e3:9.3f} {ov_ms} {ratio} {versus} {kl * 1e3:13.2f} {(ol or 0) * 1e3:12.2f}")


if __name__ == "__main__":
    main()
