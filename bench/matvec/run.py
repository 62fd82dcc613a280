#!/usr/bin/env python3
"""Matrix-vector products bound by weight bytes: Kiln's compressed GEMM kernels at M = 1, 2, 4 rows
against the machine's read bandwidth, measured in the same run.

A chain of --layers MatMuls, each with its own seeded 4096 x 4096 weight (so the weights, even at
4 bits, are several times the last-level cache and every run streams them from memory), is converted,
compressed three ways (float32, int8 per output channel, 4-bit k-means tables per group of 16 output
channels), compiled for the host and run with `kiln bench --json`. Achieved GB/s = the artifact's
weight bytes (all of them packed MatMul weights) / the median latency; the ceiling is the read
bandwidth bench/probe/peak.c measures on as many threads (a 256 MiB buffer summed with AVX2 loads)
right before each of --rounds rounds, and the share is the median of the per-round ratios (the
machine's bandwidth drifts by tens of percent between minutes).

    make build && python3 bench/matvec/run.py [--layers 6] [--size 4096] [--repeat 30] [--threads 2] [--rounds 3]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import peers  # noqa: E402

peers.ensure("bench-venv", ["numpy", "onnx", "onnxruntime==1.32.0"], "onnxruntime", "1.32.0")
import numpy as np  # noqa: E402

VARIANTS = [
    ("float32", None),
    ("int8 per channel", {"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}),
    ("4-bit palettized", {"global": {"mode": "kmeans", "nbits": 4, "granularity": "per_grouped_channel", "group_size": 16}}),
]


def chain(path, layers, size):
    """x [m, size] through `layers` MatMuls with N(0, 1/size) weights."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    for i in range(layers):
        w = (rng.standard_normal((size, size), dtype=np.float32) / np.sqrt(size)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("MatMul", [f"x{i}", f"w{i}"], [f"x{i + 1}" if i + 1 < layers else "y"]))
    graph = helper.make_graph(nodes, "matvec", [helper.make_tensor_value_info("x0", TensorProto.FLOAT, ["m", size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["m", size])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path, save_as_external_data=True, location=os.path.basename(path) + ".data")


def build_probe(tmp):
    cc = shutil.which("clang") or shutil.which("cc")
    exe = os.path.join(tmp, "peak")
    subprocess.run([cc, "-O2", "-pthread", os.path.join(ROOT, "bench", "probe", "peak.c"), "-o", exe], check=True, capture_output=True)
    return exe


def peak(exe, threads):
    return json.loads(subprocess.run([exe, str(threads)], check=True, capture_output=True, text=True).stdout)


def packed_bytes(kiln, artifact):
    """Bytes of the artifact's weight section: here every weight is a MatMul's, packed for its kernel."""
    info = json.loads(subprocess.run([kiln, "inspect", artifact, "--json"], check=True, capture_output=True, text=True).stdout)
    return info["artifact"]["weightBytes"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default=os.path.join(ROOT, ".build/release/kiln"))
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3, help="probe-then-kernel rounds per row")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = build_probe(tmp)
        onnx_path = os.path.join(tmp, "chain.onnx")
        chain(onnx_path, args.layers, args.size)
        subprocess.run([args.kiln, "convert", onnx_path, "-o", f"{tmp}/chain.kiln"], check=True, capture_output=True)
        rows = []
        for label, config in VARIANTS:
            package = f"{tmp}/chain.kiln"
            if config:
                json.dump(config, open(f"{tmp}/cfg.json", "w"))
                package = f"{tmp}/chain-{len(rows)}.kiln"
                subprocess.run([args.kiln, "optimize", f"{tmp}/chain.kiln", "--config", f"{tmp}/cfg.json", "-o", package],
                               check=True, capture_output=True)
            out = f"{tmp}/out-{len(rows)}"
            assets = json.loads(subprocess.run([args.kiln, "compile", package, "--arch", "host", "-o", out, "--json"],
                                               check=True, capture_output=True, text=True).stdout)
            artifact = os.path.join(out, assets["artifacts"][0]["file"])
            weights = packed_bytes(args.kiln, artifact)
            for m in (1, 2, 4):
                np.save(f"{tmp}/x.npy", np.random.default_rng(m).standard_normal((m, args.size), dtype=np.float32))
                # The machine's bandwidth drifts by tens of percent between minutes: each round measures
                # the probe right before the kernel, and the ratio is the median of the per-round ratios.
                seconds, bandwidths, ratios = [], [], []
                for _ in range(args.rounds):
                    bw = peak(exe, args.threads)["read_gbs"]
                    r = json.loads(subprocess.run([args.kiln, "bench", artifact, "--json", "--repeat", str(args.repeat), "--warmup", "3",
                                                   "--threads", str(args.threads), "--input", f"x0={tmp}/x.npy"],
                                                  check=True, capture_output=True, text=True).stdout)
                    t = r["latencySeconds"]["median"]
                    seconds.append(t)
                    bandwidths.append(bw)
                    ratios.append(weights / t / 1e9 / bw)
                rows.append((label, assets["artifacts"][0]["arch"], m, weights, float(np.median(seconds)), float(np.median(bandwidths)),
                             float(np.median(ratios))))
            if os.path.exists(package) and config:
                shutil.rmtree(package, ignore_errors=True)
    print(f"{args.layers} MatMuls of {args.size} x {args.size}, {args.threads} threads; GB/s = the artifact's weight bytes / median latency;")
    print(f"read bandwidth from bench/probe/peak.c (256 MiB, {args.threads} threads) measured before each of {args.rounds} rounds;")
    print("the share is the median of the per-round ratios")
    print(f"{'weights':<18} {'arch':<10} {'rows':>4} {'MiB':>8} {'ms':>9} {'GB/s':>7} {'probe GB/s':>11} {'of read bw':>11}")
    for label, arch, m, weights, seconds, bw, ratio in rows:
        print(f"{label:<18} {arch:<10} {m:>4} {weights / 2**20:8.1f} {seconds * 1e3:9.3f} {weights / seconds / 1e9:7.1f} {bw:11.1f} {ratio * 100:10.0f}%")


if __name__ == "__main__":
    main()
