#!/usr/bin/env python3
"""Loading with and without verification, on the test models (`make models`).

For each model: converts it, compiles it for the host arch, and runs `kiln bench --load --json`
on the artifact file (weights checked by CRC-32) and on the directory `kiln compile` wrote (the
file's SHA-256 checked against assets.json). Each row is the median of `--repeat` loads of each
kind: verified with an empty verified-file memo (a first load), unverified (`--no-verify`), and
warm (the memo already holds the unchanged file). The verification rate is the weight bytes over
the difference between the verified and unverified loads. Pages are in the page cache in every
case (dropping them needs root and measures the disk instead). Not part of `make test`.

    make build && python3 bench/load/run.py [--kiln .build/release/kiln] [--repeat 9]
"""
import argparse
import json
import os
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = os.environ.get("KILN_TEST_MODELS") or (os.path.join(ROOT, "..", "shared", "models")
                                               if os.path.exists(os.path.join(ROOT, "..", "shared", "models", "SHA256SUMS"))
                                               else os.path.join(ROOT, ".build", "models"))
NAMES = ["mobilenetv3_orientation", "magika_v3_3", "minilm_l3_paraphrase"]


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)}\n{r.stderr}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, ".build", "release", "kiln"))
    ap.add_argument("--repeat", type=int, default=9)
    args = ap.parse_args()
    host = json.loads(run([args.kiln, "host", "--json"]))
    print(f"host {host['chosen']}; CRC-32 hardware: {host['crc32Hardware']}, SHA-256 hardware: {host['sha256Hardware']}")
    print(f"{'model':26} {'path':9} {'weights':>10} {'verified':>10} {'unverified':>11} {'warm':>9} {'rate':>10}  check")
    with tempfile.TemporaryDirectory() as tmp:
        for name in NAMES:
            onnx = os.path.join(MODELS, f"{name}.onnx")
            if not os.path.exists(onnx):
                print(f"{name}: missing (run make models)")
                continue
            pkg = os.path.join(tmp, f"{name}.kiln")
            out = os.path.join(tmp, name)
            run([args.kiln, "convert", onnx, "-o", pkg])
            run([args.kiln, "compile", pkg, "--arch", "host", "-o", out])
            artifact = next(os.path.join(out, f) for f in sorted(os.listdir(out)) if f.endswith(".compiled"))
            for label, path in (("file", artifact), ("directory", out)):
                r = json.loads(run([args.kiln, "bench", path, "--load", "--json", "--repeat", str(args.repeat)]))
                rate = r["verificationGBPerSecond"]
                check = "CRC-32 of the weights" if label == "file" else "SHA-256 of the file (assets.json)"
                print(f"{name:26} {label:9} {r['weightBytes'] / 2**20:8.1f} MiB {r['verifiedLoadSeconds'] * 1e3:8.2f} ms"
                      f" {r['unverifiedLoadSeconds'] * 1e3:9.2f} ms {r['warmLoadSeconds'] * 1e3:7.2f} ms"
                      f" {('%6.1f GB/s' % rate) if rate else '     noise'}  {check}")


if __name__ == "__main__":
    main()
