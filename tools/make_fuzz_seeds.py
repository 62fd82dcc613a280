#!/usr/bin/env python3
"""Writes the FuzzCompile target's extra seeds to Tests/Fixtures/fuzz/compile-seeds/: small
graphs where a binary op (Add, Mul, Sub, Div) meets an NHWC activation (a Transpose of an NCHW
Conv's output) on one side and, on the other, a tensor whose dims are only known at run time (a
graph input with symbolic dims, a ConstantOfShape of a Shape, an Expand to a runtime shape), some
followed by a Transpose back to NCHW and a second Conv. tools/fuzz.sh copies them into the
corpus; the files are committed, so fuzzing needs no onnx module.
Run by hand: python3 tools/make_fuzz_seeds.py (needs onnx and numpy)."""
import itertools
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "Tests", "Fixtures", "fuzz", "compile-seeds")
os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
rng = np.random.default_rng(7)


def weight(name, shape):
    return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32) * 0.1, name)


def seed(op, other, right, dynamic_input, back):
    """One graph: x (NCHW) -> Conv -> Transpose to NHWC -> op with `other` -> y."""
    x_shape = ["n", 3, "h", "w"] if dynamic_input else [1, 3, 6, 6]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)]
    inits = [weight("W", [4, 3, 3, 3]), weight("B", [4])]
    nodes = [
        helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Transpose", ["c"], ["t"], perm=[0, 2, 3, 1]),
    ]
    if other == "input":
        # Sharing the conv input's symbols, or none of them.
        dims = ["n", "h", "w", "e"] if dynamic_input else ["a", "b", "c", "e"]
        inputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, dims))
    elif other == "vector":
        inputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, ["e"]))
    elif other == "row":
        inputs.append(helper.make_tensor_value_info("d", TensorProto.FLOAT, [1, 1, "w2", 4]))
    elif other == "constant_of_shape":
        nodes += [helper.make_node("Shape", ["t"], ["s"]),
                  helper.make_node("ConstantOfShape", ["s"], ["d"],
                                   value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5]))]
    elif other == "expand":
        inputs.append(helper.make_tensor_value_info("k", TensorProto.INT64, [4]))
        inits.append(numpy_helper.from_array(np.array([0.25, -0.5, 1.0, 2.0], np.float32), "q"))
        nodes.append(helper.make_node("Expand", ["q", "k"], ["d"]))
    pair = ["d", "t"] if right else ["t", "d"]
    nodes.append(helper.make_node(op, pair, ["y" if not back else "m"]))
    if back:
        inits += [weight("W2", [2, 4, 1, 1])]
        nodes += [helper.make_node("Transpose", ["m"], ["u"], perm=[0, 3, 1, 2]),
                  helper.make_node("Conv", ["u", "W2"], ["y"])]
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None] * 4)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    name = f"nhwc_{op.lower()}_{other}{'_left' if right else ''}{'_dyn' if dynamic_input else ''}{'_back' if back else ''}"
    with open(os.path.join(OUT, name + ".onnx"), "wb") as f:
        f.write(model.SerializeToString())


others = ["input", "vector", "row", "constant_of_shape", "expand"]
for k, (op, other) in enumerate(itertools.product(["Add", "Mul", "Sub", "Div"], others)):
    # Each pairing once; which side, a symbolic conv input and the way back vary across them.
    seed(op, other, right=k % 2 == 1, dynamic_input=k % 3 == 0, back=k % 4 >= 2)
for other in others:
    seed("Add", other, right=False, dynamic_input=True, back=True)
