import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// `attention` (ONNX Attention, opsets 23–25): scaled dot-product attention over 3-D
/// `[B, S, H·D]` or 4-D `[B, H, S, D]` inputs, with an additive or boolean mask, a causal
/// and a sliding-window mask aligned to the cache, a key/value cache, per-batch key lengths,
/// grouped-query heads and a soft cap on the scores.
enum Attention {
    struct Options {
        var scale: Float?
        var causal = false
        var qHeads = 0
        var kvHeads = 0
        var softcap: Float = 0
        var scoresMode = 0
        var leftWindow = -1
        var rightWindow = -1

        init(_ a: [String: AttributeValue]) throws {
            scale = a["scale"] != nil ? Float(try a.float("scale", 1)) : nil
            causal = try a.int("is_causal", 0) != 0
            qHeads = try a.int("q_num_heads", 0)
            kvHeads = try a.int("kv_num_heads", 0)
            softcap = Float(try a.float("softcap", 0))
            scoresMode = try a.int("qk_matmul_output_mode", 0)
            leftWindow = try a.int("left_window_size", -1)
            rightWindow = try a.int("right_window_size", -1)
            guard (0 ... 3).contains(scoresMode) else { throw OpError("qk_matmul_output_mode must be 0…3, got \(scoresMode)") }
            guard leftWindow >= -1, rightWindow >= -1 else { throw OpError("window sizes must be -1 or ≥ 0") }
        }
    }

