import KilnFormat

/// Tensor movement: aliases, layout changes, joins and splits, broadcasts, scatters and
/// index-built tensors.
extension NodeConverter {
    /// The tensor family's handlers.
    static let tensorHandlers: [String: Handler] = [
        "Identity": alias, "Dropout": dropout, "Flatten": flatten, "Transpose": transpose, "Concat": concat, "Split": split,
        "Expand": expandOrTile, "Tile": expandOrTile, "ScatterElements": scatterElements, "Scatter": scatterElements,
        "OneHot": oneHot, "EyeLike": eyeLike, "Compress": compress,
    ]

    /// Dropout: the identity, as in inference. In training mode (input 2 true) a non-zero ratio
    /// draws a random mask, which Kiln does not do: a true constant mode with a ratio that is not
    /// 0 is refused here; a mode known only at run time is checked when the function runs (an
    /// `assume` that the mode is off or the ratio 0), so a model exported with the switch as an
    /// input still runs for inference.
    /// - Parameter node: A `Dropout` node.
    /// - Throws: `ConvertError` for training mode with a ratio that is not 0.
    func dropout(_ node: ONNXNode) throws {
        let (x, ratio, mode) = (input(node, 0), input(node, 1), input(node, 2))
        guard !mode.isEmpty else { return try alias(node) }
        // An absent ratio is 0.5.
        let ratioZero: Bool? = ratio.isEmpty ? false : constant(ratio).flatMap { $0.doubles()?.allSatisfy { $0 == 0 } }
        let modeOff: Bool? = constant(mode).flatMap { m in m.scalarType == .bool ? !m.scalars(as: Bool.self).contains(true) : nil }
        if modeOff == true || ratioZero == true { return try alias(node) }
        if modeOff == false {
            throw c.fail("node '\(node.name)' (Dropout): training_mode is true with a ratio that is not 0; Kiln runs models for inference "
                         + "(export the model in eval mode, or make training_mode false)")
        }
        var off = c.freshName("\(node.outputs[0])_not_training")
        try emit(node, "not", [mode], [:], outputs: [off])
        if ratioZero == nil {
            let (ratio32, zero, isZero, either) = (c.freshName("\(ratio)_f32"), c.freshName("\(ratio)_zero"),
                                                   c.freshName("\(ratio)_is_zero"), c.freshName("\(node.outputs[0])_identity"))
            try emit(node, "cast", [ratio], ["to": .dtype(.float32)], outputs: [ratio32])
            c.values[zero] = .constant(NDArray(shape: [], scalars: [Float(0)]))
            c.usedNames.insert(zero)
            try emit(node, "equal", [ratio32, zero], [:], outputs: [isZero])
            try emit(node, "or", [off, isZero], [:], outputs: [either])
            off = either
        }
        let message = "node '\(node.name)' (Dropout): training_mode is true with a ratio that is not 0; Kiln runs models for inference"
        try emit(node, "assume", [x, off], ["message": .string(message)], outputs: [node.outputs[0]])
        if node.outputs.count > 1, !node.outputs[1].isEmpty, let t = try type(x), let shape = t.staticShape {
            c.values[node.outputs[1]] = .constant(NDArray(shape: shape, scalars: [Bool](repeating: true, count: shape.reduce(1, *))))
        }
    }

