#!/usr/bin/env python3
"""Generates Tests/Fixtures/ops/cases.json: one-op test cases for Kiln's reference
interpreter, with expected outputs computed independently by onnxruntime running the
equivalent ONNX operator. Each case's ONNX model is saved too, as
Tests/Fixtures/onnx/ops/<case>.onnx, for the ONNX importer's tests: inputs a case marks
static become initializers there (the importer turns them into attributes). Cases at older
opsets test the importer only (their Kiln form is the same op as the newest opset's).

Run by hand (not by `make test`):  pip install onnx onnxruntime numpy && python3 tools/make_op_fixtures.py
"""
import json
import math
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 21
ROOT = os.path.join(os.path.dirname(__file__), "..", "Tests", "Fixtures")
OUT = os.path.join(ROOT, "ops", "cases.json")
MODELS = os.path.join(ROOT, "onnx", "ops")
os.makedirs(MODELS, exist_ok=True)
for old in os.listdir(MODELS):
    os.remove(os.path.join(MODELS, old))

# ONNX operator -> Kiln op type (specs/ops.md).
KILN_OP = {
    "Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Pow": "pow", "Sqrt": "sqrt",
    "Reciprocal": "reciprocal", "Exp": "exp", "Log": "log", "Erf": "erf", "Tanh": "tanh",
    "Sigmoid": "sigmoid", "Relu": "relu", "LeakyRelu": "leaky_relu", "HardSigmoid": "hard_sigmoid",
    "HardSwish": "hard_swish", "Gelu": "gelu", "Clip": "clip", "Abs": "abs", "Neg": "neg",
    "Floor": "floor", "Ceil": "ceil", "Round": "round", "Max": "max", "Min": "min", "Mean": "mean",
    "Sum": "sum", "Where": "where", "Equal": "equal", "Less": "less", "LessOrEqual": "less_or_equal",
    "Greater": "greater", "GreaterOrEqual": "greater_or_equal", "And": "and", "Or": "or", "Not": "not",
    "Xor": "xor", "IsNaN": "is_nan", "IsInf": "is_inf", "Cast": "cast", "MatMul": "matmul",
    "Gemm": "gemm", "Conv": "conv", "ConvTranspose": "conv_transpose",
    "BatchNormalization": "batch_norm", "InstanceNormalization": "instance_norm",
    "LayerNormalization": "layer_norm", "Softmax": "softmax", "LogSoftmax": "log_softmax",
    "MaxPool": "max_pool", "AveragePool": "average_pool", "GlobalAveragePool": "global_average_pool",
    "GlobalMaxPool": "global_max_pool", "ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum",
    "ReduceMax": "reduce_max", "ReduceMin": "reduce_min", "ReduceProd": "reduce_prod",
    "ReduceL2": "reduce_l2", "ArgMax": "argmax", "ArgMin": "argmin", "Reshape": "reshape",
    "Transpose": "transpose", "Flatten": "flatten", "Squeeze": "squeeze", "Unsqueeze": "unsqueeze",
    "Concat": "concat", "Split": "split", "Slice": "slice", "Gather": "gather",
    "GatherElements": "gather_elements", "GatherND": "gather_nd", "ScatterND": "scatter_nd",
    "Expand": "expand", "Tile": "tile", "Pad": "pad", "Resize": "resize",
    "DepthToSpace": "depth_to_space", "SpaceToDepth": "space_to_depth", "Shape": "shape",
    "Size": "size", "ConstantOfShape": "constant_of_shape", "Range": "range", "CumSum": "cumsum",
    "TopK": "top_k", "Einsum": "einsum", "Identity": "identity", "LSTM": "lstm", "GRU": "gru",
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh",
    "Cosh": "cosh", "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "Softplus": "softplus",
    "Softsign": "softsign", "Mish": "mish", "Sign": "sign", "Elu": "elu", "Celu": "celu", "Selu": "selu",
    "ThresholdedRelu": "thresholded_relu", "Shrink": "shrink", "Mod": "mod", "BitShift": "bit_shift",
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor", "BitwiseNot": "bitwise_not",
    "PRelu": "prelu", "Trilu": "trilu", "ReduceL1": "reduce_l1", "ReduceSumSquare": "reduce_sum_square",
    "ReduceLogSum": "reduce_log_sum", "ReduceLogSumExp": "reduce_log_sum_exp", "CumProd": "cumprod",
    "Hardmax": "hardmax", "ScatterElements": "scatter_elements", "OneHot": "one_hot", "EyeLike": "eye_like",
    "Compress": "compress", "Attention": "attention", "NegativeLogLikelihoodLoss": "nll_loss",
    "QuantizeLinear": "quantize_linear", "DequantizeLinear": "dequantize_linear",
    "DynamicQuantizeLinear": "dynamic_quantize_linear", "MatMulInteger": "matmul_integer", "QLinearMatMul": "qlinear_matmul",
    "RNN": "rnn", "LpPool": "lp_pool", "RotaryEmbedding": "rotary_embedding",
    "GridSample": "grid_sample", "AffineGrid": "affine_grid", "Col2Im": "col2im", "DeformConv": "deform_conv",
    "MaxUnpool": "max_unpool", "NonMaxSuppression": "non_max_suppression", "CenterCropPad": "center_crop_pad", "LRN": "lrn",
    "GroupNormalization": "group_norm", "MeanVarianceNormalization": "mean_variance_normalization", "HannWindow": "window",
    "HammingWindow": "window", "BlackmanWindow": "window", "MelWeightMatrix": "mel_weight_matrix",
    "LinearAttention": "linear_attention", "CausalConvWithState": "causal_conv_with_state", "TensorScatter": "tensor_scatter",
    "ReverseSequence": "reverse_sequence", "Unique": "unique", "NonZero": "non_zero", "BitCast": "bit_cast", "Det": "det",
    "TfIdfVectorizer": "tfidf_vectorizer", "ConvInteger": "conv_integer", "QLinearConv": "qlinear_conv",
    "RoiAlign": "roi_align", "SwiGLU": "swiglu", "DFT": "dft", "STFT": "stft",
}
ATTR_RENAME = {"transA": "trans_a", "transB": "trans_b"}
DTYPE = {"float32": "float32", "float16": "float16", "float64": "float64", "int64": "int64",
         "int32": "int32", "int16": "int16", "int8": "int8", "uint8": "uint8", "bool": "bool"}
ONNX_TO_KILN_DTYPE = {TensorProto.FLOAT: "float32", TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64",
                      TensorProto.INT64: "int64", TensorProto.INT32: "int32", TensorProto.INT16: "int16",
                      TensorProto.INT8: "int8", TensorProto.UINT8: "uint8", TensorProto.BOOL: "bool"}

rng = np.random.default_rng(0)
cases = []


def number(v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    v = float(v)
    if math.isnan(v):
        return "nan"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    return v


def tensor_json(a):
    a = np.asarray(a)
    return {"dtype": DTYPE[a.dtype.name], "shape": list(a.shape), "data": [number(v) for v in a.reshape(-1).tolist()]}


def kiln_attr(name, value):
    if name in ("to", "dtype"):
        return {"dtype": ONNX_TO_KILN_DTYPE[value]}
    if isinstance(value, onnx.TensorProto):
        return {"tensor": tensor_json(numpy_helper.to_array(value))}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, bool):
        return {"int": int(value)}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, float):
        return {"float": value}
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, (str, bytes)) for v in value):
            return {"strings": [v.decode() if isinstance(v, bytes) else v for v in value]}
        if all(isinstance(v, int) for v in value):
            return {"ints": list(value)}
        return {"floats": [float(v) for v in value]}
    raise ValueError(f"attribute {name}: {value!r}")


