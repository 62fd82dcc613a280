import KilnFormat
import KilnReference

/// Converts one ONNX node at a time into Kiln ops, folding what is known.
struct NodeConverter {
    let c: Conversion

    init(_ conversion: Conversion) { c = conversion }

    /// ONNX operators (domain ai.onnx) the importer converts: the registry's one-to-one names
    /// and those with a handler of their own.
    static let supported: Set<String> = Set(direct.keys).union(handled).union(filtered.keys)

    /// ONNX operators converted by a handler of their own (not one to one).
    static let handled: Set<String> = Set([
        "Identity", "Dropout", "Constant", "Clip", "Cast", "Gemm", "Conv", "ConvTranspose", "BatchNormalization",
        "InstanceNormalization", "LayerNormalization", "Softmax", "LogSoftmax", "MaxPool", "AveragePool",
        "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL2", "ReduceL1", "ReduceSumSquare",
        "ReduceLogSum", "ReduceLogSumExp", "CastLike", "Trilu", "CumProd", "Hardmax", "ScatterElements", "Scatter", "OneHot",
        "EyeLike", "Compress", "QuantizeLinear", "DequantizeLinear", "NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss", "RMSNormalization", "Swish", "LpNormalization", "Reshape", "Squeeze",
        "Unsqueeze", "Split", "Slice", "Expand", "Tile", "Pad", "Resize", "Upsample", "TopK", "CumSum",
        "ConstantOfShape", "Shape", "Size", "Range", "Flatten", "Concat", "Gather", "Transpose", "LSTM", "GRU", "RNN", "LpPool",
        "If", "Loop", "Scan",
    ]).union(["HannWindow", "HammingWindow", "BlackmanWindow", "MelWeightMatrix", "BitCast", "GroupNormalization", "DFT", "STFT",
             "SimplifiedLayerNormalization"])

    /// Operators converted one to one with the listed attributes (others ignored: stash types,
    /// tuning hints).
    static let filtered: [String: (op: String, attributes: Set<String>)] = [
        "GridSample": ("grid_sample", ["mode", "padding_mode", "align_corners"]),
        "AffineGrid": ("affine_grid", ["align_corners"]),
        "Col2Im": ("col2im", ["dilations", "pads", "strides"]),
        "DeformConv": ("deform_conv", ["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"]),
        "MaxUnpool": ("max_unpool", ["kernel_shape", "pads", "strides"]),
        "NonMaxSuppression": ("non_max_suppression", ["center_point_box"]),
        "CenterCropPad": ("center_crop_pad", ["axes"]),
        "LRN": ("lrn", ["alpha", "beta", "bias", "size"]),
        "MeanVarianceNormalization": ("mean_variance_normalization", ["axes"]),
        "LinearAttention": ("linear_attention", ["q_num_heads", "kv_num_heads", "scale", "update_rule", "chunk_size"]),
        "CausalConvWithState": ("causal_conv_with_state", ["activation"]),
        "TensorScatter": ("tensor_scatter", ["axis", "mode"]),
        "ReverseSequence": ("reverse_sequence", ["batch_axis", "time_axis"]),
        "Unique": ("unique", ["axis", "sorted"]),
        "NonZero": ("non_zero", []),
        "Det": ("det", []),
        "RoiAlign": ("roi_align", ["coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"]),
        "SwiGLU": ("swiglu", ["alpha"]),
        "ConvInteger": ("conv_integer", ["strides", "pads", "dilations", "auto_pad", "group", "kernel_shape"]),
        "QLinearConv": ("qlinear_conv", ["strides", "pads", "dilations", "auto_pad", "group", "kernel_shape"]),
        "TfIdfVectorizer": ("tfidf_vectorizer", ["max_gram_length", "max_skip_count", "min_gram_length", "mode", "ngram_counts",
                                                 "ngram_indexes", "pool_int64s", "weights"]),
    ]

    /// Operators whose attributes carry over unchanged: the op registry's ONNX names.
    static let direct: [String: String] = OpSet.onnxDirect

    /// Kiln's name of each ONNX reduction.
    static let reductions: [String: String] = [
        "ReduceMean": "reduce_mean", "ReduceSum": "reduce_sum", "ReduceMax": "reduce_max", "ReduceMin": "reduce_min",
        "ReduceProd": "reduce_prod", "ReduceL2": "reduce_l2", "ReduceL1": "reduce_l1", "ReduceSumSquare": "reduce_sum_square",
        "ReduceLogSum": "reduce_log_sum", "ReduceLogSumExp": "reduce_log_sum_exp",
    ]

    /// Attributes of an ONNX node as Kiln attributes (ints, floats, strings, tensors).
    func attributes(_ node: ONNXNode, only keys: Set<String>? = nil, rename: [String: String] = [:]) throws -> [String: AttributeValue] {
        var out: [String: AttributeValue] = [:]
        for (k, v) in node.attributes where keys?.contains(k) ?? true {
            let name = rename[k] ?? k
            switch v {
            case .int(let i): out[name] = .int(i)
            case .float(let f): out[name] = .float(Double(f))
            case .string(let s): out[name] = .string(s)
            case .ints(let l): out[name] = .ints(l)
            case .floats(let l): out[name] = .floats(l.map(Double.init))
            case .strings(let l): out[name] = .strings(l)
            case .tensor(let t):
                let x = try c.narrowed(try t.value.get())
                out[name] = .tensor(TensorLiteral(dtype: x.scalarType, shape: x.shape, bytes: x.bytes))
            default: throw c.fail("node '\(node.name)' (\(node.opType)): attribute '\(k)' has a type Kiln does not support")
            }
        }
        return out
    }

