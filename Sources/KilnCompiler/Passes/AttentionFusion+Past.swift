import KilnFormat

/// ONNX `Attention` (opset 23) with a past cache, as the `attention` op imports it, split into
/// what the compiled kernel runs: `present_key = concat(past_key, k, axis 2)` (likewise for
/// values), then `attention(q, present_key, present_value, mask)` with its scale explicit. The
/// presents are the op's own outputs when it has them, so a decoder that returns them can keep
/// them as state in place. Split are float32 operands either 4-D `[B, H, S, D]` or 3-D
/// `[B, S, H·D]` with 4-D pasts (onnxruntime's GroupQueryAttention and MultiHeadAttention import
/// so; query heads a multiple of key heads): the 3-D ones are reshaped and transposed to heads
/// first, and the result back. A boolean mask becomes the additive one the kernel takes
/// (`where(mask, 0, −∞)`; a row with every key masked attends to nothing either way). No causal,
/// window or softcap options, no score output and no `nonpad_kv_seqlen`; any other form keeps
/// running the reference kernel.
extension AttentionFusion {
    func splitPast(_ f: inout Function, runtime: RuntimeVersion) {
        guard runtime >= RuntimeVersion(0, 8), f.operations.contains(where: { $0.opType == "attention" }) else { return }
        var types: [String: TensorType] = [:]
        for a in f.inputs { types[a.name] = a.type }
        for op in f.operations { for v in op.outputs { types[v.name] = v.type } }
        var rewritten: [Operation] = []
        for op in f.operations {
            guard let parts = split(op, types) else {
                rewritten.append(op)
                continue
            }
            rewritten += parts
        }
        f.operations = rewritten
    }

    private func split(_ op: Operation, _ types: [String: TensorType]) -> [Operation]? {
        let a = op.attributes
        func int(_ name: String, _ fallback: Int) -> Int? { try? a.int(name, fallback) }
        let past = op.inputs.count == 6 && !op.inputs[4].isEmpty && !op.inputs[5].isEmpty
        let none = op.inputs.count <= 4 || op.inputs[4...].allSatisfy(\.isEmpty)
        guard op.opType == "attention", op.inputs.count >= 3, (1 ... 3).contains(op.outputs.count), past || none,
              int("is_causal", 0) == 0, int("qk_matmul_output_mode", 0) == 0, int("left_window_size", -1) == -1, int("right_window_size", -1) == -1,
              (try? a.float("softcap", 0)) == 0,
              Set(a.keys).isSubset(of: ["scale", "q_num_heads", "kv_num_heads", "is_causal", "softcap", "qk_matmul_output_mode",
                                        "left_window_size", "right_window_size", "softmax_precision"]) else { return nil }
        var (q, k, v) = (op.inputs[0], op.inputs[1], op.inputs[2])
        let (pastK, pastV) = past ? (op.inputs[4], op.inputs[5]) : ("", "")
        guard let qt = types[q], let kt = types[k], let vt = types[v], [qt, kt, vt].allSatisfy({ $0.dtype == .float32 && $0.rank == qt.rank }),
              qt.rank == 3 || qt.rank == 4 else { return nil }
        let pkt = types[pastK], pvt = types[pastV]
        if past { guard let pkt, let pvt, [pkt, pvt].allSatisfy({ $0.dtype == .float32 && $0.rank == 4 }) else { return nil } }
        var mask = op.inputs.count > 3 ? op.inputs[3] : ""
        // Without a past, only what the kernel's 3-D form does not take: grouped heads, a boolean mask.
        let grouped = qt.rank == 3 && (try? a.int("q_num_heads", 0)) != (try? a.int("kv_num_heads", 0))
        if !past { guard grouped || (!mask.isEmpty && types[mask]?.dtype == .bool) else { return nil } }
        var parts: [Operation] = []
        if !mask.isEmpty {
            guard let mt = types[mask], mt.dtype == .float32 || mt.dtype == .bool, (1 ... 4).contains(mt.rank) else { return nil }
            if mt.dtype == .bool { mask = additive(mask, mt, op, &parts) }
        }
        var heads: Heads?
        if qt.rank == 3 {
            guard let h = Heads(op, qt, kt, vt), past ? h.fits(pkt!, pvt!) : true else { return nil }
            heads = h
            q = h.split(q, qt, h.query, h.d, "query", op, &parts)
            k = h.split(k, kt, h.kv, h.d, "key", op, &parts)
            v = h.split(v, vt, h.kv, h.dv, "value", op, &parts)
        }
        let scale: Double
        if a["scale"] != nil {
            guard let s = try? a.float("scale", 0) else { return nil }
            scale = s
        } else {
            guard let d = heads?.d ?? qt.shape[3].size, d > 0 else { return nil }
            scale = 1 / Double(d).squareRoot()
        }
        // The presents: the op's outputs, or values of the past's type grown along the sequence.
        func present(_ k: Int, _ past: TensorType, _ what: String) -> Value {
            if k < op.outputs.count, !op.outputs[k].name.isEmpty { return op.outputs[k] }
            var t = past
            t.shape[2] = .symbol("")
            return Value(name: "\(op.name)/present_\(what)", type: t)
        }
        if let pkt, let pvt {
            let (presentK, presentV) = (present(1, pkt, "key"), present(2, pvt, "value"))
            parts += [
                Operation(opType: "concat", name: "\(op.name)/present_key", inputs: [pastK, k], outputs: [presentK], attributes: ["axis": .int(2)], source: op.source),
                Operation(opType: "concat", name: "\(op.name)/present_value", inputs: [pastV, v], outputs: [presentV], attributes: ["axis": .int(2)], source: op.source),
            ]
            (k, v) = (presentK.name, presentV.name)
        } else {
            // Without a past the presents are the keys and values split into heads.
            for (i, x) in [(1, k), (2, v)] where i < op.outputs.count && !op.outputs[i].name.isEmpty {
                parts.append(Operation(opType: "identity", name: op.outputs[i].name, inputs: [x], outputs: [op.outputs[i]], source: op.source))
            }
        }
        var y = op.outputs[0]
        if let heads { y = Value(name: "\(op.name)/heads", type: TensorType(.float32, [qt.shape[0], .size(heads.query), qt.shape[1], .size(heads.dv)])) }
        parts.append(Operation(opType: "attention", name: op.name, inputs: [q, k, v] + (mask.isEmpty ? [] : [mask]),
                               outputs: [y], attributes: ["scale": .float(scale)], source: op.source))
        if let heads { heads.merge(y, into: op.outputs[0], op, &parts) }
        return parts
    }