def case(name, op, inputs, attrs=None, outputs=1, static=None, kiln_attrs=None, tol=1e-5, opset=OPSET, onnx_only=False, expected=None):
    """inputs: list of arrays or None (absent optional input). static: {input index: kiln attribute
    name} moves a constant input into a Kiln attribute (the static form of the op)."""
    attrs = attrs or {}
    names = [f"in{i}" if a is not None else "" for i, a in enumerate(inputs)]
    out_names = [f"out{i}" for i in range(outputs)]
    node_inputs = list(names)
    while node_inputs and node_inputs[-1] == "":
        node_inputs.pop()
    node = helper.make_node(op, node_inputs, out_names, **attrs)
    graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(a).dtype), list(np.asarray(a).shape))
                    for n, a in zip(names, inputs) if a is not None]
    graph = helper.make_graph([node], "case", graph_inputs, [helper.make_empty_tensor_value_info(n) for n in out_names])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    model = onnx.shape_inference.infer_shapes(model)
    # Outputs need types for onnxruntime; take them from shape inference.
    inferred = {v.name: v for v in model.graph.value_info}
    for i, o in enumerate(model.graph.output):
        if o.name in inferred:
            model.graph.output[i].CopyFrom(inferred[o.name])
    feeds = {n: np.asarray(a) for n, a in zip(names, inputs) if a is not None}
    if expected is not None:
        # An operator onnxruntime has no kernel for: the expected values come from its definition.
        results = expected(*[np.asarray(a) for a in inputs if a is not None])
    else:
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        results = sess.run(None, feeds)
    # The importer's copy: static inputs become initializers.
    saved = onnx.ModelProto()
    saved.CopyFrom(model)
    for i in sorted(static or {}):
        init = numpy_helper.from_array(np.asarray(inputs[i]), names[i])
        saved.graph.initializer.append(init)
        keep = [v for v in saved.graph.input if v.name != names[i]]
        del saved.graph.input[:]
        saved.graph.input.extend(keep)
    with open(os.path.join(MODELS, name + ".onnx"), "wb") as f:
        f.write(saved.SerializeToString())
    kiln_inputs = []
    kattrs = {ATTR_RENAME.get(k, k): kiln_attr(k, v) for k, v in attrs.items()}
    static = static or {}
    for i, a in enumerate(inputs):
        if i in static and static[i] in ("k", "axis", "depth", "dft_length"):
            kattrs[static[i]] = {"int": int(np.asarray(a).reshape(-1)[0])}
            kiln_inputs.append(None)
        elif i in static:
            kattrs[static[i]] = kiln_attr(static[i], [int(v) for v in np.asarray(a).reshape(-1)]) if np.asarray(a).dtype.kind in "iu" \
                else {"floats": [float(v) for v in np.asarray(a).reshape(-1)]}
            kiln_inputs.append(None)
        else:
            kiln_inputs.append(None if a is None else tensor_json(a))
    while kiln_inputs and kiln_inputs[-1] is None:
        kiln_inputs.pop()
    kattrs.update(kiln_attrs or {})
    cases.append({"name": name, "onnx": op, "opset": opset, "onnxOnly": onnx_only, "op": KILN_OP.get(op, ""),
                  "attributes": kattrs, "inputs": kiln_inputs,
                  "outputs": [tensor_json(r) for r in results], "tolerance": tol})


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i64(values):
    return np.array(values, dtype=np.int64)


# Elementwise unary.
x = f32(2, 3, 4, lo=-3, hi=3)
pos = f32(2, 3, 4, lo=0.1, hi=4)
for op in ["Exp", "Erf", "Tanh", "Sigmoid", "Relu", "Abs", "Neg", "Floor", "Ceil", "HardSwish", "Identity"]:
    case(op.lower(), op, [x])
case("round_half_even", "Round", [np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -0.6], dtype=np.float32)])
case("sqrt", "Sqrt", [pos])
case("log", "Log", [pos])
case("reciprocal", "Reciprocal", [pos])
case("leaky_relu", "LeakyRelu", [x], {"alpha": 0.2})
case("leaky_relu_default", "LeakyRelu", [x])
case("hard_sigmoid", "HardSigmoid", [x], {"alpha": 0.3, "beta": 0.4})
case("gelu_erf", "Gelu", [x])
case("gelu_tanh", "Gelu", [x], {"approximate": "tanh"})
case("relu_int32", "Relu", [np.array([-3, 0, 5], dtype=np.int32)])
case("abs_int64", "Abs", [i64([-3, 0, 5])])
case("neg_int32", "Neg", [np.array([-3, 0, 5], dtype=np.int32)])
case("empty_exp", "Exp", [np.zeros((0, 3), dtype=np.float32)])
special = np.array([np.nan, np.inf, -np.inf, 0.0, -1.5], dtype=np.float32)
case("is_nan", "IsNaN", [special])
case("is_inf", "IsInf", [special])
case("is_inf_positive", "IsInf", [special], {"detect_negative": 0})
case("is_inf_negative", "IsInf", [special], {"detect_positive": 0})
case("clip", "Clip", [x, np.array(-0.5, dtype=np.float32), np.array(1.0, dtype=np.float32)])
case("clip_min_only", "Clip", [x, np.array(0.0, dtype=np.float32)])
case("clip_max_only", "Clip", [x, None, np.array(0.25, dtype=np.float32)])
case("clip_int64", "Clip", [i64([-5, 0, 7]), i64(-2), i64(3)])
case("cast_float_to_int64", "Cast", [np.array([-2.7, -0.5, 0.5, 2.7, 100.2], dtype=np.float32)], {"to": TensorProto.INT64})
case("cast_int_to_float", "Cast", [i64([-3, 0, 9])], {"to": TensorProto.FLOAT})
case("cast_float_to_bool", "Cast", [np.array([0.0, -0.0, 2.0, -1.0], dtype=np.float32)], {"to": TensorProto.BOOL})
case("cast_bool_to_float", "Cast", [np.array([True, False, True])], {"to": TensorProto.FLOAT})
case("cast_int64_to_int32", "Cast", [i64([-3, 0, 9])], {"to": TensorProto.INT32})
case("cast_float_to_float16", "Cast", [np.array([0.1, 1.0 / 3, 65504.0, 1e-5], dtype=np.float32)], {"to": TensorProto.FLOAT16})
case("not", "Not", [np.array([True, False, True])])

# Binary with broadcasting.
a = f32(2, 3, 4)
b_row = f32(4)
b_col = f32(3, 1)
b_full = f32(2, 3, 4, lo=0.5, hi=2)
for op in ["Add", "Sub", "Mul", "Div"]:
    case(f"{op.lower()}_same", op, [a, b_full])
    case(f"{op.lower()}_broadcast_row", op, [a, b_row])
    case(f"{op.lower()}_broadcast_col", op, [b_col, a])
case("add_scalar", "Add", [a, np.array(2.5, dtype=np.float32)])
case("add_both_broadcast", "Add", [f32(3, 1), f32(1, 4)])
case("add_empty", "Add", [np.zeros((0, 4), dtype=np.float32), f32(4)])
case("add_int64", "Add", [i64([[1, 2], [3, 4]]), i64([10, 20])])
case("mul_int32", "Mul", [np.array([1, -2, 3], dtype=np.int32), np.array([4], dtype=np.int32)])
case("div_int64", "Div", [i64([7, -7, 9]), i64([2, 2, -4])])
case("pow", "Pow", [f32(3, 4, lo=0.2, hi=2), f32(4, lo=-2, hi=2)])
case("pow_int_exponent", "Pow", [f32(3, 4), i64([2])])
case("pow_square", "Pow", [f32(3, 4, lo=-2, hi=2), np.array(2.0, dtype=np.float32)])
case("max_variadic", "Max", [f32(3, 4), f32(4), f32(3, 1)])
case("min_variadic", "Min", [f32(3, 4), f32(4), f32(3, 1)])
case("sum_variadic", "Sum", [f32(3, 4), f32(4), f32(3, 1)])
case("mean_variadic", "Mean", [f32(3, 4), f32(4), f32(3, 1)])
case("max_single", "Max", [f32(3, 4)])
case("max_int64", "Max", [i64([1, 5, -2]), i64([3])])
c1 = np.array([[1.0, 2.0, 3.0], [3.0, 2.0, 1.0]], dtype=np.float32)
c2 = np.array([2.0, 2.0, 2.0], dtype=np.float32)
for op in ["Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"]:
    case(op.lower(), op, [c1, c2])
case("equal_int64", "Equal", [i64([1, 2, 3]), i64([[1], [2]])])
case("less_int64", "Less", [i64([1, 2, 3]), i64(2)])
p = np.array([[True, False], [True, True]])
q = np.array([False, True])
for op in ["And", "Or", "Xor"]:
    case(op.lower(), op, [p, q])
case("where", "Where", [np.array([[True, False, True]]), f32(2, 3), f32(2, 1)])
case("where_int64", "Where", [np.array([True, False]), i64([1, 2]), i64([-1])])

