#!/usr/bin/env python3
"""Writes Tests/Fixtures/npy/*.npy with NumPy itself, so Kiln's .npy reader is tested
against files NumPy made. Each array is arange(n) * 0.5 (cast to the dtype) unless noted.
Run by hand: python3 tools/make_npy_fixtures.py"""
import os

import numpy as np

OUT = os.path.join(os.path.dirname(__file__), "..", "Tests", "Fixtures", "npy")
os.makedirs(OUT, exist_ok=True)


def save(name, array, version=None):
    with open(os.path.join(OUT, name), "wb") as f:
        np.lib.format.write_array(f, array, version=version, allow_pickle=array.dtype == object)


base = np.arange(6).reshape(2, 3)
for dtype in ["float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "uint16", "uint32", "uint64"]:
    save(f"{dtype}.npy", (base * 0.5 if dtype.startswith("float") else base).astype(dtype))
# bfloat16 has no NumPy type: its bits as a 2-byte void (0, 0.5, …, 2.5 are exact in bfloat16).
save("bfloat16.npy", ((base * 0.5).astype(np.float32).view(np.uint32) >> 16).astype("<u2").view("V2"))
save("bool.npy", np.array([[True, False, True], [False, False, True]]))
save("scalar.npy", np.array(3.25, dtype=np.float32))
save("empty.npy", np.zeros((0, 3), dtype=np.float32))
save("version2.npy", (base * 0.5).astype(np.float32), version=(2, 0))
save("version3.npy", (base * 0.5).astype(np.float32), version=(3, 0))
save("fortran.npy", np.asfortranarray((base * 0.5).astype(np.float32)))
save("big_endian.npy", (base * 0.5).astype(">f4"))
save("object.npy", np.array([1, "a", None], dtype=object))
save("complex.npy", np.array([1 + 2j], dtype=np.complex64))
with open(os.path.join(OUT, "float32.npy"), "rb") as f:
    whole = f.read()
with open(os.path.join(OUT, "truncated.npy"), "wb") as f:
    f.write(whole[:-5])
with open(os.path.join(OUT, "not_npy.npy"), "wb") as f:
    f.write(b"hello, not an array\n")
