#!/usr/bin/env python3
"""Writes the ONNX backend node conformance cases for `make conformance`.

Each case of `onnx.backend.test.case.node.collect_testcases()` (onnx pinned below) becomes a
directory `OUT/cases/NAME/` with `model.onnx`, `input_<i>.npy` and `output_<i>.npy` (graph order);
`OUT/cases.json` lists every case with its tolerances, its input and output names, why it was
skipped (sequence, map and optional values: Kiln has tensors only) and onnxruntime's verdict on
the same arrays with the same comparison (`Sources/kiln-conformance` makes Kiln's):
dtype and shape equal, then `|got - want| <= atol + rtol * |want|` elementwise (NaN equals NaN),
exact equality for non-float types.

Arrays of a type NumPy has no plain dtype for (ml_dtypes' float8, float4, int4, int2, …; strings)
are written in a form any .npy reader takes, and the case lists their ONNX type by index
(`input_types`, `output_types`): integers narrower than a byte as int8 or uint8 values, the
8- and 4-bit floats as their bit patterns in uint8, strings not at all (their values are not
needed to learn that Kiln has no string tensors). bfloat16 stays as ml_dtypes saves it (`<V2`),
which Kiln reads.

Runs itself in `.build/conformance-venv` (made on first use) so the case set and the peer are
always the same versions.
"""
import json
import os
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PINS = ["numpy==2.4.6", "onnx==1.23.2", "onnxruntime==1.32.0"]
VERSIONS = {"onnx": "1.23.2", "onnxruntime": "1.32.0"}
# Bumped when what this script writes changes, so `make conformance` writes the cases again.
WRITER = 4


def ensure_venv():
    try:
        import onnx
        import onnxruntime
        if onnx.__version__ == VERSIONS["onnx"] and onnxruntime.__version__ == VERSIONS["onnxruntime"]:
            return
    except ImportError:
        pass
    venv = os.path.join(ROOT, ".build", "conformance-venv")
    python = os.path.join(venv, "bin", "python")
    if os.path.abspath(sys.executable) == os.path.abspath(python):
        raise SystemExit("error: .build/conformance-venv lacks " + " ".join(PINS) + "; remove it and run again")
    if not os.path.exists(python):
        subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([python, "-m", "pip", "install", "-q"] + PINS, check=True)
    os.execv(python, [python] + sys.argv)


ensure_venv()
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx.backend.test.case import node  # noqa: E402


def array(x):
    """A case's value as an ndarray (cases give some as TensorProto or NumPy scalars)."""
    if isinstance(x, onnx.TensorProto):
        return onnx.numpy_helper.to_array(x)
    return np.asarray(x)


def saved(path, x):
    """Writes `x` to `path` and returns its ONNX type name when the file holds it in another form."""
    x = np.require(x, requirements="C")
    plain = x.dtype.kind in "biuf?" and not (x.dtype.kind == "f" and x.dtype.itemsize == 1)
    if plain or x.dtype.name == "bfloat16":
        np.save(path, x)
        return None
    onnx_type = onnx.TensorProto.DataType.Name(onnx.helper.np_dtype_to_tensor_dtype(x.dtype)).lower()
    if onnx_type in ("int4", "int2"):
        np.save(path, x.astype(np.int8))
    elif onnx_type in ("uint4", "uint2"):
        np.save(path, x.astype(np.uint8))
    elif x.dtype.itemsize == 1:
        np.save(path, x.view(np.uint8))
    return onnx_type


def tensor_only(model):
    """Why the case is skipped, or None when every graph input and output is a tensor."""
    for v in list(model.graph.input) + list(model.graph.output):
        kind = v.type.WhichOneof("value")
        if kind != "tensor_type":
            return f"'{v.name}' is a {kind.replace('_type', '') if kind else 'value of no type'}"
    return None


def similar(want, got, rtol, atol):
    """The comparison of onnx's backend runner: None when `got` matches, else why not."""
    if want.dtype != got.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if want.shape != got.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype == object or want.dtype.kind in "biuSU?":
        return None if np.array_equal(want, got) else "values differ"
    try:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    except AssertionError:
        return "values differ beyond the tolerance"
    except TypeError:
        return None if np.array_equal(want.view(np.uint8), got.view(np.uint8)) else "values differ"
    return None


def ort_verdict(model, inputs, outputs, rtol, atol):
    try:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.log_severity_level = 4
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        feeds = {v.name: x for v, x in zip(model.graph.input, inputs)}
        got = session.run([v.name for v in model.graph.output], feeds)
    except Exception as e:  # onnxruntime raises its own types
        return "fail: " + str(e).splitlines()[0][:200] if str(e) else "fail"
    for i, (w, g) in enumerate(zip(outputs, got)):
        problem = similar(np.asarray(w), np.asarray(g), rtol, atol)
        if problem:
            return f"fail: output {i}: {problem}"
    return "pass"


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, ".build", "conformance")
    stamp = os.path.join(out, "cases.json")
    if os.path.exists(stamp):
        with open(stamp) as f:
            old = json.load(f)
            if old.get("onnx") == VERSIONS["onnx"] and old.get("writer") == WRITER:
                print(f"conformance cases: {stamp} (onnx {VERSIONS['onnx']}) already written")
                return
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "cases"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = node.collect_testcases()
    listing = []
    for c in sorted(cases, key=lambda c: c.name):
        for k, (inputs, outputs) in enumerate(c.data_sets or []):
            name = c.name if len(c.data_sets) == 1 else f"{c.name}_{k}"
            entry = {"name": name, "rtol": float(c.rtol), "atol": float(c.atol),
                     "inputs": [v.name for v in c.model.graph.input], "outputs": [v.name for v in c.model.graph.output]}
            skip = tensor_only(c.model)
            if skip is None and (len(inputs) != len(c.model.graph.input) or len(outputs) != len(c.model.graph.output)):
                skip = "the case's arrays do not match its graph's inputs and outputs"
            if skip is None:
                try:
                    inputs, outputs = [array(x) for x in inputs], [array(x) for x in outputs]
                except ValueError:
                    skip = "a value of the case is not a tensor"
            if skip:
                entry["skip"] = skip
                listing.append(entry)
                continue
            d = os.path.join(out, "cases", name)
            os.makedirs(d)
            with open(os.path.join(d, "model.onnx"), "wb") as f:
                f.write(c.model.SerializeToString())
            for prefix, arrays in (("input", inputs), ("output", outputs)):
                types = {str(i): t for i, x in enumerate(arrays) if (t := saved(os.path.join(d, f"{prefix}_{i}.npy"), x))}
                if types:
                    entry[f"{prefix}_types"] = types
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                entry["onnxruntime"] = ort_verdict(c.model, inputs, outputs, c.rtol, c.atol)
            listing.append(entry)
    run = [e for e in listing if "skip" not in e]
    passed = sum(e["onnxruntime"] == "pass" for e in run)
    with open(stamp + ".tmp", "w") as f:
        json.dump({"writer": WRITER, "onnx": VERSIONS["onnx"], "onnxruntime": VERSIONS["onnxruntime"], "cases": listing}, f, indent=1)
    os.replace(stamp + ".tmp", stamp)
    print(f"conformance cases: {len(run)} tensor cases ({len(listing) - len(run)} skipped) from onnx {VERSIONS['onnx']}; "
          f"onnxruntime {VERSIONS['onnxruntime']} passes {passed}")


if __name__ == "__main__":
    main()