    func known(_ name: String) -> Known? { name.isEmpty ? nil : c.values[name] }

    func constant(_ name: String) -> NDArray? {
        if case .constant(let x)? = known(name) { return x }
        return nil
    }

    /// The integer values of input `i` when known at convert time (fully).
    func staticInts(_ node: ONNXNode, _ i: Int) throws -> [Int]? {
        guard i < node.inputs.count else { return nil }
        if let x = constant(node.inputs[i]) { return try intValues(x) }
        if case .value(_, _, let elements?)? = known(node.inputs[i]) {
            let ints = elements.compactMap(\.int)
            return ints.count == elements.count ? ints : nil
        }
        return nil
    }

    func intValues(_ x: NDArray) throws -> [Int] {
        switch x.scalarType {
        case .int64: return x.scalars(as: Int64.self).map { Int($0) }
        case .int32: return x.scalars(as: Int32.self).map { Int($0) }
        default: throw c.fail("expected an integer tensor, got \(x.scalarType.rawValue)")
        }
    }

    func floatValues(_ x: NDArray) throws -> [Double] {
        switch x.scalarType {
        case .float32: return x.scalars(as: Float.self).map(Double.init)
        case .float16: return x.scalars(as: Float16.self).map { Double(Float($0)) }
        default: return try intValues(x).map(Double.init)
        }
    }

    /// The partly known entries of an int vector input (a shape), if any are known.
    func elements(_ name: String) -> [Element]? {
        switch known(name) {
        case .constant(let x)?:
            guard x.rank <= 1, x.elementCount <= 64 else { return nil }
            if x.scalarType == .bool { return x.scalars(as: Bool.self).map { .known($0 ? 1 : 0) } }
            guard x.scalarType == .int64 || x.scalarType == .int32 else { return nil }
            return (try? intValues(x))?.map { .known($0) }
        case .value(_, _, let e)?: return e
        default: return nil
        }
    }

    func type(_ name: String) throws -> TensorType? {
        switch known(name) {
        case nil: return nil
        case .constant(let x)?: return TensorType(x.scalarType, x.shape.map { .size($0) })
        case .value(_, let t, _)?: return t
        }
    }

    // MARK: Emitting

    /// Emits one Kiln op. Inputs are ONNX value names ("" = absent); outputs are ONNX
    /// names. Folds the op when every input is known at convert time.
    @discardableResult
    func emit(_ node: ONNXNode, _ opType: String, _ inputs: [String], _ attributes: [String: AttributeValue],
              outputs: [String]? = nil, elements: [[Element]?] = [], refine: ((Int, TensorType?) -> TensorType?)? = nil) throws -> [Known] {
        var inputs = inputs
        while inputs.last == "" { inputs.removeLast() }
        let outs = outputs ?? node.outputs
        let what = "node '\(node.name)' (\(node.opType))"
        let types = try inputs.map { try type($0) }
        for (name, t) in zip(inputs, types) where !name.isEmpty && t == nil {
            throw c.fail("\(what) reads '\(name)', which is not defined")
        }
        guard let schema = OpSet.schema(opType) else { throw c.fail("\(what): no Kiln op '\(opType)'") }
        var inferred: [TensorType?]
        do {
            inferred = try schema.infer(OpSchema.Context(inputs: types, attributes: attributes, outputCount: outs.count))
        } catch let e as OpError {
            throw c.fail("\(what): \(e.reason)")
        }
        // Fold when everything is known and the op is not a source of run-time values.
        let allConstant = inputs.allSatisfy { $0.isEmpty || constant($0) != nil }
        if allConstant {
            let op = Operation(opType: opType, name: node.name, inputs: inputs, outputs: [], attributes: attributes)
            do {
                let results = try ReferenceInterpreter.evaluate(op, inputs.map { constant($0) })
                var known: [Known] = []
                for (i, (name, r)) in zip(outs, results).enumerated() {
                    var value = r
                    if let t = inferred[i], [.float16, .bfloat16].contains(t.dtype), r.scalarType == .float32 {
                        value = try ReferenceInterpreter.evaluate(
                            Operation(opType: "cast", name: "narrow", inputs: [""], outputs: [], attributes: ["to": .dtype(t.dtype)]), [r])[0]
                        if t.dtype == .bfloat16 {
                            // Already rounded to bfloat16 by the cast: its upper 16 bits are exact.
                            let floats = value.scalars(as: Float.self)
                            var bf = NDArray(shape: value.shape, scalarType: .bfloat16)
                            bf.withUnsafeMutableBytes { raw in
                                for (i, f) in floats.enumerated() { raw.storeBytes(of: UInt16(truncatingIfNeeded: f.bitPattern >> 16), toByteOffset: 2 * i, as: UInt16.self) }
                            }
                            value = bf
                        } else {
                            value = NDArray(shape: value.shape, scalars: value.scalars(as: Float.self).map { Float16($0) })
                        }
                    }
                    if !name.isEmpty { c.values[name] = .constant(value) }
                    known.append(.constant(value))
                }
                return known
            } catch let e as OpError {
                throw c.fail("\(what): \(e.reason)")
            }
        }
        var operandNames: [String] = []
        for name in inputs {
            if name.isEmpty { operandNames.append(""); continue }
            operandNames.append(try c.operand(name, known(name)!).0)
        }
        var results: [Known] = []
        var values: [Value] = []
        for (i, name) in outs.enumerated() {
            var t = inferred.indices.contains(i) ? inferred[i] : nil
            if let refine { t = refine(i, t) }
            if t == nil, let info = c.valueInfo[name], let code = info.dtype, let dtype = ONNXDecoder.dtypes[code], let shape = info.shape {
                t = TensorType(dtype == .float64 ? .float32 : dtype, shape.map { _ in .unknown })
            }
            guard let type = t else { throw c.fail("\(what): cannot infer the type of output '\(name)'") }
            let valueName = c.freshName(name.isEmpty ? "\(node.name)_unused\(i)" : name)
            values.append(Value(name: valueName, type: type))
            let known = Known.value(name: valueName, type: type, elements: i < elements.count ? elements[i] : nil)
            if !name.isEmpty { c.values[name] = known }
            results.append(known)
        }
        c.operations.append(Operation(opType: opType, name: c.freshOpName(node.name.isEmpty ? "\(opType)" : node.name),
                                      inputs: operandNames, outputs: values, attributes: attributes, source: node.name))
        return results
    }

