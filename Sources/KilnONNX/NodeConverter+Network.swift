import KilnFormat

/// Network layers: matrix products, convolutions, pooling and normalizations.
extension NodeConverter {
    /// The network family's handlers.
    static let networkHandlers: [String: Handler] = [
        "Gemm": gemm, "Conv": convolution, "ConvTranspose": convolution, "LpPool": lpPool, "MaxPool": pool, "AveragePool": pool,
        "BatchNormalization": batchNormalization, "InstanceNormalization": instanceNormalization,
        "LayerNormalization": layerNormalization, "GroupNormalization": groupNormalization,
        "RMSNormalization": rmsNormalization, "SimplifiedLayerNormalization": rmsNormalization, "LpNormalization": lpNormalization,
    ]

    /// Gemm: `linear` for the common form (no scaling, B transposed, a vector bias), else `gemm`.
    /// - Parameter node: A `Gemm` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func gemm(_ node: ONNXNode) throws {
        let attrs = try attributes(node, rename: ["transA": "trans_a", "transB": "trans_b"])
        let alpha = (try? attrs.float("alpha", 1)) ?? 1, beta = (try? attrs.float("beta", 1)) ?? 1
        let ta = (try? attrs.int("trans_a", 0)) ?? 0, tb = (try? attrs.int("trans_b", 0)) ?? 0
        let bias = input(node, 2)
        if alpha == 1, beta == 1, ta == 0, tb == 1, try type(bias).map({ $0.rank == 1 }) ?? true {
            try emit(node, "linear", [input(node, 0), input(node, 1), bias], [:])
        } else {
            try emit(node, "gemm", node.inputs, attrs)
        }
    }

    /// Conv and ConvTranspose: `conv` and `conv_transpose`.
    /// - Parameter node: A `Conv` or `ConvTranspose` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func convolution(_ node: ONNXNode) throws {
        let attrs = try attributes(node, only: ["strides", "pads", "dilations", "auto_pad", "group", "output_padding", "output_shape", "kernel_shape"])
        try emit(node, node.opType == "Conv" ? "conv" : "conv_transpose", node.inputs, attrs)
    }

    /// LpPool: `lp_pool`.
    /// - Parameter node: An `LpPool` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func lpPool(_ node: ONNXNode) throws {
        let attrs = try attributes(node, only: ["kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode", "p"])
        try emit(node, "lp_pool", [input(node, 0)], attrs)
    }

    /// MaxPool and AveragePool: `max_pool` (with its indices output when read) and `average_pool`.
    /// - Parameter node: A `MaxPool` or `AveragePool` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func pool(_ node: ONNXNode) throws {
        let op = node.opType
        var attrs = try attributes(node, only: ["kernel_shape", "strides", "pads", "dilations", "auto_pad", "ceil_mode", "count_include_pad"])
        if op == "MaxPool", node.outputs.count > 1, !node.outputs[1].isEmpty {
            // The indices output: flat positions in the input, row- or column-major (storage_order).
            attrs["storage_order"] = .int(int(node, "storage_order", 0))
            try emit(node, "max_pool", [input(node, 0)], attrs, outputs: Array(node.outputs.prefix(2)))
        } else {
            try emit(node, op == "MaxPool" ? "max_pool" : "average_pool", [input(node, 0)], attrs, outputs: [node.outputs[0]])
        }
    }

    /// BatchNormalization: `batch_norm`, or the batch's own statistics in training mode.
    /// - Parameter node: A `BatchNormalization` node.
    /// - Throws: `ConvertError` when a training statistic is read outside training mode, or the
    ///   op refuses the node.
    func batchNormalization(_ node: ONNXNode) throws {
        if int(node, "training_mode", 0) != 0 { return try batchNormTraining(node) }
        try emit(node, "batch_norm", Array(node.inputs.prefix(5)), try attributes(node, only: ["epsilon"]), outputs: [node.outputs[0]])
        try unusedOutputs(node, from: 1)
    }

    /// InstanceNormalization: `instance_norm`.
    /// - Parameter node: An `InstanceNormalization` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func instanceNormalization(_ node: ONNXNode) throws {
        try emit(node, "instance_norm", node.inputs, try attributes(node, only: ["epsilon"]))
    }

    /// LayerNormalization: `layer_norm`, and the mean and inverse deviation outputs when named.
    /// - Parameter node: A `LayerNormalization` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func layerNormalization(_ node: ONNXNode) throws {
        try emit(node, "layer_norm", node.inputs, try attributes(node, only: ["axis", "epsilon"]), outputs: [node.outputs[0]])
        try layerNormStatistics(node)
    }

    /// GroupNormalization: `group_norm` (stash_type ignored).
    /// - Parameter node: A `GroupNormalization` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func groupNormalization(_ node: ONNXNode) throws {
        try emit(node, "group_norm", Array(node.inputs.prefix(3)), try attributes(node, only: ["epsilon", "num_groups"]))
    }

    /// LpNormalization: `x / ‖x‖ₚ` along axis (p = 1 or 2), 0 where the norm is 0.
    /// - Parameter node: An `LpNormalization` node.
    /// - Throws: `ConvertError` for another p or an undefined input.
    func lpNormalization(_ node: ONNXNode) throws {
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
    }
}