# Linear algebra.
case("matmul_2d", "MatMul", [f32(3, 5), f32(5, 4)])
case("matmul_batched", "MatMul", [f32(2, 3, 5), f32(2, 5, 4)])
case("matmul_broadcast_batch", "MatMul", [f32(2, 1, 3, 5), f32(3, 5, 4)])
case("matmul_vector_left", "MatMul", [f32(5), f32(2, 5, 4)])
case("matmul_vector_right", "MatMul", [f32(2, 3, 5), f32(5)])
case("matmul_vectors", "MatMul", [f32(5), f32(5)])
case("matmul_empty_k", "MatMul", [np.zeros((3, 0), dtype=np.float32), np.zeros((0, 4), dtype=np.float32)])
case("gemm", "Gemm", [f32(3, 5), f32(5, 4), f32(4)])
case("gemm_transposed", "Gemm", [f32(5, 3), f32(4, 5), f32(3, 4)], {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0})
case("gemm_no_c", "Gemm", [f32(3, 5), f32(4, 5), None], {"transB": 1})
case("gemm_scalar_c", "Gemm", [f32(3, 5), f32(5, 4), np.array(1.5, dtype=np.float32)])
case("einsum_matmul", "Einsum", [f32(3, 5), f32(5, 4)], {"equation": "ij,jk->ik"})
case("einsum_batched", "Einsum", [f32(2, 3, 5), f32(2, 5, 4)], {"equation": "bij,bjk->bik"})
case("einsum_attention", "Einsum", [f32(2, 4, 3, 8), f32(2, 4, 5, 8)], {"equation": "bhqd,bhkd->bhqk"})
case("einsum_transpose", "Einsum", [f32(3, 5)], {"equation": "ij->ji"})
case("einsum_sum_axis", "Einsum", [f32(3, 5)], {"equation": "ij->i"})
case("einsum_outer", "Einsum", [f32(3), f32(4)], {"equation": "i,j->ij"})
case("einsum_dot", "Einsum", [f32(6), f32(6)], {"equation": "i,i"})
case("einsum_trace", "Einsum", [f32(4, 4)], {"equation": "ii->i"})

# Convolution.
img = f32(1, 4, 7, 6)
case("conv_basic", "Conv", [img, f32(3, 4, 3, 3), f32(3)])
case("conv_pads_strides", "Conv", [img, f32(3, 4, 3, 3), None], {"pads": [1, 1, 1, 1], "strides": [2, 2]})
case("conv_asymmetric_pads", "Conv", [img, f32(2, 4, 3, 2), f32(2)], {"pads": [0, 1, 2, 0]})
case("conv_dilation", "Conv", [img, f32(2, 4, 3, 3), None], {"dilations": [2, 1], "pads": [2, 1, 2, 1]})
case("conv_groups", "Conv", [img, f32(6, 2, 3, 3), f32(6)], {"group": 2, "pads": [1, 1, 1, 1]})
case("conv_depthwise", "Conv", [img, f32(4, 1, 3, 3), f32(4)], {"group": 4, "pads": [1, 1, 1, 1], "strides": [2, 2]})
case("conv_groups_dilation_asym", "Conv", [f32(2, 6, 9, 8), f32(9, 2, 3, 3), f32(9)],
     {"group": 3, "dilations": [2, 2], "pads": [1, 2, 3, 0], "strides": [1, 2]})
case("conv_same_upper", "Conv", [img, f32(2, 4, 3, 3), None], {"auto_pad": "SAME_UPPER", "strides": [2, 2]})
case("conv_same_lower", "Conv", [img, f32(2, 4, 4, 4), None], {"auto_pad": "SAME_LOWER"})
case("conv_valid", "Conv", [img, f32(2, 4, 3, 3), None], {"auto_pad": "VALID"})
case("conv_1d", "Conv", [f32(2, 3, 10), f32(4, 3, 3), f32(4)], {"pads": [1, 2], "strides": [2]})
case("conv_3d", "Conv", [f32(1, 2, 4, 5, 5), f32(3, 2, 2, 3, 3), None], {"pads": [0, 1, 1, 1, 1, 1]})
case("conv_1x1", "Conv", [img, f32(5, 4, 1, 1), f32(5)])
case("conv_transpose_basic", "ConvTranspose", [f32(1, 3, 4, 5), f32(3, 2, 3, 3), f32(2)])
case("conv_transpose_strides", "ConvTranspose", [f32(1, 3, 4, 5), f32(3, 2, 3, 3), None], {"strides": [2, 2], "pads": [1, 1, 1, 1]})
case("conv_transpose_output_padding", "ConvTranspose", [f32(1, 2, 3, 3), f32(2, 3, 3, 3), None],
     {"strides": [2, 2], "output_padding": [1, 1]})
case("conv_transpose_groups_dilation", "ConvTranspose", [f32(1, 4, 3, 4), f32(4, 1, 2, 3), f32(2)],
     {"group": 2, "dilations": [2, 1], "pads": [0, 1, 1, 0]})
case("conv_transpose_output_shape", "ConvTranspose", [f32(1, 2, 3, 3), f32(2, 1, 3, 3), None],
     {"strides": [2, 2], "output_shape": [7, 8]})
case("conv_transpose_1d", "ConvTranspose", [f32(1, 2, 5), f32(2, 3, 4), None], {"strides": [3]})

