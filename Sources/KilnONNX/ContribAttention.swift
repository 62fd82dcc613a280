import KilnFormat

/// onnxruntime's attention operators (com.microsoft) as its optimizer and model builder write them
/// into decoder exports: RotaryEmbedding as Kiln's `rotary_embedding`, GroupQueryAttention and
/// MultiHeadAttention as `attention` over the grown cache with the mask their inputs give.
extension NodeConverter {
    /// RotaryEmbedding (com.microsoft): inputs `input, position_ids, cos_cache, sin_cache`;
    /// `rotary_embedding` takes `x, cos_cache, sin_cache, position_ids`. Position ids are either
    /// `[batch, sequence]` or one start position (shape `[1]`) that every sequence counts up from,
    /// which becomes `start + 0 ..< sequence` broadcast over the batch. A 3-D input without
    /// `num_heads` rotates whole heads: their size is twice the caches' last dim.
    /// - Parameter node: A `RotaryEmbedding` node of the com.microsoft domain.
    /// - Throws: `ConvertError` for packed batching, a scale other than 1, position ids of
    ///   another shape, or a head size the input's features do not split into.
    func contribRotary(_ node: ONNXNode) throws {
        let what = contribName(node)
        let (x, positions, cos, sin) = (input(node, 0), input(node, 1), input(node, 2), input(node, 3))
        guard let t = try type(x), let p = try type(positions), let ct = try type(cos), try type(sin) != nil else {
            throw c.fail("\(what) reads an undefined value")
        }
        guard t.rank == 3 || t.rank == 4 else { throw c.fail("\(what): the input must be 3-D or 4-D, got rank \(t.rank)") }
        guard int(node, "is_packed_batching", 0) == 0 else { throw c.fail("\(what): packed batching is not supported") }
        guard float(node, "scale", 1) == 1 else { throw c.fail("\(what): a scale other than 1 is not supported") }
        guard p.dtype == .int64 || p.dtype == .int32 else { throw c.fail("\(what): position_ids must be integers, got \(p.dtype.rawValue)") }
        var heads = int(node, "num_heads", 0)
        let dim = int(node, "rotary_embedding_dim", 0)
        if t.rank == 3 && heads == 0 {
            guard let half = ct.shape.last?.size, half > 0, let hidden = t.shape[2].size, hidden % (2 * half) == 0 else {
                throw c.fail("\(what): without num_heads the head size is twice the caches' last dim, which must divide the input's \(t.shape[2].displayText) features")
            }
            heads = hidden / (2 * half)
        }
        var attributes: [String: AttributeValue] = ["interleaved": .int(int(node, "interleaved", 0))]
        if dim > 0 { attributes["rotary_embedding_dim"] = .int(dim) }
        if t.rank == 3 { attributes["num_heads"] = .int(heads) }
        var ids = positions
        if p.dtype == .int32 {
            ids = c.freshName("\(positions)_int64")
            try emit(node, "cast", [positions], ["to": .dtype(.int64)], outputs: [ids])
        }
        switch p.shape {
        case let s where s.count == 2:
            break
        case let s where s.count == 1 && s[0] == .size(1):
            ids = try countedUp(from: ids, like: x, sequenceAxis: t.rank == 4 ? 2 : 1, node)
        case let s where s.count == 1 && s[0].size == nil:
            // A vector of run-time length: one start position, checked when the function runs.
            let (length, isOne, checked) = (c.freshName("\(positions)_length"), c.freshName("\(positions)_is_one"), c.freshName("\(positions)_start"))
            try emit(node, "shape", [ids], [:], outputs: [length])
            try emit(node, "equal", [length, int64Constant([1], [1], node, "one")], [:], outputs: [isOne])
            try emit(node, "assume", [ids, isOne], ["message": .string("\(what): position_ids of rank 1 must hold one start position")], outputs: [checked])
            ids = try countedUp(from: checked, like: x, sequenceAxis: t.rank == 4 ? 2 : 1, node)
        default:
            throw c.fail("\(what): position_ids must be [batch, sequence] or one start position [1], got \(TensorType(p.dtype, p.shape))")
        }
        try emit(node, "rotary_embedding", [x, cos, sin, ids], attributes, outputs: [node.outputs[0]])
    }

