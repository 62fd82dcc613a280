#!/usr/bin/env python3
"""Builds small whole-model ONNX fixtures for the importer's tests, in
Tests/Fixtures/onnx/models/: structural cases (weights only in Constant nodes, dynamic
shape subgraphs, Identity chains, unnamed dims, wrong declared shapes, metadata, external
data, unsorted nodes, float16 and float64 tensors) with onnxruntime's outputs in
models.json, and broken or unsupported models the importer must refuse.
Run by hand: python3 tools/make_onnx_fixtures.py"""
import json
import math
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(__file__), "..", "Tests", "Fixtures", "onnx", "models")
os.makedirs(OUT, exist_ok=True)
for old in os.listdir(OUT):
    os.remove(os.path.join(OUT, old))
rng = np.random.default_rng(1)
cases = []


def number(v):
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return int(v) if float(v).is_integer() and abs(v) < 2**53 else v


def tensor_json(a):
    a = np.asarray(a)
    return {"dtype": {"float32": "float32", "int64": "int64", "int32": "int32", "bool": "bool", "float16": "float16"}[a.dtype.name],
            "shape": list(a.shape), "data": [bool(v) if a.dtype == np.bool_ else number(v) for v in a.reshape(-1).tolist()]}


def save(name, model, feeds=None, check=True, exact=False, one_thread=False):
    model.ir_version = min(model.ir_version or 10, 10)
    if check:
        onnx.checker.check_model(model)
    path = os.path.join(OUT, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    if feeds is not None:
        # exact: onnxruntime's graph optimizations off, so its outputs are the model's own
        # arithmetic (optimized, it fuses DequantizeLinear + MatMul into an integer matmul that
        # quantizes the activations too).
        options = ort.SessionOptions()
        if exact:
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        # one_thread: onnxruntime's result depends on its thread count (its quantized LSTM splits
        # the batch across threads and quantizes each part's hidden states on their own).
        if one_thread:
            options.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        # Run on copies: onnxruntime writes some operators' results over their inputs' buffers
        # (GroupQueryAttention rotates its query and key in place).
        results = sess.run(None, {k: np.array(v, copy=True) for k, v in feeds.items()})
        cases.append({"name": name, "inputs": {k: tensor_json(v) for k, v in feeds.items()},
                      "outputs": {o.name: tensor_json(r) for o, r in zip(sess.get_outputs(), results)}})


def f32(*shape):
    return rng.uniform(-1, 1, size=shape).astype(np.float32)


def model(nodes, inputs, outputs, inits=(), opset=17, value_info=(), **kw):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(value_info))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], **kw)


# Weights only in Constant nodes (no initializers).
w, b = f32(4, 3), f32(3)
save("constants_only", model(
    [helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(w)),
     helper.make_node("Constant", [], ["B"], value_floats=b.tolist()),
     helper.make_node("Constant", [], ["k"], value_float=0.5),
     helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Add", ["h", "B"], ["a"]),
     helper.make_node("Mul", ["a", "k"], ["m"]), helper.make_node("Relu", ["m"], ["y"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 3])]), {"x": f32(5, 4)})

# A dynamic shape subgraph: Shape → Gather → Unsqueeze → Concat → Reshape over [batch, seq, 8].
i64 = lambda v: numpy_helper.from_array(np.array(v, dtype=np.int64))
save("shape_subgraph", model(
    [helper.make_node("Shape", ["x"], ["s"]),
     helper.make_node("Constant", [], ["i0"], value=i64(0)), helper.make_node("Constant", [], ["i1"], value=i64(1)),
     helper.make_node("Gather", ["s", "i0"], ["b"], axis=0), helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
     helper.make_node("Constant", [], ["ax"], value=i64([0])),
     helper.make_node("Unsqueeze", ["b", "ax"], ["bu"]), helper.make_node("Unsqueeze", ["t", "ax"], ["tu"]),
     helper.make_node("Constant", [], ["rest"], value=i64([2, 4])),
     helper.make_node("Concat", ["bu", "tu", "rest"], ["shape"], axis=0),
     helper.make_node("Reshape", ["x", "shape"], ["r"]),
     helper.make_node("Transpose", ["r"], ["tr"], perm=[0, 2, 1, 3]),
     helper.make_node("Mul", ["t", "i1"], ["t1"]),
     helper.make_node("Constant", [], ["neg"], value=i64([-1])),
     helper.make_node("Concat", ["bu", "neg"], ["flat_shape"], axis=0),
     helper.make_node("Reshape", ["tr", "flat_shape"], ["y"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "flat"])]), {"x": f32(2, 3, 8)})

# Identity chains and Dropout vanish; an output may be an input.
save("identity_chain", model(
    [helper.make_node("Identity", ["x"], ["a"]), helper.make_node("Identity", ["a"], ["b"]),
     helper.make_node("Dropout", ["b"], ["c"]), helper.make_node("Neg", ["c"], ["y"]),
     helper.make_node("Identity", ["x"], ["same"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]), helper.make_tensor_value_info("same", TensorProto.FLOAT, [2, 3])]),
    {"x": f32(2, 3)})

# Unnamed dynamic dims and wrong declared output shapes.
x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 6])
save("unnamed_dims_wrong_declared", model(
    [helper.make_node("Relu", ["x"], ["y"])], [x_info],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, 7, 7])]), {"x": f32(3, 6)}, check=False)

# Metadata.
m = model([helper.make_node("Abs", ["x"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
          producer_name="kiln-fixtures", producer_version="1.2.3", doc_string="Absolute values.", model_version=7)
helper.set_model_props(m, {"author": "fixtures", "labels": "a,b"})
save("metadata", m, {"x": np.array([-1.5, 2.0], dtype=np.float32)})

# External data beside the model.
big = f32(16, 8)
m = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])], [numpy_helper.from_array(big, "W")])
onnx.external_data_helper.convert_model_to_external_data(m, all_tensors_to_one_file=True, location="external_data.bin", size_threshold=0)
onnx.save_model(m, os.path.join(OUT, "external_data.onnx"))
sess = ort.InferenceSession(os.path.join(OUT, "external_data.onnx"), providers=["CPUExecutionProvider"])
xin = f32(1, 16)
cases.append({"name": "external_data", "inputs": {"x": tensor_json(xin)}, "outputs": {"y": tensor_json(sess.run(None, {"x": xin})[0])}})
# The same model pointing outside its folder.
for t in m.graph.initializer:
    for e in t.external_data:
        if e.key == "location":
            e.value = "../outside.bin"
save("external_escape", m, check=False)

# Nodes out of topological order.
m = model([helper.make_node("Relu", ["h"], ["y"]), helper.make_node("Neg", ["x"], ["h"])],
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3])])
save("unsorted_nodes", m, {"x": np.array([1.0, -2.0, 3.0], dtype=np.float32)}, check=False)

