"""Convolution networks in the shapes of common model families, built with onnx.helper and seeded
random weights, for bench/runtime/run.py: speed only (their outputs mean nothing), so the bench
covers more than the three test models without downloading any.

- resnet18: NCHW ResNet-18 at 224×224 (BatchNorm, ReLU, residual adds, max pool, global pool, Gemm).
- resnet_nhwc: a TensorFlow-style export: NHWC input, a Transpose pair around every convolution,
  explicit Pads, residual adds in NHWC.
- yolo_neck: a YOLOv5/v8-style backbone and neck at 320×320: SiLU (x·sigmoid(x)), C3/C2f-style
  splits and concats, SPPF max pools, nearest upsampling, a detection head.
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class Builder:
    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes, self.inits, self.n = [], [], 0

    def name(self, base):
        self.n += 1
        return f"{base}_{self.n}"

    def weight(self, shape, scale=None):
        fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
        w = self.rng.standard_normal(shape).astype(np.float32) * (scale or (2.0 / max(fan_in, 1)) ** 0.5)
        n = self.name("w")
        self.inits.append(numpy_helper.from_array(w, n))
        return n

    def const(self, values, dtype=np.int64):
        n = self.name("c")
        self.inits.append(numpy_helper.from_array(np.array(values, dtype=dtype), n))
        return n

    def op(self, kind, inputs, **attrs):
        out = self.name(kind.lower())
        self.nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def split2(self, x, half, axis=1):
        a, c = self.name("split"), self.name("split")
        self.nodes.append(helper.make_node("Split", [x, self.const([half, half])], [a, c], name=a, axis=axis))
        return a, c

    def conv(self, x, cin, cout, k=3, s=1, groups=1, bias=True, pads=None):
        p = k // 2 if pads is None else pads
        inputs = [x, self.weight([cout, cin // groups, k, k])] + ([self.weight([cout], 0.1)] if bias else [])
        return self.op("Conv", inputs, kernel_shape=[k, k], strides=[s, s], pads=[p, p, p, p], group=groups)

    def bn(self, x, c):
        scale, shift = self.weight([c], 0.1), self.weight([c], 0.1)
        mean = self.weight([c], 0.1)
        var = self.name("var")
        self.inits.append(numpy_helper.from_array(self.rng.uniform(0.5, 1.5, c).astype(np.float32), var))
        return self.op("BatchNormalization", [x, self.op("Add", [scale, self.const([1.0], np.float32)]), shift, mean, var], epsilon=1e-5)

    def model(self, inputs, outputs):
        graph = helper.make_graph(self.nodes, "built", inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        return m


def resnet18():
    b = Builder(1)
    x = b.op("Relu", [b.bn(b.conv("image", 3, 64, 7, 2, bias=False), 64)])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        for block in range(2):
            s = stride if block == 0 else 1
            y = b.op("Relu", [b.bn(b.conv(x, cin, cout, 3, s, bias=False), cout)])
            y = b.bn(b.conv(y, cout, cout, 3, 1, bias=False), cout)
            shortcut = x if s == 1 and cin == cout else b.bn(b.conv(x, cin, cout, 1, s, bias=False, pads=0), cout)
            x = b.op("Relu", [b.op("Add", [y, shortcut])])
            cin = cout
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])])
    logits = b.op("Gemm", [x, b.weight([1000, 512]), b.weight([1000], 0.1)], transB=1)
    return b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 224, 224])],
                   [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 1000])]), {"image": (1, 3, 224, 224)}


def resnet_nhwc():
    """TensorFlow exports keep NHWC: each Conv is wrapped in NHWC→NCHW and NCHW→NHWC Transposes."""
    b = Builder(2)

    def conv_nhwc(x, cin, cout, k, s, pad):
        if pad:
            x = b.op("Pad", [x, b.const([0, pad, pad, 0, 0, pad, pad, 0])], mode="constant")
        t = b.op("Transpose", [x], perm=[0, 3, 1, 2])
        y = b.conv(t, cin, cout, k, s, pads=0)
        return b.op("Transpose", [y], perm=[0, 2, 3, 1])

    x = b.op("Relu", [conv_nhwc("image", 3, 32, 3, 2, 1)])
    cin = 32
    for cout, stride in [(32, 1), (64, 2), (128, 2), (256, 2)]:
        for block in range(2):
            s = stride if block == 0 else 1
            y = b.op("Relu", [conv_nhwc(x, cin, cout, 3, s, 1)])
            y = conv_nhwc(y, cout, cout, 3, 1, 1)
            shortcut = x if s == 1 and cin == cout else conv_nhwc(x, cin, cout, 1, s, 0)
            x = b.op("Relu", [b.op("Add", [y, shortcut])])
            cin = cout
    x = b.op("ReduceMean", [x], axes=[1, 2], keepdims=0)
    logits = b.op("Add", [b.op("MatMul", [x, b.weight([256, 10])]), b.weight([10], 0.1)])
    return b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 224, 224, 3])],
                   [helper.make_tensor_value_info(logits, TensorProto.FLOAT, [1, 10])]), {"image": (1, 224, 224, 3)}


def yolo_neck():
    b = Builder(3)

    def cbs(x, cin, cout, k=1, s=1):
        y = b.conv(x, cin, cout, k, s)
        return b.op("Mul", [y, b.op("Sigmoid", [y])])

    def c2f(x, cin, cout, n):
        y = cbs(x, cin, cout)
        half = cout // 2
        a, c = b.split2(y, half)
        outs, cur = [a, c], c
        for _ in range(n):
            cur = b.op("Add", [cur, cbs(cbs(cur, half, half, 3), half, half, 3)])
            outs.append(cur)
        return cbs(b.op("Concat", outs, axis=1), half * (2 + n), cout)

    x = cbs("image", 3, 16, 3, 2)
    x = cbs(x, 16, 32, 3, 2)
    x = c2f(x, 32, 32, 1)
    x = cbs(x, 32, 64, 3, 2)
    p3 = c2f(x, 64, 64, 2)
    x = cbs(p3, 64, 128, 3, 2)
    p4 = c2f(x, 128, 128, 2)
    x = cbs(p4, 128, 256, 3, 2)
    x = c2f(x, 256, 256, 1)
    # SPPF: three chained 5×5 max pools concatenated.
    y = cbs(x, 256, 128)
    m1 = b.op("MaxPool", [y], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m2 = b.op("MaxPool", [m1], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    m3 = b.op("MaxPool", [m2], kernel_shape=[5, 5], strides=[1, 1], pads=[2, 2, 2, 2])
    p5 = cbs(b.op("Concat", [y, m1, m2, m3], axis=1), 512, 256)
    scales = b.const([1.0, 1.0, 2.0, 2.0], np.float32)
    up = b.op("Resize", [p5, "", scales], mode="nearest")
    n4 = c2f(b.op("Concat", [up, p4], axis=1), 384, 128, 1)
    up = b.op("Resize", [n4, "", scales], mode="nearest")
    n3 = c2f(b.op("Concat", [up, p3], axis=1), 192, 64, 1)
    head3 = b.conv(cbs(n3, 64, 64, 3), 64, 85, 1)
    head4 = b.conv(cbs(n4, 128, 64, 3), 64, 85, 1)
    return b.model([helper.make_tensor_value_info("image", TensorProto.FLOAT, [1, 3, 320, 320])],
                   [helper.make_tensor_value_info(head3, TensorProto.FLOAT, [1, 85, 40, 40]),
                    helper.make_tensor_value_info(head4, TensorProto.FLOAT, [1, 85, 20, 20])]), {"image": (1, 3, 320, 320)}


BUILT = {"resnet18": resnet18, "resnet_nhwc": resnet_nhwc, "yolo_neck": yolo_neck}


def write(name, directory):
    """Writes `name`.onnx and its seeded input `image`.npy into `directory`; returns (model path, {input: path})."""
    import os
    model, inputs = BUILT[name]()
    onnx.checker.check_model(model)
    path = os.path.join(directory, f"{name}.onnx")
    onnx.save(model, path)
    rng = np.random.default_rng(0)
    files = {}
    for k, shape in inputs.items():
        files[k] = os.path.join(directory, f"{name}.{k}.npy")
        np.save(files[k], rng.standard_normal(shape).astype(np.float32))
    return path, files