    /// `[batch, sequence]` positions `start + s` for `x`'s batch and sequence (its dims 0 and
    /// `sequenceAxis`), `start` an int64 `[1]`.
    private func countedUp(from start: String, like x: String, sequenceAxis: Int, _ node: ONNXNode) throws -> String {
        func constant(_ values: [Int64], _ shape: [Int], _ hint: String) -> String { int64Constant(values, shape, node, hint) }
        let (shape, dims, length, steps, counted, row, ids) = (c.freshName("\(x)_shape"), c.freshName("\(x)_batch_sequence"), c.freshName("\(x)_sequence"),
                                                               c.freshName("\(x)_steps"), c.freshName("\(x)_positions"), c.freshName("\(x)_position_row"),
                                                               c.freshName("\(x)_position_ids"))
        try emit(node, "shape", [x], [:], outputs: [shape])
        try emit(node, "gather", [shape, constant([0, Int64(sequenceAxis)], [2], "batch_sequence_axes")], ["axis": .int(0)], outputs: [dims])
        try emit(node, "gather", [shape, constant([Int64(sequenceAxis)], [], "sequence_axis")], ["axis": .int(0)], outputs: [length])
        try emit(node, "range", [constant([0], [], "zero"), length, constant([1], [], "one")], [:], outputs: [steps])
        try emit(node, "add", [steps, start], [:], outputs: [counted])
        try emit(node, "unsqueeze", [counted], ["axes": .ints([0])], outputs: [row])
        try emit(node, "expand", [row, dims], [:], outputs: [ids])
        return ids
    }
}

extension NodeConverter {
    /// An int64 constant of `shape`, as a value name.
    func int64Constant(_ values: [Int64], _ shape: [Int], _ node: ONNXNode, _ hint: String) -> String {
        let name = c.freshName("\(node.name)_\(hint)")
        c.values[name] = .constant(NDArray(shape: shape, scalars: values))
        c.usedNames.insert(name)
        return name
    }

    /// GroupQueryAttention (com.microsoft): `attention` over `concat(past, new)` keys and values
    /// (its present outputs), grouped heads read as `kv_num_heads` groups, with a boolean mask
    /// from the lengths onnxruntime takes: `valid = seqlens_k + 1` keys per batch, and query `i`
    /// at position `offset + i`, where `offset` is 0 for a first prompt (the sequence is
    /// `total_sequence_length` long) and `valid − sequence` otherwise; a key `j` takes part when
    /// `j ≤ offset + i`, `j < valid` and, with `local_window_size` `w ≥ 0`, `offset + i − j < w`.
    /// With `do_rotary`, queries and keys are rotated at those positions first (the caches' rows).
    /// Packed QKV (no key and value inputs) is split into its parts.
    /// - Parameter node: A `GroupQueryAttention` node of the com.microsoft domain.
    /// - Throws: `ConvertError` for head counts that do not group, position ids, an attention
    ///   bias, head sinks, smooth softmax or a QK output (not supported), or missing lengths.
    func groupQueryAttention(_ node: ONNXNode) throws {
        let what = contribName(node)
        let (heads, kvHeads) = (int(node, "num_heads", 0), int(node, "kv_num_heads", 0))
        guard heads > 0, kvHeads > 0, heads % kvHeads == 0 else {
            throw c.fail("\(what): num_heads \(heads) must be a positive multiple of kv_num_heads \(kvHeads)")
        }
        for (i, name) in [(9, "position_ids"), (10, "attention_bias"), (11, "head_sink")] where !input(node, i).isEmpty {
            throw c.fail("\(what): the \(name) input is not supported")
        }
        guard int(node, "smooth_softmax", 0) == 0, int(node, "qk_output", 0) == 0 else { throw c.fail("\(what): smooth_softmax and qk_output are not supported") }
        var (q, k, v) = (input(node, 0), input(node, 1), input(node, 2))
        let (pastKey, pastValue, seqlens, total) = (input(node, 3), input(node, 4), input(node, 5), input(node, 6))
        guard let qt = try type(q), qt.rank == 3, [DataType.float32, .float16].contains(qt.dtype) else {
            throw c.fail("\(what): query must be a float [batch, sequence, hidden] tensor")
        }
        guard !seqlens.isEmpty, !total.isEmpty, try type(seqlens) != nil, try type(total) != nil else {
            throw c.fail("\(what) needs seqlens_k and total_sequence_length")
        }
        guard pastKey.isEmpty == pastValue.isEmpty else { throw c.fail("\(what): past_key and past_value come together") }
        if k.isEmpty {
            guard v.isEmpty, let width = qt.shape[2].size, width % (heads + 2 * kvHeads) == 0 else {
                throw c.fail("\(what): packed QKV needs a hidden size that splits into \(heads) + 2 × \(kvHeads) heads")
            }
            let size = width / (heads + 2 * kvHeads)
            let bounds = [0, heads * size, (heads + kvHeads) * size, width]
            let parts = ["query", "key", "value"].map { c.freshName("\(q)_\($0)") }
            for (n, part) in parts.enumerated() {
                try emit(node, "slice", [q], ["starts": .ints([bounds[n]]), "ends": .ints([bounds[n + 1]]), "axes": .ints([2])], outputs: [part])
            }
            (q, k, v) = (parts[0], parts[1], parts[2])
        }
        let (positions, allowed) = try groupedQueryMask(node, q: q, pastKey: pastKey, seqlens: seqlens, total: total)
        if int(node, "do_rotary", 0) != 0 {
            let (cos, sin) = (input(node, 7), input(node, 8))
            guard !cos.isEmpty, !sin.isEmpty, let ct = try type(cos), try type(sin) != nil else { throw c.fail("\(what): do_rotary needs cos_cache and sin_cache") }
            var attributes: [String: AttributeValue] = ["interleaved": .int(int(node, "rotary_interleaved", 0))]
            let headSize = qt.shape[2].size.map { $0 / (input(node, 1).isEmpty ? heads + 2 * kvHeads : heads) }
            if let half = ct.shape.last?.size, let headSize, 2 * half < headSize {
                attributes["rotary_embedding_dim"] = .int(2 * half)
            }
            let (rq, rk) = (c.freshName("\(q)_rotated"), c.freshName("\(k)_rotated"))
            try emit(node, "rotary_embedding", [q, cos, sin, positions], attributes.merging(["num_heads": .int(heads)]) { a, _ in a }, outputs: [rq])
            try emit(node, "rotary_embedding", [k, cos, sin, positions], attributes.merging(["num_heads": .int(kvHeads)]) { a, _ in a }, outputs: [rk])
            (q, k) = (rq, rk)
        }
        var attributes: [String: AttributeValue] = ["q_num_heads": .int(heads), "kv_num_heads": .int(kvHeads)]
        let scale = float(node, "scale", 0), softcap = float(node, "softcap", 0)
        if scale != 0 { attributes["scale"] = .float(Double(scale)) }
        if softcap != 0 { attributes["softcap"] = .float(Double(softcap)) }
        // onnxruntime computes another attention when the presents are not asked for (its results
        // then differ from attention over the grown cache): such a node is refused.
        let outputs = Array(node.outputs.prefix(3))
        guard outputs.count == 3, !outputs.contains("") else { throw c.fail("\(what): an output, present_key or present_value is unnamed; Kiln converts GroupQueryAttention with all three") }
        try emit(node, "attention", [q, k, v, allowed, pastKey, pastValue], attributes, outputs: outputs)
    }