    /// Flatten: `flatten`.
    /// - Parameter node: A `Flatten` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func flatten(_ node: ONNXNode) throws {
        try emit(node, "flatten", [input(node, 0)], try attributes(node))
    }

    /// Transpose: `transpose`, keeping what is known of a shape vector.
    /// - Parameter node: A `Transpose` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func transpose(_ node: ONNXNode) throws {
        let e = elements(input(node, 0))
        try emit(node, "transpose", [input(node, 0)], try attributes(node), elements: [e])
    }

    /// Concat: `concat`; of shape vectors (rank ≤ 1), the known entries of each, joined.
    /// - Parameter node: A `Concat` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func concat(_ node: ONNXNode) throws {
        let parts = node.inputs.map { elements($0) }
        var e: [Element]?
        if parts.allSatisfy({ $0 != nil }), try node.inputs.allSatisfy({ (try type($0))?.rank ?? 2 <= 1 }) {
            e = parts.flatMap { $0! }
        }
        try emit(node, "concat", node.inputs, try attributes(node), elements: [e])
    }

    /// Split: known sizes (input 1) become the `split` attribute.
    /// - Parameter node: A `Split` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func split(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["axis", "split"])
        var inputs = [input(node, 0)]
        if !input(node, 1).isEmpty {
            if let s = try staticInts(node, 1) { attrs["split"] = .ints(s); inputs.append("") } else { inputs.append(input(node, 1)) }
        }
        try emit(node, "split", inputs, attrs)
    }

    /// Expand and Tile: a known shape or repeats become an attribute; an Expand to a partly known
    /// shape keeps the dims it knows.
    /// - Parameter node: An `Expand` or `Tile` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func expandOrTile(_ node: ONNXNode) throws {
        let (kiln, key) = node.opType == "Expand" ? ("expand", "shape") : ("tile", "repeats")
        if let v = try staticInts(node, 1) ?? (kiln == "expand" ? try keptDims(node) : nil) {
            try emit(node, kiln, [input(node, 0)], [key: .ints(v)])
        } else {
            let e = elements(input(node, 1))
            try emit(node, kiln, [input(node, 0), input(node, 1)], [:]) { _, t in
                guard let t, kiln == "expand", let e, let x = try? self.type(self.input(node, 0)) else { return t }
                return (try? OpSet.broadcast(x.shape, e.map(\.dimension))).map { TensorType(x.dtype, $0) } ?? t
            }
        }
    }

    /// An Expand target whose run-time entries are each the input's own dim there (a decoder's
    /// `[batch, kv_heads, n_rep, past_sequence_length + sequence_length, head_dim]` over
    /// `[batch, kv_heads, 1, past_sequence_length + sequence_length, head_dim]`) as a static one:
    /// those entries become 1, which broadcasting resolves to the input's dim. `nil` otherwise.
    func keptDims(_ node: ONNXNode) throws -> [Int]? {
        guard let e = elements(input(node, 1)), let x = try type(input(node, 0)) else { return nil }
        var out: [Int] = []
        for (i, element) in e.enumerated() {
            let aligned = i - (e.count - x.rank)
            switch element {
            case .known(let n): out.append(n)
            case .dim(let s) where aligned >= 0 && x.shape[aligned] == .symbol(s): out.append(1)
            default: return nil
            }
        }
        return out
    }

    /// ScatterElements and the deprecated Scatter: `scatter_elements`.
    /// - Parameter node: A `ScatterElements` or `Scatter` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func scatterElements(_ node: ONNXNode) throws {
        try emit(node, "scatter_elements", Array(node.inputs.prefix(3)), try attributes(node, only: ["axis", "reduction"]))
    }

    /// OneHot: a known one-value depth becomes an attribute.
    /// - Parameter node: A `OneHot` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func oneHot(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = ["axis": .int(int(node, "axis", -1))]
        var inputs = [input(node, 0), input(node, 1), input(node, 2)]
        if let d = constant(input(node, 1)), d.elementCount == 1 {
            attrs["depth"] = .int(Int(try floatValues(d)[0].rounded(.towardZero)))
            inputs[1] = ""
        }
        try emit(node, "one_hot", inputs, attrs)
    }

    /// EyeLike: `eye_like`, a stated dtype carried (float64 held as float32).
    /// - Parameter node: An `EyeLike` node.
    /// - Throws: `ConvertError` for a dtype Kiln does not support.
    func eyeLike(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = ["k": .int(int(node, "k", 0))]
        if case .int(let code)? = node.attributes["dtype"] {
            guard var dtype = ONNXDecoder.dtypes[Int32(code)] else { throw c.fail("node '\(node.name)' (EyeLike): unsupported dtype \(code)") }
            if dtype == .float64 { dtype = .float32 }
            attrs["dtype"] = .dtype(dtype)
        }
        try emit(node, "eye_like", [input(node, 0)], attrs)
    }

    /// Compress: `compress`.
    /// - Parameter node: A `Compress` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func compress(_ node: ONNXNode) throws {
        try emit(node, "compress", Array(node.inputs.prefix(2)), try attributes(node, only: ["axis"]))
    }
}
