import KilnFormat

/// onnxruntime's own operators (domain `com.microsoft`) that its optimizers and quantizers write
/// into models people ship, converted into Kiln ops: 4-bit and 8-bit weight matmuls, the LSTM over
/// 8-bit weights, the GELU family, skip layer norms, fused matmul, rotary embeddings. (`SimplifiedLayerNormalization`, which onnxruntime
/// registers in the ai.onnx domain, is RMS normalization.)
extension NodeConverter {
    /// The com.microsoft operators Kiln converts: the keys of `contribHandlers`.
    static let contribSupported: Set<String> = Set(contribHandlers.keys)

    /// The handler of each com.microsoft operator.
    static let contribHandlers: [String: Handler] = [
        "Gelu": gelu, "FastGelu": biasedGelu, "BiasGelu": biasedGelu, "QuickGelu": quickGelu, "BiasAdd": biasAdd,
        "SkipLayerNormalization": skipNormalization, "SkipSimplifiedLayerNormalization": skipNormalization,
        "FusedMatMul": fusedMatMul, "MatMulNBits": matMulNBits, "DynamicQuantizeLSTM": dynamicQuantizeLSTM,
        "RotaryEmbedding": contribRotary, "GroupQueryAttention": groupQueryAttention, "MultiHeadAttention": multiHeadAttention,
    ]

    /// How errors name a com.microsoft node.
    func contribName(_ node: ONNXNode) -> String { "node '\(node.name)' (com.microsoft.\(node.opType))" }

    /// Converts a com.microsoft node by `contribHandlers`.
    /// - Parameter node: A node of the com.microsoft domain.
    /// - Throws: `ConvertError` for an undefined first input or an operator without a handler,
    ///   or when its handler refuses the node.
    func convertContrib(_ node: ONNXNode) throws {
        let what = contribName(node)
        guard try type(input(node, 0)) != nil else { throw c.fail("\(what) reads an undefined value") }
        guard let handler = NodeConverter.contribHandlers[node.opType] else { throw c.fail("\(what) is not supported") }
        try handler(self)(node)
    }