    /// GroupQueryAttention's query positions `[batch, sequence]` and mask `[batch, 1, sequence,
    /// past + sequence]` (see ``groupQueryAttention(_:)``).
    private func groupedQueryMask(_ node: ONNXNode, q: String, pastKey: String, seqlens: String, total: String) throws -> (positions: String, mask: String) {
        func name(_ hint: String) -> String { c.freshName("\(node.name)_\(hint)") }
        func constant(_ value: Int64, _ hint: String) -> String { int64Constant([value], [], node, hint) }
        let (qShape, length) = (name("query_shape"), name("sequence"))
        try emit(node, "shape", [q], [:], outputs: [qShape])
        try emit(node, "gather", [qShape, constant(1, "sequence_axis")], ["axis": .int(0)], outputs: [length])
        var keys = length
        if !pastKey.isEmpty {
            let (pastShape, past) = (name("past_shape"), name("past"))
            keys = name("keys")
            try emit(node, "shape", [pastKey], [:], outputs: [pastShape])
            try emit(node, "gather", [pastShape, constant(2, "past_axis")], ["axis": .int(0)], outputs: [past])
            try emit(node, "add", [past, length], [:], outputs: [keys])
        }
        let (total64, totalScalar, first, seqlens64, valid, later, offset) = (name("total"), name("total_scalar"), name("first_prompt"), name("seqlens"),
                                                                              name("valid"), name("later_offset"), name("offset"))
        try emit(node, "cast", [total], ["to": .dtype(.int64)], outputs: [total64])
        try emit(node, "reshape", [total64], ["shape": .ints([])], outputs: [totalScalar])
        try emit(node, "equal", [length, totalScalar], [:], outputs: [first])
        try emit(node, "cast", [seqlens], ["to": .dtype(.int64)], outputs: [seqlens64])
        try emit(node, "add", [seqlens64, constant(1, "one")], [:], outputs: [valid])
        try emit(node, "sub", [valid, length], [:], outputs: [later])
        try emit(node, "where", [first, constant(0, "zero"), later], [:], outputs: [offset])
        let (rows, cols, offset3, rows3, cols3, at, positions) = (name("rows"), name("columns"), name("offset3"), name("rows3"), name("columns3"),
                                                                  name("at"), name("positions"))
        try emit(node, "range", [constant(0, "start"), length, constant(1, "step")], [:], outputs: [rows])
        try emit(node, "range", [constant(0, "key_start"), keys, constant(1, "key_step")], [:], outputs: [cols])
        try emit(node, "unsqueeze", [offset], ["axes": .ints([1, 2])], outputs: [offset3])
        try emit(node, "unsqueeze", [rows], ["axes": .ints([0, 2])], outputs: [rows3])
        try emit(node, "unsqueeze", [cols], ["axes": .ints([0, 1])], outputs: [cols3])
        try emit(node, "add", [rows3, offset3], [:], outputs: [at])
        try emit(node, "squeeze", [at], ["axes": .ints([2])], outputs: [positions])
        let (causal, valid3, inside, allowed) = (name("causal"), name("valid3"), name("inside"), name("allowed"))
        try emit(node, "less_or_equal", [cols3, at], [:], outputs: [causal])
        try emit(node, "unsqueeze", [valid], ["axes": .ints([1, 2])], outputs: [valid3])
        try emit(node, "less", [cols3, valid3], [:], outputs: [inside])
        try emit(node, "and", [causal, inside], [:], outputs: [allowed])
        var mask = allowed
        let window = int(node, "local_window_size", -1)
        if window >= 0 {
            let (distance, near, windowed) = (name("distance"), name("in_window"), name("windowed"))
            try emit(node, "sub", [at, cols3], [:], outputs: [distance])
            try emit(node, "less", [distance, constant(Int64(window), "window")], [:], outputs: [near])
            try emit(node, "and", [allowed, near], [:], outputs: [windowed])
            mask = windowed
        }
        let heads = name("mask")
        try emit(node, "unsqueeze", [mask], ["axes": .ints([1])], outputs: [heads])
        return (positions, heads)
    }
}

