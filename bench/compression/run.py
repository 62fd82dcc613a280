#!/usr/bin/env python3
"""Kiln vs coremltools weight compression, in one run, on seeded N(0, 0.02^2) weights.

For each shape and setting (4- and 6-bit per-tensor k-means, int8 per-channel, on float32
weights; k-means on float16 weights too), runs `kiln optimize` on a package holding the weight
and coremltools' pass on a one-op ML program holding the same weight, each in its own process,
and prints time, peak memory (max RSS) and MSE side by side with the ratios. Not part of
`make test`. Runs itself in .build/compression-venv (numpy, onnx, coremltools 9.0,
scikit-learn from PyPI) unless the running Python already has coremltools 9.0.

    make build && python3 bench/compression/run.py [--shapes 4096x4096,11008x4096] [--kiln .build/release/kiln]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

# scikit-learn at the newest version coremltools 9.0 supports (its k-means runs on it).
PEERS = ["numpy", "onnx", "coremltools==9.0", "scikit-learn==1.5.1"]


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import peers  # noqa: E402

peers.ensure("compression-venv", PEERS, "coremltools", "9.0")
import numpy as np  # noqa: E402

# (label, weight dtype, setting)
SETTINGS = [
    ("kmeans-4", "float32", {"mode": "kmeans", "nbits": 4}),
    ("kmeans-6", "float32", {"mode": "kmeans", "nbits": 6}),
    ("int8-per-channel", "float32", {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}),
    ("fp16 kmeans-4", "float16", {"mode": "kmeans", "nbits": 4}),
    ("fp16 kmeans-6", "float16", {"mode": "kmeans", "nbits": 6}),
]

COREMLTOOLS_JOB = r'''
import json, sys, time, warnings, resource
warnings.filterwarnings("ignore")
import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from coremltools.optimize.coreml import OpPalettizerConfig, OpLinearQuantizerConfig, OptimizationConfig
from coremltools.converters.mil.mil import types
w = np.load(sys.argv[1]); setting = json.loads(sys.argv[2])
dtype = types.fp16 if w.dtype == np.float16 else types.fp32
@mb.program(input_specs=[mb.TensorSpec(shape=(1, w.shape[1]), dtype=dtype)], opset_version=ct.target.iOS18)
def prog(x):
    return mb.linear(x=x, weight=w)
if setting["mode"] == "kmeans":
    cfg, name = OpPalettizerConfig(mode="kmeans", nbits=setting["nbits"], weight_threshold=0), "compression::palettize_weights"
else:
    cfg, name = OpLinearQuantizerConfig(mode="linear_symmetric", dtype="int8", granularity="per_channel", weight_threshold=0), "compression::linear_quantize_weights"
p = PASS_REGISTRY[name]; p.config = OptimizationConfig(global_config=cfg)
start = time.perf_counter(); p(prog); seconds = time.perf_counter() - start
op = [o for o in prog.functions["main"].operations if o.op_type.startswith("constexpr")][0]
if setting["mode"] == "kmeans":
    lut = np.asarray(op.inputs["lut"].val).reshape(-1); idx = np.asarray(op.inputs["indices"].val)
    decoded = lut[idx]
else:
    decoded = np.asarray(op.inputs["data"].val).astype(np.float64) * np.asarray(op.inputs["scale"].val)
mse = float(np.mean((decoded.astype(np.float64) - w.astype(np.float64)) ** 2))
print(json.dumps({"seconds": seconds, "mse": mse, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
'''


def onnx_model(path, w):
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    elem = TensorProto.FLOAT16 if w.dtype == np.float16 else TensorProto.FLOAT
    g = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "bench",
                          [helper.make_tensor_value_info("x", elem, [1, w.shape[0]])],
                          [helper.make_tensor_value_info("y", elem, [1, w.shape[1]])],
                          [numpy_helper.from_array(w, "W")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save_model(m, path, save_as_external_data=w.nbytes > 1 << 30, location="W.bin")


def child_rss_kb(before):
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, before


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="4096x4096,11008x4096")
    ap.add_argument("--kiln", default=".build/release/kiln")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape_text in args.shapes.split(","):
            shape = tuple(int(d) for d in shape_text.split("x"))
            w32 = np.random.default_rng(0).normal(0, 0.02, shape).astype(np.float32)
            for dtype in ["float32", "float16"]:
                w = w32.astype(dtype)
                np.save(f"{tmp}/w.npy", w)
                # Kiln: the weight as a matmul's right operand ([in, out] → output channels last).
                onnx_model(f"{tmp}/m.onnx", w.T.copy())
                subprocess.run([args.kiln, "convert", f"{tmp}/m.onnx", "-o", f"{tmp}/m.kiln"], check=True)
                for label, setting_dtype, setting in SETTINGS:
                    if setting_dtype != dtype:
                        continue
                    cfg = {"global": dict(setting, weight_threshold=0)}
                    with open(f"{tmp}/cfg.json", "w") as f:
                        json.dump(cfg, f)
                    start = time.perf_counter()
                    kiln = subprocess.run(["/usr/bin/time", "-f", "%M", args.kiln, "optimize", f"{tmp}/m.kiln", "--config", f"{tmp}/cfg.json",
                                           "-o", f"{tmp}/o.kiln", "--json"], capture_output=True, text=True, check=True)
                    kiln_seconds = time.perf_counter() - start
                    kiln_rss = int(kiln.stderr.strip().splitlines()[-1])
                    report = json.loads(kiln.stdout)
                    row = report["rows"][0]
                    w64 = w.astype(np.float64)
                    mean_square = float(np.mean(w64 ** 2))
                    kiln_mse = mean_square / 10 ** (row["snrDecibels"] / 10) if isinstance(row["snrDecibels"], (int, float)) else 0.0
                    cml = subprocess.run(["/usr/bin/time", "-f", "%M", sys.executable, "-c", COREMLTOOLS_JOB, f"{tmp}/w.npy", json.dumps(setting)],
                                         capture_output=True, text=True, check=True)
                    c = json.loads(cml.stdout.strip().splitlines()[-1])
                    cml_rss = int(cml.stderr.strip().splitlines()[-1])
                    rows.append((shape_text, label, kiln_seconds, c["seconds"], kiln_rss, cml_rss, kiln_mse, c["mse"], w.nbytes))
                    print(f"  {shape_text} {label}: kiln {kiln_seconds:.2f} s, coremltools {c['seconds']:.2f} s", file=sys.stderr)
    print(f"{'shape':<12} {'setting':<17} {'kiln s':>8} {'cml s':>8} {'speedup':>8} {'kiln MiB':>9} {'cml MiB':>9} {'kiln/w':>7} {'kiln MSE':>11} {'cml MSE':>11} {'MSE ratio':>9}")
    for shape, label, ks, cs, kr, cr, km, cm, nbytes in rows:
        print(f"{shape:<12} {label:<17} {ks:8.2f} {cs:8.2f} {cs / ks:7.1f}x {kr / 1024:9.0f} {cr / 1024:9.0f} {kr * 1024 / nbytes:6.2f}x {km:11.4e} {cm:11.4e} {km / cm if cm else 0:9.4f}")


if __name__ == "__main__":
    main()
