import KilnFormat
import KilnReference

/// Attention over tensors already split into heads, `[B, H, S, D]`, as timm, torchvision,
/// `torch.nn.functional.scaled_dot_product_attention` exports and decoder models spell it:
///
/// ```
/// s = matmul(q·c₁, kᵀ·c₂) · c₃            (each scalar scale optional; kᵀ = transpose(k, [0, 1, 3, 2])
///                                          or reshape(transpose(reshape(k, [B·H, S, D]), [0, 2, 1]), [B, H, D, S]))
/// p = softmax(s + mask, axis -1)          (mask optional)
/// p = where(isnan(p), 0, p)               (optional: a row softmax makes NaN is a row of zeros)
/// y = matmul(p, v)
/// ```
/// becomes `y = attention(q, k, v, mask)` on the 4-D operands with `scale = c₁·c₂·c₃`; whatever
/// made q, k and v stays, but for the repetition of grouped-query keys and values over the query
/// heads (``ungrouped(_:_:_:)``), which the kernel does without copying. The `where(isnan(p), 0, p)` form is kept exact because a softmax row
/// is NaN everywhere or nowhere, and the kernel gives a row of zeros where the best score is −∞.
/// Batch and head dims must be provably equal (the same size or the same named symbol), so no
/// matmul broadcasting is folded away.
extension AttentionFusion {
    /// `x·c`, `c·x` or `x/c` for a scalar constant c, its result read only by the op that asks and
    /// of x's shape: (x, the factor, the op).
    func peeledScale(_ value: String, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> (String, Double, Int)? {
        guard uses.isPrivate(value), let p = uses.producer[value] else { return nil }
        let op = f.operations[p]
        guard op.inputs.count == 2, let out = op.outputs.first?.type else { return nil }
        var found: (String, Double)?
        switch op.opType {
        case "mul":
            for k in 0 ..< 2 { if found == nil, let c = scalar(op.inputs[k], f, uses, unit) { found = (op.inputs[1 - k], c) } }
        case "div":
            if let c = scalar(op.inputs[1], f, uses, unit), c != 0 { found = (op.inputs[0], 1 / c) }
        default: break
        }
        guard let (x, c) = found, type(of: x, f)?.shape == out.shape else { return nil }
        return (x, c, p)
    }

    /// Strips scalar scales from `value`: the value under them, their product, their ops.
    func unscaled(_ value: String, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> (String, Double, [Int]) {
        var (x, scale, ops) = (value, 1.0, [Int]())
        while ops.count < 3, let (inner, c, p) = peeledScale(x, f, uses, unit) {
            (x, scale, ops) = (inner, scale * c, ops + [p])
        }
        return (x, scale, ops)
    }

    /// Whether two dims are provably equal: the same size or the same named symbol.
    func same(_ a: Dimension, _ b: Dimension) -> Bool {
        if case .symbol(let s) = a, s.isEmpty { return false }
        return a == b
    }

    /// Whether two batch or head dims may be taken as equal: provably so, or one of them is
    /// anonymous (a size the exporter's shape arithmetic hid, as GPT-2's head split does). The
    /// attention kernel checks them when it is bound, and unequal sizes there are an error
    /// naming the op; the unfused graph would only broadcast a size-1 dim in such a place.
    func compatible(_ a: Dimension, _ b: Dimension) -> Bool {
        if case .symbol(let s) = a, s.isEmpty { return true }
        if case .symbol(let s) = b, s.isEmpty { return true }
        return a == b
    }

    /// kᵀ `[B, H, D, S]` spelled as a transpose of k `[B, H, S, D]`: k and the ops.
    func untransposedKeys(_ value: String, _ f: Function, _ uses: UseIndex) -> (String, [Int])? {
        if let (ti, t) = privateProducer(value, "transpose", f, uses), perm(t) == [0, 1, 3, 2] { return (t.inputs[0], [ti]) }
        // Through a 3-D transpose of the flattened heads: reshape → transpose [0, 2, 1] → reshape.
        guard let (ri, r) = privateProducer(value, "reshape", f, uses), let kt = r.outputs.first?.type, kt.rank == 4,
              let (ti, t) = privateProducer(r.inputs[0], "transpose", f, uses), perm(t) == [0, 2, 1],
              let (fi, flat) = privateProducer(t.inputs[0], "reshape", f, uses), let k = flat.inputs.first,
              let kType = type(of: k, f), kType.rank == 4, let flatType = flat.outputs.first?.type, flatType.rank == 3 else { return nil }
        let (ks, fs) = (kType.shape.map(\.size), flatType.shape.map(\.size))
        guard let b = ks[0], let h = ks[1], let s = ks[2], let d = ks[3], fs == [b * h, s, d],
              kt.shape.map(\.size) == [b, h, d, s] else { return nil }
        return (k, [ri, ti, fi])
    }

    /// The part every form shares, from the scores matmul to the values matmul: its operands
    /// before scaling (q `[B, H, Sq, D]`, kᵀ `[B, H, D, Skv]`, v), the mask, the scale, the ops.
    struct Core {
        var q: String, kt: String, v: String
        var mask: String?
        var scale: Double
        var ops: Set<Int>
        /// The values matmul.
        var result: Int
    }

    func core(softmax si: Int, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> Core? {
        let softmax = f.operations[si]
        guard softmax.inputs.count == 1, let sType = softmax.outputs.first?.type, sType.rank == 4, sType.dtype == .float32,
              let axis = try? softmax.attributes.int("axis", -1), axis == -1 || axis == 3 else { return nil }
        var ops: Set<Int> = [si]
        // Backwards: an optional mask add, scales, the scores matmul.
        var scoresValue = softmax.inputs[0], mask: String?
        if let (ai, add) = privateProducer(scoresValue, "add", f, uses), add.inputs.count == 2 {
            for (s, m) in [(add.inputs[0], add.inputs[1]), (add.inputs[1], add.inputs[0])] where mask == nil {
                let (inner, _, _) = unscaled(s, f, uses, unit)
                if privateProducer(inner, "matmul", f, uses) != nil, type(of: s, f)?.shape == sType.shape {
                    (scoresValue, mask) = (s, m)
                    ops.insert(ai)
                }
            }
        }
        let (scores, outerScale, outerOps) = unscaled(scoresValue, f, uses, unit)
        guard let (qi, qk) = privateProducer(scores, "matmul", f, uses), qk.inputs.count == 2 else { return nil }
        ops.formUnion(outerOps + [qi])
        let (q, qScale, qOps) = unscaled(qk.inputs[0], f, uses, unit)
        let (kt, kScale, kOps) = unscaled(qk.inputs[1], f, uses, unit)
        ops.formUnion(qOps + kOps)
        // Forwards: the optional NaN-row cleanup, then the values matmul.
        var p = softmax.outputs[0].name
        let pReaders = uses.readers[p] ?? []
        if pReaders.count == 2, !uses.returned.contains(p) {
            let (a, b) = (f.operations[pReaders[0]], f.operations[pReaders[1]])
            let (isNaN, select) = a.opType == "is_nan" ? (pReaders[0], pReaders[1]) : (pReaders[1], pReaders[0])
            let (n, w) = (f.operations[isNaN], f.operations[select])
            guard a.opType != b.opType, n.opType == "is_nan", w.opType == "where", w.inputs.count == 3, uses.isPrivate(n.outputs[0].name),
                  w.inputs[0] == n.outputs[0].name, w.inputs[2] == p, scalar(w.inputs[1], f, uses, unit) == 0 else { return nil }
            ops.formUnion([isNaN, select])
            p = w.outputs[0].name
        }
        guard uses.isPrivate(p), let pi = uses.readers[p]?.first, f.operations[pi].opType == "matmul", f.operations[pi].inputs.count == 2,
              f.operations[pi].inputs[0] == p else { return nil }
        ops.insert(pi)
        return Core(q: q, kt: kt, v: f.operations[pi].inputs[1], mask: mask, scale: outerScale * qScale * kScale, ops: ops, result: pi)
    }

    /// Grouped-query keys or values repeated over the query heads, `reshape(expand(unsqueeze(x, [2]),
    /// [1, 1, G, 1, 1]), [B, KVH·G, S, D])` as decoder exports spell `repeat_kv`: x `[B, KVH, S, D]`,
    /// G and the ops (the attention kernel reads each of x's heads for its G query heads in place).
    /// The repeated value may also be read by `shape` ops (exports take the key length from it):
    /// the ops then stay for them, and a shape plan never runs them (only shapes are read).
    func ungrouped(_ value: String, _ f: Function, _ uses: UseIndex) -> (x: String, group: Int, ops: [Int])? {
        let readers = uses.readers[value] ?? []
        let shapeReaders = readers.filter { f.operations[$0].opType == "shape" }.count
        guard !uses.returned.contains(value), readers.count == shapeReaders + 1, let ri = uses.producer[value] else { return nil }
        let r = f.operations[ri]
        guard r.opType == "reshape", let out = r.outputs.first?.type, out.rank == 4,
              let (ei, e) = privateProducer(r.inputs[0], "expand", f, uses), e.inputs.count == 1, let target = try? e.attributes.ints("shape"),
              let wide = e.outputs.first?.type, wide.rank == 5, target.count == 5,
              let (ui, u) = privateProducer(e.inputs[0], "unsqueeze", f, uses), u.inputs.count == 1, (try? u.attributes.ints("axes")) == [2],
              let x = u.inputs.first, let xt = type(of: x, f), xt.rank == 4, let kvHeads = xt.shape[1].size, let g = wide.shape[2].size, g > 1,
              target[2] == g, [0, 1, 3, 4].allSatisfy({ target[$0] == 1 || wide.shape[$0].size == target[$0] }),
              out.shape[1].size == kvHeads * g, same(out.shape[0], xt.shape[0]), same(out.shape[2], xt.shape[2]), same(out.shape[3], xt.shape[3]),
              same(wide.shape[0], xt.shape[0]), same(wide.shape[1], xt.shape[1]), same(wide.shape[3], xt.shape[2]), same(wide.shape[4], xt.shape[3])
        else { return nil }
        return (x, g, shapeReaders == 0 ? [ri, ei, ui] : [])
    }

    func match4D(softmax si: Int, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> Match? {
        guard let c = core(softmax: si, f, uses, unit), var (k, keyOps) = untransposedKeys(c.kt, f, uses) else { return nil }
        let q = c.q
        var (v, group) = (c.v, 1)
        // Keys and values repeated for grouped-query attention are read where they are.
        if let gk = ungrouped(k, f, uses), let gv = ungrouped(v, f, uses), gk.group == gv.group {
            (k, v, group) = (gk.x, gv.x, gk.group)
            keyOps += gk.ops + gv.ops
        }
        // Operands: float32 [B, H, S, D] with batch and head dims that need no broadcasting (key
        // heads: the query heads, or a G-th of them).
        func heads(_ kv: KilnFormat.Dimension, of qd: KilnFormat.Dimension) -> Bool {
            group == 1 ? compatible(qd, kv) : (qd.size != nil && kv.size.map { $0 * group } == qd.size)
        }
        guard let qt = type(of: q, f), let kt4 = type(of: k, f), let vt = type(of: v, f),
              [qt, kt4, vt].allSatisfy({ $0.rank == 4 && $0.dtype == .float32 }),
              compatible(qt.shape[0], kt4.shape[0]), compatible(qt.shape[0], vt.shape[0]), heads(kt4.shape[1], of: qt.shape[1]), heads(vt.shape[1], of: qt.shape[1]),
              same(kt4.shape[2], vt.shape[2]), same(qt.shape[3], kt4.shape[3]) else { return nil }
        if let m = c.mask {
            // The mask broadcasts to the scores [B, H, Sq, Skv] without growing them (batch and
            // head dims as ``compatible(_:_:)`` allows; the key dim exactly).
            guard let mt = type(of: m, f) ?? unit.weight(m)?.type, mt.dtype == .float32, (1 ... 4).contains(mt.rank) else { return nil }
            let full = [qt.shape[0], qt.shape[1], qt.shape[2], kt4.shape[2]]
            for (i, d) in mt.shape.enumerated() where d != .size(1) {
                let at = 4 - mt.rank + i
                guard at < 2 ? compatible(d, full[at]) : same(d, full[at]) else { return nil }
            }
        }
        return Match(q: q, k: k, v: v, mask: c.mask, heads: 0, scale: c.scale, ops: c.ops.union(keyOps), result: c.result)
    }
}