    /// `where(mask, 0, −∞)`: the additive float32 mask of a boolean one.
    private func additive(_ mask: String, _ type: TensorType, _ op: Operation, _ parts: inout [Operation]) -> String {
        func scalar(_ value: Float, _ what: String) -> String {
            let name = "\(op.name)/mask_\(what)"
            let bytes = withUnsafeBytes(of: value.bitPattern.littleEndian) { [UInt8]($0) }
            parts.append(Operation(opType: "constant", name: name, inputs: [], outputs: [Value(name: name, type: TensorType(.float32, []))],
                                   attributes: ["value": .tensor(TensorLiteral(dtype: .float32, shape: [], bytes: bytes))], source: op.source))
            return name
        }
        let (zero, minus) = (scalar(0, "zero"), scalar(-.infinity, "minus_infinity"))
        let out = Value(name: "\(op.name)/additive_mask", type: TensorType(.float32, type.shape))
        parts.append(Operation(opType: "where", name: out.name, inputs: [mask, zero, minus], outputs: [out], source: op.source))
        return out.name
    }

    /// The head counts and sizes of the 3-D form: `[B, S, H·D]` queries, keys and values (each
    /// reshaped to `[B, S, H, D]` and transposed to `[B, H, S, D]`) over 4-D pasts.
    struct Heads {
        let query: Int, kv: Int, d: Int, dv: Int

        init?(_ op: Operation, _ qt: TensorType, _ kt: TensorType, _ vt: TensorType) {
            guard let hq = try? op.attributes.int("q_num_heads", 0), let hkv = try? op.attributes.int("kv_num_heads", 0), hq > 0, hkv > 0,
                  hq % hkv == 0, let qw = qt.shape[2].size, let kw = kt.shape[2].size, let vw = vt.shape[2].size,
                  qw % hq == 0, kw == qw / hq * hkv, vw % hkv == 0 else { return nil }
            (query, kv, d, dv) = (hq, hkv, qw / hq, vw / hkv)
        }

        /// Whether 4-D pasts may have these heads (a dim left symbolic, as exporters name the head
        /// size, is checked by the concat when it runs).
        func fits(_ pkt: TensorType, _ pvt: TensorType) -> Bool {
            func may(_ dim: Dimension, _ size: Int) -> Bool { dim.size.map { $0 == size } ?? true }
            return may(pkt.shape[1], kv) && may(pkt.shape[3], d) && may(pvt.shape[1], kv) && may(pvt.shape[3], dv)
        }

        /// `transpose(reshape(x, [0, 0, heads, size]), [0, 2, 1, 3])`.
        func split(_ x: String, _ t: TensorType, _ heads: Int, _ size: Int, _ what: String, _ op: Operation, _ parts: inout [Operation]) -> String {
            let tokens = Value(name: "\(op.name)/\(what)_tokens", type: TensorType(.float32, [t.shape[0], t.shape[1], .size(heads), .size(size)]))
            let split = Value(name: "\(op.name)/\(what)_heads", type: TensorType(.float32, [t.shape[0], .size(heads), t.shape[1], .size(size)]))
            parts.append(Operation(opType: "reshape", name: tokens.name, inputs: [x], outputs: [tokens], attributes: ["shape": .ints([0, 0, heads, size])],
                                   source: op.source))
            parts.append(Operation(opType: "transpose", name: split.name, inputs: [tokens.name], outputs: [split], attributes: ["perm": .ints([0, 2, 1, 3])],
                                   source: op.source))
            return split.name
        }

        /// `reshape(transpose(y, [0, 2, 1, 3]), [0, 0, heads · dv])` into the op's output.
        func merge(_ y: Value, into out: Value, _ op: Operation, _ parts: inout [Operation]) {
            let tokens = Value(name: "\(op.name)/tokens", type: TensorType(.float32, [y.type.shape[0], y.type.shape[2], .size(query), .size(dv)]))
            parts.append(Operation(opType: "transpose", name: tokens.name, inputs: [y.name], outputs: [tokens], attributes: ["perm": .ints([0, 2, 1, 3])],
                                   source: op.source))
            parts.append(Operation(opType: "reshape", name: "\(op.name)/merged", inputs: [tokens.name], outputs: [out],
                                   attributes: ["shape": .ints([0, 0, query * dv])], source: op.source))
        }
    }
}