extension NodeConverter {
    /// MultiHeadAttention (com.microsoft): `attention` over 3-D query, key and value (plus the
    /// past cache, BNSH) with one additive mask: `mask_filter_value` (default −10000) where a 2-D
    /// key_padding_mask `[batch, past + keys]` is 0, where `unidirectional` hides key `j > past + i`
    /// from query `i`, plus the attention_bias. A bias input is added to query, key and value
    /// (its three parts). Packed or 4-D/5-D key and value forms, other key_padding_mask shapes,
    /// past_sequence_length, cache_indirection and the QK output are refused.
    /// - Parameter node: A `MultiHeadAttention` node of the com.microsoft domain.
    /// - Throws: `ConvertError` for what is refused above, or when an op refuses the node.
    func multiHeadAttention(_ node: ONNXNode) throws {
        let what = contribName(node)
        let heads = int(node, "num_heads", 0)
        guard heads > 0 else { throw c.fail("\(what) needs num_heads") }
        var (q, k, v) = (input(node, 0), input(node, 1), input(node, 2))
        guard let qt = try type(q), let kt = try type(k), let vt = try type(v), qt.rank == 3, kt.rank == 3, vt.rank == 3,
              [DataType.float32, .float16].contains(qt.dtype) else {
            throw c.fail("\(what): query, key and value must be float [batch, sequence, hidden] tensors (packed and BNSH forms are not supported)")
        }
        for (i, name) in [(8, "past_sequence_length"), (9, "cache_indirection")] where !input(node, i).isEmpty {
            throw c.fail("\(what): the \(name) input is not supported")
        }
        guard node.outputs.count < 4 || node.outputs[3].isEmpty else { throw c.fail("\(what): the qk output is not supported") }
        let (pastKey, pastValue) = (input(node, 6), input(node, 7))
        guard pastKey.isEmpty == pastValue.isEmpty else { throw c.fail("\(what): past_key and past_value come together") }
        func name(_ hint: String) -> String { c.freshName("\(node.name)_\(hint)") }
        if !input(node, 3).isEmpty {
            guard let width = qt.shape[2].size, let vWidth = vt.shape[2].size, kt.shape[2] == qt.shape[2] else {
                throw c.fail("\(what): a bias needs fixed hidden sizes, the key's equal to the query's")
            }
            let bounds = [0, width, 2 * width, 2 * width + vWidth]
            var biased: [String] = []
            for (n, x) in [q, k, v].enumerated() {
                let (part, sum) = (name("bias_part"), name("biased"))
                try emit(node, "slice", [input(node, 3)], ["starts": .ints([bounds[n]]), "ends": .ints([bounds[n + 1]]), "axes": .ints([0])], outputs: [part])
                try emit(node, "add", [x, part], [:], outputs: [sum])
                biased.append(sum)
            }
            (q, k, v) = (biased[0], biased[1], biased[2])
        }
        let filter = float(node, "mask_filter_value", -10000)
        var masks: [String] = []
        let padding = input(node, 4)
        if !padding.isEmpty {
            guard let pt = try type(padding), pt.rank == 2 else { throw c.fail("\(what): key_padding_mask must be [batch, total keys]") }
            let (hidden, scaled, spread) = (name("padded"), name("padding_bias"), name("padding_mask"))
            let zero = int64Constant([0], [], node, "zero")
            let cast = name("padding_int64")
            try emit(node, "cast", [padding], ["to": .dtype(.int64)], outputs: [cast])
            try emit(node, "equal", [cast, zero], [:], outputs: [hidden])
            try emit(node, "where", [hidden, try scalar(filter, like: qt.dtype, node), try scalar(0, like: qt.dtype, node)], [:], outputs: [scaled])
            try emit(node, "unsqueeze", [scaled], ["axes": .ints([1, 2])], outputs: [spread])
            masks.append(spread)
        }
        if int(node, "unidirectional", 0) != 0 {
            masks.append(try causalBias(node, q: q, k: k, pastKey: pastKey, filter: filter, dtype: qt.dtype))
        }
        if !input(node, 5).isEmpty { masks.append(input(node, 5)) }
        var mask = masks.first ?? ""
        for m in masks.dropFirst() {
            let sum = name("mask_sum")
            try emit(node, "add", [mask, m], [:], outputs: [sum])
            mask = sum
        }
        var attributes: [String: AttributeValue] = ["q_num_heads": .int(heads), "kv_num_heads": .int(heads)]
        let scale = float(node, "scale", 0)
        if scale != 0 { attributes["scale"] = .float(Double(scale)) }
        var outputs = Array(node.outputs.prefix(3))
        while outputs.last == "" { outputs.removeLast() }
        guard !outputs.contains("") else { throw c.fail("\(what): present_key is unnamed while present_value is asked for") }
        try emit(node, "attention", [q, k, v, mask, pastKey, pastValue], attributes, outputs: outputs)
    }

