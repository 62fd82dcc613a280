#!/usr/bin/env python3
"""Builds one-op ML programs from seeded weights, applies coremltools' linear quantization
pass for a matrix of settings, and saves coremltools' integers, scales and zero points as
.npy files in Tests/Fixtures/compression/ with a manifest.json. Kiln's tests require
identical numbers. Run by hand: pip install coremltools==9.0 scikit-learn; python3 tools/make_compression_fixtures.py"""
import json
import os
import warnings

import numpy as np
import coremltools as ct
from coremltools.converters.mil import Builder as mb
from coremltools.converters.mil.mil import types
from coremltools.converters.mil.mil.passes.pass_registry import PASS_REGISTRY
from coremltools.optimize.coreml import OpLinearQuantizerConfig, OpPalettizerConfig, OptimizationConfig

warnings.filterwarnings("ignore")
OUT = os.path.join(os.path.dirname(__file__), "..", "Tests", "Fixtures", "compression")
os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
rng = np.random.default_rng(7)

weights = {
    # [out, in] for linear; mixed signs, one row all positive, one with an outlier.
    "linear": rng.normal(0, 0.02, (48, 64)),
    # [out, in, kh, kw] for conv.
    "conv": rng.normal(0, 0.05, (16, 32, 3, 3)),
    # matmul's right operand [in, out]: output channels on the last axis.
    "matmul": rng.normal(0, 0.1, (64, 24)),
}
weights["linear"][3] = np.abs(weights["linear"][3])
weights["linear"][5, 7] = 0.5

cases = []


def program(kind, w, fp16):
    dtype = types.fp16 if fp16 else types.fp32
    if kind == "linear":
        spec = [mb.TensorSpec(shape=(1, w.shape[1]), dtype=dtype)]
        f = lambda x: mb.linear(x=x, weight=w)
    elif kind == "conv":
        spec = [mb.TensorSpec(shape=(1, w.shape[1], 8, 8), dtype=dtype)]
        f = lambda x: mb.conv(x=x, weight=w)
    else:
        spec = [mb.TensorSpec(shape=(2, w.shape[0]), dtype=dtype)]
        f = lambda x: mb.matmul(x=x, y=w)
    return mb.program(input_specs=spec, opset_version=ct.target.iOS18)(f)


for kind, w64 in weights.items():
    for fp16 in [False, True]:
        w = w64.astype(np.float16 if fp16 else np.float32)
        wname = f"{kind}_{'fp16' if fp16 else 'fp32'}_weight.npy"
        np.save(os.path.join(OUT, wname), w)
        for mode in ["linear_symmetric", "linear"]:
            for dtype in ["int8", "uint8", "int4", "uint4"]:
                for gran in ["per_tensor", "per_channel", "per_block"]:
                    if kind != "linear" and (fp16 or dtype in ("uint8", "uint4")):
                        continue  # the full matrix runs on the linear weight
                    block = 16 if kind == "conv" else 32
                    cfg = OpLinearQuantizerConfig(mode=mode, dtype=dtype, granularity=gran, block_size=block, weight_threshold=0)
                    prog = program(kind, w, fp16)
                    p = PASS_REGISTRY["compression::linear_quantize_weights"]
                    p.config = OptimizationConfig(global_config=cfg)
                    p(prog)
                    ops = [op for op in prog.functions["main"].operations if op.op_type == "constexpr_blockwise_shift_scale"]
                    assert len(ops) == 1, [op.op_type for op in prog.functions["main"].operations]
                    op = ops[0]
                    name = f"{kind}_{'fp16' if fp16 else 'fp32'}_{mode}_{dtype}_{gran}"
                    files = {}
                    for key in ["data", "scale", "offset"]:
                        if key in op.inputs and op.inputs[key].val is not None:
                            v = np.asarray(op.inputs[key].val)
                            if key != "scale":
                                v = v.astype(np.int32)
                            np.save(os.path.join(OUT, f"{name}.{key}.npy"), v)
                            files[key] = f"{name}.{key}.npy"
                    cases.append({"name": name, "op": kind, "weight": wname, "mode": mode, "dtype": dtype,
                                  "granularity": gran, "block_size": block, **files})

# Palettization: uniform and unique must be identical; kmeans must not be worse.
pal_weights = {
    "fp32": rng.normal(0, 0.02, (48, 64)).astype(np.float32),
    "fp16": rng.normal(0, 0.02, (48, 64)).astype(np.float16),
    "few": (rng.integers(0, 7, (48, 64)) * 0.125 - 0.375).astype(np.float32),
}
for wkey, w in pal_weights.items():
    wname = f"palettize_{wkey}_weight.npy"
    np.save(os.path.join(OUT, wname), w)
    settings = [("unique", 3, "per_tensor")] if wkey == "few" else [
        (mode, nbits, gran) for mode in ["kmeans", "uniform"] for nbits in [2, 4] for gran in ["per_tensor", "per_grouped_channel"]]
    for mode, nbits, gran in settings:
        cfg = OpPalettizerConfig(mode=mode, nbits=None if mode == "unique" else nbits, granularity=gran, group_size=16, weight_threshold=0)
        prog = program("linear", w, w.dtype == np.float16)
        p = PASS_REGISTRY["compression::palettize_weights"]
        p.config = OptimizationConfig(global_config=cfg)
        p(prog)
        ops = [op for op in prog.functions["main"].operations if op.op_type == "constexpr_lut_to_dense"]
        assert len(ops) == 1, [op.op_type for op in prog.functions["main"].operations]
        lut = np.asarray(ops[0].inputs["lut"].val)
        indices = np.asarray(ops[0].inputs["indices"].val).astype(np.int32)
        name = f"palettize_{wkey}_{mode}_{nbits}_{gran}"
        np.save(os.path.join(OUT, f"{name}.lut.npy"), lut)
        np.save(os.path.join(OUT, f"{name}.indices.npy"), indices)
        groups = lut.shape[0]
        rows_per_group = w.shape[0] // groups
        decoded = np.stack([lut[r // rows_per_group, 0, indices[r], 0] for r in range(w.shape[0])])
        mse = float(np.mean((decoded.astype(np.float64) - w.astype(np.float64)) ** 2))
        cases.append({"name": name, "op": "linear", "weight": wname, "mode": mode, "nbits": nbits, "granularity": gran,
                      "group_size": 16, "lut": f"{name}.lut.npy", "indices": f"{name}.indices.npy", "mse": mse})

with open(os.path.join(OUT, "manifest.json"), "w") as f:
    json.dump({"generator": "tools/make_compression_fixtures.py", "coremltools": ct.__version__, "cases": cases}, f, indent=1)
    f.write("\n")
print(len(cases), "cases")