    func alias(_ node: ONNXNode) throws {
        guard let first = node.inputs.first, let k = known(first) else {
            throw c.fail("node '\(node.name)' (\(node.opType)) has no input")
        }
        c.values[node.outputs[0]] = k
        // Dropout's optional mask output is all true in inference.
        if node.outputs.count > 1, !node.outputs[1].isEmpty, let t = try type(first), let shape = t.staticShape {
            c.values[node.outputs[1]] = .constant(NDArray(shape: shape, scalars: [Bool](repeating: true, count: shape.reduce(1, *))))
        }
    }

    func int(_ node: ONNXNode, _ name: String, _ fallback: Int) -> Int {
        if case .int(let v)? = node.attributes[name] { return v }
        return fallback
    }

    func float(_ node: ONNXNode, _ name: String, _ fallback: Float) -> Float {
        if case .float(let v)? = node.attributes[name] { return v }
        return fallback
    }

    func ints(_ node: ONNXNode, _ name: String) -> [Int]? {
        if case .ints(let v)? = node.attributes[name] { return v }
        return nil
    }

    func input(_ node: ONNXNode, _ i: Int) -> String { i < node.inputs.count ? node.inputs[i] : "" }

    // MARK: Quantized weights

    /// `DequantizeLinear` of an int8/uint8 initializer with constant float scale (and zero point)
    /// becomes a quantized weight of the package — the integers stay integers — instead of a
    /// float32 copy folded at convert time. Per tensor, per axis and blocked scales map to the
    /// package's block scales (specs/package-format.md). Returns false to convert the node as an op.
    func keepQuantized(_ node: ONNXNode) throws -> Bool {
        let source = input(node, 0)
        guard c.parent == nil, node.outputs.count == 1, let q = constant(source), c.initializerNames.contains(source),
              [.int8, .uint8].contains(q.scalarType), q.rank >= 1, let scale = constant(input(node, 1)),
              [.float32, .float16].contains(scale.scalarType) else { return false }
        if case .int(let code)? = node.attributes["output_dtype"], code != 0, code != 1 && code != 10 { return false }
        let zero = input(node, 2).isEmpty ? nil : constant(input(node, 2))
        if !input(node, 2).isEmpty && (zero == nil || zero!.scalarType != q.scalarType || zero!.shape != scale.shape) { return false }
        guard case .int(let rawAxis)? = node.attributes["axis"] ?? .int(1), rawAxis >= -q.rank, rawAxis < q.rank else { return false }
        let axis = rawAxis < 0 ? rawAxis + q.rank : rawAxis
        var blockSize = 0
        if case .int(let b)? = node.attributes["block_size"] { blockSize = b }
        // The scale's shape in the weight's rank: ones, the axis's size, or the axis's block count.
        var shape = [Int](repeating: 1, count: q.rank)
        if scale.elementCount == 1 && blockSize == 0 {
            // per tensor
        } else if blockSize == 0, scale.rank == 1, scale.shape[0] == q.shape[axis] {
            shape[axis] = q.shape[axis]
        } else if blockSize > 0, scale.rank == q.rank, q.shape[axis] % blockSize == 0,
                  (0 ..< q.rank).allSatisfy({ $0 == axis ? scale.shape[$0] == q.shape[axis] / blockSize : scale.shape[$0] == q.shape[$0] }) {
            shape = scale.shape
        } else {
            return false
        }
        // 4-bit integers stay 4-bit: packed two per byte, the first in the low nibble.
        let fourBit = c.fourBitInitializers.contains(source)
        if !input(node, 2).isEmpty, c.fourBitInitializers.contains(input(node, 2)) != fourBit { return false }
        let name = c.freshName(node.outputs[0])
        func blob(_ x: NDArray, _ shape: [Int]) -> WeightBlob { WeightBlob(dtype: x.scalarType, shape: shape, data: ByteStorage(x.bytes)) }
        func integers(_ x: NDArray, _ shape: [Int]) -> WeightBlob {
            guard fourBit else { return blob(x, shape) }
            let bytes = x.bytes
            var packed = [UInt8](repeating: 0, count: (bytes.count + 1) / 2)
            for (i, b) in bytes.enumerated() { packed[i / 2] |= (b & 0xF) << (i % 2 == 0 ? 0 : 4) }
            return WeightBlob(dtype: x.scalarType == .int8 ? .int4 : .uint4, shape: shape, data: ByteStorage(packed))
        }
        let weight = Weight(name: name, dtype: scale.scalarType, shape: q.shape, encoding: .quantized(QuantizedWeight(
            data: integers(q, q.shape), scale: blob(scale, shape), zeroPoint: zero.map { integers($0, shape) })))
        c.weights.append(weight)
        c.values[node.outputs[0]] = .value(name: name, type: TensorType(scale.scalarType, q.shape.map { .size($0) }), elements: nil)
        return true
    }

