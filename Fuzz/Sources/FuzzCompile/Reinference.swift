import KilnFormat

extension Function {
    /// The declared types made to follow the mutated inputs: each op's outputs take the types its
    /// schema infers from its inputs' types (an output the schema says nothing of keeps its
    /// type), and each function output the type of the value it returns. An op whose inference
    /// fails keeps its declared types, which validation then refuses.
    mutating func reinfer(weights: [String: TensorType]) {
        var scope = weights
        for a in inputs { scope[a.name] = a.type }
        for (i, op) in operations.enumerated() {
            if let schema = OpSet.schema(op.opType) {
                let types = op.inputs.map { $0.isEmpty ? nil : scope[$0] }
                let context = OpSchema.Context(inputs: types, attributes: op.attributes, outputCount: op.outputs.count)
                if let inferred = try? schema.infer(context) {
                    for (k, t) in zip(op.outputs.indices, inferred) {
                        if let t { operations[i].outputs[k].type = t }
                    }
                }
            }
            for v in operations[i].outputs { scope[v.name] = v.type }
        }
        for (k, a) in outputs.enumerated() {
            if let t = scope[a.value] { outputs[k].type = t }
        }
    }
}