# Pooling.
pimg = f32(1, 2, 7, 6, lo=-2, hi=2)
case("max_pool", "MaxPool", [pimg], {"kernel_shape": [3, 3], "strides": [2, 2]})
case("max_pool_pads", "MaxPool", [pimg], {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1]})
case("max_pool_ceil", "MaxPool", [pimg], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1})
case("max_pool_dilation", "MaxPool", [pimg], {"kernel_shape": [2, 2], "dilations": [2, 2]})
case("max_pool_same_upper", "MaxPool", [pimg], {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"})
case("average_pool", "AveragePool", [pimg], {"kernel_shape": [3, 3], "strides": [2, 2]})
case("average_pool_pads_exclude", "AveragePool", [pimg], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})
case("average_pool_pads_include", "AveragePool", [pimg], {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1})
case("average_pool_ceil", "AveragePool", [pimg], {"kernel_shape": [2, 2], "strides": [2, 2], "ceil_mode": 1})
case("average_pool_1d", "AveragePool", [f32(2, 3, 9)], {"kernel_shape": [3], "strides": [2]})
case("global_average_pool", "GlobalAveragePool", [pimg])
case("global_max_pool", "GlobalMaxPool", [pimg])

# Normalization.
case("batch_norm", "BatchNormalization", [f32(2, 3, 4, 5), f32(3), f32(3), f32(3), f32(3, lo=0.5, hi=2)], {"epsilon": 1e-3})
case("batch_norm_2d", "BatchNormalization", [f32(4, 3), f32(3), f32(3), f32(3), f32(3, lo=0.5, hi=2)])
case("instance_norm", "InstanceNormalization", [f32(2, 3, 4, 5), f32(3), f32(3)], {"epsilon": 1e-4})
case("layer_norm", "LayerNormalization", [f32(2, 3, 8), f32(8), f32(8)], {"epsilon": 1e-5})
case("layer_norm_axis", "LayerNormalization", [f32(2, 3, 4), f32(3, 4), None], {"axis": 1})
case("layer_norm_negative_axis", "LayerNormalization", [f32(2, 3, 4), f32(3, 4), f32(4)], {"axis": -2})
case("softmax", "Softmax", [f32(2, 3, 4, lo=-5, hi=5)])
case("softmax_axis", "Softmax", [f32(2, 3, 4, lo=-5, hi=5)], {"axis": 1})
case("softmax_large", "Softmax", [np.array([[1000.0, 1001.0, 999.0]], dtype=np.float32)])
case("log_softmax", "LogSoftmax", [f32(2, 3, 4, lo=-5, hi=5)], {"axis": -2})

# Reductions.
r = f32(2, 3, 4)
for op in ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2"]:
    n = op[6:].lower()
    case(f"reduce_{n}_axes", op, [r, i64([1])])
    case(f"reduce_{n}_negative_axes_nokeep", op, [r, i64([-1, 0])], {"keepdims": 0})
    case(f"reduce_{n}_all", op, [r])
    case(f"reduce_{n}_static", op, [r, i64([2])], static={1: "axes"})
case("reduce_sum_noop", "ReduceSum", [r, i64([])], {"noop_with_empty_axes": 1})
case("reduce_sum_int64", "ReduceSum", [i64([[1, 2, 3], [4, 5, 6]]), i64([1])])
case("reduce_max_empty_axis_keep", "ReduceSum", [np.zeros((2, 0), dtype=np.float32), i64([1])])
case("argmax", "ArgMax", [f32(3, 4)], {"axis": 1})
case("argmax_nokeep", "ArgMax", [f32(3, 4)], {"axis": 0, "keepdims": 0})
case("argmax_ties_last", "ArgMax", [np.array([[1, 3, 3, 2]], dtype=np.float32)], {"axis": 1, "select_last_index": 1})
case("argmax_ties_first", "ArgMax", [np.array([[1, 3, 3, 2]], dtype=np.float32)], {"axis": -1})
case("argmin", "ArgMin", [f32(3, 4)], {"axis": -1})
case("cumsum", "CumSum", [f32(2, 5), i64(1)])
case("cumsum_exclusive_reverse", "CumSum", [f32(2, 5), i64(-1)], {"exclusive": 1, "reverse": 1})
case("cumsum_axis0_int64", "CumSum", [i64([[1, 2], [3, 4], [5, 6]]), i64(0)])
case("top_k", "TopK", [f32(3, 6), i64([2])], outputs=2)
case("top_k_smallest_axis0", "TopK", [f32(5, 3), i64([3])], {"axis": 0, "largest": 0}, outputs=2)
case("top_k_ties", "TopK", [np.array([[1, 3, 3, 2, 3]], dtype=np.float32), i64([2])], outputs=2)
case("top_k_static", "TopK", [f32(3, 6), i64([4])], outputs=2, static={1: "k"})

# Shapes and movement.
t = f32(2, 3, 4)
case("reshape", "Reshape", [t, i64([4, 6])])
case("reshape_zero_minus_one", "Reshape", [t, i64([0, -1])])
case("reshape_static", "Reshape", [t, i64([2, 0, 2, 2])], static={1: "shape"})
case("reshape_allowzero_empty", "Reshape", [np.zeros((0, 3), dtype=np.float32), i64([3, 0])], {"allowzero": 1})
case("reshape_int64", "Reshape", [i64([[1, 2], [3, 4]]), i64([-1])])
case("transpose", "Transpose", [t], {"perm": [2, 0, 1]})
case("transpose_default", "Transpose", [t])
case("flatten", "Flatten", [f32(2, 3, 4, 5)], {"axis": 2})
case("flatten_zero", "Flatten", [t], {"axis": 0})
case("flatten_negative", "Flatten", [t], {"axis": -1})
case("squeeze", "Squeeze", [f32(1, 3, 1, 4), i64([0, -2])])
case("squeeze_all", "Squeeze", [f32(1, 3, 1, 4)])
case("squeeze_static", "Squeeze", [f32(1, 3, 1, 4), i64([2])], static={1: "axes"})
case("unsqueeze", "Unsqueeze", [t, i64([0, -1])])
case("unsqueeze_static", "Unsqueeze", [t, i64([1, 3])], static={1: "axes"})
case("concat", "Concat", [f32(2, 3), f32(2, 1), f32(2, 2)], {"axis": 1})
case("concat_negative_axis", "Concat", [f32(2, 3, 2), f32(2, 3, 1)], {"axis": -1})
case("concat_int64", "Concat", [i64([1, 2]), i64([3]), i64([])], {"axis": 0})
case("concat_empty", "Concat", [np.zeros((0, 3), dtype=np.float32), f32(2, 3)], {"axis": 0})
case("split_sizes", "Split", [f32(2, 7), i64([2, 5])], {"axis": 1}, outputs=2)
case("split_equal", "Split", [f32(6, 2)], {"num_outputs": 3}, outputs=3)
case("split_uneven", "Split", [f32(7, 2)], {"num_outputs": 3}, outputs=3)
case("split_static", "Split", [f32(2, 7), i64([3, 1, 3])], {"axis": -1}, outputs=3, static={1: "split"})
s = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
case("slice", "Slice", [s, i64([0, 1]), i64([2, 3]), i64([0, 2])])
case("slice_negative_indices", "Slice", [s, i64([-2]), i64([-1]), i64([1])])
case("slice_negative_step", "Slice", [s, i64([-1, 4]), i64([-1000, 0]), i64([1, 2]), i64([-1, -2])])
case("slice_step_3", "Slice", [s, i64([0]), i64([5]), i64([2]), i64([3])])
case("slice_clamped", "Slice", [s, i64([-100, 1]), i64([100, 1000]), i64([0, 1])])
case("slice_empty", "Slice", [s, i64([3]), i64([1]), i64([1])])
case("slice_reverse_all", "Slice", [s, i64([2**62]), i64([-2**62]), i64([0]), i64([-1])])
case("slice_static", "Slice", [s, i64([1, -1]), i64([3, 0]), i64([1, 2]), i64([1, -1])],
     static={1: "starts", 2: "ends", 3: "axes", 4: "steps"})
g = f32(5, 4)
case("gather", "Gather", [g, i64([[0, 2], [4, -1]])])
case("gather_axis1", "Gather", [f32(2, 5, 3), i64([1, 0, 4])], {"axis": 1})
case("gather_scalar_index", "Gather", [g, i64(3)])
case("gather_int32_indices", "Gather", [g, np.array([1, 1], dtype=np.int32)], {"axis": -1})
case("gather_int64_data", "Gather", [i64([10, 20, 30]), i64([2, 0])])
case("gather_elements", "GatherElements", [f32(3, 4), i64([[0, 3, 1], [2, 2, 0]])], {"axis": 1})
case("gather_elements_axis0", "GatherElements", [f32(3, 4), i64([[2, 0, 1, -1]])], {"axis": 0})
case("gather_nd", "GatherND", [f32(2, 3, 4), i64([[0, 1], [1, 2]])])
case("gather_nd_full", "GatherND", [f32(2, 3), i64([[0, 1], [1, 2]])])
case("gather_nd_batch", "GatherND", [f32(2, 3, 4), i64([[[1]], [[2]]])], {"batch_dims": 1})
case("scatter_nd", "ScatterND", [f32(4, 3), i64([[1], [3]]), f32(2, 3)])
case("scatter_nd_elements", "ScatterND", [f32(2, 3), i64([[0, 1], [1, 2]]), f32(2)])
case("scatter_nd_add", "ScatterND", [f32(4, 3), i64([[1], [1]]), f32(2, 3)], {"reduction": "add"})
case("expand", "Expand", [f32(3, 1), i64([2, 3, 4])])
case("expand_smaller_shape", "Expand", [f32(2, 3), i64([3])])
case("expand_static", "Expand", [f32(1, 4), i64([3, 1])], static={1: "shape"})
case("tile", "Tile", [f32(2, 3), i64([2, 3])])
case("tile_zero", "Tile", [f32(2, 3), i64([0, 1])])
case("tile_static", "Tile", [i64([[1, 2]]), i64([3, 2])], static={1: "repeats"})
pd = np.arange(12, dtype=np.float32).reshape(3, 4)
case("pad_constant", "Pad", [pd, i64([1, 2, 0, 1]), np.array(9.5, dtype=np.float32)])
case("pad_constant_default", "Pad", [pd, i64([0, 1, 2, 0])])
case("pad_reflect", "Pad", [pd, i64([2, 3, 1, 2])], {"mode": "reflect"})
case("pad_edge", "Pad", [pd, i64([2, 1, 3, 2])], {"mode": "edge"})
case("pad_wrap", "Pad", [pd, i64([1, 2, 2, 5])], {"mode": "wrap"})
case("pad_negative", "Pad", [pd, i64([-1, 1, 0, -2])])
case("pad_axes", "Pad", [f32(2, 3, 4), i64([1, 2]), None, i64([-1])], {"mode": "reflect"})
case("pad_4d_reflect", "Pad", [f32(1, 2, 4, 4), i64([0, 0, 1, 2, 0, 0, 2, 1])], {"mode": "reflect"})
case("pad_static", "Pad", [pd, i64([1, 0, 1, 2])], {"mode": "edge"}, static={1: "pads"})
case("pad_int64", "Pad", [i64([[1, 2], [3, 4]]), i64([1, 1, 1, 1]), i64(-7)])
dts = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
case("depth_to_space_dcr", "DepthToSpace", [dts], {"blocksize": 2})
case("depth_to_space_crd", "DepthToSpace", [dts], {"blocksize": 2, "mode": "CRD"})
case("space_to_depth", "SpaceToDepth", [f32(1, 2, 4, 6)], {"blocksize": 2})
case("shape", "Shape", [t])
case("shape_start_end", "Shape", [f32(2, 3, 4, 5)], {"start": 1, "end": -1})
case("shape_start_negative", "Shape", [f32(2, 3, 4, 5)], {"start": -2})
case("size", "Size", [t])
case("constant_of_shape", "ConstantOfShape", [i64([2, 3])], {"value": numpy_helper.from_array(np.array([1.5], dtype=np.float32))})
case("constant_of_shape_int64", "ConstantOfShape", [i64([4])], {"value": numpy_helper.from_array(i64([7]))})
case("constant_of_shape_default", "ConstantOfShape", [i64([2, 2])])
case("range_float", "Range", [np.array(1.0, dtype=np.float32), np.array(3.0, dtype=np.float32), np.array(0.4, dtype=np.float32)])
case("range_int64", "Range", [i64(10), i64(-2), i64(-3)])
case("range_empty", "Range", [i64(3), i64(3), i64(1)])

# Resize: every mode and coordinate transformation.
rimg = f32(1, 2, 3, 4, lo=0, hi=10)
for nearest in ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]:
    for ctm in ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]:
        case(f"resize_nearest_{nearest}_{ctm}", "Resize", [rimg, None, np.array([1, 1, 2.0, 1.5], dtype=np.float32)],
             {"mode": "nearest", "nearest_mode": nearest, "coordinate_transformation_mode": ctm})