    /// Integer initializers cast to float, by the name of the cast's output: a `Mul` by a
    /// constant scale then makes them a quantized weight (the `Cast`/`Mul` form of dequantization).
    func recordIntegerCast(_ node: ONNXNode) throws -> Bool {
        let source = input(node, 0)
        guard c.parent == nil, node.outputs.count == 1, let q = constant(source), c.initializerNames.contains(source),
              [.int8, .uint8].contains(q.scalarType), q.rank >= 1,
              case .int(let code)? = node.attributes["to"], code == 1 else { return false }
        c.integerCasts[node.outputs[0]] = q
        return false // converted (folded) as usual; the record only matters to a `Mul` reading it
    }

    /// `Mul(Cast(q), scale)` with q an int8/uint8 initializer and a constant float32 scale that is
    /// one value or one per entry of a single axis: a symmetric quantized weight.
    func keepScaledIntegers(_ node: ONNXNode) throws -> Bool {
        guard c.parent == nil, node.inputs.count == 2, node.outputs.count == 1 else { return false }
        for (i, j) in [(0, 1), (1, 0)] {
            guard let q = c.integerCasts[node.inputs[i]], let scale = constant(node.inputs[j]), scale.scalarType == .float32,
                  scale.rank <= q.rank else { continue }
            // Right-aligned broadcast of the scale against the weight: at most one axis above 1.
            let aligned = [Int](repeating: 1, count: q.rank - scale.rank) + scale.shape
            let axes = aligned.indices.filter { aligned[$0] != 1 }
            guard axes.count <= 1, axes.allSatisfy({ aligned[$0] == q.shape[$0] }) else { continue }
            let name = c.freshName(node.outputs[0])
            let weight = Weight(name: name, dtype: .float32, shape: q.shape, encoding: .quantized(QuantizedWeight(
                data: WeightBlob(dtype: q.scalarType, shape: q.shape, data: ByteStorage(q.bytes)),
                scale: WeightBlob(dtype: .float32, shape: aligned, data: ByteStorage(scale.bytes)), zeroPoint: nil)))
            c.weights.append(weight)
            c.values[node.outputs[0]] = .value(name: name, type: TensorType(.float32, q.shape.map { .size($0) }), elements: nil)
            return true
        }
        return false
    }

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

    /// Elementwise ops on partly known int vectors (shape arithmetic), entry by entry.
    func symbolic(_ op: String, _ inputs: [String]) -> [Element]? {
        guard ["add", "sub", "mul", "div", "equal", "where", "max", "min"].contains(op), !inputs.isEmpty else { return nil }
        let parts = inputs.map { elements($0) }
        guard parts.allSatisfy({ $0 != nil }), parts.contains(where: { _ in true }) else { return nil }
        // Only when some input is computed at run time (otherwise folding handles it).
        guard inputs.contains(where: { if case .value? = known($0) { return true } else { return false } }) else { return nil }
        let lists = parts.map { $0! }
        let n = lists.map(\.count).max() ?? 0
        guard lists.allSatisfy({ $0.count == n || $0.count == 1 }) else { return nil }
        func at(_ k: Int, _ i: Int) -> Element { lists[k].count == 1 ? lists[k][0] : lists[k][i] }
        return (0 ..< n).map { i -> Element in
            let a = at(0, i)
            if op == "where" {
                guard lists.count == 3, let cond = a.int else { return .unknown }
                return cond != 0 ? at(1, i) : at(2, i)
            }
            guard lists.count >= 2 else { return .unknown }
            let b = at(1, i)
            if let x = a.int, let y = b.int {
                switch op {
                case "add": return .known(x + y)
                case "sub": return .known(x - y)
                case "mul": return .known(x * y)
                case "div": return y == 0 ? .unknown : .known(x / y)
                case "equal": return .known(x == y ? 1 : 0)
                case "max": return .known(max(x, y))
                default: return .known(min(x, y))
                }
            }
            switch (op, a, b) {
            case ("add", _, .known(0)), ("sub", _, .known(0)), ("mul", _, .known(1)), ("div", _, .known(1)): return a
            case ("add", .known(0), _), ("mul", .known(1), _): return b
            // Dims are never negative, so a dim never equals a negative number.
            case ("equal", .dim, .known(let v)) where v < 0: return .known(0)
            case ("equal", .known(let v), .dim) where v < 0: return .known(0)
            case ("equal", .dim(let x), .dim(let y)) where x == y: return .known(1)
            case ("max", .dim, .known(let v)) where v <= 0: return a
            case ("max", .known(let v), .dim) where v <= 0: return b
            default: return .unknown
            }
        }
    }

    /// Records `node`'s output as a dim test (see `Conversion.dimTests`): `Equal` of one run-time
    /// dim and 0 or 1, and what `Not`, `Cast`, `Squeeze`, `Unsqueeze`, `Reshape` and `Identity`
    /// make of one.
    func noteDimTest(_ node: ONNXNode) {
        guard let out = node.outputs.first, !out.isEmpty, case .value? = known(out) else { return }
        switch node.opType {
        case "Equal" where node.inputs.count == 2:
            let (a, b) = (elements(node.inputs[0]), elements(node.inputs[1]))
            func dim(_ e: [Element]?) -> Bool { e?.count == 1 && e![0].int == nil }
            func small(_ e: [Element]?) -> Int? { e?.count == 1 && (e![0].int == 0 || e![0].int == 1) ? e![0].int : nil }
            if let v = dim(a) ? small(b) : dim(b) ? small(a) : nil { c.dimTests[out] = v == 1 }
        case "Not":
            if let v = c.dimTests[input(node, 0)] { c.dimTests[out] = !v }
        case "Cast", "Squeeze", "Unsqueeze", "Reshape", "Identity":
            if let v = c.dimTests[input(node, 0)] { c.dimTests[out] = v }
        default:
            break
        }
    }

