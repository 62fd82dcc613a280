import KilnFormat
import KilnReference

/// The conversion of one node: the handler of each ONNX operator.
extension NodeConverter {
    // MARK: Nodes

    // swiftlint:disable:next cyclomatic_complexity function_body_length
    func convert(_ node: ONNXNode) throws {
        defer { noteDimTest(node) }
        let op = node.opType
        // Every ONNX operator has an output; the converters below read the first one, except the
        // recurrent ones, which name the outputs a node leaves out (often Y, when only Y_h is used).
        let recurrent = op == "LSTM" || op == "GRU" || op == "RNN"
        guard let first = node.outputs.first, !first.isEmpty || (recurrent && node.outputs.contains { !$0.isEmpty }) else {
            throw c.fail("node '\(node.name)' (\(op)) has no output")
        }
        if node.domain == "com.microsoft" {
            try convertContrib(node)
            return
        }
        if node.domain == "ai.onnx.ml" {
            try convertML(node)
            return
        }
        switch op {
        case "SimplifiedLayerNormalization":
            try rmsNormalization(node)
        case "Identity", "Dropout":
            try alias(node)
        case "Constant":
            try constantNode(node)
        case "Mul" where try keepScaledIntegers(node):
            break
        case _ where NodeConverter.direct[op] != nil:
            let kiln = NodeConverter.direct[op]!
            let needed = kiln == "where" ? 3 : 1
            guard node.inputs.count >= needed, !node.inputs[0].isEmpty else {
                throw c.fail("node '\(node.name)' (\(op)) has \(node.inputs.count) input\(node.inputs.count == 1 ? "" : "s"); it takes at least \(needed)")
            }
            let e = symbolic(kiln, node.inputs)
            if let e, let ints = Optional(e.compactMap(\.int)), ints.count == e.count, let t = try type(node.inputs[0]) {
                // Every entry is known although the inputs are computed at run time.
                let outType: DataType = ["equal", "less", "greater"].contains(kiln) ? .bool : (kiln == "where" ? (try type(node.inputs[1]))?.dtype ?? t.dtype : t.dtype)
                let rank0 = try node.inputs.allSatisfy { (try type($0))?.rank ?? 0 == 0 }
                let shape = rank0 ? [] : [ints.count]
                switch outType {
                case .bool: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { $0 != 0 }))
                case .int32: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { Int32($0) }))
                default: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { Int64($0) }))
                }
                return
            }
            try emit(node, kiln, node.inputs, try attributes(node), elements: [e])
        case "TfIdfVectorizer" where node.attributes["pool_strings"] != nil:
            throw c.fail("node '\(node.name)' (TfIdfVectorizer): string pools are not supported (Kiln has no string tensors)")
        case _ where NodeConverter.filtered[op] != nil:
            let (kiln, keys) = NodeConverter.filtered[op]!
            try emit(node, kiln, node.inputs, try attributes(node, only: keys))
        case "HannWindow", "HammingWindow", "BlackmanWindow":
            let kind = op == "HannWindow" ? "hann" : op == "HammingWindow" ? "hamming" : "blackman"
            var attrs: [String: AttributeValue] = ["kind": .string(kind), "periodic": .int(int(node, "periodic", 1))]
            attrs["dtype"] = .dtype(try outputDType(node, "output_datatype"))
            try emit(node, "window", [input(node, 0)], attrs)
        case "MelWeightMatrix":
            try emit(node, "mel_weight_matrix", node.inputs, ["dtype": .dtype(try outputDType(node, "output_datatype"))])
        case "BitCast":
            guard case .int(let code)? = node.attributes["to"], let to = ONNXDecoder.dtypes[Int32(code)],
                  let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' (BitCast) needs a known input and 'to'") }
            let declared = c.model.graph.inputs.first { $0.name == input(node, 0) }?.dtype ?? c.valueInfo[input(node, 0)]?.dtype
            guard to != .float64, t.dtype != .float64, declared != 11 else {
                throw c.fail("node '\(node.name)' (BitCast): float64 is held as float32 in Kiln, so its bits cannot be reinterpreted")
            }
            try emit(node, "bit_cast", [input(node, 0)], ["to": .dtype(to)])
        case "DFT":
            // Opsets 17–19 give the axis as an attribute (default 1), opset 20 as an input (default −2).
            var attrs = try attributes(node, only: ["inverse", "onesided"])
            var inputs = [input(node, 0), "", ""]
            if c.opset < 20 || node.attributes["axis"] != nil {
                attrs["axis"] = .int(int(node, "axis", 1))
            } else if let a = try staticInts(node, 2), a.count == 1 {
                attrs["axis"] = .int(a[0])
            } else if !input(node, 2).isEmpty {
                inputs[2] = input(node, 2)
            } else {
                attrs["axis"] = .int(-2)
            }
            if let l = try staticInts(node, 1), l.count == 1 { attrs["dft_length"] = .int(l[0]) } else { inputs[1] = input(node, 1) }
            try emit(node, "dft", inputs, attrs)
        case "STFT":
            try emit(node, "stft", node.inputs, try attributes(node, only: ["onesided"]))
        case "GroupNormalization":
            try emit(node, "group_norm", Array(node.inputs.prefix(3)), try attributes(node, only: ["epsilon", "num_groups"]))
        case "Cast" where try recordIntegerCast(node):
            break
        case "Cast":
            guard let code = node.attributes["to"].flatMap({ if case .int(let v) = $0 { return Int32(v) } else { return nil } }),
                  var dtype = ONNXDecoder.dtypes[code] else {
                throw c.fail("node '\(node.name)' (Cast): unsupported target type")
            }
            if dtype == .float64 { dtype = .float32 }
            let e = elements(input(node, 0))
            let source = input(node, 0)
            if let x = constant(source), c.sourceConstants.contains(source), [.float16, .bfloat16].contains(x.scalarType), dtype == .float32 {
                // A stated float16 weight widened for compute stays float16 in the package.
                let (name, _) = try c.operand(source, .constant(x))
                let out = c.freshName(node.outputs[0])
                c.operations.append(Operation(opType: "cast", name: c.freshOpName(node.name.isEmpty ? "cast" : node.name), inputs: [name],
                                              outputs: [Value(name: out, type: TensorType(.float32, x.shape.map { .size($0) }))],
                                              attributes: ["to": .dtype(.float32)], source: node.name))
                c.values[node.outputs[0]] = .value(name: out, type: TensorType(.float32, x.shape.map { .size($0) }), elements: nil)
                return
            }
            try emit(node, "cast", [input(node, 0)], ["to": .dtype(dtype)], elements: [e])
        case "Clip":
            var attrs = try attributes(node, only: ["min", "max"])
            var inputs = [input(node, 0)]
            for (i, key) in [(1, "min"), (2, "max")] {
                if let x = constant(input(node, i)), x.elementCount == 1 {
                    attrs[key] = .float(try floatValues(x)[0])
                    inputs.append("")
                } else {
                    inputs.append(input(node, i))
                }
            }
            try emit(node, "clip", inputs, attrs)
        case "Gemm":
            let attrs = try attributes(node, rename: ["transA": "trans_a", "transB": "trans_b"])
            let alpha = (try? attrs.float("alpha", 1)) ?? 1, beta = (try? attrs.float("beta", 1)) ?? 1
            let ta = (try? attrs.int("trans_a", 0)) ?? 0, tb = (try? attrs.int("trans_b", 0)) ?? 0
            let bias = input(node, 2)
            if alpha == 1, beta == 1, ta == 0, tb == 1, try type(bias).map({ $0.rank == 1 }) ?? true {
                try emit(node, "linear", [input(node, 0), input(node, 1), bias], [:])
            } else {
                try emit(node, "gemm", node.inputs, attrs)
            }
        case "Conv", "ConvTranspose":
            let attrs = try attributes(node, only: ["strides", "pads", "dilations", "auto_pad", "group", "output_padding", "output_shape", "kernel_shape"])
            try emit(node, op == "Conv" ? "conv" : "conv_transpose", node.inputs, attrs)
        case "LpPool":
            let attrs = try attributes(node, only: ["kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode", "p"])
            try emit(node, "lp_pool", [input(node, 0)], attrs)
        case "MaxPool", "AveragePool":
            var attrs = try attributes(node, only: ["kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode", "count_include_pad"])
            if op == "MaxPool", node.outputs.count > 1, !node.outputs[1].isEmpty {
                // The indices output: flat positions in the input, row- or column-major (storage_order).
                attrs["storage_order"] = .int(int(node, "storage_order", 0))
                try emit(node, "max_pool", [input(node, 0)], attrs, outputs: Array(node.outputs.prefix(2)))
            } else {
                try emit(node, op == "MaxPool" ? "max_pool" : "average_pool", [input(node, 0)], attrs, outputs: [node.outputs[0]])
            }
        case "BatchNormalization" where int(node, "training_mode", 0) != 0:
            try batchNormTraining(node)
        case "BatchNormalization":
            try emit(node, "batch_norm", Array(node.inputs.prefix(5)), try attributes(node, only: ["epsilon"]), outputs: [node.outputs[0]])
            try unusedOutputs(node, from: 1)
        case "InstanceNormalization":
            try emit(node, "instance_norm", node.inputs, try attributes(node, only: ["epsilon"]))
        case "LayerNormalization":
            try emit(node, "layer_norm", node.inputs, try attributes(node, only: ["axis", "epsilon"]), outputs: [node.outputs[0]])
            try layerNormStatistics(node)
        case "Hardmax":
            guard let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' reads an undefined value") }
            let axis = int(node, "axis", c.opset >= 13 ? -1 : 1)
            // Before opset 13 the input is seen as 2-D from `axis` on: the same as the last axis only when `axis` is the last.
            let flat = try OpSet.flattenAxis(axis, rank: t.rank)
            guard c.opset >= 13 || flat == t.rank - 1 else {
                throw c.fail("node '\(node.name)' (Hardmax): opset \(c.opset)'s 2-D form over axis \(axis) of a rank-\(t.rank) input is not supported")
            }
            try emit(node, "hardmax", [input(node, 0)], ["axis": .int(c.opset >= 13 ? axis : -1)])
        case "ScatterElements", "Scatter":
            try emit(node, "scatter_elements", Array(node.inputs.prefix(3)), try attributes(node, only: ["axis", "reduction"]))
        case "OneHot":
            var attrs: [String: AttributeValue] = ["axis": .int(int(node, "axis", -1))]
            var inputs = [input(node, 0), input(node, 1), input(node, 2)]
            if let d = constant(input(node, 1)), d.elementCount == 1 {
                attrs["depth"] = .int(Int(try floatValues(d)[0].rounded(.towardZero)))
                inputs[1] = ""
            }
            try emit(node, "one_hot", inputs, attrs)
        case "EyeLike":
            var attrs: [String: AttributeValue] = ["k": .int(int(node, "k", 0))]
            if case .int(let code)? = node.attributes["dtype"] {
                guard var dtype = ONNXDecoder.dtypes[Int32(code)] else { throw c.fail("node '\(node.name)' (EyeLike): unsupported dtype \(code)") }
                if dtype == .float64 { dtype = .float32 }
                attrs["dtype"] = .dtype(dtype)
            }
            try emit(node, "eye_like", [input(node, 0)], attrs)
        case "Compress":
            try emit(node, "compress", Array(node.inputs.prefix(2)), try attributes(node, only: ["axis"]))
        case "DequantizeLinear" where try keepQuantized(node):
            break
        case "QuantizeLinear", "DequantizeLinear":
            var attrs = try attributes(node, only: ["axis", "block_size"])
            if case .int(let code)? = node.attributes["output_dtype"], code != 0 {
                guard let dtype = ONNXDecoder.dtypes[Int32(code)] else { throw c.fail("node '\(node.name)' (\(op)): unsupported output_dtype \(code)") }
                attrs["output_dtype"] = .dtype(dtype == .float64 ? .float32 : dtype)
            }
            try emit(node, op == "QuantizeLinear" ? "quantize_linear" : "dequantize_linear", Array(node.inputs.prefix(3)), attrs)
        case "NegativeLogLikelihoodLoss":
            try emit(node, "nll_loss", Array(node.inputs.prefix(3)), try attributes(node, only: ["reduction", "ignore_index"]))
        case "SoftmaxCrossEntropyLoss":
            // log_softmax over the classes (the optional second output), then the NLL loss.
            let logProb = node.outputs.count > 1 && !node.outputs[1].isEmpty ? node.outputs[1] : c.freshName("\(input(node, 0))_log_prob")
            try emit(node, "log_softmax", [input(node, 0)], ["axis": .int(1)], outputs: [logProb])
            try emit(node, "nll_loss", [logProb] + Array(node.inputs.dropFirst().prefix(2)),
                     try attributes(node, only: ["reduction", "ignore_index"]), outputs: [node.outputs[0]])
        case "RMSNormalization":
            try rmsNormalization(node)
        case "Swish":
            // x · sigmoid(alpha · x).
            let x = input(node, 0)
            guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
            let alpha = float(node, "alpha", 1)
            var scaled = x
            if alpha != 1 {
                scaled = c.freshName("\(x)_scaled")
                try emit(node, "mul", [x, try scalar(alpha, like: t.dtype, node)], [:], outputs: [scaled])
            }
            let gate = c.freshName("\(x)_gate")
            try emit(node, "sigmoid", [scaled], [:], outputs: [gate])
            try emit(node, "mul", [x, gate], [:])
        case "LpNormalization":
            // x / ‖x‖ₚ along axis (p = 1 or 2), 0 where the norm is 0.
            let x = input(node, 0)
            guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
            let p = int(node, "p", 2)
            guard p == 1 || p == 2 else { throw c.fail("node '\(node.name)' (LpNormalization): p must be 1 or 2, got \(p)") }
            let (norm, zero, isZero, ratio) = (c.freshName("\(x)_norm"), try scalar(0, like: t.dtype, node), c.freshName("\(x)_zero_norm"),
                                               c.freshName("\(x)_ratio"))
            try emit(node, p == 1 ? "reduce_l1" : "reduce_l2", [x], ["axes": .ints([int(node, "axis", -1)]), "keepdims": .int(1)], outputs: [norm])
            try emit(node, "equal", [norm, zero], [:], outputs: [isZero])
            try emit(node, "div", [x, norm], [:], outputs: [ratio])
            try emit(node, "where", [isZero, zero, ratio], [:])
        case "Softmax", "LogSoftmax":
            try softmax(node)
        case _ where NodeConverter.reductions[op] != nil:
            var attrs = try attributes(node, only: ["keepdims", "noop_with_empty_axes", "axes"])
            var inputs = [input(node, 0)]
            if !input(node, 1).isEmpty {
                if let axes = try staticInts(node, 1) { attrs["axes"] = .ints(axes); inputs.append("") } else { inputs.append(input(node, 1)) }
            }
            try emit(node, NodeConverter.reductions[op]!, inputs, attrs)
        case "CastLike":
            // A cast to the second input's dtype (float64 held as float32, as for Cast).
            guard let like = try type(input(node, 1)) else { throw c.fail("node '\(node.name)' (CastLike): the type of input 1 is unknown") }
            try emit(node, "cast", [input(node, 0)], ["to": .dtype(like.dtype == .float64 ? .float32 : like.dtype)], elements: [elements(input(node, 0))])
        case "Trilu":
            var attrs = try attributes(node, only: ["upper"])
            var inputs = [input(node, 0)]
            if !input(node, 1).isEmpty {
                if let k = try staticInts(node, 1), k.count == 1 { attrs["k"] = .int(k[0]); inputs.append("") } else { inputs.append(input(node, 1)) }
            }
            try emit(node, "trilu", inputs, attrs)
        case "Reshape":
            try reshape(node)
        case "Flatten":
            try emit(node, "flatten", [input(node, 0)], try attributes(node))
        case "Transpose":
            let e = elements(input(node, 0))
            try emit(node, "transpose", [input(node, 0)], try attributes(node), elements: [e])
        case "Squeeze", "Unsqueeze":
            try squeeze(node)
        case "Concat":
            let parts = node.inputs.map { elements($0) }
            var e: [Element]?
            if parts.allSatisfy({ $0 != nil }), try node.inputs.allSatisfy({ (try type($0))?.rank ?? 2 <= 1 }) {
                e = parts.flatMap { $0! }
            }
            try emit(node, "concat", node.inputs, try attributes(node), elements: [e])
        case "Split":
            var attrs = try attributes(node, only: ["axis", "split"])
            var inputs = [input(node, 0)]
            if !input(node, 1).isEmpty {
                if let s = try staticInts(node, 1) { attrs["split"] = .ints(s); inputs.append("") } else { inputs.append(input(node, 1)) }
            }
            try emit(node, "split", inputs, attrs)
        case "Slice":
            try slice(node)
        case "Gather":
            try gather(node)
        case "Expand", "Tile":
            let (kiln, key) = op == "Expand" ? ("expand", "shape") : ("tile", "repeats")
            if let v = try staticInts(node, 1) {
                try emit(node, kiln, [input(node, 0)], [key: .ints(v)])
            } else {
                let e = elements(input(node, 1))
                try emit(node, kiln, [input(node, 0), input(node, 1)], [:]) { _, t in
                    guard let t, kiln == "expand", let e, let x = try? self.type(self.input(node, 0)) else { return t }
                    return (try? OpSet.broadcast(x.shape, e.map(\.dimension))).map { TensorType(x.dtype, $0) } ?? t
                }
            }
        case "Pad":
            try pad(node)
        case "Resize", "Upsample":
            try resize(node)
        case "TopK":
            var attrs = try attributes(node, only: ["axis", "largest", "sorted", "k"])
            var inputs = [input(node, 0)]
            if let k = try staticInts(node, 1), k.count == 1 { attrs["k"] = .int(k[0]) } else if !input(node, 1).isEmpty { inputs.append(input(node, 1)) }
            try emit(node, "top_k", inputs, attrs)
        case "CumSum", "CumProd":
            var attrs = try attributes(node, only: ["exclusive", "reverse"])
            var inputs = [input(node, 0)]
            if let a = try staticInts(node, 1), a.count == 1 { attrs["axis"] = .int(a[0]) } else { inputs.append(input(node, 1)) }
            try emit(node, op == "CumSum" ? "cumsum" : "cumprod", inputs, attrs)
        case "ConstantOfShape":
            var attrs = try attributes(node, only: ["value"])
            let e = elements(input(node, 0))
            if let s = try staticInts(node, 0) {
                attrs["shape"] = .ints(s)
                try emit(node, "constant_of_shape", [], attrs)
            } else {
                try emit(node, "constant_of_shape", [input(node, 0)], attrs) { _, t in
                    guard let t, let e else { return t }
                    return TensorType(t.dtype, e.map(\.dimension))
                }
            }
        case "Shape":
            try shape(node)
        case "Size":
            if let t = try type(input(node, 0)), let s = t.staticShape {
                c.values[node.outputs[0]] = .constant(NDArray(scalar: Int64(s.reduce(1, *))))
            } else {
                try emit(node, "size", node.inputs, [:])
            }
        case "Range":
            try emit(node, "range", node.inputs, [:])
        case "LSTM", "GRU", "RNN":
            try Recurrent.convert(node, self)
        case "If": try convertIf(node)
        case "Loop": try convertLoop(node)
        case "Scan": try convertScan(node)
        default:
            throw c.fail("node '\(node.name)': unsupported operator \(op)")
        }
    }
}