for mode in ["linear", "cubic"]:
    for ctm in ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel", "half_pixel_symmetric"]:
        case(f"resize_{mode}_{ctm}_up", "Resize", [rimg, None, np.array([1, 1, 2.0, 1.75], dtype=np.float32)],
             {"mode": mode, "coordinate_transformation_mode": ctm}, tol=1e-4)
        case(f"resize_{mode}_{ctm}_sizes_down", "Resize", [f32(1, 1, 7, 9, lo=0, hi=10), None, None, i64([1, 1, 3, 4])],
             {"mode": mode, "coordinate_transformation_mode": ctm}, tol=1e-4)
case("resize_cubic_exclude_outside", "Resize", [rimg, None, np.array([1, 1, 2.0, 2.0], dtype=np.float32)],
     {"mode": "cubic", "exclude_outside": 1, "cubic_coeff_a": -0.5}, tol=1e-4)
case("resize_linear_tf_crop", "Resize", [rimg, np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.3], dtype=np.float32), None, i64([1, 2, 4, 5])],
     {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": -1.0}, tol=1e-4)
case("resize_nearest_tf_crop", "Resize", [rimg, np.array([0, 0, -0.2, 0.1, 1, 1, 0.9, 0.8], dtype=np.float32), None, i64([1, 2, 4, 5])],
     {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize", "extrapolation_value": 5.0})
case("resize_axes_sizes", "Resize", [rimg, None, None, i64([6, 2])], {"axes": [2, 3], "mode": "linear"}, tol=1e-4)
case("resize_not_larger", "Resize", [rimg, None, None, i64([5, 5])], {"axes": [2, 3], "keep_aspect_ratio_policy": "not_larger"})
case("resize_not_smaller", "Resize", [rimg, None, None, i64([5, 5])], {"axes": [2, 3], "keep_aspect_ratio_policy": "not_smaller"})
case("resize_linear_1d", "Resize", [f32(2, 5), None, np.array([1, 1.6], dtype=np.float32)], {"mode": "linear"}, tol=1e-4)
case("resize_linear_3d_trilinear", "Resize", [f32(1, 1, 2, 3, 4), None, np.array([1, 1, 2, 1.5, 0.75], dtype=np.float32)],
     {"mode": "linear"}, tol=1e-4)
case("resize_static_scales", "Resize", [rimg, None, np.array([1, 1, 1.5, 2.0], dtype=np.float32)], {"mode": "linear"},
     static={2: "scales"}, tol=1e-4)

# Recurrent layers.
S, B, I, H = 4, 2, 3, 5
def rnn(gates, dirs, bias=True):
    w = f32(dirs, gates * H, I, lo=-0.6, hi=0.6)
    r = f32(dirs, gates * H, H, lo=-0.6, hi=0.6)
    b = f32(dirs, 2 * gates * H, lo=-0.3, hi=0.3) if bias else None
    return w, r, b
xs = f32(S, B, I, lo=-2, hi=2)
w, r_, b = rnn(4, 1)
case("lstm_forward", "LSTM", [xs, w, r_, b], {"hidden_size": H}, outputs=3)
w, r_, _ = rnn(4, 1, bias=False)
case("lstm_reverse_no_bias", "LSTM", [xs, w, r_], {"hidden_size": H, "direction": "reverse"}, outputs=3)
w, r_, b = rnn(4, 2)
case("lstm_bidirectional_states_lengths_peepholes", "LSTM",
     [xs, w, r_, b, np.array([4, 2], dtype=np.int32), f32(2, B, H), f32(2, B, H), f32(2, 3 * H)],
     {"hidden_size": H, "direction": "bidirectional"}, outputs=3)
w, r_, b = rnn(4, 1)
case("lstm_clip_activations", "LSTM", [xs, w, r_, b], {"hidden_size": H, "clip": 0.5,
     "activations": ["HardSigmoid", "Tanh", "Relu"], "activation_alpha": [0.3], "activation_beta": [0.4]}, outputs=3)
w, r_, b = rnn(3, 1)
case("gru_forward", "GRU", [xs, w, r_, b], {"hidden_size": H}, outputs=2)
w, r_, b = rnn(3, 2)
case("gru_bidirectional_linear_before_reset", "GRU", [xs, w, r_, b, np.array([3, 4], dtype=np.int32), f32(2, B, H)],
     {"hidden_size": H, "direction": "bidirectional", "linear_before_reset": 1}, outputs=2)
w, r_, b = rnn(3, 1)
case("gru_reverse", "GRU", [xs, w, r_, b], {"hidden_size": H, "direction": "reverse"}, outputs=2)

# Older opsets: attributes where newer opsets take inputs, and older semantics.
sq = f32(1, 3, 1, 4)
case("opset9_slice_attributes", "Slice", [s], {"starts": [1, -3], "ends": [3, 100], "axes": [0, 2]}, opset=9, onnx_only=True)
case("opset11_squeeze_attribute", "Squeeze", [sq], {"axes": [0, 2]}, opset=11, onnx_only=True)
case("opset11_unsqueeze_attribute", "Unsqueeze", [f32(3, 4)], {"axes": [0, 3]}, opset=11, onnx_only=True)
case("opset11_split_attribute", "Split", [f32(2, 7)], {"axis": 1, "split": [3, 4]}, outputs=2, opset=11, onnx_only=True)
case("opset13_split_input", "Split", [f32(2, 7), i64([5, 2])], {"axis": 1}, outputs=2, opset=13, onnx_only=True)
case("opset13_split_equal", "Split", [f32(6, 3)], {}, outputs=3, opset=13, onnx_only=True)
case("opset6_clip_attributes", "Clip", [x], {"min": -0.5, "max": 0.7}, opset=6, onnx_only=True)
case("opset11_clip_inputs", "Clip", [x, np.array(-0.1, dtype=np.float32), None], opset=11, onnx_only=True)
case("opset2_pad_attributes", "Pad", [pd], {"pads": [1, 0, 0, 2], "value": 3.0}, opset=2, onnx_only=True)
case("opset2_pad_reflect", "Pad", [pd], {"pads": [1, 2, 1, 2], "mode": "reflect"}, opset=2, onnx_only=True)
case("opset11_pad_inputs", "Pad", [pd, i64([0, 1, 1, 0]), np.array(-2.0, dtype=np.float32)], opset=11, onnx_only=True)
case("opset11_reduce_sum_attribute", "ReduceSum", [r], {"axes": [0, 2], "keepdims": 0}, opset=11, onnx_only=True)
case("opset13_reduce_mean_attribute", "ReduceMean", [r], {"axes": [-1]}, opset=13, onnx_only=True)
case("opset13_reduce_max_all", "ReduceMax", [r], {"keepdims": 0}, opset=13, onnx_only=True)
case("opset11_softmax_coerced", "Softmax", [f32(2, 3, 4, lo=-3, hi=3)], {"axis": 1}, opset=11, onnx_only=True)
case("opset11_softmax_default", "Softmax", [f32(2, 3, 4, lo=-3, hi=3)], opset=11, onnx_only=True)
case("opset11_log_softmax_last", "LogSoftmax", [f32(2, 3, 4, lo=-3, hi=3)], {"axis": 2}, opset=11, onnx_only=True)
case("opset1_topk_attribute", "TopK", [f32(3, 6)], {"k": 2}, outputs=2, opset=1, onnx_only=True)
case("opset10_resize_scales", "Resize", [rimg, np.array([1, 1, 2, 2], dtype=np.float32)], {"mode": "nearest"}, opset=10, onnx_only=True)
case("opset10_resize_linear", "Resize", [rimg, np.array([1, 1, 1.5, 2], dtype=np.float32)], {"mode": "linear"}, opset=10, onnx_only=True, tol=1e-4)
case("opset9_upsample", "Upsample", [rimg, np.array([1, 1, 2, 3], dtype=np.float32)], {"mode": "nearest"}, opset=9, onnx_only=True)
case("opset11_resize_sizes", "Resize", [rimg, np.array([], dtype=np.float32), np.array([], dtype=np.float32), i64([1, 2, 5, 7])],
     {"mode": "cubic", "coordinate_transformation_mode": "align_corners"}, opset=11, onnx_only=True, tol=1e-4)
case("opset13_resize_scales_static", "Resize", [rimg, None, np.array([1, 1, 0.6, 0.5], dtype=np.float32)],
     {"mode": "linear"}, static={2: "scales"}, opset=13, onnx_only=True, tol=1e-4)
case("opset9_batch_norm", "BatchNormalization", [f32(2, 3, 4), f32(3), f32(3), f32(3), f32(3, lo=0.5, hi=2)], opset=9, onnx_only=True)
case("opset12_dropout", "Dropout", [x], opset=12, onnx_only=True)
case("opset7_dropout", "Dropout", [x], {"ratio": 0.3}, opset=7, onnx_only=True)
case("opset11_gemm", "Gemm", [f32(3, 5), f32(4, 5), f32(4)], {"transB": 1}, opset=11, onnx_only=True)
case("opset11_flatten", "Flatten", [f32(2, 3, 4)], {"axis": 2}, opset=11, onnx_only=True)
case("opset11_cumsum", "CumSum", [f32(3, 4), np.array(1, dtype=np.int32)], opset=11, onnx_only=True)
case("opset13_cast_double", "Cast", [x], {"to": TensorProto.DOUBLE}, opset=13, onnx_only=True)
case("opset13_argmax", "ArgMax", [f32(3, 4)], {"axis": 1, "keepdims": 0}, opset=13, onnx_only=True)
case("opset7_add_broadcast", "Add", [f32(2, 3), f32(3)], opset=7, onnx_only=True)
case("opset17_layer_norm", "LayerNormalization", [f32(2, 5), f32(5), f32(5)], opset=17, onnx_only=True)
case("opset20_gelu", "Gelu", [x], {"approximate": "tanh"}, opset=20, onnx_only=True)
case("opset11_range", "Range", [np.array(0, dtype=np.int32), np.array(7, dtype=np.int32), np.array(2, dtype=np.int32)], opset=11, onnx_only=True)
case("opset11_reshape_static", "Reshape", [t, i64([3, -1])], static={1: "shape"}, opset=11, onnx_only=True)

# Kiln ops with no single ONNX twin: expected values from NumPy.
def manual(name, op, inputs, attrs, outputs, tol=1e-5):
    cases.append({"name": name, "onnx": None, "opset": None, "onnxOnly": False, "op": op, "attributes": attrs,
                  "inputs": [None if a is None else tensor_json(a) for a in inputs],
                  "outputs": [tensor_json(o) for o in outputs], "tolerance": tol})


lx, lw, lb = f32(2, 3, 5), f32(4, 5), f32(4)
manual("linear", "linear", [lx, lw, lb], {}, [(lx.astype(np.float64) @ lw.T.astype(np.float64) + lb).astype(np.float32)])
manual("linear_no_bias", "linear", [lx[0], lw], {}, [(lx[0].astype(np.float64) @ lw.T.astype(np.float64)).astype(np.float32)])
manual("linear_empty_batch", "linear", [np.zeros((0, 5), dtype=np.float32), lw, lb], {}, [np.zeros((0, 4), dtype=np.float32)])
# x · sigmoid(x): no ONNX operator of its own.
sx = np.linspace(-8, 8, 24, dtype=np.float32).reshape(2, 3, 4)
manual("silu", "silu", [sx], {}, [(sx.astype(np.float64) / (1 + np.exp(-sx.astype(np.float64)))).astype(np.float32)])
lit = np.array([[1.5, -2.0], [0.25, 8.0]], dtype=np.float32)
manual("constant", "constant", [], {"value": {"tensor": tensor_json(lit)}}, [lit])
manual("constant_int64", "constant", [], {"value": {"tensor": tensor_json(i64([4, -1]))}}, [i64([4, -1])])

# Added with op set additions (kept last so the cases above keep their random values).
u = f32(2, 3, 4, lo=-0.9, hi=0.9)
for op in ["Sin", "Cos", "Tan", "Asin", "Acos", "Atan", "Sinh", "Cosh", "Asinh", "Atanh", "Softplus", "Softsign", "Mish", "Sign"]:
    case(op.lower(), op, [u], opset=22 if op != "Sign" else OPSET)
case("acosh", "Acosh", [f32(2, 3, lo=1.0, hi=5.0)], opset=22)
case("softplus_large", "Softplus", [np.array([-100.0, -20.0, 0.0, 20.0, 100.0], dtype=np.float32)], opset=22)
case("sign_int64", "Sign", [i64([-7, 0, 3])])
case("elu", "Elu", [x], {"alpha": 0.5}, opset=22)
case("celu", "Celu", [x], {"alpha": 2.0})
case("selu", "Selu", [x], opset=22)
case("thresholded_relu", "ThresholdedRelu", [x], {"alpha": 0.5}, opset=22)
case("shrink", "Shrink", [x], {"bias": 0.5, "lambd": 1.0})
case("prelu", "PRelu", [f32(2, 3, 4, lo=-2, hi=2), f32(3, 1)])
case("mod_int64", "Mod", [i64([-7, -3, 5, 7, 0]), i64([3, -2, -3, 2, 5])])
case("mod_int32_fmod", "Mod", [np.array([-7, -3, 5, 7], dtype=np.int32), np.array([3, -2, -3, 2], dtype=np.int32)], {"fmod": 1})
case("mod_float_fmod", "Mod", [f32(2, 3, lo=-5, hi=5), f32(2, 3, lo=0.5, hi=2)], {"fmod": 1})
case("bit_shift_left", "BitShift", [np.array([1, 2, 16, 255], dtype=np.uint8), np.array([1, 2, 3, 1], dtype=np.uint8)], {"direction": "LEFT"})
case("bit_shift_right", "BitShift", [np.array([1, 2, 16, 255], dtype=np.uint8), np.array([1, 1, 3, 4], dtype=np.uint8)], {"direction": "RIGHT"})
for op in ["BitwiseAnd", "BitwiseOr", "BitwiseXor"]:
    case(op.lower(), op, [np.array([[5, -3, 12]], dtype=np.int32), np.array([[3], [-1]], dtype=np.int32)])
case("bitwise_not", "BitwiseNot", [i64([0, -1, 7])])
tri = f32(2, 4, 5)
case("trilu_upper", "Trilu", [tri])
case("trilu_lower_k", "Trilu", [tri, i64(-1)], {"upper": 0})
case("trilu_upper_static_k", "Trilu", [tri, i64(2)], static={1: "k"})
rr = f32(3, 4, 5, lo=0.1, hi=2)
for op in ["ReduceL1", "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"]:
    n = {"ReduceL1": "l1", "ReduceSumSquare": "sum_square", "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp"}[op]
    case(f"reduce_{n}_axes", op, [rr, i64([1])])
    case(f"reduce_{n}_all_nokeep", op, [rr], {"keepdims": 0})
case("reduce_log_sum_exp_large", "ReduceLogSumExp", [np.array([[1000.0, 1000.0], [-1000.0, 0.0]], dtype=np.float32), i64([1])])
case("cumprod", "CumProd", [f32(3, 4, lo=0.5, hi=1.5), np.array(1, dtype=np.int32)], static={1: "axis"}, opset=26)
case("cumprod_exclusive_reverse", "CumProd", [f32(3, 4, lo=0.5, hi=1.5), i64(0)], {"exclusive": 1, "reverse": 1}, opset=26)
case("hardmax", "Hardmax", [np.array([[1.0, 3.0, 3.0], [-1.0, -2.0, -3.0]], dtype=np.float32)])
case("hardmax_axis0", "Hardmax", [f32(3, 4)], {"axis": 0})
sdata = f32(3, 4)
case("scatter_elements", "ScatterElements", [sdata, i64([[1, 0, 2, -1]]), f32(1, 4)], {"axis": 0})
case("scatter_elements_add", "ScatterElements", [sdata, i64([[0, 0], [2, 2]]), f32(2, 2)], {"axis": 1, "reduction": "add"})
case("one_hot", "OneHot", [i64([[0, 2], [-1, 5]]), i64(4), np.array([0.0, 1.0], dtype=np.float32)], static={1: "depth"})
case("one_hot_axis0", "OneHot", [i64([1, 0, 3]), i64(3), i64([-1, 7])], {"axis": 0}, static={1: "depth"})
case("eye_like", "EyeLike", [f32(3, 4)], {"k": 1})
case("eye_like_int", "EyeLike", [f32(4, 3)], {"k": -1, "dtype": TensorProto.INT64})
case("compress_axis", "Compress", [f32(3, 4), np.array([True, False, True])], {"axis": 0})
case("compress_flat", "Compress", [f32(2, 3), np.array([False, True, True, False, True])])

case("attention_causal", "Attention", [f32(2, 3, 4, 8), f32(2, 3, 6, 8), f32(2, 3, 6, 5)], {"is_causal": 1}, opset=23)
case("attention_3d_gqa_mask", "Attention", [f32(1, 4, 16), f32(1, 5, 8), f32(1, 5, 6), f32(4, 5)],
     {"q_num_heads": 4, "kv_num_heads": 2, "scale": 0.3}, opset=23)
case("attention_cache_scores", "Attention", [f32(1, 2, 3, 4), f32(1, 2, 3, 4), f32(1, 2, 3, 4), np.array([[True, False, True, True, True, False]] * 3),
     f32(1, 2, 3, 4), f32(1, 2, 3, 4)], {"qk_matmul_output_mode": 3, "softcap": 2.0}, outputs=4, opset=23)

case("nll_loss_weighted_mean", "NegativeLogLikelihoodLoss", [f32(3, 4, 2), i64([[0, 3], [1, 1], [2, 0]]), f32(4, lo=0.5, hi=1.5)],
     {"ignore_index": 1})
case("nll_loss_none", "NegativeLogLikelihoodLoss", [f32(3, 4), i64([0, 3, 1])], {"reduction": "none"})

qx = f32(2, 3, 4, lo=-2, hi=2)
case("quantize_linear_per_tensor", "QuantizeLinear", [qx, np.array(0.02, dtype=np.float32), np.array(128, dtype=np.uint8)])
case("quantize_linear_per_axis_int8", "QuantizeLinear", [qx, np.array([0.01, 0.02, 0.05], dtype=np.float32), np.array([0, -3, 5], dtype=np.int8)])
case("quantize_linear_blocked", "QuantizeLinear", [qx, f32(2, 3, 2, lo=0.01, hi=0.05), np.zeros((2, 3, 2), dtype=np.int8)],
     {"axis": 2, "block_size": 2})
case("dequantize_linear_per_axis", "DequantizeLinear", [np.array([[0, 128, 255], [3, 4, 5]], dtype=np.uint8), np.array([0.5, 0.25], dtype=np.float32),
     np.array([128, 2], dtype=np.uint8)], {"axis": 0})
case("dequantize_linear_int16", "DequantizeLinear", [np.array([-30000, 0, 12345], dtype=np.int16), np.array(0.001, dtype=np.float32)])
case("dynamic_quantize_linear", "DynamicQuantizeLinear", [f32(3, 4, lo=-1, hi=3)], outputs=3)
case("matmul_integer", "MatMulInteger", [rng.integers(0, 255, (2, 3, 4)).astype(np.uint8), rng.integers(-128, 127, (4, 5)).astype(np.int8),
     np.array(12, dtype=np.uint8), np.array(-3, dtype=np.int8)])
case("qlinear_matmul", "QLinearMatMul", [rng.integers(0, 255, (3, 4)).astype(np.uint8), np.array(0.02, dtype=np.float32), np.array(120, dtype=np.uint8),
     rng.integers(0, 255, (4, 2)).astype(np.uint8), np.array(0.01, dtype=np.float32), np.array(128, dtype=np.uint8),
     np.array(0.05, dtype=np.float32), np.array(100, dtype=np.uint8)])

case("rnn_bidirectional", "RNN", [f32(4, 2, 3), f32(2, 5, 3), f32(2, 5, 5), f32(2, 10), None, f32(2, 2, 5)],
     {"hidden_size": 5, "direction": "bidirectional"}, outputs=2)
case("rnn_relu_clip", "RNN", [f32(3, 2, 3), f32(1, 4, 3), f32(1, 4, 4)], {"hidden_size": 4, "activations": ["Relu"], "clip": 0.5}, outputs=2)
case("lp_pool", "LpPool", [f32(1, 2, 5, 6)], {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1], "p": 3})
case("lp_pool_default", "LpPool", [f32(1, 2, 4, 4)], {"kernel_shape": [2, 2]})
rope = f32(2, 3, 5, 8)
case("rotary_embedding", "RotaryEmbedding", [rope, f32(2, 5, 4), f32(2, 5, 4)], opset=23)
case("rotary_embedding_3d_positions_interleaved", "RotaryEmbedding", [f32(2, 5, 12), f32(9, 2), f32(9, 2), i64([[0, 1, 2, 3, 4], [4, 5, 6, 7, 8]])],
     {"num_heads": 2, "interleaved": 1, "rotary_embedding_dim": 4}, opset=23)

# Sampling, detection, signal and sequence ops.
img = f32(2, 3, 5, 6)
for mode in ["linear", "nearest", "cubic"]:
    for pad in ["zeros", "border", "reflection"]:
        case(f"grid_sample_{mode}_{pad}", "GridSample", [img, f32(2, 4, 7, 2, lo=-1.3, hi=1.3)],
             {"mode": mode, "padding_mode": pad, "align_corners": int(pad == "border")}, tol=1e-4)
case("grid_sample_volumetric", "GridSample", [f32(1, 2, 3, 4, 5), f32(1, 2, 3, 4, 3, lo=-1.2, hi=1.2)], {"mode": "linear"})
case("affine_grid_2d", "AffineGrid", [f32(2, 2, 3), i64([2, 3, 4, 5])], {"align_corners": 0})
case("affine_grid_3d_aligned", "AffineGrid", [f32(1, 3, 4), i64([1, 1, 2, 3, 4])], {"align_corners": 1})
case("col2im_strided_padded", "Col2Im", [f32(2, 2 * 6, 9), i64([5, 6]), i64([2, 3])], {"strides": [2, 1], "pads": [1, 0, 0, 1], "dilations": [1, 2]})
case("deform_conv_groups_mask", "DeformConv", [f32(1, 4, 5, 5), f32(6, 2, 3, 3), f32(1, 2 * 9 * 2, 3, 3, lo=-1.5, hi=1.5), f32(6), f32(1, 2 * 9, 3, 3, lo=0, hi=1)],
     {"group": 2, "offset_group": 2, "kernel_shape": [3, 3]}, tol=1e-4)
case("max_unpool_output_shape", "MaxUnpool", [f32(1, 1, 2, 2), i64([[[[5, 7], [13, 15]]]]), i64([1, 1, 5, 5])], {"kernel_shape": [2, 2], "strides": [2, 2]})
boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, -0.1, 1, 0.9], [0, 10, 1, 11], [1, 10.1, 0, 11.1], [0, 100, 1, 101]]], dtype=np.float32)
nms_scores = np.array([[[0.9, 0.75, 0.6, 0.95, 0.5, 0.3], [0.1, 0.8, 0.7, 0.2, 0.9, 0.6]]], dtype=np.float32)
case("non_max_suppression_two_classes", "NonMaxSuppression", [boxes, nms_scores, i64([2]), np.array([0.5], dtype=np.float32),
     np.array([0.25], dtype=np.float32)])
