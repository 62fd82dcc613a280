import KilnFormat

/// Reductions, softmax, hardmax, top-k, cumulative sums and products, and losses.
extension NodeConverter {
    /// Kiln's name of each ONNX reduction: the registry's reductions, each ONNX name the Kiln name
    /// in camel case (`reduce_log_sum_exp` is ReduceLogSumExp).
    static let reductions: [String: String] = Dictionary(uniqueKeysWithValues: OpSet.reduceNames.map { name in
        (name.split(separator: "_").map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined(), name)
    })

    /// The reduction family's handlers.
    static let reductionHandlers: [String: Handler] = reductions.mapValues { kiln -> Handler in
        { converter in { try converter.reduction($0, as: kiln) } }
    }.merging([
        "Softmax": softmax, "LogSoftmax": softmax, "Hardmax": hardmax, "TopK": topK, "CumSum": cumulative, "CumProd": cumulative,
        "NegativeLogLikelihoodLoss": nllLoss, "SoftmaxCrossEntropyLoss": softmaxCrossEntropyLoss,
    ]) { _, _ in preconditionFailure("a reduction has a handler of its own") }

    /// A reduction of `reductions`: known axes (input 1) become an attribute.
    /// - Parameters:
    ///   - node: A node of a reduction.
    ///   - kiln: The Kiln reduction it becomes.
    /// - Throws: `ConvertError` when the op refuses the node.
    func reduction(_ node: ONNXNode, as kiln: String) throws {
        var attrs = try attributes(node, only: ["keepdims", "noop_with_empty_axes", "axes"])
        var inputs = [input(node, 0)]
        if !input(node, 1).isEmpty {
            if let axes = try staticInts(node, 1) { attrs["axes"] = .ints(axes); inputs.append("") } else { inputs.append(input(node, 1)) }
        }
        try emit(node, kiln, inputs, attrs)
    }

    /// Hardmax: before opset 13 the input is seen as 2-D from `axis` on, which Kiln converts only
    /// when that is the last axis.
    /// - Parameter node: A `Hardmax` node.
    /// - Throws: `ConvertError` for an undefined input or the 2-D form over another axis.
    func hardmax(_ node: ONNXNode) throws {
        guard let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let axis = int(node, "axis", c.opset >= 13 ? -1 : 1)
        // Before opset 13 the input is seen as 2-D from `axis` on: the same as the last axis only when `axis` is the last.
        let flat = try OpSet.flattenAxis(axis, rank: t.rank)
        guard c.opset >= 13 || flat == t.rank - 1 else {
            throw c.fail("node '\(node.name)' (Hardmax): opset \(c.opset)'s 2-D form over axis \(axis) of a rank-\(t.rank) input is not supported")
        }
        try emit(node, "hardmax", [input(node, 0)], ["axis": .int(c.opset >= 13 ? axis : -1)])
    }

    /// TopK: a known `k` becomes an attribute.
    /// - Parameter node: A `TopK` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func topK(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["axis", "largest", "sorted", "k"])
        var inputs = [input(node, 0)]
        if let k = try staticInts(node, 1), k.count == 1 { attrs["k"] = .int(k[0]) } else if !input(node, 1).isEmpty { inputs.append(input(node, 1)) }
        try emit(node, "top_k", inputs, attrs)
    }

    /// CumSum and CumProd: `cumsum` and `cumprod`, a known axis as an attribute.
    /// - Parameter node: A `CumSum` or `CumProd` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func cumulative(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["exclusive", "reverse"])
        var inputs = [input(node, 0)]
        if let a = try staticInts(node, 1), a.count == 1 { attrs["axis"] = .int(a[0]) } else { inputs.append(input(node, 1)) }
        try emit(node, node.opType == "CumSum" ? "cumsum" : "cumprod", inputs, attrs)
    }

    /// NegativeLogLikelihoodLoss: `nll_loss`.
    /// - Parameter node: A `NegativeLogLikelihoodLoss` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func nllLoss(_ node: ONNXNode) throws {
        try emit(node, "nll_loss", Array(node.inputs.prefix(3)), try attributes(node, only: ["reduction", "ignore_index"]))
    }

    /// SoftmaxCrossEntropyLoss: `log_softmax` over the classes (the optional second output), then
    /// the NLL loss.
    /// - Parameter node: A `SoftmaxCrossEntropyLoss` node.
    /// - Throws: `ConvertError` when an op refuses the node.
    func softmaxCrossEntropyLoss(_ node: ONNXNode) throws {
        let logProb = node.outputs.count > 1 && !node.outputs[1].isEmpty ? node.outputs[1] : c.freshName("\(input(node, 0))_log_prob")
        try emit(node, "log_softmax", [input(node, 0)], ["axis": .int(1)], outputs: [logProb])
        try emit(node, "nll_loss", [logProb] + Array(node.inputs.dropFirst().prefix(2)),
                 try attributes(node, only: ["reduction", "ignore_index"]), outputs: [node.outputs[0]])
    }
}
