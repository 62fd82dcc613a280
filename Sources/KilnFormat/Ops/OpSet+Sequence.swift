/// Sequence and state ops (linear attention, stateful causal convolution, cache updates), and
/// ops whose output size follows from input values (unique, nonzero).
extension OpSet {
    /// The state update rules of `linear_attention` (`update_rule`).
    public static let updateRules: Set<String> = ["linear", "gated", "delta", "gated_delta"]

    static var sequenceOps: [OpSchema] {
        [
            // query [B, T, Hq·dk], key [B, T, Hkv·dk], value [B, T, Hkv·dv], past_state [B, Hkv, dk, dv]
            // → output [B, T, Hq·dv], present_state [B, Hkv, dk, dv].
            op("linear_attention", ["query", "key", "value", "past_state?", "decay?", "beta?"], outputs: 1 ... 2,
               ["q_num_heads!": .int, "kv_num_heads!": .int, "scale": .float, "update_rule": .string, "chunk_size": .int]) { ctx in
                let (q, k, v) = (try ctx.input(0), try ctx.input(1), try ctx.input(2))
                try requireFloat(q, "linear_attention")
                guard q.rank == 3, k.rank == 3, v.rank == 3 else { throw OpError("linear_attention needs 3-D query, key and value") }
                let hq = try ctx.attributes.int("q_num_heads", 0), hkv = try ctx.attributes.int("kv_num_heads", 0)
                guard hq >= 1, hkv >= 1, hq % hkv == 0 else { throw OpError("q_num_heads must be a positive multiple of kv_num_heads") }
                let rule = try ctx.attributes.string("update_rule", "gated_delta")
                guard updateRules.contains(rule) else { throw OpError("unknown update_rule '\(rule)'") }
                let dk = k.shape[2].size.map { Dimension.size($0 / hkv) } ?? .unknown
                let dv = v.shape[2].size.map { $0 / hkv }
                let out = TensorType(q.dtype, [q.shape[0], q.shape[1], dv.map { .size($0 * hq) } ?? .unknown])
                return [out, TensorType(q.dtype, [q.shape[0], .size(hkv), dk, dv.map { .size($0) } ?? .unknown])].prefix(ctx.outputCount).map { $0 }
            },
            // input [B, C, L], weight [C, 1, K], bias [C], past_state [B, C, K−1].
            op("causal_conv_with_state", ["x", "weight", "bias?", "past_state?"], outputs: 1 ... 2, ["activation": .string]) { ctx in
                let (x, w) = (try ctx.input(0), try ctx.input(1))
                try requireFloat(x, "causal_conv_with_state")
                guard x.rank == 3, w.rank == 3 else { throw OpError("causal_conv_with_state needs input [B, C, L] and weight [C, 1, K]") }
                guard ["none", "silu", "swish"].contains(try ctx.attributes.string("activation", "none")) else { throw OpError("unknown activation") }
                let state = TensorType(x.dtype, [x.shape[0], x.shape[1], w.shape[2].size.map { .size($0 - 1) } ?? .unknown])
                return [x, state].prefix(ctx.outputCount).map { $0 }
            },
            op("tensor_scatter", ["past", "update", "write_indices?"], ["axis": .int, "mode": .string]) { ctx in
                let (p, u) = (try ctx.input(0), try ctx.input(1))
                guard p.rank == u.rank, p.rank >= 2, p.dtype == u.dtype else { throw OpError("tensor_scatter needs past and update of one rank ≥ 2 and dtype") }
                let axis = try OpSet.axis(ctx, default: -2, rank: p.rank)
                guard axis != 0 else { throw OpError("tensor_scatter's axis cannot be the batch axis") }
                guard ["linear", "circular"].contains(try ctx.attributes.string("mode", "linear")) else { throw OpError("mode must be linear or circular") }
                return [p]
            },
            op("reverse_sequence", ["x", "sequence_lens"], ["batch_axis": .int, "time_axis": .int]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 2 else { throw OpError("reverse_sequence needs rank ≥ 2") }
                return [x]
            },
            op("unique", ["x"], outputs: 1 ... 4, ["axis": .int, "sorted": .int]) { ctx in
                let x = try ctx.input(0)
                var y = TensorType(x.dtype, [.unknown])
                if let a = ctx.attributes["axis"], case .int(let ax) = a {
                    let axis = try normalize(axis: ax, rank: x.rank)
                    var dims = x.shape
                    dims[axis] = .unknown
                    y = TensorType(x.dtype, dims)
                }
                let index = TensorType(.int64, [.unknown])
                return [y, index, index, index].prefix(ctx.outputCount).map { $0 }
            },
            // x unchanged when every element of condition is true, else an error with the message: a
            // convert-time assumption checked at run time.
            op("assume", ["x", "condition"], ["message": .string]) { ctx in
                guard try ctx.input(1).dtype == .bool else { throw OpError("assume needs a bool condition") }
                return [try ctx.input(0)]
            },
            op("non_zero", ["x"]) { ctx in
                [TensorType(.int64, [.size(try ctx.input(0).rank), .unknown])]
            },
            op("bit_cast", ["x"], ["to!": .dtype]) { ctx in
                let x = try ctx.input(0)
                guard case .dtype(let to)? = ctx.attributes["to"] else { throw OpError("bit_cast needs 'to'") }
                guard to.bitWidth == x.dtype.bitWidth, !to.isSubByte else {
                    throw OpError("bit_cast from \(x.dtype.rawValue) to \(to.rawValue) changes the width")
                }
                return [TensorType(to, x.shape)]
            },
            op("det", ["x"]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "det")
                guard x.rank >= 2 else { throw OpError("det needs [..., M, M]") }
                try requireEqual(x.shape[x.rank - 2], x.shape[x.rank - 1], "det's matrix dims")
                return [TensorType(x.dtype, Array(x.shape.dropLast(2)))]
            },
            // Integer n-gram counts (ONNX TfIdfVectorizer over int32/int64 tokens).
            op("tfidf_vectorizer", ["x"], ["max_gram_length!": .int, "max_skip_count!": .int, "min_gram_length!": .int, "mode!": .string,
                                           "ngram_counts!": .ints, "ngram_indexes!": .ints, "pool_int64s!": .ints, "weights": .floats]) { ctx in
                let x = try ctx.input(0)
                try requireInteger(x, "tfidf_vectorizer")
                guard x.rank == 1 || x.rank == 2 else { throw OpError("tfidf_vectorizer needs a 1-D or 2-D input") }
                let width = Dimension.size((try ctx.attributes.ints("ngram_indexes") ?? []).max().map { $0 + 1 } ?? 0)
                return [TensorType(.float32, x.rank == 1 ? [width] : [x.shape[0], width])]
            },
        ]
    }
}