case("center_crop_pad_mixed", "CenterCropPad", [f32(5, 4, 3), i64([3, 7])], {"axes": [0, -2]})
case("lrn", "LRN", [f32(2, 5, 3, 3)], {"size": 3, "alpha": 0.002, "beta": 0.6, "bias": 1.5})
case("group_norm", "GroupNormalization", [f32(2, 6, 3, 2), f32(6), f32(6)], {"num_groups": 3, "epsilon": 1e-4}, opset=21)
case("mean_variance_normalization", "MeanVarianceNormalization", [f32(2, 3, 4, 2)])
case("hann_window", "HannWindow", [np.array(10, dtype=np.int64)], kiln_attrs={"kind": {"string": "hann"}})
case("hamming_window_symmetric", "HammingWindow", [np.array(9, dtype=np.int32)], {"periodic": 0}, kiln_attrs={"kind": {"string": "hamming"}})
case("blackman_window", "BlackmanWindow", [np.array(12, dtype=np.int64)], kiln_attrs={"kind": {"string": "blackman"}})
case("mel_weight_matrix", "MelWeightMatrix", [np.array(8, dtype=np.int64), np.array(64, dtype=np.int64), np.array(8000, dtype=np.int64),
     np.array(0, dtype=np.float32), np.array(4000, dtype=np.float32)])
