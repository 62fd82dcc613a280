import KilnFormat
import KilnReference

/// Replaces multi-head attention written as its parts (as PyTorch and Hugging Face BERT-style
/// exports spell it) by one `attention` op over the 3-D projections, which the compiled
/// `f32_attention` kernel runs without materializing the transposes or the score tensor:
///
/// ```
/// qh = transpose(reshape(q, [0, 0, H, D]), [0, 2, 1, 3])        (likewise vh from v)
/// kt = transpose(reshape(k, [0, 0, H, D]), [0, 2, 3, 1])        (or [0, 2, 1, 3], then [0, 1, 3, 2])
/// p  = softmax(add(matmul(qh·c₁, kt·c₂)·c₃, mask), axis -1)     (scalar scales by mul or div optional, add optional)
/// p  = where(isnan(p), 0, p)                                    (optional; see AttentionFusion+Heads.swift)
/// y  = reshape(transpose(matmul(p, vh), [0, 2, 1, 3]), [0, 0, H·D])
/// ```
/// becomes `y = attention(q, k, v, mask)` with `q_num_heads = kv_num_heads = H` and
/// `scale = c₁·c₂·c₃`. The reshape targets may also spell the first two dims out when they are the
/// input's fixed sizes. Every intermediate must be read only inside the pattern; c is a scalar
/// constant (weight or `constant` op). Attention on operands already split into heads is matched
/// too (AttentionFusion+Heads.swift).
public struct AttentionFusion: CompilerPass {
    /// `attention_fusion`.
    public static let name = "attention_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            splitPast(&f, runtime: unit.minimumRuntime)
            unit.model.functions[fi] = f
            let uses = UseIndex(f)
            var removed = Set<Int>()
            for (i, op) in f.operations.enumerated() where op.opType == "softmax" {
                // The 4-D form runs on runtimes from 0.8.
                guard let m = match(softmax: i, f, uses, unit) ?? (unit.minimumRuntime >= RuntimeVersion(0, 8) ? match4D(softmax: i, f, uses, unit) : nil),
                      removed.isDisjoint(with: m.ops) else { continue }
                let last = f.operations[m.result]
                let attributes: [String: AttributeValue] = m.heads == 0 ? ["scale": .float(m.scale)]
                    : ["q_num_heads": .int(m.heads), "kv_num_heads": .int(m.heads), "scale": .float(m.scale)]
                f.operations[m.result] = Operation(opType: "attention", name: last.name, inputs: [m.q, m.k, m.v] + (m.mask.map { [$0] } ?? []),
                                                   outputs: last.outputs, attributes: attributes, source: last.source)
                removed.formUnion(m.ops.subtracting([m.result]))
            }
            guard !removed.isEmpty else { continue }
            f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
            unit.model.functions[fi] = f
        }
    }

    struct Match {
        var q: String, k: String, v: String
        var mask: String?
        /// Heads of the 3-D form; 0 for operands already `[B, H, S, D]`.
        var heads: Int
        var scale: Double
        var ops: Set<Int>
        var result: Int
    }

    /// The producer of a value read only by the op that asks, if it has that type.
    func privateProducer(_ value: String, _ type: String, _ f: Function, _ uses: UseIndex) -> (Int, Operation)? {
        guard uses.isPrivate(value), let p = uses.producer[value], f.operations[p].opType == type else { return nil }
        return (p, f.operations[p])
    }

    func perm(_ op: Operation) -> [Int]? { try? op.attributes.ints("perm") }

    /// The scalar value of a weight or `constant` op result.
    func scalar(_ name: String, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> Double? {
        if let w = unit.weight(name) {
            guard w.elementCount == 1, let d = try? WeightDecoding.dense(w) else { return nil }
            switch d.scalarType {
            case .float32: return Double(d.scalars(as: Float.self)[0])
            case .float64: return d.scalars(as: Double.self)[0]
            default: return nil
            }
        }
        guard let p = uses.producer[name], f.operations[p].opType == "constant",
              case .tensor(let t)? = f.operations[p].attributes["value"], t.shape.reduce(1, *) == 1 else { return nil }
        switch t.dtype {
        case .float32 where t.bytes.count == 4: return Double(t.bytes.withUnsafeBytes { $0.loadUnaligned(as: Float.self) })
        case .float64 where t.bytes.count == 8: return t.bytes.withUnsafeBytes { $0.loadUnaligned(as: Double.self) }
        default: return nil
        }
    }

    /// `transpose(reshape(x, [0, 0, H, D]), perm)`: x (3-D, last dim H·D), H and D, the ops.
    func heads(_ value: String, perm want: [Int], _ f: Function, _ uses: UseIndex) -> (x: String, h: Int, d: Int, ops: [Int])? {
        guard let (ti, t) = privateProducer(value, "transpose", f, uses), perm(t) == want,
              let (ri, r) = privateProducer(t.inputs[0], "reshape", f, uses), let x = r.inputs.first,
              let shape = try? r.attributes.ints("shape"), shape.count == 4, (try? r.attributes.int("allowzero", 0)) == 0,
              let out = r.outputs.first?.type, out.shape.count == 4, let h = out.shape[2].size, let d = out.shape[3].size, h > 0, d > 0,
              shape[2] == h || shape[2] == -1, shape[3] == d || shape[3] == -1 else { return nil }
        // The input: 3-D, its first two dims kept (0 in the target, the same fixed size, or a -1
        // that the types show comes out as the input's dim).
        guard let inType = type(of: x, f), inType.shape.count == 3, inType.shape[2].size.map({ $0 == h * d }) ?? false,
              (0 ..< 2).allSatisfy({ shape[$0] == 0 || inType.shape[$0].size == shape[$0] || (shape[$0] == -1 && same(out.shape[$0], inType.shape[$0])) })
        else { return nil }
        return (x, h, d, [ti, ri])
    }

    /// The type of a function value (input or op result).
    func type(of value: String, _ f: Function) -> TensorType? {
        if let a = f.inputs.first(where: { $0.name == value }) { return a.type }
        for op in f.operations { if let o = op.outputs.first(where: { $0.name == value }) { return o.type } }
        return nil
    }

    func match(softmax si: Int, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> Match? {
        guard let c = core(softmax: si, f, uses, unit), let q = heads(c.q, perm: [0, 2, 1, 3], f, uses) else { return nil }
        var ops = c.ops.union(q.ops)
        // Keys: transposed straight to [B, H, D, S], or to [B, H, S, D] and then swapped.
        var key = heads(c.kt, perm: [0, 2, 3, 1], f, uses)
        if key == nil, let (si2, swap) = privateProducer(c.kt, "transpose", f, uses), perm(swap) == [0, 1, 3, 2],
           let kh = heads(swap.inputs[0], perm: [0, 2, 1, 3], f, uses) {
            key = (kh.x, kh.h, kh.d, kh.ops + [si2])
        }
        guard let k = key, k.h == q.h, k.d == q.d, let v = heads(c.v, perm: [0, 2, 1, 3], f, uses), v.h == q.h else { return nil }
        ops.formUnion(k.ops + v.ops)
        // Forwards: back to [B, S, H·Dv] (through a reshape that keeps the shape, as some exports write).
        var ctx = f.operations[c.result].outputs[0].name
        if uses.isPrivate(ctx), let ri = uses.readers[ctx]?.first, f.operations[ri].opType == "reshape",
           let before = f.operations[c.result].outputs.first?.type, let after = f.operations[ri].outputs.first?.type,
           before.rank == after.rank, zip(before.shape, after.shape).allSatisfy({ same($0, $1) }) {
            ops.insert(ri)
            ctx = f.operations[ri].outputs[0].name
        }
        guard uses.isPrivate(ctx), let ti = uses.readers[ctx]?.first, f.operations[ti].opType == "transpose", perm(f.operations[ti]) == [0, 2, 1, 3],
              case let tOut = f.operations[ti].outputs[0].name, uses.isPrivate(tOut), let ri = uses.readers[tOut]?.first,
              f.operations[ri].opType == "reshape", let target = try? f.operations[ri].attributes.ints("shape"), target.count == 3,
              let yType = f.operations[ri].outputs.first?.type, yType.shape.count == 3, yType.shape[2] == .size(q.h * v.d),
              target[2] == q.h * v.d || target[2] == -1,
              let qType = type(of: q.x, f),
              (0 ..< 2).allSatisfy({ target[$0] == 0 || qType.shape[$0].size == target[$0] || (target[$0] == -1 && same(yType.shape[$0], qType.shape[$0])) })
        else { return nil }
        ops.formUnion([ti, ri])
        // The mask must be float32 and broadcast to [B, H, Sq, Skv] from the right.
        if let m = c.mask {
            guard let mt = type(of: m, f) ?? unit.weight(m)?.type, mt.dtype == .float32, (1 ... 4).contains(mt.shape.count) else { return nil }
        }
        return Match(q: q.x, k: k.x, v: v.x, mask: c.mask, heads: q.h, scale: c.scale, ops: ops, result: ri)
    }
}
