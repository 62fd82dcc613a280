import KilnFormat

/// RNN, LSTM and GRU: the ONNX operators map one to one onto Kiln's `rnn`, `lstm` and `gru`.
extension NodeConverter {
    /// The recurrent family's handlers.
    static let recurrentHandlers: [String: Handler] = ["RNN": recurrent, "LSTM": recurrent, "GRU": recurrent]

    /// The attributes the recurrent ops carry over (onnxruntime's DynamicQuantizeLSTM has the LSTM's, less `layout`).
    static let recurrentAttributeNames: Set<String> = ["hidden_size", "direction", "activations", "activation_alpha", "activation_beta",
                                                       "clip", "input_forget", "linear_before_reset", "layout"]

    /// A recurrent layer with every output named, those the node leaves out as "".
    /// - Parameter node: An `RNN`, `LSTM` or `GRU` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func recurrent(_ node: ONNXNode) throws {
        let isLSTM = node.opType == "LSTM"
        let attrs = try attributes(node, only: NodeConverter.recurrentAttributeNames)
        var outputs = node.outputs
        while outputs.count < (isLSTM ? 3 : 2) { outputs.append("") }
        try emit(node, node.opType.lowercased(), node.inputs, attrs, outputs: outputs)
    }
}