    /// A rank-0 constant of `value` in `dtype` (a float type, float64 held as float32), as a value name.
    func scalar(_ value: Float, like dtype: DataType, _ node: ONNXNode) throws -> String {
        let name = c.freshName("\(node.name)_constant")
        switch dtype {
        case .float32, .float64: c.values[name] = .constant(NDArray(shape: [], scalars: [value]))
        case .float16: c.values[name] = .constant(NDArray(shape: [], scalars: [Float16(value)]))
        case .bfloat16:
            var x = NDArray(shape: [], scalarType: .bfloat16)
            let bits = value.bitPattern
            let rounded = UInt16(truncatingIfNeeded: (bits &+ 0x7FFF &+ ((bits >> 16) & 1)) >> 16)
            x.withUnsafeMutableBytes { $0.storeBytes(of: rounded, as: UInt16.self) }
            c.values[name] = .constant(x)
        default: throw c.fail("node '\(node.name)' (\(node.opType)) needs a floating-point input, got \(dtype.rawValue)")
        }
        c.usedNames.insert(name)
        return name
    }

    /// RMSNormalization: `x / sqrt(mean(x², axes from axis) + epsilon) · scale`.
    func rmsNormalization(_ node: ONNXNode) throws {
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let axis = try OpSet.normalize(axis: int(node, "axis", -1), rank: t.rank)
        let (square, meanSquare, shifted, rms, normalized) = (c.freshName("\(x)_square"), c.freshName("\(x)_mean_square"),
                                                              c.freshName("\(x)_shifted"), c.freshName("\(x)_rms"), c.freshName("\(x)_normalized"))
        try emit(node, "mul", [x, x], [:], outputs: [square])
        try emit(node, "reduce_mean", [square], ["axes": .ints(Array(axis ..< t.rank)), "keepdims": .int(1)], outputs: [meanSquare])
        try emit(node, "add", [meanSquare, try scalar(float(node, "epsilon", 1e-5), like: t.dtype, node)], [:], outputs: [shifted])
        try emit(node, "sqrt", [shifted], [:], outputs: [rms])
        try emit(node, "div", [x, rms], [:], outputs: [normalized])
        try emit(node, "mul", [normalized, input(node, 1)], [:])
    }

    /// LayerNormalization's optional outputs 1 and 2, the mean and the inverse standard deviation
    /// over the normalized axes (kept as dims of 1), computed by their own ops in float32.
    func layerNormStatistics(_ node: ONNXNode) throws {
        let wanted = node.outputs.dropFirst().contains { !$0.isEmpty }
        guard wanted else { return }
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let axis = try OpSet.normalize(axis: int(node, "axis", -1), rank: t.rank)
        let axes = ["axes": AttributeValue.ints(Array(axis ..< t.rank)), "keepdims": .int(1)]
        let output = { (i: Int, base: String) in i < node.outputs.count && !node.outputs[i].isEmpty ? node.outputs[i] : self.c.freshName("\(x)_\(base)") }
        let mean = output(1, "mean")
        try emit(node, "reduce_mean", [x], axes, outputs: [mean])
        let (centered, square, variance, shifted, deviation) = (c.freshName("\(x)_centered"), c.freshName("\(x)_square"),
                                                                 c.freshName("\(x)_variance"), c.freshName("\(x)_shifted"), c.freshName("\(x)_deviation"))
        try emit(node, "sub", [x, mean], [:], outputs: [centered])
        try emit(node, "mul", [centered, centered], [:], outputs: [square])
        try emit(node, "reduce_mean", [square], axes, outputs: [variance])
        try emit(node, "add", [variance, try scalar(float(node, "epsilon", 1e-5), like: t.dtype, node)], [:], outputs: [shifted])
        try emit(node, "sqrt", [shifted], [:], outputs: [deviation])
        try emit(node, "reciprocal", [deviation], [:], outputs: [output(2, "inv_std_dev")])
    }