for rule, extra in [("linear", []), ("gated", [f32(2, 3, 4, lo=-0.5, hi=0)]), ("delta", [None, f32(2, 3, 2, lo=0, hi=1)]),
                    ("gated_delta", [f32(2, 3, 2, lo=-0.5, hi=0), f32(2, 3, 1, lo=0, hi=1)])]:
    case(f"linear_attention_{rule}", "LinearAttention", [f32(2, 3, 4 * 2), f32(2, 3, 2 * 2), f32(2, 3, 2 * 3), f32(2, 2, 2, 3)] + extra,
         {"q_num_heads": 4, "kv_num_heads": 2, "update_rule": rule}, outputs=2, opset=27)
case("causal_conv_with_state_silu", "CausalConvWithState", [f32(2, 3, 5), f32(3, 1, 4), f32(3), f32(2, 3, 3)], {"activation": "silu"},
     outputs=2, opset=27)
case("tensor_scatter_circular", "TensorScatter", [f32(2, 3, 5, 2), f32(2, 3, 3, 2), i64([1, 4])], {"mode": "circular"}, opset=24)
case("reverse_sequence", "ReverseSequence", [f32(4, 3, 2), i64([4, 1, 3])], {"batch_axis": 1, "time_axis": 0})
uq = np.array([[1, 3], [2, 1], [1, 3], [0, 5]], dtype=np.int64)
case("unique_flat_unsorted", "Unique", [np.array([2.0, 1.0, 2.0, 3.0, 1.0, 0.5], dtype=np.float32)], {"sorted": 0}, outputs=4)
case("unique_axis_sorted", "Unique", [uq], {"axis": 0}, outputs=4)
case("non_zero", "NonZero", [np.array([[0, 1.5, 0], [2, 0, -1]], dtype=np.float32)])
case("bit_cast_float_to_int", "BitCast", [np.array([1.0, -2.5, np.inf], dtype=np.float32)], {"to": TensorProto.INT32}, opset=26)
case("det_batch", "Det", [f32(2, 3, 3)])
case("tfidf_uni_and_bigrams", "TfIdfVectorizer", [np.array([[1, 1, 3, 3, 3, 7], [8, 6, 7, 5, 6, 8]], dtype=np.int32)],
     {"mode": "TFIDF", "min_gram_length": 1, "max_gram_length": 2, "max_skip_count": 2, "ngram_counts": [0, 4],
      "ngram_indexes": [0, 1, 2, 3, 4, 5, 6], "pool_int64s": [2, 3, 5, 4, 5, 6, 7, 8, 6, 7], "weights": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]})
