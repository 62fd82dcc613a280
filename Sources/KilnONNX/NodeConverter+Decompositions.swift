import KilnFormat
import KilnReference

/// Operators converted to several Kiln ops, and node checks they share.
extension NodeConverter {
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

    /// RMSNormalization (and onnxruntime's SimplifiedLayerNormalization, registered in ai.onnx):
    /// `x / sqrt(mean(x², axes from axis) + epsilon) · scale`.
    /// - Parameter node: An `RMSNormalization` or `SimplifiedLayerNormalization` node.
    /// - Throws: `ConvertError` for an undefined input, or when an op refuses the node.
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

    /// Constant: a known value (a stated constant), from whichever value attribute it has.
    /// - Parameter node: A `Constant` node.
    /// - Throws: `ConvertError` without a value, or for a value attribute Kiln does not support.
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

    /// Softmax and LogSoftmax: `softmax` and `log_softmax`; before opset 13 over the input seen
    /// as 2-D from `axis` on (flatten, then reshape back).
    /// - Parameter node: A `Softmax` or `LogSoftmax` node.
    /// - Throws: `ConvertError` for an undefined input, or when an op refuses the node.
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
}
