/// Recurrent ops: `lstm` and `gru` with ONNX semantics.
extension OpSet {
    static func recurrentTypes(_ ctx: OpSchema.Context, gates: Int, states: Int) throws -> [TensorType?] {
        let (x, w) = (try ctx.input(0), try ctx.input(1))
        guard x.rank == 3, w.rank == 3 else { throw OpError("X must be rank 3 and W rank 3, got \(x) and \(w)") }
        let hidden = try ctx.attributes.int("hidden_size", 0)
        guard hidden > 0 else { throw OpError("hidden_size must be positive") }
        if let rows = w.shape[1].size, rows != gates * hidden {
            throw OpError("W has \(rows) rows, expected \(gates) × hidden_size \(hidden)")
        }
        let direction = try ctx.attributes.string("direction", "forward")
        guard ["forward", "reverse", "bidirectional"].contains(direction) else { throw OpError("unknown direction '\(direction)'") }
        let directions = Dimension.size(direction == "bidirectional" ? 2 : 1)
        let batchFirst = try ctx.attributes.int("layout", 0) != 0
        let (seq, batch) = batchFirst ? (x.shape[1], x.shape[0]) : (x.shape[0], x.shape[1])
        let y = batchFirst ? [batch, seq, directions, .size(hidden)] : [seq, directions, batch, .size(hidden)]
        let state = batchFirst ? [batch, directions, .size(hidden)] : [directions, batch, .size(hidden)]
        return [TensorType(x.dtype, y)] + Array(repeating: TensorType(x.dtype, state), count: states)
    }

    static let recurrentAttributes: [String: AttributeKind] = [
        "hidden_size!": .int, "direction": .string, "activations": .strings, "activation_alpha": .floats,
        "activation_beta": .floats, "clip": .float, "layout": .int,
    ]

    static var recurrentOps: [OpSchema] {
        [
            op("lstm", ["x", "w", "r", "b?", "sequence_lens?", "initial_h?", "initial_c?", "p?"], outputs: 3 ... 3,
               recurrentAttributes.merging(["input_forget": .int]) { a, _ in a }) { ctx in
                try recurrentTypes(ctx, gates: 4, states: 2)
            },
            op("rnn", ["x", "w", "r", "b?", "sequence_lens?", "initial_h?"], outputs: 2 ... 2, recurrentAttributes) { ctx in
                try recurrentTypes(ctx, gates: 1, states: 1)
            },
            op("gru", ["x", "w", "r", "b?", "sequence_lens?", "initial_h?"], outputs: 2 ... 2,
               recurrentAttributes.merging(["linear_before_reset": .int]) { a, _ in a }) { ctx in
                try recurrentTypes(ctx, gates: 3, states: 1)
            },
        ]
    }
}
