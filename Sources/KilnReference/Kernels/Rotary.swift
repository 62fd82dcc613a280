import KilnFormat

/// `rotary_embedding` (ONNX RotaryEmbedding, opset 23): rotates the first `rotary_embedding_dim`
/// features of each head by position-dependent angles given as cos and sin caches.
enum Rotary {
    static func run(_ x: NDArray, cos: NDArray, sin: NDArray, positions: NDArray?, interleaved: Bool, dim: Int, heads: Int) throws -> NDArray {
        guard x.scalarType == .float32, x.rank == 3 || x.rank == 4 else { throw OpError("rotary_embedding needs a float 3-D or 4-D input") }
        // [B, S, H, D] views of the input: a 4-D input is [B, H, S, D], a 3-D one [B, S, H·D].
        let batch = x.shape[0]
        let (seq, h, d): (Int, Int, Int)
        if x.rank == 4 {
            (seq, h, d) = (x.shape[2], x.shape[1], x.shape[3])
        } else {
            guard heads > 0, x.shape[2] % heads == 0 else { throw OpError("num_heads \(heads) does not split \(x.shape[2]) features") }
            (seq, h, d) = (x.shape[1], heads, x.shape[2] / heads)
        }
        let r = dim == 0 ? d : dim
        guard r <= d, r % 2 == 0 else { throw OpError("rotary_embedding_dim \(r) must be even and at most the head size \(d)") }
        let half = r / 2
        let cs = try Elementwise.cast(cos, to: .float32).contiguous().values(Float.self)
        let sn = try Elementwise.cast(sin, to: .float32).contiguous().values(Float.self)
        guard cos.shape == sin.shape, cos.shape.last == half else { throw OpError("cos and sin caches \(cos.shape), \(sin.shape) must end in rotary_embedding_dim / 2 = \(half)") }
        // The cache row of (b, s): by position id, or the cache's own [B?, S] rows.
        let pos = try positions.map { p -> [Int] in
            guard p.shape == [batch, seq] else { throw OpError("position_ids \(p.shape) must be [\(batch), \(seq)]") }
            return try p.intValues()
        }
        let rows = cs.count / half
        func row(_ b: Int, _ s: Int) throws -> Int {
            if let pos {
                let p = pos[b * seq + s]
                guard p >= 0, p < rows else { throw OpError("position id \(p) is outside the cache of \(rows) rows") }
                return p
            }
            if cos.rank == 3 { return (cos.shape[0] == 1 ? 0 : b) * cos.shape[1] + s }
            return s
        }
        if positions == nil {
            let fits = cos.rank == 3 ? (cos.shape[0] == batch || cos.shape[0] == 1) && cos.shape[1] == seq : cos.rank == 2 && cos.shape[0] == seq
            guard fits else { throw OpError("without position_ids the caches must be [\(batch), \(seq), \(half)], got \(cos.shape)") }
        }
        let p = try x.contiguous().values(Float.self)
        var out = p
        for b in 0 ..< batch {
            for s in 0 ..< seq {
                let c = try row(b, s) * half
                for head in 0 ..< h {
                    let base = x.rank == 4 ? ((b * h + head) * seq + s) * d : ((b * seq + s) * h + head) * d
                    for i in 0 ..< half {
                        let (i1, i2) = interleaved ? (base + 2 * i, base + 2 * i + 1) : (base + i, base + half + i)
                        let (x1, x2) = (p[i1], p[i2])
                        out[i1] = cs[c + i] * x1 - sn[c + i] * x2
                        out[i2] = sn[c + i] * x1 + cs[c + i] * x2
                    }
                }
            }
        }
        return NDArray(shape: x.shape, scalars: out)
    }
}