    /// `[1, 1, sequence, past + keys]`: 0 where key `j ≤ past + i`, else `filter`.
    private func causalBias(_ node: ONNXNode, q: String, k: String, pastKey: String, filter: Float, dtype: DataType) throws -> String {
        func name(_ hint: String) -> String { c.freshName("\(node.name)_\(hint)") }
        func constant(_ value: Int64, _ hint: String) -> String { int64Constant([value], [], node, hint) }
        let (qShape, kShape, length, keys) = (name("query_shape"), name("key_shape"), name("sequence"), name("keys"))
        try emit(node, "shape", [q], [:], outputs: [qShape])
        try emit(node, "gather", [qShape, constant(1, "sequence_axis")], ["axis": .int(0)], outputs: [length])
        try emit(node, "shape", [k], [:], outputs: [kShape])
        try emit(node, "gather", [kShape, constant(1, "key_axis")], ["axis": .int(0)], outputs: [keys])
        var past = constant(0, "no_past"), total = keys
        if !pastKey.isEmpty {
            let pastShape = name("past_shape")
            (past, total) = (name("past"), name("total"))
            try emit(node, "shape", [pastKey], [:], outputs: [pastShape])
            try emit(node, "gather", [pastShape, constant(2, "past_axis")], ["axis": .int(0)], outputs: [past])
            try emit(node, "add", [past, keys], [:], outputs: [total])
        }
        let (rows, cols, rows2, at, seen, bias, spread) = (name("rows"), name("columns"), name("rows2"), name("at"), name("seen"), name("causal_bias"), name("causal_mask"))
        try emit(node, "range", [constant(0, "start"), length, constant(1, "step")], [:], outputs: [rows])
        try emit(node, "range", [constant(0, "key_start"), total, constant(1, "key_step")], [:], outputs: [cols])
        try emit(node, "unsqueeze", [rows], ["axes": .ints([1])], outputs: [rows2])
        try emit(node, "add", [rows2, past], [:], outputs: [at])
        try emit(node, "less_or_equal", [cols, at], [:], outputs: [seen])
        try emit(node, "where", [seen, try scalar(0, like: dtype, node), try scalar(filter, like: dtype, node)], [:], outputs: [bias])
        try emit(node, "unsqueeze", [bias], ["axes": .ints([0, 1])], outputs: [spread])
        return spread
    }
}