case("conv_integer_grouped_padded", "ConvInteger", [rng.integers(0, 255, (1, 4, 5, 5)).astype(np.uint8), rng.integers(-128, 127, (6, 2, 3, 3)).astype(np.int8),
     np.array(7, dtype=np.uint8), np.array(-2, dtype=np.int8)], {"group": 2, "pads": [1, 1, 0, 1], "strides": [2, 1]})
case("qlinear_conv_per_channel", "QLinearConv", [rng.integers(0, 255, (1, 3, 5, 4)).astype(np.uint8), np.array(0.03, dtype=np.float32),
     np.array(120, dtype=np.uint8), rng.integers(-100, 100, (4, 3, 3, 3)).astype(np.int8), np.array([0.01, 0.02, 0.005, 0.015], dtype=np.float32),
     np.zeros(4, dtype=np.int8), np.array(0.2, dtype=np.float32), np.array(110, dtype=np.uint8), rng.integers(-500, 500, (4,)).astype(np.int32)],
     {"pads": [1, 1, 1, 1]})
case("einsum_ellipsis_broadcast", "Einsum", [f32(2, 3, 4, 5), f32(1, 3, 5, 2)], {"equation": "...ij,...jk->...ik"})
case("einsum_ellipsis_implicit", "Einsum", [f32(2, 3, 3)], {"equation": "...ii"})
case("resize_linear_antialias", "Resize", [f32(1, 2, 9, 11), None, np.array([1, 1, 0.4, 0.6], dtype=np.float32)],
     {"mode": "linear", "antialias": 1}, static={2: "scales"}, opset=18)
case("resize_cubic_antialias_exclude", "Resize", [f32(1, 1, 10, 7), None, None, i64([1, 1, 4, 3])],
     {"mode": "cubic", "antialias": 1, "exclude_outside": 1}, static={3: "sizes"}, opset=18)
case("roi_align_avg", "RoiAlign", [f32(2, 3, 8, 9), np.array([[0.5, 1.0, 6.0, 7.5], [2.0, 0.0, 8.5, 4.0], [-1.0, -1.0, 3.0, 2.0]], dtype=np.float32),
     i64([0, 1, 1])], {"output_height": 3, "output_width": 2, "sampling_ratio": 2, "spatial_scale": 0.9}, opset=16)
case("roi_align_max_output_half_pixel", "RoiAlign", [f32(1, 2, 6, 6), np.array([[0.0, 0.0, 5.0, 4.0]], dtype=np.float32), i64([0])],
     {"mode": "max", "coordinate_transformation_mode": "output_half_pixel", "output_height": 2, "output_width": 3}, opset=16)
case("swiglu_alpha", "SwiGLU", [f32(2, 3, 4, lo=-3, hi=3), f32(2, 3, 4)], {"alpha": 1.7}, opset=28,
     expected=lambda a, b: [(a.astype(np.float64) / (1 + np.exp(-1.7 * a.astype(np.float64))) * b).astype(np.float32)])
case("dft_complex_axis1", "DFT", [f32(2, 6, 3, 2), None, np.array(1, dtype=np.int64)], static={2: "axis"}, opset=20, tol=1e-4)
case("dft_real_onesided_padded", "DFT", [f32(2, 7, 1), np.array(10, dtype=np.int64)], {"onesided": 1}, static={1: "dft_length"}, opset=20, tol=1e-4)
case("dft_irfft", "DFT", [f32(1, 5, 2)], {"inverse": 1, "onesided": 1}, opset=20, tol=1e-4)
case("stft_window", "STFT", [f32(2, 30, 1), np.array(4, dtype=np.int64), np.hanning(8).astype(np.float32), np.array(8, dtype=np.int64)],
     tol=1e-4)
# int64's maximum as max_output_boxes_per_class: exporters' way of writing "no limit".
case("non_max_suppression_no_limit", "NonMaxSuppression", [boxes, nms_scores, i64([2**63 - 1]), np.array([0.5], dtype=np.float32)])
# A real signal without its trailing dim of 1, as audio front-ends export it.
case("stft_rank2_signal", "STFT", [f32(2, 30), np.array(4, dtype=np.int64), np.hanning(8).astype(np.float32), np.array(8, dtype=np.int64)],
     tol=1e-4)

with open(OUT, "w") as f:
    json.dump({"generator": "tools/make_op_fixtures.py", "onnxruntime": ort.__version__, "opset": OPSET, "cases": cases},
              f, separators=(",", ":"))
    f.write("\n")
print(f"wrote {len(cases)} cases to {os.path.normpath(OUT)}", file=sys.stderr)
