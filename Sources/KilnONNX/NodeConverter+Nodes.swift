import KilnFormat

/// The conversion of one node: checks every node passes, then its operator's handler.
extension NodeConverter {
    // MARK: Nodes

    /// The handler of each ONNX operator (domain ai.onnx): the one-to-one routes, and over them
    /// the handlers of each family. Only `Mul` has both: its own handler checks for a scaled
    /// integer weight first, then takes the one-to-one route.
    static let handlers: [String: Handler] = oneToOneHandlers.merging(ownHandlers) { _, own in own }

    /// The handlers of every family, each operator in one family only.
    static let ownHandlers: [String: Handler] = {
        let families = [elementwiseHandlers, networkHandlers, reductionHandlers, tensorHandlers, shapeHandlers,
                        signalHandlers, quantizedHandlers, recurrentHandlers, controlFlowHandlers]
        var table: [String: Handler] = [:]
        for family in families {
            for (op, handler) in family {
                precondition(table.updateValue(handler, forKey: op) == nil, "ONNX \(op) has two handlers")
            }
        }
        return table
    }()

    /// Converts `node` into Kiln ops (or known values): a com.microsoft or ai.onnx.ml node by
    /// its domain's table, any other by `handlers`.
    /// - Parameter node: A node whose inputs are converted.
    /// - Throws: `ConvertError` when the node has no output, when no handler converts its
    ///   operator, or when its handler refuses it.
    func convert(_ node: ONNXNode) throws {
        defer { noteDimTest(node) }
        let op = node.opType
        // Every ONNX operator has an output; the handlers read the first one, except the recurrent
        // ones, which name the outputs a node leaves out (often Y, when only Y_h is used).
        let recurrent = NodeConverter.recurrentHandlers[op] != nil
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
        guard let handler = NodeConverter.handlers[op] else {
            throw c.fail("node '\(node.name)': unsupported operator \(op)")
        }
        try handler(self)(node)
    }
}