    /// BatchNormalization with `training_mode` 1: normalized by the batch's own statistics (mean and
    /// population variance over every axis but 1), with the running statistics updated by
    /// `momentum` as further outputs.
    func batchNormTraining(_ node: ONNXNode) throws {
        let x = input(node, 0)
        guard node.inputs.count >= 5, let t = try type(x), t.rank >= 2 else {
            throw c.fail("node '\(node.name)' (BatchNormalization) needs x of rank ≥ 2, scale, bias, mean and var")
        }
        let axes = ["axes": AttributeValue.ints([0] + Array(2 ..< t.rank)), "keepdims": .int(0)]
        let kept = ["axes": AttributeValue.ints([0] + Array(2 ..< t.rank)), "keepdims": .int(1)]
        let (meanKept, mean, centered, square, variance) = (c.freshName("\(x)_batch_mean_kept"), c.freshName("\(x)_batch_mean"),
                                                            c.freshName("\(x)_centered"), c.freshName("\(x)_square"), c.freshName("\(x)_batch_var"))
        try emit(node, "reduce_mean", [x], kept, outputs: [meanKept])
        try emit(node, "reduce_mean", [x], axes, outputs: [mean])
        try emit(node, "sub", [x, meanKept], [:], outputs: [centered])
        try emit(node, "mul", [centered, centered], [:], outputs: [square])
        try emit(node, "reduce_mean", [square], axes, outputs: [variance])
        try emit(node, "batch_norm", [x, input(node, 1), input(node, 2), mean, variance], try attributes(node, only: ["epsilon"]),
                 outputs: [node.outputs[0]])
        let momentum = float(node, "momentum", 0.9)
        for (i, (running, batch)) in [(input(node, 3), mean), (input(node, 4), variance)].enumerated() where i + 1 < node.outputs.count {
            let out = node.outputs[i + 1]
            guard !out.isEmpty, let rt = try type(running) else { continue }
            let (kept, added) = (c.freshName("\(out)_kept"), c.freshName("\(out)_added"))
            try emit(node, "mul", [running, try scalar(momentum, like: rt.dtype, node)], [:], outputs: [kept])
            try emit(node, "mul", [batch, try scalar(1 - momentum, like: rt.dtype, node)], [:], outputs: [added])
            try emit(node, "add", [kept, added], [:], outputs: [out])
        }
    }

    /// A dtype attribute (`output_datatype`, default float32), float64 held as float32.
    func outputDType(_ node: ONNXNode, _ key: String) throws -> DataType {
        guard case .int(let code)? = node.attributes[key] else { return .float32 }
        guard let d = ONNXDecoder.dtypes[Int32(code)] else { throw c.fail("node '\(node.name)' (\(node.opType)): unsupported \(key) \(code)") }
        return d == .float64 ? .float32 : d
    }

    func unusedOutputs(_ node: ONNXNode, from start: Int) throws {
        try unusedOutputs(node, Array(start ..< max(start, node.outputs.count)), "training statistics")
    }

    /// Refuses outputs `indices` of `node` (ones Kiln does not compute) when anything reads them.
    func unusedOutputs(_ node: ONNXNode, _ indices: [Int], _ what: String) throws {
        for i in indices where i < node.outputs.count && !node.outputs[i].isEmpty {
            let o = node.outputs[i]
            let used = c.model.graph.nodes.contains { $0.inputs.contains(o) } || c.model.graph.outputs.contains { $0.name == o }
            if used { throw c.fail("node '\(node.name)' (\(node.opType)): output '\(o)' (\(what)) is not supported") }
        }
    }

    func constantNode(_ node: ONNXNode) throws {
        guard let (key, value) = node.attributes.first else { throw c.fail("Constant node '\(node.name)' has no value") }
        let x: NDArray
        switch (key, value) {
        case ("value", .tensor(let t)): x = try c.narrowed(try t.value.get())
        case ("value_float", .float(let f)): x = NDArray(scalar: f)
        case ("value_floats", .floats(let f)): x = NDArray(shape: [f.count], scalars: f)
        case ("value_int", .int(let i)): x = NDArray(scalar: Int64(i))
        case ("value_ints", .ints(let i)): x = NDArray(shape: [i.count], scalars: i.map { Int64($0) })
        default: throw c.fail("Constant node '\(node.name)': \(key) is not supported")
        }
        c.values[node.outputs[0]] = .constant(x)
        c.sourceConstants.insert(node.outputs[0])
    }

    func softmax(_ node: ONNXNode) throws {
        let kiln = node.opType == "Softmax" ? "softmax" : "log_softmax"
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        if c.opset >= 13 {
            try emit(node, kiln, [x], ["axis": .int(int(node, "axis", -1))])
            return
        }
        // Before opset 13 the input is seen as 2-D: [∏ dims before axis, ∏ dims from axis].
        let axis = try OpSet.flattenAxis(int(node, "axis", 1), rank: t.rank)
        if axis == t.rank - 1 {
            try emit(node, kiln, [x], ["axis": .int(-1)])
            return
        }
        let flat = c.freshName("\(x)_flat")
        try emit(node, "flatten", [x], ["axis": .int(axis)], outputs: [flat])
        let soft = c.freshName("\(x)_softmax")
        try emit(node, kiln, [flat], ["axis": .int(-1)], outputs: [soft])
        if let s = t.staticShape {
            try emit(node, "reshape", [soft], ["shape": .ints(s)])
        } else {
            let shape = c.freshName("\(x)_shape")
            try emit(node, "shape", [x], [:], outputs: [shape])
            try emit(node, "reshape", [soft, shape], [:]) { _, _ in t }
        }
    }

    func shape(_ node: ONNXNode) throws {
        guard let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let rank = t.rank
        let clamp = { (v: Int) in min(max(v < 0 ? v + rank : v, 0), rank) }
        let start = clamp(int(node, "start", 0)), end = clamp(int(node, "end", rank))
        let dims = Array(t.shape[start ..< max(start, end)])
        let e: [Element] = dims.map { d in
            switch d {
            case .size(let n): return .known(n)
            case .symbol(let s): return s.isEmpty ? .unknown : .dim(s)
            }
        }
        if let ints = Optional(e.compactMap(\.int)), ints.count == e.count {
            c.values[node.outputs[0]] = .constant(NDArray.int64vector(ints))
            return
        }
        var attrs: [String: AttributeValue] = [:]
        if start != 0 { attrs["start"] = .int(start) }
        if end != rank { attrs["end"] = .int(end) }
        try emit(node, "shape", [input(node, 0)], attrs, elements: [e])
    }

