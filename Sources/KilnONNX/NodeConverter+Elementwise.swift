import KilnFormat

/// Elementwise operators with a handler of their own: casts, clipping, triangles and Swish.
extension NodeConverter {
    /// The elementwise family's handlers.
    static let elementwiseHandlers: [String: Handler] = [
        "Cast": cast, "CastLike": castLike, "BitCast": bitCast, "Clip": clip, "Trilu": trilu, "Swish": swish,
    ]

    /// Cast, float64 held as float32. A stated float16 weight widened to float32 stays a float16
    /// constant of the package, cast when the function runs.
    /// - Parameter node: A `Cast` node.
    /// - Throws: `ConvertError` for a target type Kiln does not support.
    func cast(_ node: ONNXNode) throws {
        if try recordIntegerCast(node) { return }
        guard let code = node.attributes["to"].flatMap({ if case .int(let v) = $0 { return Int32(v) } else { return nil } }) else {
            throw c.fail("node '\(node.name)' (Cast) has no integer attribute 'to'")
        }
        guard var dtype = ONNXDecoder.dtypes[code] else {
            throw c.fail("node '\(node.name)' (Cast): target type \(ONNXDecoder.dtypeNames[code] ?? "\(code)"), which Kiln does not support")
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
    }

    /// CastLike: a cast to the second input's dtype (float64 held as float32, as for Cast).
    /// - Parameter node: A `CastLike` node.
    /// - Throws: `ConvertError` when the second input's type is unknown.
    func castLike(_ node: ONNXNode) throws {
        guard let like = try type(input(node, 1)) else { throw c.fail("node '\(node.name)' (CastLike): the type of input 1 is unknown") }
        try emit(node, "cast", [input(node, 0)], ["to": .dtype(like.dtype == .float64 ? .float32 : like.dtype)], elements: [elements(input(node, 0))])
    }

    /// BitCast: the same bits as another dtype; refused for float64, whose bits Kiln does not keep.
    /// - Parameter node: A `BitCast` node.
    /// - Throws: `ConvertError` without a known input and `to`, or for float64.
    func bitCast(_ node: ONNXNode) throws {
        guard case .int(let code)? = node.attributes["to"], let to = ONNXDecoder.dtypes[Int32(code)],
              let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' (BitCast) needs a known input and 'to'") }
        let declared = c.model.graph.inputs.first { $0.name == input(node, 0) }?.dtype ?? c.valueInfo[input(node, 0)]?.dtype
        guard to != .float64, t.dtype != .float64, declared != 11 else {
            throw c.fail("node '\(node.name)' (BitCast): float64 is held as float32 in Kiln, so its bits cannot be reinterpreted")
        }
        try emit(node, "bit_cast", [input(node, 0)], ["to": .dtype(to)])
    }

    /// Clip: a constant one-value min or max input becomes an attribute.
    /// - Parameter node: A `Clip` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func clip(_ node: ONNXNode) throws {
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
    }

    /// Trilu: a known diagonal offset `k` becomes an attribute.
    /// - Parameter node: A `Trilu` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func trilu(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["upper"])
        var inputs = [input(node, 0)]
        if !input(node, 1).isEmpty {
            if let k = try staticInts(node, 1), k.count == 1 { attrs["k"] = .int(k[0]); inputs.append("") } else { inputs.append(input(node, 1)) }
        }
        try emit(node, "trilu", inputs, attrs)
    }

    /// Swish: `x · sigmoid(alpha · x)`.
    /// - Parameter node: A `Swish` node.
    /// - Throws: `ConvertError` when the input is undefined or not floating point.
    func swish(_ node: ONNXNode) throws {
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
    }
}