    /// A float32 array in 4-D head-major form `[B, H, S, D]` (a 3-D `[B, S, H·D]` one split into `heads`).
    static func heads(_ x: NDArray, _ heads: Int, _ what: String) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("\(what) must be float, got \(x.scalarType.rawValue)") }
        if x.rank == 4 { return x.contiguous() }
        guard x.rank == 3, heads > 0, x.shape[2] % heads == 0 else {
            throw OpError("\(what) \(x.shape) does not split into \(heads) heads")
        }
        return x.reshaped([x.shape[0], x.shape[1], heads, x.shape[2] / heads]).transposed([0, 2, 1, 3]).contiguous()
    }

    static func run(_ inputs: [NDArray?], _ o: Options, outputs: Int) throws -> [NDArray] {
        func input(_ i: Int) -> NDArray? { i < inputs.count ? inputs[i] : nil }
        guard let q0 = input(0), let k0 = input(1), let v0 = input(2) else { throw OpError("attention needs q, k and v") }
        guard q0.rank == k0.rank, q0.rank == v0.rank, q0.rank == 3 || q0.rank == 4 else { throw OpError("q, k and v must all be 3-D or all 4-D") }
        let threeD = q0.rank == 3
        let q = try heads(q0, o.qHeads, "q"), k = try heads(k0, o.kvHeads, "k"), v = try heads(v0, o.kvHeads, "v")
        let (batch, hq, s, d) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3])
        var (keys, values) = (k, v)
        let past = input(4), pastValue = input(5)
        guard (past == nil) == (pastValue == nil) else { throw OpError("past_key and past_value must be given together") }
        if let past, let pastValue {
            keys = try Movement.concat([try heads(past, o.kvHeads, "past_key"), k], axis: 2)
            values = try Movement.concat([try heads(pastValue, o.kvHeads, "past_value"), v], axis: 2)
        }
        let (hkv, t, dv) = (keys.shape[1], keys.shape[2], values.shape[3])
        guard keys.shape[0] == batch, values.shape[0] == batch, keys.shape[3] == d, values.shape[1] == hkv, values.shape[2] == t else {
            throw OpError("q \(q.shape), k \(keys.shape) and v \(values.shape) do not fit")
        }
        guard hkv > 0, hq % hkv == 0 else { throw OpError("\(hq) query heads do not group over \(hkv) key heads") }
        let group = hq / hkv
        let pastLength = past.map { _ in t - k.shape[2] } ?? 0
        // Per-batch valid key counts (the external cache).
        var valid: [Int]?
        if let n = input(6) {
            guard past == nil else { throw OpError("nonpad_kv_seqlen cannot be combined with past_key") }
            let lengths = try n.intValues()
            guard lengths.count == batch else { throw OpError("nonpad_kv_seqlen has \(lengths.count) entries for a batch of \(batch)") }
            valid = lengths
        }
        // The mask as [B?, H?, S?, T?] with broadcast strides; keys past its last dim are masked.
        let mask = try input(3).map { m -> (values: [Float], strides: [Int], width: Int) in
            guard m.rank >= 1, m.rank <= 4 else { throw OpError("attn_mask must have rank 1…4") }
            let dims = [Int](repeating: 1, count: 4 - m.rank) + m.shape
            let full = [batch, hq, s, dims[3]]
            for i in 0 ..< 3 where dims[i] != 1 && dims[i] != full[i] { throw OpError("attn_mask \(m.shape) does not broadcast to [\(batch), \(hq), \(s), \(t)]") }
            let c = m.contiguous()
            let vals: [Float] = m.scalarType == .bool ? try c.values(Bool.self).map { $0 ? 0 : -.infinity } : try Elementwise.cast(c, to: .float32).scalars(as: Float.self)
            var strides = [Int](repeating: 0, count: 4), step = 1
            for i in stride(from: 3, through: 0, by: -1) { strides[i] = dims[i] == 1 ? 0 : step; step *= dims[i] }
            return (vals, strides, dims[3])
        }
        let scale = (o.scale ?? 1 / Float(d).squareRoot()).squareRoot()
        let qs = try q.values(Float.self), ks = try keys.values(Float.self), vs = try values.values(Float.self)
        var y = [Float](repeating: 0, count: batch * hq * s * dv)
        var scores = [Float](repeating: 0, count: outputs > 3 ? batch * hq * s * t : 0)
        var row = [Float](repeating: 0, count: t), bias = [Float](repeating: 0, count: t)
        for b in 0 ..< batch {
            // Where causal and window masks line up: the keys before this query block.
            let offset = valid.map { $0[b] - s } ?? pastLength
            for h in 0 ..< hq {
                let kh = h / group
                for i in 0 ..< s {
                    let qRow = ((b * hq + h) * s + i) * d
                    for j in 0 ..< t {
                        var extra: Float = 0
                        if let mask {
                            let m = j < mask.width ? mask.values[b * mask.strides[0] + h * mask.strides[1] + i * mask.strides[2] + j * mask.strides[3]] : -.infinity
                            extra += m
                        }
                        if o.causal, j > i + offset { extra = -.infinity }
                        if o.leftWindow >= 0 || o.rightWindow >= 0 {
                            let diff = i + offset - j
                            if (o.leftWindow >= 0 && diff > o.leftWindow) || (o.rightWindow >= 0 && -diff > o.rightWindow) { extra = -.infinity }
                        }
                        if let valid, j >= valid[b] { extra = -.infinity }
                        bias[j] = extra
                        let kRow = ((b * hkv + kh) * t + j) * d
                        var dot: Float = 0
                        for e in 0 ..< d { dot += (qs[qRow + e] * scale) * (ks[kRow + e] * scale) }
                        if o.softcap > 0 { dot = o.softcap * tanhf(dot / o.softcap) }
                        row[j] = dot
                    }
                    let at = ((b * hq + h) * s + i) * t
                    if outputs > 3, o.scoresMode <= 1 { for j in 0 ..< t { scores[at + j] = row[j] } }
                    for j in 0 ..< t { row[j] += bias[j] }
                    if outputs > 3, o.scoresMode == 2 { for j in 0 ..< t { scores[at + j] = row[j] } }
                    // Softmax; a row with every key masked (or every score −∞) attends to nothing.
                    let top = row.max() ?? -.infinity
                    let masked = top == -.infinity || bias.allSatisfy { $0 == -.infinity }
                    var sum: Float = 0
                    for j in 0 ..< t { row[j] = masked ? 0 : expf(row[j] - top); sum += row[j] }
                    if sum > 0 { for j in 0 ..< t { row[j] /= sum } }
                    if outputs > 3, o.scoresMode == 3 { for j in 0 ..< t { scores[at + j] = row[j] } }
                    let yRow = ((b * hq + h) * s + i) * dv
                    for j in 0 ..< t where row[j] != 0 {
                        let vRow = ((b * hkv + kh) * t + j) * dv
                        for e in 0 ..< dv { y[yRow + e] += row[j] * vs[vRow + e] }
                    }
                }
            }
        }
        var out = NDArray(shape: [batch, hq, s, dv], scalars: y)
        if threeD { out = out.transposed([0, 2, 1, 3]).contiguous().reshaped([batch, s, hq * dv]) }
        var results = [out, keys, values, NDArray(shape: [batch, hq, s, t], scalars: scores.isEmpty ? [Float](repeating: 0, count: batch * hq * s * t) : scores)]
        results.removeLast(4 - max(1, min(outputs, 4)))
        return results
    }
}