    func gather(_ node: ONNXNode) throws {
        let axis = int(node, "axis", 0)
        let data = input(node, 0), indices = input(node, 1)
        var e: [Element]?
        if let d = elements(data), let idx = constant(indices), idx.rank <= 1, let list = try? intValues(idx) {
            e = list.map { i in
                let j = i < 0 ? i + d.count : i
                return j >= 0 && j < d.count ? d[j] : .unknown
            }
            if let ints = Optional(e!.compactMap(\.int)), ints.count == e!.count, case .value? = known(data) {
                // The entries are known even though the vector is computed at run time.
                c.values[node.outputs[0]] = .constant(idx.rank == 0 ? NDArray(scalar: Int64(ints[0])) : NDArray.int64vector(ints))
                return
            }
        }
        try emit(node, "gather", [data, indices], ["axis": .int(axis)], elements: [e])
    }

    func squeeze(_ node: ONNXNode) throws {
        let kiln = node.opType == "Squeeze" ? "squeeze" : "unsqueeze"
        var attrs: [String: AttributeValue] = [:]
        var inputs = [input(node, 0)]
        if let axes = ints(node, "axes") {
            attrs["axes"] = .ints(axes)
        } else if !input(node, 1).isEmpty {
            if let axes = try staticInts(node, 1) { attrs["axes"] = .ints(axes) } else { inputs.append(input(node, 1)) }
        }
        let e = elements(input(node, 0))
        if kiln == "squeeze", attrs["axes"] == nil, inputs.count == 1, try squeezeRunTimeDims(node) { return }
        try emit(node, kiln, inputs, attrs, elements: [e])
    }

    /// `Squeeze` without axes of an input with run-time dims: its rank would depend on which of
    /// them are 1. The known 1s are squeezed and the run-time dims kept, assumed not to be 1 (a
    /// dim the exporter could not fix is a batch or a length); an `assume` checks it when the
    /// function runs. Returns false when every dim is known (the op converts as is).
    func squeezeRunTimeDims(_ node: ONNXNode) throws -> Bool {
        let x = input(node, 0)
        guard let t = try type(x), t.shape.contains(where: { $0.size == nil }) else { return false }
        let ones = t.shape.indices.filter { t.shape[$0] == .size(1) }
        let open = t.shape.indices.filter { t.shape[$0].size == nil }
        let (shape, picked, isOne, notOne, squeezed) = (c.freshName("\(x)_shape"), c.freshName("\(x)_run_time_dims"), c.freshName("\(x)_dim_is_one"),
                                                        c.freshName("\(x)_dim_not_one"), c.freshName("\(node.outputs[0])_unchecked"))
        try emit(node, "shape", [x], [:], outputs: [shape])
        let (index, one) = (c.freshName("\(x)_run_time_axes"), c.freshName("\(x)_one"))
        c.values[index] = .constant(NDArray(shape: [open.count], scalars: open.map { Int64($0) }))
        c.values[one] = .constant(NDArray(shape: [], scalars: [Int64(1)]))
        c.usedNames.formUnion([index, one])
        try emit(node, "gather", [shape, index], ["axis": .int(0)], outputs: [picked])
        try emit(node, "equal", [picked, one], [:], outputs: [isOne])
        try emit(node, "not", [isOne], [:], outputs: [notOne])
        try emit(node, "squeeze", [x], ["axes": .ints(ones)], outputs: [squeezed])
        let message = "node '\(node.name)' (Squeeze) without axes was converted keeping its run-time dims (assumed not to be 1); this input has one of size 1"
        try emit(node, "assume", [squeezed, notOne], ["message": .string(message)], outputs: [node.outputs[0]])
        return true
    }

    func reshape(_ node: ONNXNode) throws {
        let x = input(node, 0)
        var attrs = try attributes(node, only: ["allowzero"])
        let allowZero = int(node, "allowzero", 0) != 0
        let e = elements(x)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        if let shape = ints(node, "shape") {
            attrs["shape"] = .ints(shape)
            try emit(node, "reshape", [x], attrs, elements: [e])
            return
        }
        guard let target = elements(input(node, 1)) else {
            try emit(node, "reshape", [x, input(node, 1)], attrs, elements: [e])
            return
        }
        // Turn a partly known target into a static one: a symbol equal to the input's
        // dim at the same position is "copy" (0), one remaining unknown is "infer" (-1).
        var fixed: [Int?] = target.enumerated().map { i, el in
            switch el {
            case .known(let n): return n
            case .dim(let s) where !allowZero && i < t.rank && t.shape[i] == .symbol(s): return 0
            default: return nil
            }
        }
        let unknown = fixed.indices.filter { fixed[$0] == nil }
        if unknown.count <= 1, !(unknown.count == 1 && fixed.contains(-1)) {
            if let u = unknown.first { fixed[u] = -1 }
            attrs["shape"] = .ints(fixed.map { $0! })
            try emit(node, "reshape", [x], attrs, elements: [e]) { _, inferred in
                guard let inferred, let u = unknown.first, case .dim(let s) = target[u] else { return inferred }
                var dims = inferred.shape
                dims[u] = .symbol(s)
                return TensorType(inferred.dtype, dims)
            }
        } else {
            // What the partly known target says per dim: -1 is inferred at run time, 0 copies the input's dim.
            let dims = target.enumerated().map { i, el -> Dimension in
                switch el {
                case .known(-1): return .unknown
                case .known(0) where !allowZero: return i < t.rank ? t.shape[i] : .unknown
                case .known(let n) where n < 0: return .unknown
                default: return el.dimension
                }
            }
            try emit(node, "reshape", [x, input(node, 1)], attrs, elements: [e]) { _, inferred in
                TensorType(inferred?.dtype ?? t.dtype, dims)
            }
        }
    }

