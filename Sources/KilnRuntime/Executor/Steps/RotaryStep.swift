import KilnCompiler
import KilnFormat

/// `rotary_embedding` on float32 (runtime 0.8): each head's first `rotary_embedding_dim`
/// features rotated in pairs (halves, or neighbours when interleaved) by the cos and sin cache
/// row of the token's position — the row of its position id, or the cache's own `[B?, S]` row.
/// The same products and difference as the reference interpreter's, so the values are equal to
/// its bits; the features past the rotary dim are copied. Tokens split across threads.
struct RotaryStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    /// Where a token's features lie: heads `h` of `d` floats, consecutive heads `headStride`
    /// apart, token (b, s) at `b · batchStride + s · tokenStride`.
    struct Geometry {
        var batch = 0, seq = 0, heads = 0, d = 0, half = 0
        var batchStride = 0, tokenStride = 0, headStride = 0
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count >= 3, let x = inputs[0], let cos = inputs[1], let sin = inputs[2], x.dtype == .float32, cos.dtype == .float32,
              sin.dtype == .float32, x.shape.count == 3 || x.shape.count == 4 else { throw OpError("needs a float32 3-D or 4-D input and float32 caches") }
        for o in [x, cos, sin] + outputs where o.rowStride != nil || o.extent != nil { throw OpError("needs dense operands") }
        try expectOutput(outputs, x.shape)
        let a = op.attributes
        let interleaved = try a.int("interleaved", 0) != 0, dim = try a.int("rotary_embedding_dim", 0), heads = try a.int("num_heads", 0)
        var g = Geometry(batch: x.shape[0])
        if x.shape.count == 4 {
            (g.heads, g.seq, g.d) = (x.shape[1], x.shape[2], x.shape[3])
            (g.headStride, g.tokenStride, g.batchStride) = (g.seq * g.d, g.d, g.heads * g.seq * g.d)
        } else {
            guard heads > 0, x.shape[2] % heads == 0 else { throw OpError("num_heads \(heads) does not split \(x.shape[2]) features") }
            (g.heads, g.seq, g.d) = (heads, x.shape[1], x.shape[2] / heads)
            (g.headStride, g.tokenStride, g.batchStride) = (g.d, x.shape[2], g.seq * x.shape[2])
        }
        let r = dim == 0 ? g.d : dim
        guard r <= g.d, r % 2 == 0 else { throw OpError("rotary_embedding_dim \(r) must be even and at most the head size \(g.d)") }
        g.half = r / 2
        guard cos.shape == sin.shape, cos.shape.last == g.half else {
            throw OpError("cos and sin caches \(cos.shape), \(sin.shape) must end in rotary_embedding_dim / 2 = \(g.half)")
        }
        let positions = inputs.count > 3 ? inputs[3] : nil
        let cacheRows = cos.count / max(g.half, 1)
        if let p = positions {
            guard p.shape == [g.batch, g.seq], p.dtype == .int64 || p.dtype == .int32 else { throw OpError("position_ids \(p.shape) must be int64 [\(g.batch), \(g.seq)]") }
        } else {
            let fits = cos.shape.count == 3 ? (cos.shape[0] == g.batch || cos.shape[0] == 1) && cos.shape[1] == g.seq : cos.shape.count == 2 && cos.shape[0] == g.seq
            guard fits else { throw OpError("without position_ids the caches must be [\(g.batch), \(g.seq), \(g.half)], got \(cos.shape)") }
        }
        // Without ids, the cache row of (b, s): b · batchRows + s.
        let batchRows = cos.shape.count == 3 && cos.shape[0] != 1 ? g.seq : 0
        let tokens = g.batch * g.seq
        let parts = splitRanges(tokens, parts: x.count < 1 << 14 ? 1 : workChunks(context.threads))
        let (y, threads) = (outputs[0], context.threads)
        return BoundStep { slots in
            guard tokens > 0 else { return }
            let px = UnsafePointer(x.floats(slots)), py = y.floats(slots)
            let pc = UnsafePointer(cos.floats(slots)), ps = UnsafePointer(sin.floats(slots))
            let ids = positions.map { UnsafeRawPointer($0.pointer(slots)) }
            let wide = positions?.dtype == .int64
            if let ids, Self.outside(ids, wide, tokens, cacheRows) { throw OpError("a position id is outside the cache of \(cacheRows) rows") }
            parallelFor(parts.count, threads: threads) { i in
                for t in parts[i] {
                    let (b, s) = t.quotientAndRemainder(dividingBy: g.seq)
                    let row: Int
                    if let ids {
                        row = wide ? Int(ids.load(fromByteOffset: t * 8, as: Int64.self)) : Int(ids.load(fromByteOffset: t * 4, as: Int32.self))
                    } else {
                        row = b * batchRows + s
                    }
                    Self.rotate(token: b * g.batchStride + s * g.tokenStride, px, py, pc + row * g.half, ps + row * g.half, g, interleaved)
                }
            }
        }
    }

    /// Whether any id lies outside the cache (checked before any row is read).
    private static func outside(_ ids: UnsafeRawPointer, _ wide: Bool, _ tokens: Int, _ rows: Int) -> Bool {
        (0 ..< tokens).contains { t in
            let p = wide ? Int(ids.load(fromByteOffset: t * 8, as: Int64.self)) : Int(ids.load(fromByteOffset: t * 4, as: Int32.self))
            return p < 0 || p >= rows
        }
    }

    @inline(__always)
    private static func rotate(token: Int, _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, _ c: UnsafePointer<Float>,
                               _ s: UnsafePointer<Float>, _ g: Geometry, _ interleaved: Bool) {
        for head in 0 ..< g.heads {
            let base = token + head * g.headStride
            let (xi, yo) = (x + base, y + base)
            if interleaved {
                for i in 0 ..< g.half {
                    let (x1, x2) = (xi[2 * i], xi[2 * i + 1])
                    yo[2 * i] = c[i] * x1 - s[i] * x2
                    yo[2 * i + 1] = s[i] * x1 + c[i] * x2
                }
            } else {
                for i in 0 ..< g.half {
                    let (x1, x2) = (xi[i], xi[g.half + i])
                    yo[i] = c[i] * x1 - s[i] * x2
                    yo[g.half + i] = s[i] * x1 + c[i] * x2
                }
            }
            if yo != UnsafeMutablePointer(mutating: xi) {
                for i in 2 * g.half ..< g.d { yo[i] = xi[i] }
            }
        }
    }
}
