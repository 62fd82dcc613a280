/// Recurrent ops: `lstm` and `gru` with ONNX semantics, and `dynamic_quantize_lstm` (onnxruntime's
/// LSTM over 8-bit weights, its inputs quantized per matrix product).
extension OpSet {
    /// The outputs of a recurrent op. `transposed`: W is `[dirs, input, gates·hidden]` (the
    /// quantized LSTM's layout) rather than `[dirs, gates·hidden, input]`.
    static func recurrentTypes(_ ctx: OpSchema.Context, gates: Int, states: Int, transposed: Bool = false) throws -> [TensorType?] {
        let (x, w) = (try ctx.input(0), try ctx.input(1))
        guard x.rank == 3, w.rank == 3 else { throw OpError("X must be rank 3 and W rank 3, got \(x) and \(w)") }
        let hidden = try ctx.attributes.int("hidden_size", 0)
        guard hidden > 0 else { throw OpError("hidden_size must be positive") }
        if let rows = w.shape[transposed ? 2 : 1].size, rows != gates * hidden {
            throw OpError("W has \(rows) \(transposed ? "columns" : "rows"), expected \(gates) × hidden_size \(hidden)")
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
            op("dynamic_quantize_lstm", ["x", "w", "r", "b?", "sequence_lens?", "initial_h?", "initial_c?", "p?",
                                         "w_scale", "w_zero_point", "r_scale", "r_zero_point"], outputs: 3 ... 3,
               recurrentAttributes.merging(["input_forget": .int]) { a, _ in a }) { ctx in
                let (w, r) = (try ctx.input(1), try ctx.input(2))
                guard [.int8, .uint8].contains(w.dtype), r.dtype == w.dtype else { throw OpError("W and R must both be int8 or uint8, got \(w) and \(r)") }
                return try recurrentTypes(ctx, gates: 4, states: 2, transposed: true)
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