    /// Gelu: `gelu`.
    /// - Parameter node: A `Gelu` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func gelu(_ node: ONNXNode) throws {
        try emit(node, "gelu", [input(node, 0)], [:])
    }

    /// FastGelu and BiasGelu: x (+ bias), then GELU: the tanh form for FastGelu, erf for BiasGelu.
    /// - Parameter node: A `FastGelu` or `BiasGelu` node.
    /// - Throws: `ConvertError` when an op refuses the node.
    func biasedGelu(_ node: ONNXNode) throws {
        let x = input(node, 0)
        var source = x
        if !input(node, 1).isEmpty {
            source = c.freshName("\(x)_biased")
            try emit(node, "add", [x, input(node, 1)], [:], outputs: [source])
        }
        try emit(node, "gelu", [source], node.opType == "FastGelu" ? ["approximate": .string("tanh")] : [:], outputs: [node.outputs[0]])
    }

    /// QuickGelu: x · sigmoid(alpha · x), alpha = 1.702.
    /// - Parameter node: A `QuickGelu` node.
    /// - Throws: `ConvertError` for an input that is not floating point, or when an op refuses the node.
    func quickGelu(_ node: ONNXNode) throws {
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("\(contribName(node)) reads an undefined value") }
        let alpha = float(node, "alpha", 1.702)
        let (scaled, gate) = (c.freshName("\(x)_scaled"), c.freshName("\(x)_gate"))
        try emit(node, "mul", [x, try scalar(alpha, like: t.dtype, node)], [:], outputs: [scaled])
        try emit(node, "sigmoid", [scaled], [:], outputs: [gate])
        try emit(node, "mul", [x, gate], [:], outputs: [node.outputs[0]])
    }

    /// DynamicQuantizeLSTM: `dynamic_quantize_lstm`, one to one, every output named.
    /// - Parameter node: A `DynamicQuantizeLSTM` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func dynamicQuantizeLSTM(_ node: ONNXNode) throws {
        let attrs = try attributes(node, only: NodeConverter.recurrentAttributeNames.subtracting(["layout", "linear_before_reset"]))
        var outputs = node.outputs
        while outputs.count < 3 { outputs.append("") }
        try emit(node, "dynamic_quantize_lstm", node.inputs, attrs, outputs: outputs)
    }

    /// BiasAdd: x + bias + skip.
    /// - Parameter node: A `BiasAdd` node.
    /// - Throws: `ConvertError` when an op refuses the node.
    func biasAdd(_ node: ONNXNode) throws {
        let x = input(node, 0)
        let sum = c.freshName("\(x)_biased")
        try emit(node, "add", [x, input(node, 1)], [:], outputs: [sum])
        try emit(node, "add", [sum, input(node, 2)], [:], outputs: [node.outputs[0]])
    }

    /// SkipLayerNormalization and SkipSimplifiedLayerNormalization: `input + skip (+ bias)`,
    /// layer-normalized (or RMS-normalized) over the last axis with gamma (and beta); output 3 is
    /// the sum. The mean and inverse-deviation outputs are refused when read.
    /// - Parameter node: A `SkipLayerNormalization` or `SkipSimplifiedLayerNormalization` node.
    /// - Throws: `ConvertError` when a statistic is read, or when an op refuses the node.
    func skipNormalization(_ node: ONNXNode) throws {
        let simplified = node.opType == "SkipSimplifiedLayerNormalization"
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let biasIndex = simplified ? 3 : 4
        let sum = node.outputs.count > 3 && !node.outputs[3].isEmpty ? node.outputs[3] : c.freshName("\(x)_skip_sum")
        if input(node, biasIndex).isEmpty {
            try emit(node, "add", [x, input(node, 1)], [:], outputs: [sum])
        } else {
            let partial = c.freshName("\(x)_skip")
            try emit(node, "add", [x, input(node, 1)], [:], outputs: [partial])
            try emit(node, "add", [partial, input(node, biasIndex)], [:], outputs: [sum])
        }
        try unusedOutputs(node, [1, 2], "a statistic")
        let epsilon = float(node, "epsilon", 1e-12)
        if simplified {
            let (square, meanSquare, shifted, rms, normalized) = (c.freshName("\(x)_square"), c.freshName("\(x)_mean_square"),
                                                                  c.freshName("\(x)_shifted"), c.freshName("\(x)_rms"), c.freshName("\(x)_normalized"))
            try emit(node, "mul", [sum, sum], [:], outputs: [square])
            try emit(node, "reduce_mean", [square], ["axes": .ints([t.rank - 1]), "keepdims": .int(1)], outputs: [meanSquare])
            try emit(node, "add", [meanSquare, try scalar(epsilon, like: t.dtype, node)], [:], outputs: [shifted])
            try emit(node, "sqrt", [shifted], [:], outputs: [rms])
            try emit(node, "div", [sum, rms], [:], outputs: [normalized])
            try emit(node, "mul", [normalized, input(node, 2)], [:], outputs: [node.outputs[0]])
        } else {
            try emit(node, "layer_norm", [sum, input(node, 2), input(node, 3)], ["axis": .int(-1), "epsilon": .float(Double(epsilon))],
                     outputs: [node.outputs[0]])
        }
    }

    /// FusedMatMul: `alpha · op(A) · op(B)`, op transposing the last two dims when transA / transB
    /// is set.
    /// - Parameter node: A `FusedMatMul` node.
    /// - Throws: `ConvertError` for transBatchA/transBatchB, or when an op refuses the node.
    func fusedMatMul(_ node: ONNXNode) throws {
        let what = contribName(node)
        guard int(node, "transBatchA", 0) == 0, int(node, "transBatchB", 0) == 0 else { throw c.fail("\(what): transBatchA/transBatchB are not supported") }
        var operands: [String] = []
        for (i, key) in [(0, "transA"), (1, "transB")] {
            let name = input(node, i)
            guard let t = try type(name) else { throw c.fail("\(what) reads an undefined value") }
            if int(node, key, 0) != 0, t.rank >= 2 {
                let out = c.freshName("\(name)_transposed")
                try emit(node, "transpose", [name], ["perm": .ints(Array(0 ..< t.rank - 2) + [t.rank - 1, t.rank - 2])], outputs: [out])
                operands.append(out)
            } else {
                operands.append(name)
            }
        }
        let alpha = float(node, "alpha", 1)
        if alpha == 1 {
            try emit(node, "matmul", operands, [:], outputs: [node.outputs[0]])
        } else {
            let product = c.freshName("\(node.outputs[0])_product")
            try emit(node, "matmul", operands, [:], outputs: [product])
            guard let t = try type(product) else { throw c.fail("\(what): no product type") }
            try emit(node, "mul", [product, try scalar(alpha, like: t.dtype, node)], [:], outputs: [node.outputs[0]])
        }
    }

    /// `A · dequantize(B)ᵀ (+ bias)` with B [N, blocks, block bytes] of 4- or 8-bit integers
    /// (little nibble first), per-block scales [N · blocks] and zero points (packed like B, or
    /// none: 2^(bits−1)): a `linear` op over a quantized package weight [N, K] that keeps the
    /// integers, blocked along K — what the compressed GEMM kernels run.
    /// - Parameter node: A `MatMulNBits` node.
    /// - Throws: `ConvertError` when the sizes, the constants or the zero points do not fit.
    func matMulNBits(_ node: ONNXNode) throws {
        let what = contribName(node)
        let (k, n, bits, block) = (int(node, "K", 0), int(node, "N", 0), int(node, "bits", 4), int(node, "block_size", 0))
        guard k >= 1, n >= 1, bits == 4 || bits == 8, block >= 16, block & (block - 1) == 0, let count = elementCount([n, k]), count <= 1 << 34 else {
            throw c.fail("\(what): needs K, N ≥ 1, bits 4 or 8 and a power-of-two block_size ≥ 16 (got K \(k), N \(n), bits \(bits), block_size \(block))")
        }
        guard k % block == 0 else { throw c.fail("\(what): K \(k) is not a multiple of block_size \(block)") }
        guard input(node, 4).isEmpty else { throw c.fail("\(what): g_idx (act-order) is not supported") }
        guard c.parent == nil else { throw c.fail("\(what) inside a subgraph is not supported") }
        guard let packed = constant(input(node, 1)), packed.scalarType == .uint8, let scales = constant(input(node, 2)),
              [.float32, .float16].contains(scales.scalarType) else {
            throw c.fail("\(what): B must be a constant uint8 tensor and scales constant floats")
        }
        let blocks = k / block, blob = block * bits / 8
        guard packed.elementCount == n * blocks * blob, scales.elementCount == n * blocks else {
            throw c.fail("\(what): B holds \(packed.elementCount) bytes and scales \(scales.elementCount) values; N \(n), K \(k), block \(block) need \(n * blocks * blob) and \(n * blocks)")
        }
        let bytes = packed.bytes
        // The integers [N, K], as unsigned values.
        var q = [UInt8](repeating: 0, count: n * k)
        for row in 0 ..< n {
            for col in 0 ..< k {
                let at = row * blocks * blob + (col / block) * blob
                let within = col % block
                q[row * k + col] = bits == 8 ? bytes[at + within] : (bytes[at + within / 2] >> (within % 2 == 0 ? 0 : 4)) & 0xF
            }
        }
        // Zero points: packed uint8 like B (rows padded to whole bytes), or float values (refused), or none.
        var zero = [UInt8](repeating: UInt8(1 << (bits - 1)), count: n * blocks)
        if !input(node, 3).isEmpty {
            guard let z = constant(input(node, 3)), z.scalarType == .uint8 else { throw c.fail("\(what): zero points must be a constant uint8 tensor") }
            let perRow = (blocks * bits + 7) / 8, zb = z.bytes
            guard zb.count == n * perRow else { throw c.fail("\(what): zero points hold \(zb.count) bytes, N \(n) rows of \(blocks) blocks need \(n * perRow)") }
            for row in 0 ..< n {
                for b in 0 ..< blocks {
                    zero[row * blocks + b] = bits == 8 ? zb[row * perRow + b] : (zb[row * perRow + b / 2] >> (b % 2 == 0 ? 0 : 4)) & 0xF
                }
            }
        }
        func pack(_ v: [UInt8]) -> [UInt8] {
            guard bits == 4 else { return v }
            var out = [UInt8](repeating: 0, count: (v.count + 1) / 2)
            for (i, x) in v.enumerated() { out[i / 2] |= (x & 0xF) << (i % 2 == 0 ? 0 : 4) }
            return out
        }
        let dtype: DataType = bits == 4 ? .uint4 : .uint8
        let name = c.freshName("\(node.name.isEmpty ? "matmul_nbits" : node.name)_weight")
        let weight = Weight(name: name, dtype: scales.scalarType, shape: [n, k], encoding: .quantized(QuantizedWeight(
            data: WeightBlob(dtype: dtype, shape: [n, k], data: ByteStorage(pack(q))),
            scale: WeightBlob(dtype: scales.scalarType, shape: [n, blocks], data: ByteStorage(scales.bytes)),
            zeroPoint: WeightBlob(dtype: dtype, shape: [n, blocks], data: ByteStorage(pack(zero))))))
        c.weights.append(weight)
        c.values[name] = .value(name: name, type: TensorType(scales.scalarType, [.size(n), .size(k)]), elements: nil)
        try emit(node, "linear", [input(node, 0), name, input(node, 5)], [:], outputs: [node.outputs[0]])
    }
}

