import KilnFormat

/// LSTM and GRU conversion.
enum Recurrent {
    static func convert(_ node: ONNXNode, _ converter: NodeConverter) throws {
        throw converter.c.fail("node '\(node.name)': \(node.opType) is not supported yet")
    }
}