# float16 weights (kept float16 in the package) and float64 constants (narrowed).
w16 = f32(3, 2).astype(np.float16)
save("float16_weights", model(
    [helper.make_node("Cast", ["W16"], ["W"], to=TensorProto.FLOAT), helper.make_node("MatMul", ["x", "W"], ["y"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
    [numpy_helper.from_array(w16, "W16")]), {"x": f32(2, 3)})
save("float64_constant", model(
    [helper.make_node("Constant", [], ["d"], value=numpy_helper.from_array(np.array([0.25, 2.0], dtype=np.float64))),
     helper.make_node("Cast", ["d"], ["f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x", "f"], ["y"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]),
    {"x": np.array([4.0, 3.0], dtype=np.float32)})

# Initializers listed as graph inputs too (IR < 4 style): they are constants, not inputs.
m = model([helper.make_node("Add", ["x", "c"], ["y"])],
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("c", TensorProto.FLOAT, [2])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], [numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "c")])
save("initializer_as_input", m, check=False)
cases.append({"name": "initializer_as_input", "inputs": {"x": tensor_json(np.array([0.5, 0.5], np.float32))},
              "outputs": {"y": tensor_json(np.array([1.5, 2.5], np.float32))}})

# Unsupported: control flow and custom domains, listed together.
then_g = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])])
else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [], [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
m = model([helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
           helper.make_node("Constant", [], ["zero"], value_float=0.0),
           helper.make_node("Greater", ["s", "zero"], ["cond"]),
           helper.make_node("If", ["cond"], ["i"], then_branch=then_g, else_branch=else_g),
           helper.make_node("Frobnicate", ["i"], ["f1"], domain="com.example"),
           helper.make_node("Frobnicate", ["f1"], ["y"], domain="com.example")],
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
m.opset_import.append(helper.make_opsetid("com.example", 3))
save("unsupported_ops", m, check=False)
m = model([helper.make_node("Loop", ["", "", "x"], ["y"], body=then_g)],
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
save("unsupported_loop", m, check=False)

# Malformed models.
valid = model([helper.make_node("MatMul", ["x", "W"], ["y"])], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [numpy_helper.from_array(f32(4, 3), "W")])
data = valid.SerializeToString()
with open(os.path.join(OUT, "truncated.onnx"), "wb") as f:
    f.write(data[: len(data) * 2 // 3])
bad = onnx.ModelProto()
bad.CopyFrom(valid)
bad.graph.initializer[0].dims[:] = [4, 4]
save("tensor_length_mismatch", bad, check=False)
bad = onnx.ModelProto()
bad.CopyFrom(valid)
bad.graph.node[0].input[1] = "nowhere"
del bad.graph.initializer[:]
save("undefined_input", bad, check=False)
with open(os.path.join(OUT, "wrong_wire_type.onnx"), "wb") as f:
    # Field 7 (graph, a message) written as a varint.
    f.write(bytes([0x08, 0x08, 0x38, 0x05]))
with open(os.path.join(OUT, "not_onnx.onnx"), "wb") as f:
    f.write(b"this is not a protobuf \xff\xff\xff\xff")

# A Reshape target from arithmetic on Shape (batch·seq, heads = 384 / 64, -1), then a MatMul: a
# value info that declares -1 dims (invalid, accepted by onnxruntime) must not hide the 64.
save("shape_arithmetic_reshape", model(
    [helper.make_node("Shape", ["x"], ["s"]),
     helper.make_node("Constant", [], ["i0"], value=i64(0)), helper.make_node("Constant", [], ["i1"], value=i64(1)),
     helper.make_node("Gather", ["s", "i0"], ["b"], axis=0), helper.make_node("Gather", ["s", "i1"], ["t"], axis=0),
     helper.make_node("Mul", ["b", "t"], ["bt"]),
     helper.make_node("Constant", [], ["hidden"], value=i64(384)), helper.make_node("Constant", [], ["size"], value=i64(64)),
     helper.make_node("Div", ["hidden", "size"], ["heads"]),
     helper.make_node("Constant", [], ["ax"], value=i64([0])),
     helper.make_node("Unsqueeze", ["bt", "ax"], ["btu"]), helper.make_node("Unsqueeze", ["heads", "ax"], ["hu"]),
     helper.make_node("Constant", [], ["rest"], value=i64([-1])),
     helper.make_node("Concat", ["btu", "hu", "rest"], ["target"], axis=0),
     helper.make_node("Reshape", ["x", "target"], ["r"]),
     helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(f32(64, 16))),
     helper.make_node("MatMul", ["r", "w"], ["y"])],
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 384])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["rows", 6, 16])],
    value_info=[helper.make_tensor_value_info("r", TensorProto.FLOAT, [-1, -1, 64])]), {"x": f32(2, 5, 384)}, check=False)