    func slice(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = [:]
        var inputs = [input(node, 0)]
        if c.opset < 10 {
            for key in ["starts", "ends", "axes"] { if let v = ints(node, key) { attrs[key] = .ints(v) } }
        } else {
            let keys = ["starts", "ends", "axes", "steps"]
            let known = try (1 ... 4).map { try staticInts(node, $0) }
            let present = (1 ... 4).map { !input(node, $0).isEmpty }
            if zip(known, present).allSatisfy({ $0 != nil || !$1 }) {
                for (k, v) in zip(keys, known) { if let v { attrs[k] = .ints(v) } }
            } else {
                inputs += (1 ... 4).map { input(node, $0) }
            }
        }
        // Slicing a partly known shape vector keeps what is known.
        var e: [Element]?
        if let d = elements(input(node, 0)), case .ints(let s)? = attrs["starts"], case .ints(let en)? = attrs["ends"], s.count == 1 {
            let step: Int = { if case .ints(let st)? = attrs["steps"] { return st.first ?? 1 } else { return 1 } }()
            if step != 0 {
                let r = OpSet.sliceRange(start: s[0], end: en[0], step: step, size: d.count)
                e = (0 ..< r.count).map { d[r.start + $0 * step] }
            }
        }
        let params = (1 ... 4).map { elements(input(node, $0)) }
        try emit(node, "slice", inputs, attrs, elements: [e]) { _, inferred in
            // starts 0, step 1 and an end that is a symbol give that symbol.
            guard let inferred, inputs.count > 1, let starts = params[0], let ends = params[1], let x = try? self.type(self.input(node, 0)) else { return inferred }
            let axes = params[2]?.map(\.int) ?? Array(0 ..< starts.count).map { Optional($0) }
            let steps = params[3] ?? Array(repeating: .known(1), count: starts.count)
            var dims = x.shape
            for a in axes { if var a { if a < 0 { a += x.rank }; if a >= 0, a < dims.count { dims[a] = .unknown } } }
            for k in 0 ..< min(starts.count, ends.count, axes.count, steps.count) {
                guard var a = axes[k] else { return inferred }
                if a < 0 { a += x.rank }
                guard a >= 0, a < dims.count else { return inferred }
                if starts[k] == .known(0), steps[k] == .known(1), case .dim(let s) = ends[k] {
                    dims[a] = .symbol(s)
                } else if starts[k] == .known(0), steps[k] == .known(1), let end = ends[k].int, end >= Int(Int32.max) {
                    dims[a] = x.shape[a]
                }
            }
            return TensorType(inferred.dtype, dims)
        }
    }

    func pad(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = [:]
        if case .string(let m)? = node.attributes["mode"] { attrs["mode"] = .string(m) }
        var inputs = [input(node, 0)]
        if c.opset < 11 {
            if let p = ints(node, "pads") ?? ints(node, "paddings") { attrs["pads"] = .ints(p) }
            if case .float(let v)? = node.attributes["value"] { attrs["value"] = .float(Double(v)) }
        } else {
            if let p = try staticInts(node, 1) { attrs["pads"] = .ints(p); inputs.append("") } else { inputs.append(input(node, 1)) }
            if let v = constant(input(node, 2)), v.elementCount == 1, v.scalarType.isFloatingPoint {
                attrs["value"] = .float(try floatValues(v)[0])
                inputs.append("")
            } else {
                inputs.append(input(node, 2))
            }
            if !input(node, 3).isEmpty {
                if let a = try staticInts(node, 3) { attrs["axes"] = .ints(a) } else { inputs.append(input(node, 3)) }
            }
        }
        try emit(node, "pad", inputs, attrs)
    }

    func resize(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "antialias",
                                                "exclude_outside", "extrapolation_value", "axes", "keep_aspect_ratio_policy"])
        if case .string(let m)? = attrs["mode"] { attrs["mode"] = .string(m == "bilinear" || m == "trilinear" ? "linear" : m) }
        let legacy = node.opType == "Upsample" || c.opset < 11
        if legacy {
            attrs["coordinate_transformation_mode"] = .string("asymmetric")
            attrs["nearest_mode"] = .string("floor")
        }
        var inputs = [input(node, 0)]
        // Upsample-7 has scales as an attribute; Upsample-9 and Resize-10 as input 1.
        let scalesIndex = legacy ? 1 : 2, sizesIndex = legacy ? -1 : 3
        if case .floats(let s)? = node.attributes["scales"] {
            attrs["scales"] = .floats(s.map(Double.init))
        } else if let s = constant(input(node, scalesIndex)), s.elementCount > 0 {
            attrs["scales"] = .floats(try floatValues(s))
        } else if sizesIndex > 0, let s = try staticInts(node, sizesIndex), !s.isEmpty {
            attrs["sizes"] = .ints(s)
        } else if !legacy {
            inputs += [input(node, 1), input(node, 2), input(node, 3)]
        } else {
            inputs += ["", input(node, 1)]
        }
        if !legacy, inputs.count == 1, !input(node, 1).isEmpty, constant(input(node, 1))?.elementCount ?? 0 > 0 {
            inputs.append(input(node, 1))
        }
        try emit(node, "resize", inputs, attrs)
    }
}

extension NDArray {
    static func int64vector(_ values: [Int]) -> NDArray {
        NDArray(shape: [values.count], scalars: values.map { Int64($0) })
    }
}