/// Operators of the ai.onnx.ml domain that are tensor arithmetic.
extension NodeConverter {
    /// The ai.onnx.ml operators Kiln converts: the keys of `mlHandlers`.
    static let mlSupported: Set<String> = Set(mlHandlers.keys)

    /// The handler of each ai.onnx.ml operator.
    static let mlHandlers: [String: Handler] = ["Binarizer": binarizer, "ArrayFeatureExtractor": arrayFeatureExtractor]

    /// How errors name an ai.onnx.ml node.
    func mlName(_ node: ONNXNode) -> String { "node '\(node.name)' (ai.onnx.ml.\(node.opType))" }

    /// Converts an ai.onnx.ml node by `mlHandlers`.
    /// - Parameter node: A node of the ai.onnx.ml domain.
    /// - Throws: `ConvertError` for an undefined first input or an operator without a handler,
    ///   or when its handler refuses the node.
    func convertML(_ node: ONNXNode) throws {
        let what = mlName(node)
        guard try type(input(node, 0)) != nil else { throw c.fail("\(what) reads an undefined value") }
        guard let handler = NodeConverter.mlHandlers[node.opType] else { throw c.fail("\(what) is not supported") }
        try handler(self)(node)
    }

    /// Binarizer: 1 where x > threshold, else 0, in x's type.
    /// - Parameter node: A `Binarizer` node.
    /// - Throws: `ConvertError` for an input that is not floating point, or when an op refuses the node.
    func binarizer(_ node: ONNXNode) throws {
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("\(mlName(node)) reads an undefined value") }
        let above = c.freshName("\(x)_above")
        try emit(node, "greater", [x, try scalar(float(node, "threshold", 0), like: t.dtype, node)], [:], outputs: [above])
        try emit(node, "cast", [above], ["to": .dtype(t.dtype)], outputs: [node.outputs[0]])
    }

    /// ArrayFeatureExtractor: the flattened indices gathered along the last axis; a vector input
    /// gives one row.
    /// - Parameter node: An `ArrayFeatureExtractor` node.
    /// - Throws: `ConvertError` when an op refuses the node.
    func arrayFeatureExtractor(_ node: ONNXNode) throws {
        let x = input(node, 0)
        guard let t = try type(x) else { throw c.fail("\(mlName(node)) reads an undefined value") }
        let indices = input(node, 1)
        let (flat, picked) = (c.freshName("\(indices)_flat"), c.freshName("\(x)_picked"))
        try emit(node, "reshape", [indices], ["shape": .ints([-1])], outputs: [flat])
        if t.rank == 1 {
            try emit(node, "gather", [x, flat], ["axis": .int(0)], outputs: [picked])
            try emit(node, "reshape", [picked], ["shape": .ints([1, -1])], outputs: [node.outputs[0]])
        } else {
            try emit(node, "gather", [x, flat], ["axis": .int(-1)], outputs: [node.outputs[0]])
        }
    }
}