# Control flow. An If on a run-time flag whose branches read outer values (one a weight), with a
# nested If on a second flag inside the else branch (a capture through two levels).
vi = helper.make_tensor_value_info
ifw = f32(3, 3)
then_g = helper.make_graph(
    [helper.make_node("MatMul", ["h", "W"], ["hw"]), helper.make_node("Add", ["hw", "one"], ["t_out"])], "then",
    [], [vi("t_out", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(np.array(1.0, dtype=np.float32), "one")])
inner_then = helper.make_graph([helper.make_node("Sub", ["h", "x"], ["it_out"])], "inner_then", [], [vi("it_out", TensorProto.FLOAT, [2, 3])])
inner_else = helper.make_graph([helper.make_node("Mul", ["x", "x"], ["ie_out"])], "inner_else", [], [vi("ie_out", TensorProto.FLOAT, [2, 3])])
else_g = helper.make_graph(
    [helper.make_node("If", ["flag2"], ["inner"], then_branch=inner_then, else_branch=inner_else),
     helper.make_node("Neg", ["inner"], ["e_out"])], "else", [], [vi("e_out", TensorProto.FLOAT, [2, 3])])
if_model = model(
    [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("If", ["flag"], ["y"], then_branch=then_g, else_branch=else_g)],
    [vi("x", TensorProto.FLOAT, [2, 3]), vi("flag", TensorProto.BOOL, []), vi("flag2", TensorProto.BOOL, [])],
    [vi("y", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(ifw, "W")])
ifx = f32(2, 3)
for suffix, a, b in [("then", True, False), ("else_then", False, True), ("else_else", False, False)]:
    save(f"if_nested_{suffix}", if_model, {"x": ifx, "flag": np.array(a), "flag2": np.array(b)})

# An If whose condition is a constant: the taken branch is inlined.
save("if_constant_condition", model(
    [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(np.array(False))),
     helper.make_node("If", ["c"], ["y"], then_branch=helper.make_graph([helper.make_node("Neg", ["x"], ["a"])], "t", [], [vi("a", TensorProto.FLOAT, [4])]),
                      else_branch=helper.make_graph([helper.make_node("Sigmoid", ["x"], ["b"])], "e", [], [vi("b", TensorProto.FLOAT, [4])]))],
    [vi("x", TensorProto.FLOAT, [4])], [vi("y", TensorProto.FLOAT, [4])]), {"x": f32(4)})

# A Loop with a trip count and a condition the body computes (it stops early), a carried value,
# a scan output and an outer value the body reads.
loop_body = helper.make_graph(
    [helper.make_node("Cast", ["i"], ["fi"], to=TensorProto.FLOAT), helper.make_node("Mul", ["x", "fi"], ["xi"]),
     helper.make_node("Add", ["acc", "xi"], ["acc_out"]), helper.make_node("Constant", [], ["three"], value=i64(3)),
     helper.make_node("Less", ["i", "three"], ["c_out"]), helper.make_node("Identity", ["acc_out"], ["step"])],
    "body", [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("acc", TensorProto.FLOAT, [2, 3])],
    [vi("c_out", TensorProto.BOOL, []), vi("acc_out", TensorProto.FLOAT, [2, 3]), vi("step", TensorProto.FLOAT, [2, 3])])
save("loop_early_exit", model(
    [helper.make_node("Constant", [], ["go"], value=numpy_helper.from_array(np.array(True))),
     helper.make_node("Loop", ["n", "go", "acc0"], ["acc_final", "steps"], body=loop_body)],
    [vi("n", TensorProto.INT64, []), vi("x", TensorProto.FLOAT, [2, 3]), vi("acc0", TensorProto.FLOAT, [2, 3])],
    [vi("acc_final", TensorProto.FLOAT, [2, 3]), vi("steps", TensorProto.FLOAT, [None, 2, 3])], opset=16),
    {"n": np.array(6, dtype=np.int64), "x": f32(2, 3), "acc0": f32(2, 3)})

# A Scan over two inputs (one along axis 1, backwards), with a state, an outer value the body
# reads, and an output stacked along axis 1 in reverse.
scan_body = helper.make_graph(
    [helper.make_node("Mul", ["a_t", "b_t"], ["ab"]), helper.make_node("Add", ["s", "ab"], ["s1"]),
     helper.make_node("Add", ["s1", "w"], ["s_out"]), helper.make_node("Tanh", ["s_out"], ["o"])],
    "body", [vi("s", TensorProto.FLOAT, [3]), vi("a_t", TensorProto.FLOAT, [3]), vi("b_t", TensorProto.FLOAT, [3])],
    [vi("s_out", TensorProto.FLOAT, [3]), vi("o", TensorProto.FLOAT, [3])])
save("scan_reverse_axes", model(
    [helper.make_node("Scan", ["s0", "a", "b"], ["s_final", "outs"], body=scan_body, num_scan_inputs=2,
                      scan_input_axes=[0, 1], scan_input_directions=[0, 1], scan_output_axes=[1], scan_output_directions=[1])],
    [vi("s0", TensorProto.FLOAT, [3]), vi("a", TensorProto.FLOAT, [4, 3]), vi("b", TensorProto.FLOAT, [3, 4]), vi("w", TensorProto.FLOAT, [3])],
    [vi("s_final", TensorProto.FLOAT, [3]), vi("outs", TensorProto.FLOAT, [3, 4])], opset=16),
    {"s0": f32(3), "a": f32(4, 3), "b": f32(3, 4), "w": f32(3)})

# A branch that reads a value no graph defines: refused, naming the node.
save("if_undefined_outer", model(
    [helper.make_node("If", ["flag"], ["y"], then_branch=helper.make_graph([helper.make_node("Neg", ["missing"], ["a"])], "t", [], [vi("a", TensorProto.FLOAT, [2])]),
                      else_branch=helper.make_graph([helper.make_node("Neg", ["x"], ["b"])], "e", [], [vi("b", TensorProto.FLOAT, [2])]), name="branchy")],
    [vi("x", TensorProto.FLOAT, [2]), vi("flag", TensorProto.BOOL, [])], [vi("y", TensorProto.FLOAT, [2])]), check=False)

# Weight-only int8 quantization as exporters write it: a two-layer MLP whose MatMul weights are
# int8 initializers behind DequantizeLinear (per output channel, axis 1; the second affine
# uint8 with zero points, in blocks of 16 along K), a Gemm whose weight is Cast(int8) · scale,
# and an embedding table (per row) read by Gather.
def symmetric_int8(w, axis):
    scale = np.abs(w).max(axis=axis, keepdims=True) / 127
    return np.clip(np.round(w / scale), -127, 127).astype(np.int8), scale.astype(np.float32)


w1, w2, w3, table = f32(64, 96), f32(96, 48), f32(40, 48), f32(50, 64)
q1, s1 = symmetric_int8(w1, 0)
q3, s3 = symmetric_int8(w3, 1)
qt, st = symmetric_int8(table, 1)
blocks = w2.reshape(6, 16, 48)
lo, hi = np.minimum(blocks.min(axis=1), 0), np.maximum(blocks.max(axis=1), 0)
s2 = ((hi - lo) / 255).astype(np.float32)
z2 = np.clip(np.round(-lo / s2), 0, 255).astype(np.uint8)
q2 = np.clip(np.round(w2 / np.repeat(s2, 16, axis=0)) + np.repeat(z2, 16, axis=0), 0, 255).astype(np.uint8)
save("int8_weights", model(
    [helper.make_node("DequantizeLinear", ["table_q", "table_s"], ["table"], axis=0),
     helper.make_node("Gather", ["table", "ids"], ["emb"]),
     helper.make_node("DequantizeLinear", ["w1_q", "w1_s"], ["w1"], axis=1),
     helper.make_node("MatMul", ["emb", "w1"], ["h1"]), helper.make_node("Relu", ["h1"], ["a1"]),
     helper.make_node("DequantizeLinear", ["w2_q", "w2_s", "w2_z"], ["w2"], axis=0, block_size=16),
     helper.make_node("MatMul", ["a1", "w2"], ["h2"]),
     helper.make_node("Cast", ["w3_q"], ["w3_f"], to=TensorProto.FLOAT), helper.make_node("Mul", ["w3_f", "w3_s"], ["w3"]),
     helper.make_node("Reshape", ["h2", "flat"], ["h2f"]), helper.make_node("Gemm", ["h2f", "w3"], ["yf"], transB=1),
     helper.make_node("Reshape", ["yf", "out_shape"], ["y"])],
    [vi("ids", TensorProto.INT64, [3, 5])], [vi("y", TensorProto.FLOAT, [3, 5, 40])],
    [numpy_helper.from_array(qt, "table_q"), numpy_helper.from_array(st.reshape(50), "table_s"),
     numpy_helper.from_array(q1, "w1_q"), numpy_helper.from_array(s1.reshape(96), "w1_s"),
     numpy_helper.from_array(q2, "w2_q"), numpy_helper.from_array(s2, "w2_s"), numpy_helper.from_array(z2, "w2_z"),
     numpy_helper.from_array(q3, "w3_q"), numpy_helper.from_array(s3, "w3_s"),
     numpy_helper.from_array(np.array([15, 48], dtype=np.int64), "flat"), numpy_helper.from_array(np.array([3, 5, 40], dtype=np.int64), "out_shape")],
    opset=21),
    {"ids": rng.integers(0, 50, size=(3, 5)).astype(np.int64)}, check=False, exact=True)

# Model-local functions (the PyTorch dynamo exporter's form): a block called twice with different
# attribute values, calling an activation function whose alpha refers to the block's attribute or
# takes its default, and a function output the caller leaves unnamed.
act_node = helper.make_node("LeakyRelu", ["a"], ["b"])
ref = onnx.AttributeProto()
ref.name, ref.ref_attr_name, ref.type = "alpha", "slope", onnx.AttributeProto.FLOAT
act_node.attribute.append(ref)
act = onnx.FunctionProto()
act.name, act.domain = "Act", "pkg.kiln"
act.input.append("a")
act.output.append("b")
act.node.append(act_node)
act.opset_import.append(helper.make_opsetid("", 18))
default_slope = helper.make_attribute("slope", 0.3)
act.attribute_proto.append(default_slope)
block = onnx.FunctionProto()
block.name, block.domain = "Block", "pkg.kiln"
block.input.extend(["x", "w"])
block.output.extend(["y", "pre"])
block.attribute.append("slope")
block.node.extend([helper.make_node("MatMul", ["x", "w"], ["pre"]),
                   helper.make_node("Act", ["pre"], ["y"], domain="pkg.kiln")])
passed = onnx.AttributeProto()
passed.name, passed.ref_attr_name, passed.type = "slope", "slope", onnx.AttributeProto.FLOAT
block.node[1].attribute.append(passed)
block.opset_import.extend([helper.make_opsetid("", 18), helper.make_opsetid("pkg.kiln", 1)])
lf = model(
    [helper.make_node("Block", ["x", "w1"], ["h", ""], domain="pkg.kiln", slope=0.1),
     helper.make_node("Block", ["h", "w2"], ["y", "z"], domain="pkg.kiln"),
     helper.make_node("Act", ["z"], ["z_act"], domain="pkg.kiln")],
    [vi("x", TensorProto.FLOAT, ["n", 4])], [vi("y", TensorProto.FLOAT, ["n", 3]), vi("z_act", TensorProto.FLOAT, ["n", 3])],
    [numpy_helper.from_array(f32(4, 5), "w1"), numpy_helper.from_array(f32(5, 3), "w2")], opset=18)
# The second Block call omits slope: its Act then takes Act's own default (0.3).
lf.opset_import.append(helper.make_opsetid("pkg.kiln", 1))
lf.functions.extend([act, block])
save("local_functions", lf, {"x": f32(6, 4)})
rec = onnx.FunctionProto()
rec.name, rec.domain = "Again", "pkg.kiln"
rec.input.append("a")
rec.output.append("b")
rec.node.append(helper.make_node("Again", ["a"], ["b"], domain="pkg.kiln", name="inner"))
rec.opset_import.extend([helper.make_opsetid("", 18), helper.make_opsetid("pkg.kiln", 1)])
rm = model([helper.make_node("Again", ["x"], ["y"], domain="pkg.kiln", name="outer")],
           [vi("x", TensorProto.FLOAT, [2])], [vi("y", TensorProto.FLOAT, [2])], opset=18)
rm.opset_import.append(helper.make_opsetid("pkg.kiln", 1))
rm.functions.append(rec)
save("local_function_recursive", rm, check=False)

# A CRNN text recognizer: convolutions over a [n, 1, 16, W] line image of any width, the feature
# map reshaped by Shape arithmetic into a width-major sequence, a bidirectional LSTM, per-step
# class log-probabilities.
hidden, classes = 6, 11
crnn = model(
    [helper.make_node("Conv", ["img", "c1w", "c1b"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
     helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
     helper.make_node("Conv", ["p1", "c2w", "c2b"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c2"], ["r2"]),
     helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 1], strides=[2, 1]),
     helper.make_node("Shape", ["p2"], ["sh"]),
     helper.make_node("Gather", ["sh", "i0"], ["n"], axis=0), helper.make_node("Gather", ["sh", "i1"], ["c"], axis=0),
     helper.make_node("Gather", ["sh", "i2"], ["h"], axis=0), helper.make_node("Gather", ["sh", "i3"], ["wd"], axis=0),
     helper.make_node("Mul", ["c", "h"], ["ch"]),
     helper.make_node("Concat", ["n", "ch", "wd"], ["target"], axis=0),
     helper.make_node("Reshape", ["p2", "target"], ["seq_ncw"]),
     helper.make_node("Transpose", ["seq_ncw"], ["seq"], perm=[2, 0, 1]),
     helper.make_node("LSTM", ["seq", "lw", "lr", "lb"], ["ly", "", ""], hidden_size=hidden, direction="bidirectional"),
     helper.make_node("Transpose", ["ly"], ["lyt"], perm=[0, 2, 1, 3]),
     helper.make_node("Reshape", ["lyt", "flat_shape"], ["feat"]),
     helper.make_node("MatMul", ["feat", "cls_w"], ["logits"]), helper.make_node("Add", ["logits", "cls_b"], ["logits_b"]),
     helper.make_node("LogSoftmax", ["logits_b"], ["logp"], axis=-1)],
    [vi("img", TensorProto.FLOAT, ["n", 1, 16, "W"])], [vi("logp", TensorProto.FLOAT, ["T", "n", classes])],
    [numpy_helper.from_array(f32(4, 1, 3, 3), "c1w"), numpy_helper.from_array(f32(4), "c1b"),
     numpy_helper.from_array(f32(5, 4, 3, 3), "c2w"), numpy_helper.from_array(f32(5), "c2b"),
     numpy_helper.from_array(np.array([0], dtype=np.int64), "i0"), numpy_helper.from_array(np.array([1], dtype=np.int64), "i1"),
     numpy_helper.from_array(np.array([2], dtype=np.int64), "i2"), numpy_helper.from_array(np.array([3], dtype=np.int64), "i3"),
     numpy_helper.from_array(f32(2, 4 * hidden, 20), "lw"), numpy_helper.from_array(f32(2, 4 * hidden, hidden), "lr"),
     numpy_helper.from_array(f32(2, 8 * hidden), "lb"), numpy_helper.from_array(np.array([0, 0, -1], dtype=np.int64), "flat_shape"),
     numpy_helper.from_array(f32(2 * hidden, classes), "cls_w"), numpy_helper.from_array(f32(classes), "cls_b")],
    value_info=[vi("seq", TensorProto.FLOAT, [-1, -1, 20])], opset=17)
save("crnn_recognizer", crnn, {"img": f32(2, 1, 16, 13)}, check=False)

# A YOLO-style detection head with distribution focal loss: 4 × 16 bins per anchor softmaxed and
# reduced to distances by a 1 × 1 convolution over 0…15, decoded against anchor points into
# boxes, concatenated with sigmoid class scores. The anchor count comes from the input.
reg_max, ncls = 16, 3
dfl = model(
    [helper.make_node("Split", ["feat", "split"], ["box_raw", "cls_raw"], axis=1),
     helper.make_node("Shape", ["box_raw"], ["bsh"]), helper.make_node("Gather", ["bsh", "i2"], ["anchors"], axis=0),
     helper.make_node("Concat", ["one", "four", "bins", "anchors"], ["dfl_shape"], axis=0),
     helper.make_node("Reshape", ["box_raw", "dfl_shape"], ["b4"]),
     helper.make_node("Transpose", ["b4"], ["b4t"], perm=[0, 2, 1, 3]),
     helper.make_node("Softmax", ["b4t"], ["prob"], axis=1),
     helper.make_node("Conv", ["prob", "proj"], ["dist4"]),
     helper.make_node("Concat", ["one", "four", "anchors"], ["dist_shape"], axis=0),
     helper.make_node("Reshape", ["dist4", "dist_shape"], ["dist"]),
     helper.make_node("Slice", ["dist", "s0", "s2", "ax1"], ["lt"]), helper.make_node("Slice", ["dist", "s2", "s4", "ax1"], ["rb"]),
     helper.make_node("Sub", ["points", "lt"], ["xy1"]), helper.make_node("Add", ["points", "rb"], ["xy2"]),
     helper.make_node("Add", ["xy1", "xy2"], ["c2"]), helper.make_node("Div", ["c2", "two"], ["cxy"]),
     helper.make_node("Sub", ["xy2", "xy1"], ["wh"]), helper.make_node("Concat", ["cxy", "wh"], ["box"], axis=1),
     helper.make_node("Mul", ["box", "stride"], ["box_px"]),
     helper.make_node("Sigmoid", ["cls_raw"], ["cls"]), helper.make_node("Concat", ["box_px", "cls"], ["det"], axis=1)],
    [vi("feat", TensorProto.FLOAT, [1, 4 * reg_max + ncls, 24]), vi("points", TensorProto.FLOAT, [1, 2, 24])],
    [vi("det", TensorProto.FLOAT, [1, 4 + ncls, 24])],
    [numpy_helper.from_array(np.array([4 * reg_max, ncls], dtype=np.int64), "split"),
     numpy_helper.from_array(np.array([2], dtype=np.int64), "i2"), numpy_helper.from_array(np.array([1], dtype=np.int64), "one"),
     numpy_helper.from_array(np.array([4], dtype=np.int64), "four"), numpy_helper.from_array(np.array([reg_max], dtype=np.int64), "bins"),
     numpy_helper.from_array(np.arange(reg_max, dtype=np.float32).reshape(1, reg_max, 1, 1), "proj"),
     numpy_helper.from_array(np.array([0], dtype=np.int64), "s0"), numpy_helper.from_array(np.array([2], dtype=np.int64), "s2"),
     numpy_helper.from_array(np.array([4], dtype=np.int64), "s4"), numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
     numpy_helper.from_array(np.array(2, dtype=np.float32), "two"), numpy_helper.from_array(np.array(8, dtype=np.float32), "stride")],
    opset=17)
save("yolo_dfl_head", dfl, {"feat": f32(1, 4 * reg_max + ncls, 24) * 3, "points": rng.uniform(0, 20, (1, 2, 24)).astype(np.float32)})

# A Loop over the sequence length read from the input's shape: h ← tanh(h·W + x[t]), every h
# stacked.
step_body = helper.make_graph(
    [helper.make_node("Gather", ["xs", "t"], ["xt"], axis=0),
     helper.make_node("MatMul", ["h_in", "rw"], ["hw"]), helper.make_node("Add", ["hw", "xt"], ["pre"]),
     helper.make_node("Tanh", ["pre"], ["h_out"]), helper.make_node("Identity", ["cond_in"], ["cond_out"]),
     helper.make_node("Identity", ["h_out"], ["h_scan"])],
    "step", [vi("t", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []), vi("h_in", TensorProto.FLOAT, ["b", 5])],
    [vi("cond_out", TensorProto.BOOL, []), vi("h_out", TensorProto.FLOAT, ["b", 5]), vi("h_scan", TensorProto.FLOAT, ["b", 5])])
seq_loop = model(
    [helper.make_node("Shape", ["xs"], ["xsh"], start=0, end=1), helper.make_node("Squeeze", ["xsh"], ["steps"]),
     helper.make_node("Loop", ["steps", "", "h0"], ["h_last", "hs"], body=step_body)],
    [vi("xs", TensorProto.FLOAT, ["T", "b", 5]), vi("h0", TensorProto.FLOAT, ["b", 5])],
    [vi("h_last", TensorProto.FLOAT, ["b", 5]), vi("hs", TensorProto.FLOAT, ["T", "b", 5])],
    [numpy_helper.from_array(f32(5, 5), "rw")], opset=17)
save("loop_sequence_length", seq_loop, {"xs": f32(7, 2, 5), "h0": f32(2, 5)})

# 4-bit weights as 4-bit-weight exporters write them: DequantizeLinear of an int4 initializer with
# per-block scales and int4 zero points (block 16 along K), and of a uint4 initializer per column.
k4, n4 = 64, 24
q4 = rng.integers(-8, 8, size=(k4, n4)).astype(np.int8)
z4 = rng.integers(-2, 3, size=(k4 // 16, n4)).astype(np.int8)
u4 = rng.integers(0, 16, size=(n4, 10)).astype(np.uint8)
int4_model = model(
    [helper.make_node("DequantizeLinear", ["w1_q", "w1_s", "w1_z"], ["w1"], axis=0, block_size=16),
     helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["a"]),
     helper.make_node("DequantizeLinear", ["w2_q", "w2_s"], ["w2"], axis=1),
     helper.make_node("MatMul", ["a", "w2"], ["y"])],
    [vi("x", TensorProto.FLOAT, ["n", k4])], [vi("y", TensorProto.FLOAT, ["n", 10])],
    [helper.make_tensor("w1_q", TensorProto.INT4, [k4, n4], q4.reshape(-1).tolist()),
     numpy_helper.from_array((rng.uniform(0.01, 0.05, size=(k4 // 16, n4))).astype(np.float32), "w1_s"),
     helper.make_tensor("w1_z", TensorProto.INT4, [k4 // 16, n4], z4.reshape(-1).tolist()),
     helper.make_tensor("w2_q", TensorProto.UINT4, [n4, 10], u4.reshape(-1).tolist()),
     numpy_helper.from_array(rng.uniform(0.01, 0.05, size=(10,)).astype(np.float32), "w2_s")],
    opset=21)
save("int4_weights", int4_model, {"x": f32(3, k4)}, check=False, exact=True)

# PyTorch's `x.squeeze(-1)` of a run-time dim, as the exporter writes it when it cannot prove the
# size (a voice-activity model's decoder does this): If(shape[-1] == 1, Squeeze, Identity), whose
# branches differ in rank, then a matmul that needs the squeezed rank.
squeeze_then = helper.make_graph([helper.make_node("Squeeze", ["feat", "last"], ["sq"])], "then", [], [vi("sq", TensorProto.FLOAT, None)])
squeeze_else = helper.make_graph([helper.make_node("Identity", ["feat"], ["id"])], "else", [], [vi("id", TensorProto.FLOAT, None)])
squeeze_if = model(
    [helper.make_node("Conv", ["x", "cw"], ["feat"]), helper.make_node("Shape", ["feat"], ["fsh"]),
     helper.make_node("Gather", ["fsh", "minus_one"], ["t"], axis=0), helper.make_node("Equal", ["t", "one_i"], ["is_one"]),
     helper.make_node("If", ["is_one"], ["squeezed"], then_branch=squeeze_then, else_branch=squeeze_else),
     helper.make_node("MatMul", ["squeezed", "w"], ["y"])],
    [vi("x", TensorProto.FLOAT, ["n", 3, "T"])], [vi("y", TensorProto.FLOAT, ["n", 5])],
    [numpy_helper.from_array(f32(8, 3, 4), "cw"), numpy_helper.from_array(np.array(-1, dtype=np.int64), "minus_one"),
     numpy_helper.from_array(np.array(1, dtype=np.int64), "one_i"), numpy_helper.from_array(np.array([-1], dtype=np.int64), "last"),
     numpy_helper.from_array(f32(8, 5), "w")], opset=17)
save("if_squeeze_runtime_dim", squeeze_if, {"x": f32(2, 3, 4)})

# onnxruntime's own operators as its optimizers and 4-bit quantizer write them (domain
# com.microsoft): MatMulNBits with and without zero points, FastGelu with a bias,
# SkipLayerNormalization (its sum output used), QuickGelu, FusedMatMul, the simplified
# (RMS) layer norms.
def nbits(w, block, zero_points):
    n, k = w.shape
    blocks = k // block
    wb = w.reshape(n, blocks, block)
    if zero_points:
        lo, hi = np.minimum(wb.min(axis=2), 0), np.maximum(wb.max(axis=2), 0)
        scale = ((hi - lo) / 15).astype(np.float32)
        zp = np.clip(np.round(-lo / scale), 0, 15).astype(np.uint8)
    else:
        scale = (np.abs(wb).max(axis=2) / 7).astype(np.float32)
        zp = np.full((n, blocks), 8, dtype=np.uint8)
    q = np.clip(np.round(wb / scale[:, :, None]) + zp[:, :, None], 0, 15).astype(np.uint8)
    packed = (q[:, :, 0::2] | (q[:, :, 1::2] << 4)).astype(np.uint8)
    zpad = np.concatenate([zp, np.zeros((n, blocks % 2), dtype=np.uint8)], axis=1)
    zpacked = (zpad[:, 0::2] | (zpad[:, 1::2] << 4)).astype(np.uint8)
    return packed, scale.reshape(-1), zpacked
hid, inner_dim = 64, 96
p1, s1n, z1n = nbits(f32(inner_dim, hid), 32, True)
p2, s2n, _ = nbits(f32(hid, inner_dim), 16, False)
ms = "com.microsoft"
contrib = model(
    [helper.make_node("MatMulNBits", ["x", "w1_q", "w1_s", "w1_z"], ["up"], domain=ms, K=hid, N=inner_dim, bits=4, block_size=32),
     helper.make_node("FastGelu", ["up", "up_bias"], ["act"], domain=ms),
     helper.make_node("MatMulNBits", ["act", "w2_q", "w2_s", "", "", "down_bias"], ["down"], domain=ms, K=inner_dim, N=hid, bits=4, block_size=16),
     helper.make_node("SkipLayerNormalization", ["down", "x", "gamma", "beta"], ["normed", "", "", "residual"], domain=ms, epsilon=1e-5),
     helper.make_node("QuickGelu", ["normed"], ["q"], domain=ms),
     helper.make_node("FusedMatMul", ["q", "wt"], ["fm"], domain=ms, transB=1, alpha=0.5),
     helper.make_node("SkipSimplifiedLayerNormalization", ["fm", "residual", "gamma"], ["rms1"], domain=ms, epsilon=1e-6),
     helper.make_node("SimplifiedLayerNormalization", ["rms1", "gamma"], ["y"], epsilon=1e-6, axis=-1)],
    [vi("x", TensorProto.FLOAT, ["n", hid])], [vi("y", TensorProto.FLOAT, ["n", hid]), vi("residual", TensorProto.FLOAT, ["n", hid])],
    [numpy_helper.from_array(p1, "w1_q"), numpy_helper.from_array(s1n, "w1_s"), numpy_helper.from_array(z1n.reshape(-1), "w1_z"),
     numpy_helper.from_array(f32(inner_dim), "up_bias"), numpy_helper.from_array(p2, "w2_q"), numpy_helper.from_array(s2n, "w2_s"),
     numpy_helper.from_array(f32(hid), "down_bias"), numpy_helper.from_array(f32(hid) + 1, "gamma"), numpy_helper.from_array(f32(hid), "beta"),
     numpy_helper.from_array(f32(hid, hid), "wt")], opset=17)
contrib.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_ops", contrib, {"x": f32(3, hid)}, check=False, exact=True)

# Squeeze without axes of [n, 1, 4] with a run-time n: the known 1 goes, n stays (checked not 1).
squeeze_all = model([helper.make_node("Squeeze", ["x"], ["s"]), helper.make_node("MatMul", ["s", "w"], ["y"])],
                    [vi("x", TensorProto.FLOAT, ["n", 1, 4])], [vi("y", TensorProto.FLOAT, ["n", 3])],
                    [numpy_helper.from_array(f32(4, 3), "w")], opset=17)
save("squeeze_no_axes_runtime_dim", squeeze_all, {"x": f32(2, 1, 4)})

# onnxruntime's LSTM over 8-bit weights (what quantize_dynamic writes for LSTM): a forward layer
# with uint8 weights, per-tensor scales and zero points, then a bidirectional one with int8
# weights, per-column scales, biases, peepholes and initial states. W and R are [dirs, k, 4h].
def lstm_q(w, signed, per_column):
    axis = 0 if per_column else None
    if signed:
        scale = (np.abs(w).max(axis=axis, keepdims=True) / 127).astype(np.float32)
        zero = np.zeros_like(scale, dtype=np.int8)
        q = np.clip(np.round(w / scale), -127, 127).astype(np.int8)
    else:
        lo, hi = w.min(axis=axis, keepdims=True), w.max(axis=axis, keepdims=True)
        scale = ((hi - lo) / 255).astype(np.float32)
        zero = np.clip(np.round(-lo / scale), 0, 255).astype(np.uint8)
        q = np.clip(np.round(w / scale) + zero, 0, 255).astype(np.uint8)
    return q[None], scale.reshape(1, -1) if per_column else scale.reshape(1), zero.reshape(1, -1) if per_column else zero.reshape(1)
seq_len, in_size, hq = 6, 10, 8
w1, s1, z1 = lstm_q(f32(in_size, 4 * hq), False, False)
r1, rs1, rz1 = lstm_q(f32(hq, 4 * hq), False, False)
pairs = [lstm_q(f32(k, 4 * hq), True, True) for k in (hq, hq, hq, hq)]
w2, s2, z2 = (np.concatenate([pairs[0][i], pairs[1][i]]) for i in range(3))
r2, rs2, rz2 = (np.concatenate([pairs[2][i], pairs[3][i]]) for i in range(3))
inits = {"w1": w1, "r1": r1, "w1_s": s1, "w1_z": z1, "r1_s": rs1, "r1_z": rz1, "axis1": np.array([1], dtype=np.int64),
         "w2": w2, "r2": r2, "w2_s": s2, "w2_z": z2, "r2_s": rs2, "r2_z": rz2, "b2": f32(2, 8 * hq), "p2": f32(2, 3 * hq)}
qlstm = model(
    [helper.make_node("DynamicQuantizeLSTM", ["x", "w1", "r1", "", "", "", "", "", "w1_s", "w1_z", "r1_s", "r1_z"], ["y1"], domain=ms,
                      hidden_size=hq),
     helper.make_node("Squeeze", ["y1", "axis1"], ["s1"]),
     helper.make_node("DynamicQuantizeLSTM", ["s1", "w2", "r2", "b2", "", "h0", "c0", "p2", "w2_s", "w2_z", "r2_s", "r2_z"],
                      ["y", "y_h", "y_c"], domain=ms, hidden_size=hq, direction="bidirectional")],
    [vi("x", TensorProto.FLOAT, [seq_len, "batch", in_size]), vi("h0", TensorProto.FLOAT, [2, "batch", hq]),
     vi("c0", TensorProto.FLOAT, [2, "batch", hq])],
    [vi("y", TensorProto.FLOAT, [seq_len, 2, "batch", hq]), vi("y_h", TensorProto.FLOAT, [2, "batch", hq]),
     vi("y_c", TensorProto.FLOAT, [2, "batch", hq])],
    [numpy_helper.from_array(v, k) for k, v in inits.items()], opset=17)
qlstm.opset_import.append(helper.make_opsetid(ms, 1))
save("dynamic_quantize_lstm", qlstm, {"x": f32(seq_len, 2, in_size) * 2, "h0": f32(2, 2, hq), "c0": f32(2, 2, hq)}, check=False,
     one_thread=True)

# Dynamically quantized convolution and matmul as onnxruntime's quantize_dynamic writes them:
# DynamicQuantizeLinear, ConvInteger (uint8 weight with a zero point) plus an int32 bias reshaped
# per channel, Cast, Mul by the scales; MatMulInteger with an int8 weight and per-column zero points.
wc = rng.integers(0, 256, size=(6, 3, 3, 3), dtype=np.uint8)
wm = rng.integers(-128, 128, size=(6 * 5 * 5, 7), dtype=np.int8)
iq = model(
    [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
     helper.make_node("ConvInteger", ["xq", "wc", "xz", "wcz"], ["ci"], pads=[1, 1, 1, 1], strides=[2, 2]),
     helper.make_node("Reshape", ["bc", "bshape"], ["bcr"]),
     helper.make_node("Add", ["ci", "bcr"], ["cib"]),
     helper.make_node("Cast", ["cib"], ["cf"], to=TensorProto.FLOAT),
     helper.make_node("Mul", ["xs", "wcs"], ["cs"]), helper.make_node("Mul", ["cf", "cs"], ["c"]),
     helper.make_node("Relu", ["c"], ["r"]), helper.make_node("Flatten", ["r"], ["fl"]),
     helper.make_node("DynamicQuantizeLinear", ["fl"], ["fq", "fs", "fz"]),
     helper.make_node("MatMulInteger", ["fq", "wm", "fz", "wmz"], ["mi"]),
     helper.make_node("Cast", ["mi"], ["mf"], to=TensorProto.FLOAT),
     helper.make_node("Mul", ["fs", "wms"], ["ms"]), helper.make_node("Mul", ["mf", "ms"], ["y"])],
    [vi("x", TensorProto.FLOAT, ["n", 3, 10, 10])], [vi("y", TensorProto.FLOAT, ["n", 7])],
    [numpy_helper.from_array(wc, "wc"), numpy_helper.from_array(np.array(131, dtype=np.uint8), "wcz"),
     numpy_helper.from_array(rng.integers(-2000, 2000, size=6).astype(np.int32), "bc"),
     numpy_helper.from_array(np.array([6, 1, 1], dtype=np.int64), "bshape"),
     numpy_helper.from_array(np.array(0.01, dtype=np.float32), "wcs"), numpy_helper.from_array(wm, "wm"),
     numpy_helper.from_array(rng.integers(-3, 4, size=7).astype(np.int8), "wmz"),
     numpy_helper.from_array(np.array(0.02, dtype=np.float32), "wms")], opset=17)
save("integer_conv_matmul", iq, {"x": f32(2, 3, 10, 10)})

# A decoder's cache as optimum exports it: the past concatenated with the new rows, a mask whose
# length is written as an expression of the two dims (spaced unlike Kiln's spelling), and shape
# arithmetic that adds the two lengths for a Range and an Expand target; the new rows' positions,
# a Range from the past length to the total.
pc = model(
    [helper.make_node("Concat", ["past", "x"], ["present"], axis=1),
     helper.make_node("Shape", ["past"], ["ps"], start=1, end=2),
     helper.make_node("Shape", ["x"], ["xs"], start=1, end=2),
     helper.make_node("Add", ["ps", "xs"], ["total"]),
     helper.make_node("Squeeze", ["total"], ["total0"]),
     helper.make_node("Range", ["zero", "total0", "one"], ["positions"]),
     helper.make_node("Cast", ["positions"], ["pf"], to=TensorProto.FLOAT),
     helper.make_node("Cast", ["mask"], ["mf"], to=TensorProto.FLOAT),
     helper.make_node("Mul", ["pf", "mf"], ["weighted"]),
     helper.make_node("Concat", ["total", "four"], ["target"], axis=0),
     helper.make_node("Unsqueeze", ["weighted", "minus_one"], ["weighted_col"]),
     helper.make_node("Expand", ["weighted_col", "target"], ["spread"]),
     helper.make_node("Add", ["present", "spread"], ["y"]),
     helper.make_node("Squeeze", ["ps"], ["ps0"]),
     helper.make_node("Range", ["ps0", "total0", "one"], ["new_positions"])],
    [vi("x", TensorProto.FLOAT, ["batch", "sequence_length", 4]), vi("past", TensorProto.FLOAT, ["batch", "past_sequence_length", 4]),
     vi("mask", TensorProto.INT64, ["batch", "past_sequence_length+sequence_length"])],
    [vi("present", TensorProto.FLOAT, ["batch", "past_sequence_length + sequence_length", 4]),
     vi("y", TensorProto.FLOAT, ["batch", "past_sequence_length + sequence_length", 4]),
     vi("new_positions", TensorProto.INT64, ["sequence_length"])],
    [numpy_helper.from_array(np.array(0, dtype=np.int64), "zero"), numpy_helper.from_array(np.array(1, dtype=np.int64), "one"),
     numpy_helper.from_array(np.array([4], dtype=np.int64), "four"), numpy_helper.from_array(np.array([-1], dtype=np.int64), "minus_one")],
    opset=17)
save("past_concat_expression", pc, {"x": f32(1, 2, 4), "past": f32(1, 3, 4), "mask": np.array([[1, 1, 0, 1, 1]], dtype=np.int64)})

# onnxruntime's RotaryEmbedding (com.microsoft) as its model builder writes it: a 3-D [batch, seq,
# heads·head_size] input with [batch, seq] position ids (halves rotated), a 4-D [batch, heads, seq,
# head_size] one rotated interleaved from one start position, and a rotary dim below the head size.
head, nheads, maxpos = 8, 2, 16
freq = 1.0 / (10000 ** (np.arange(0, head, 2) / head))
angle = np.arange(maxpos)[:, None] * freq[None, :]
rot = model(
    [helper.make_node("RotaryEmbedding", ["x", "pos", "cos", "sin"], ["y"], domain=ms, num_heads=nheads),
     helper.make_node("RotaryEmbedding", ["x4", "start", "cos", "sin"], ["y4"], domain=ms, interleaved=1),
     helper.make_node("RotaryEmbedding", ["x", "pos", "cos_part", "sin_part"], ["y_part"], domain=ms, num_heads=nheads, rotary_embedding_dim=4)],
    [vi("x", TensorProto.FLOAT, ["batch", "seq", nheads * head]), vi("pos", TensorProto.INT64, ["batch", "seq"]),
     vi("x4", TensorProto.FLOAT, ["batch", nheads, "seq", head]), vi("start", TensorProto.INT64, [1])],
    [vi("y", TensorProto.FLOAT, ["batch", "seq", nheads * head]), vi("y4", TensorProto.FLOAT, ["batch", nheads, "seq", head]),
     vi("y_part", TensorProto.FLOAT, ["batch", "seq", nheads * head])],
    [numpy_helper.from_array(np.cos(angle).astype(np.float32), "cos"), numpy_helper.from_array(np.sin(angle).astype(np.float32), "sin"),
     numpy_helper.from_array(np.cos(angle[:, :2]).astype(np.float32), "cos_part"), numpy_helper.from_array(np.sin(angle[:, :2]).astype(np.float32), "sin_part")],
    opset=17)
rot.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_rotary", rot, {"x": f32(2, 3, nheads * head), "pos": np.array([[0, 1, 2], [5, 6, 7]], dtype=np.int64),
                             "x4": f32(2, nheads, 3, head), "start": np.array([4], dtype=np.int64)}, check=False, exact=True)

# onnxruntime's GroupQueryAttention (com.microsoft): a decode step over a past cache (4 query heads
# on 2 key/value heads, rotated at the cache's positions, a window of 3 keys, a soft cap), and first
# prompts of a right-padded batch (seqlens_k one less than each row's tokens) with packed QKV.
gqa_heads, gqa_kv, gqa_size, gqa_past = 4, 2, 16, 5
gqa_freq = 1.0 / (10000 ** (np.arange(0, gqa_size, 2) / gqa_size))
gqa_angle = np.arange(32)[:, None] * gqa_freq[None, :]
gqa = model(
    [helper.make_node("GroupQueryAttention", ["q", "k", "v", "past_key", "past_value", "seqlens_k", "total", "cos", "sin"],
                      ["y", "present_key", "present_value"], domain=ms, num_heads=gqa_heads, kv_num_heads=gqa_kv, do_rotary=1),
     # Inputs of its own: onnxruntime may write a GroupQueryAttention's results over its inputs.
     # (Its presents are named: without them onnxruntime computes another attention.)
     helper.make_node("GroupQueryAttention", ["q_w", "k_w", "v_w", "past_key_w", "past_value_w", "seqlens_k", "total"],
                      ["y_window", "present_key_w", "present_value_w"], domain=ms, num_heads=gqa_heads, kv_num_heads=gqa_kv, local_window_size=3, softcap=2.0, scale=0.25)],
    [vi("q", TensorProto.FLOAT, ["batch", 1, gqa_heads * gqa_size]), vi("k", TensorProto.FLOAT, ["batch", 1, gqa_kv * gqa_size]),
     vi("v", TensorProto.FLOAT, ["batch", 1, gqa_kv * gqa_size]), vi("q_w", TensorProto.FLOAT, ["batch", 1, gqa_heads * gqa_size]),
     vi("k_w", TensorProto.FLOAT, ["batch", 1, gqa_kv * gqa_size]), vi("v_w", TensorProto.FLOAT, ["batch", 1, gqa_kv * gqa_size]),
     vi("past_key_w", TensorProto.FLOAT, ["batch", gqa_kv, "past", gqa_size]), vi("past_value_w", TensorProto.FLOAT, ["batch", gqa_kv, "past", gqa_size]),
     vi("past_key", TensorProto.FLOAT, ["batch", gqa_kv, "past", gqa_size]),
     vi("past_value", TensorProto.FLOAT, ["batch", gqa_kv, "past", gqa_size]), vi("seqlens_k", TensorProto.INT32, ["batch"]),
     vi("total", TensorProto.INT32, [])],
    [vi("y", TensorProto.FLOAT, ["batch", 1, gqa_heads * gqa_size]), vi("present_key", TensorProto.FLOAT, ["batch", gqa_kv, "total", gqa_size]),
     vi("present_value", TensorProto.FLOAT, ["batch", gqa_kv, "total", gqa_size]), vi("y_window", TensorProto.FLOAT, ["batch", 1, gqa_heads * gqa_size])],
    [numpy_helper.from_array(np.cos(gqa_angle).astype(np.float32), "cos"), numpy_helper.from_array(np.sin(gqa_angle).astype(np.float32), "sin")],
    opset=17)
gqa.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_gqa_decode", gqa, {"q": f32(2, 1, gqa_heads * gqa_size), "k": f32(2, 1, gqa_kv * gqa_size), "v": f32(2, 1, gqa_kv * gqa_size),
                                 "past_key": f32(2, gqa_kv, gqa_past, gqa_size), "past_value": f32(2, gqa_kv, gqa_past, gqa_size),
                                 "seqlens_k": np.array([gqa_past, gqa_past], dtype=np.int32), "total": np.array(gqa_past + 1, dtype=np.int32),
                                 "q_w": f32(2, 1, gqa_heads * gqa_size), "k_w": f32(2, 1, gqa_kv * gqa_size), "v_w": f32(2, 1, gqa_kv * gqa_size),
                                 "past_key_w": f32(2, gqa_kv, gqa_past, gqa_size), "past_value_w": f32(2, gqa_kv, gqa_past, gqa_size)},
     check=False, exact=True)
packed_width = (gqa_heads + 2 * gqa_kv) * gqa_size
gqa_prompt = model(
    [helper.make_node("GroupQueryAttention", ["qkv", "", "", "", "", "seqlens_k", "total"], ["y", "present_key", "present_value"],
                      domain=ms, num_heads=gqa_heads, kv_num_heads=gqa_kv)],
    [vi("qkv", TensorProto.FLOAT, ["batch", "sequence", packed_width]), vi("seqlens_k", TensorProto.INT32, ["batch"]), vi("total", TensorProto.INT32, [])],
    [vi("y", TensorProto.FLOAT, ["batch", "sequence", gqa_heads * gqa_size]), vi("present_key", TensorProto.FLOAT, ["batch", gqa_kv, "sequence", gqa_size]),
     vi("present_value", TensorProto.FLOAT, ["batch", gqa_kv, "sequence", gqa_size])], opset=17)
gqa_prompt.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_gqa_prompt", gqa_prompt, {"qkv": f32(2, 4, packed_width), "seqlens_k": np.array([3, 1], dtype=np.int32),
                                        "total": np.array(4, dtype=np.int32)}, check=False, exact=True)

# A GroupQueryAttention whose presents are not asked for (onnxruntime then attends otherwise): refused.
unnamed = model(
    [helper.make_node("GroupQueryAttention", ["qkv", "", "", "", "", "seqlens_k", "total"], ["y", "", ""], domain=ms, num_heads=gqa_heads,
                      kv_num_heads=gqa_kv, name="gqa")],
    [vi("qkv", TensorProto.FLOAT, [1, 4, packed_width]), vi("seqlens_k", TensorProto.INT32, [1]), vi("total", TensorProto.INT32, [])],
    [vi("y", TensorProto.FLOAT, [1, 4, gqa_heads * gqa_size])], opset=17)
unnamed.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_gqa_unnamed_presents", unnamed, check=False)

# onnxruntime's MultiHeadAttention (com.microsoft): causal self-attention over a past cache with a
# key padding mask and the projection bias, and cross-attention to longer keys with an attention
# bias and a scale.
mha_heads, mha_size, mha_past = 2, 16, 2
mha_hidden = mha_heads * mha_size
mha = model(
    [helper.make_node("MultiHeadAttention", ["q", "k", "v", "bias", "padding", "", "past_key", "past_value"], ["y", "present_key", "present_value"],
                      domain=ms, num_heads=mha_heads, unidirectional=1),
     helper.make_node("MultiHeadAttention", ["q", "memory_k", "memory_v", "", "", "attention_bias"], ["y_cross"], domain=ms, num_heads=mha_heads, scale=0.3)],
    [vi("q", TensorProto.FLOAT, ["batch", "sequence", mha_hidden]), vi("k", TensorProto.FLOAT, ["batch", "sequence", mha_hidden]),
     vi("v", TensorProto.FLOAT, ["batch", "sequence", mha_hidden]), vi("padding", TensorProto.INT32, ["batch", "total"]),
     vi("past_key", TensorProto.FLOAT, ["batch", mha_heads, "past", mha_size]), vi("past_value", TensorProto.FLOAT, ["batch", mha_heads, "past", mha_size]),
     vi("memory_k", TensorProto.FLOAT, ["batch", "memory", mha_hidden]), vi("memory_v", TensorProto.FLOAT, ["batch", "memory", mha_hidden]),
     vi("attention_bias", TensorProto.FLOAT, [1, mha_heads, "sequence", "memory"])],
    [vi("y", TensorProto.FLOAT, ["batch", "sequence", mha_hidden]), vi("present_key", TensorProto.FLOAT, ["batch", mha_heads, "total", mha_size]),
     vi("present_value", TensorProto.FLOAT, ["batch", mha_heads, "total", mha_size]), vi("y_cross", TensorProto.FLOAT, ["batch", "sequence", mha_hidden])],
    [numpy_helper.from_array(f32(3 * mha_hidden), "bias")], opset=17)
mha.opset_import.append(helper.make_opsetid(ms, 1))
save("contrib_mha", mha, {"q": f32(2, 3, mha_hidden), "k": f32(2, 3, mha_hidden), "v": f32(2, 3, mha_hidden),
                          "padding": np.array([[1, 1, 1, 1, 1], [0, 1, 1, 1, 1]], dtype=np.int32),
                          "past_key": f32(2, mha_heads, mha_past, mha_size), "past_value": f32(2, mha_heads, mha_past, mha_size),
                          "memory_k": f32(2, 5, mha_hidden), "memory_v": f32(2, 5, mha_hidden), "attention_bias": f32(1, mha_heads, 3, 5)},
     check=False, exact=True)

# GroupQueryAttention as onnxruntime-genai's model builder writes it: packed QKV over a past cache
# whose head size is a named dim, rotated in the node, a scale; a decode step of a batch and a later
# prompt (onnxruntime takes one sequence there).
genai = model(
    [helper.make_node("GroupQueryAttention", ["qkv", "", "", "past_key", "past_value", "seqlens_k", "total", "cos", "sin"],
                      ["y", "present_key", "present_value"], domain=ms, num_heads=gqa_heads, kv_num_heads=gqa_kv, do_rotary=1, scale=0.25,
                      local_window_size=-1, softcap=0.0, rotary_interleaved=0)],
    [vi("qkv", TensorProto.FLOAT, ["batch", "sequence", packed_width]),
     vi("past_key", TensorProto.FLOAT, ["batch", gqa_kv, "past", "head_size"]), vi("past_value", TensorProto.FLOAT, ["batch", gqa_kv, "past", "head_size"]),
     vi("seqlens_k", TensorProto.INT32, ["batch"]), vi("total", TensorProto.INT32, [])],
    [vi("y", TensorProto.FLOAT, ["batch", "sequence", gqa_heads * gqa_size]), vi("present_key", TensorProto.FLOAT, ["batch", gqa_kv, "total", "head_size"]),
     vi("present_value", TensorProto.FLOAT, ["batch", gqa_kv, "total", "head_size"])],
    [numpy_helper.from_array(np.cos(gqa_angle).astype(np.float32), "cos"), numpy_helper.from_array(np.sin(gqa_angle).astype(np.float32), "sin")],
    opset=17)
genai.opset_import.append(helper.make_opsetid(ms, 1))
for name, batch, sequence in [("contrib_gqa_genai_decode", 2, 1), ("contrib_gqa_genai_prompt", 1, 3)]:
    save(name, genai, {"qkv": f32(batch, sequence, packed_width), "past_key": f32(batch, gqa_kv, gqa_past, gqa_size),
                       "past_value": f32(batch, gqa_kv, gqa_past, gqa_size),
                       "seqlens_k": np.array([gqa_past + sequence - 1] * batch, dtype=np.int32), "total": np.array(gqa_past + sequence, dtype=np.int32)},
         check=False, exact=True)

# Dropout with its training switch: as a graph input (fed false here, so the identity; true with a
# ratio that is not 0 is a run error in Kiln) and as a true constant (refused at convert).
dropout_inputs = [vi("x", TensorProto.FLOAT, [2, 3]), vi("training", TensorProto.BOOL, [])]
save("dropout_training_input", model([helper.make_node("Dropout", ["x", "ratio", "training"], ["y"])], dropout_inputs,
                                     [vi("y", TensorProto.FLOAT, [2, 3])], [numpy_helper.from_array(np.array(0.3, dtype=np.float32), "ratio")]),
     {"x": f32(2, 3), "training": np.array(False)})
save("dropout_training_constant", model([helper.make_node("Dropout", ["x", "ratio", "training"], ["y"], name="drop")], dropout_inputs[:1],
                                        [vi("y", TensorProto.FLOAT, [2, 3])],
                                        [numpy_helper.from_array(np.array(0.3, dtype=np.float32), "ratio"),
                                         numpy_helper.from_array(np.array(True), "training")]))

with open(os.path.join(OUT, "models.json"), "w") as f:
    json.dump({"generator": "tools/make_onnx_fixtures.py", "onnxruntime": ort.__version__, "cases": cases}, f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(os.listdir(OUT))} files")
