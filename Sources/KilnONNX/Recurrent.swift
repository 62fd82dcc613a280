import KilnFormat

/// RNN, LSTM and GRU: the ONNX operators map one to one onto Kiln's `rnn`, `lstm` and `gru`.
enum Recurrent {
    static func convert(_ node: ONNXNode, _ converter: NodeConverter) throws {
        let isLSTM = node.opType == "LSTM"
        let attrs = try converter.attributes(node, only: ["hidden_size", "direction", "activations", "activation_alpha",
                                                           "activation_beta", "clip", "layout", "input_forget", "linear_before_reset"])
        var outputs = node.outputs
        while outputs.count < (isLSTM ? 3 : 2) { outputs.append("") }
        try converter.emit(node, node.opType.lowercased(), node.inputs, attrs, outputs: outputs)
    }
}
