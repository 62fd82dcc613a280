import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Recurrent-state and value-dependent kernels: linear attention, stateful causal convolution,
/// cache scatter, sequence reversal, unique, nonzero, bit casts, determinants, n-gram counts.
enum SequenceKernels {
    /// Which linear-attention recurrence runs (ONNX LinearAttention's update_rule).
    struct LinearAttentionOptions: Sendable {
        var qHeads: Int
        var kvHeads: Int
        var scale: Float
        var gated: Bool
        var delta: Bool

        init(_ a: [String: AttributeValue]) throws {
            qHeads = try a.int("q_num_heads", 0)
            kvHeads = try a.int("kv_num_heads", 0)
            guard qHeads >= 1, kvHeads >= 1, qHeads % kvHeads == 0 else { throw OpError("q_num_heads must be a positive multiple of kv_num_heads") }
            scale = Float(try a.float("scale", 0))
            let rule = try a.string("update_rule", "gated_delta")
            guard OpSet.updateRules.contains(rule) else { throw OpError("unknown update_rule '\(rule)'") }
            gated = rule.hasPrefix("gated")
            delta = rule.hasSuffix("delta")
        }
    }

    /// `linear_attention`: per token, the state S [dk, dv] of each key/value head decays by
    /// exp(g) (gated), takes β·k ⊗ (v − Sᵀk) (delta) or k ⊗ v, and each query head reads
    /// scale · qᵀS of its group's state.
    static func linearAttention(_ inputs: [NDArray?], _ o: LinearAttentionOptions, outputs: Int) throws -> [NDArray] {
        let q = try KernelTable.present(inputs, 0), k = try KernelTable.present(inputs, 1), v = try KernelTable.present(inputs, 2)
        let past = inputs.count > 3 ? inputs[3] : nil, decay = inputs.count > 4 ? inputs[4] : nil, beta = inputs.count > 5 ? inputs[5] : nil
        guard q.rank == 3, k.rank == 3, v.rank == 3, k.shape[0] == q.shape[0], v.shape[0] == q.shape[0],
              k.shape[1] == q.shape[1], v.shape[1] == q.shape[1], q.shape[2] % o.qHeads == 0, v.shape[2] % o.kvHeads == 0 else {
            throw OpError("linear_attention needs query, key and value [B, T, heads·d] with the heads dividing the last dims")
        }
        let (b, t) = (q.shape[0], q.shape[1])
        let dk = q.shape[2] / o.qHeads, dv = v.shape[2] / o.kvHeads, hkv = o.kvHeads, hq = o.qHeads, group = hq / hkv
        guard k.shape[2] == hkv * dk else { throw OpError("key's last dim must be \(hkv * dk)") }
        guard o.gated == (decay != nil) else { throw OpError(o.gated ? "this update_rule needs decay" : "this update_rule takes no decay") }
        guard o.delta == (beta != nil) else { throw OpError(o.delta ? "this update_rule needs beta" : "this update_rule takes no beta") }
        let qs = try q.contiguous().values(Float.self), ks = try k.contiguous().values(Float.self), vs = try v.contiguous().values(Float.self)
        var state = [Float](repeating: 0, count: b * hkv * dk * dv)
        if let past {
            guard past.shape == [b, hkv, dk, dv] else { throw OpError("past_state must be [\(b), \(hkv), \(dk), \(dv)], got \(past.shape)") }
            state = try past.contiguous().values(Float.self)
        }
        var gs: [Float] = [], perKey = false
        if let decay {
            guard decay.rank == 3, decay.shape[0] == b, decay.shape[1] == t, decay.shape[2] == hkv || decay.shape[2] == hkv * dk else {
                throw OpError("decay must be [\(b), \(t), \(hkv)] or [\(b), \(t), \(hkv * dk)]")
            }
            perKey = decay.shape[2] == hkv * dk && dk != 1
            gs = try decay.contiguous().values(Float.self)
        }
        var betas: [Float] = [], betaWidth = 1
        if let beta {
            guard beta.rank == 3, beta.shape[0] == b, beta.shape[1] == t, beta.shape[2] == hkv || beta.shape[2] == 1 else {
                throw OpError("beta must be [\(b), \(t), \(hkv)] or [\(b), \(t), 1]")
            }
            betaWidth = beta.shape[2]
            betas = try beta.contiguous().values(Float.self)
        }
        let scale = o.scale == 0 ? 1 / Float(dk).squareRoot() : o.scale
        var out = [Float](repeating: 0, count: b * t * hq * dv)
        var update = [Float](repeating: 0, count: dv)
        for bi in 0 ..< b {
            for ti in 0 ..< t {
                for h in 0 ..< hkv {
                    let s = (bi * hkv + h) * dk * dv
                    let kBase = (bi * t + ti) * hkv * dk + h * dk, vBase = (bi * t + ti) * hkv * dv + h * dv
                    if o.gated {
                        let gBase = (bi * t + ti) * (perKey ? hkv * dk : hkv)
                        for i in 0 ..< dk {
                            let f = expf(gs[gBase + (perKey ? h * dk + i : h)])
                            for j in 0 ..< dv { state[s + i * dv + j] *= f }
                        }
                    }
                    for j in 0 ..< dv { update[j] = vs[vBase + j] }
                    if o.delta {
                        let rate = betas[(bi * t + ti) * betaWidth + (betaWidth == 1 ? 0 : h)]
                        for j in 0 ..< dv {
                            var retrieved: Float = 0
                            for i in 0 ..< dk { retrieved += state[s + i * dv + j] * ks[kBase + i] }
                            update[j] = rate * (update[j] - retrieved)
                        }
                    }
                    for i in 0 ..< dk {
                        let ki = ks[kBase + i]
                        for j in 0 ..< dv { state[s + i * dv + j] += ki * update[j] }
                    }
                    for g in 0 ..< group {
                        let head = h * group + g
                        let qBase = (bi * t + ti) * hq * dk + head * dk, oBase = (bi * t + ti) * hq * dv + head * dv
                        for j in 0 ..< dv {
                            var acc: Float = 0
                            for i in 0 ..< dk { acc += qs[qBase + i] * state[s + i * dv + j] }
                            out[oBase + j] = scale * acc
                        }
                    }
                }
            }
        }
        let results = [NDArray(shape: [b, t, hq * dv], scalars: out), NDArray(shape: [b, hkv, dk, dv], scalars: state)]
        return Array(results.prefix(outputs))
    }

    /// `causal_conv_with_state`: a depthwise convolution over [past_state, x] along the length,
    /// with bias and SiLU, and the last k − 1 positions of that sequence as the new state.
    static func causalConv(_ inputs: [NDArray?], silu: Bool, outputs: Int) throws -> [NDArray] {
        let x = try KernelTable.present(inputs, 0), w = try KernelTable.present(inputs, 1)
        let bias = inputs.count > 2 ? inputs[2] : nil, past = inputs.count > 3 ? inputs[3] : nil
        guard x.rank == 3, w.rank == 3, w.shape[0] == x.shape[1], w.shape[1] == 1, w.shape[2] >= 1 else {
            throw OpError("causal_conv_with_state needs input [B, C, L] and weight [C, 1, K], got \(x.shape) and \(w.shape)")
        }
        let (b, c, l, k) = (x.shape[0], x.shape[1], x.shape[2], w.shape[2])
        if let bias, bias.elementCount != c { throw OpError("bias must hold \(c) values") }
        if let past, past.shape != [b, c, k - 1] { throw OpError("past_state must be [\(b), \(c), \(k - 1)], got \(past.shape)") }
        let xs = try x.contiguous().values(Float.self), ws = try w.contiguous().values(Float.self)
        let bs = try bias?.contiguous().values(Float.self), ps = try past?.contiguous().values(Float.self)
        let width = l + k - 1
        var out = [Float](repeating: 0, count: b * c * l), state = [Float](repeating: 0, count: b * c * (k - 1))
        var padded = [Float](repeating: 0, count: width)
        for bi in 0 ..< b {
            for ch in 0 ..< c {
                let plane = bi * c + ch
                for i in 0 ..< k - 1 { padded[i] = ps?[plane * (k - 1) + i] ?? 0 }
                for i in 0 ..< l { padded[k - 1 + i] = xs[plane * l + i] }
                for i in 0 ..< l {
                    var acc = bs?[ch] ?? 0
                    for j in 0 ..< k { acc += padded[i + j] * ws[ch * k + j] }
                    out[plane * l + i] = silu ? acc / (1 + expf(-acc)) : acc
                }
                for i in 0 ..< k - 1 { state[plane * (k - 1) + i] = padded[width - (k - 1) + i] }
            }
        }
        let results = [NDArray(shape: x.shape, scalars: out), NDArray(shape: [b, c, k - 1], scalars: state)]
        return Array(results.prefix(outputs))
    }

    /// `tensor_scatter`: the cache with `update` written along `axis` from each batch's write index
    /// (wrapping in circular mode).
    static func tensorScatter(_ past: NDArray, _ update: NDArray, writeIndices: NDArray?, axis rawAxis: Int, circular: Bool) throws -> NDArray {
        guard past.rank == update.rank, past.scalarType == update.scalarType else { throw OpError("tensor_scatter needs past and update of one rank and dtype") }
        let axis = try OpSet.normalize(axis: rawAxis, rank: past.rank)
        guard axis > 0 else { throw OpError("tensor_scatter's axis cannot be the batch axis") }
        for d in 0 ..< past.rank where d != axis && past.shape[d] != update.shape[d] {
            throw OpError("update \(update.shape) differs from past \(past.shape) outside axis \(axis)")
        }
        let (batch, capacity) = (past.shape[0], past.shape[axis])
        let starts = try writeIndices?.intValues() ?? [Int](repeating: 0, count: batch)
        guard starts.count == batch else { throw OpError("write_indices must hold \(batch) values") }
        let pStrides = stridesOf(past.shape)
        var map = Array(0 ..< past.elementCount)
        let total = past.elementCount
        var index = [Int](repeating: 0, count: update.rank)
        for u in 0 ..< update.elementCount {
            var seq = starts[index[0]] + index[axis]
            if circular && capacity > 0 { seq = ((seq % capacity) + capacity) % capacity }
            if seq >= 0, seq < capacity {
                var at = 0
                for d in 0 ..< past.rank { at += (d == axis ? seq : index[d]) * pStrides[d] }
                map[at] = total + u
            }
            var d = update.rank - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < update.shape[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        let combined = try Movement.concat([past.reshaped([total]), update.reshaped([update.elementCount])], axis: 0)
        return gatherFlat(combined, map, shape: past.shape)
    }

    /// `reverse_sequence`: for each batch entry, the first sequence_lens[b] steps along the time
    /// axis reversed.
    static func reverseSequence(_ x: NDArray, lengths: [Int], batchAxis: Int, timeAxis: Int) throws -> NDArray {
        guard x.rank >= 2, Set([batchAxis, timeAxis]) == Set([0, 1]) else { throw OpError("reverse_sequence needs batch and time axes 0 and 1") }
        let (batch, time) = (x.shape[batchAxis], x.shape[timeAxis])
        guard lengths.count == batch, lengths.allSatisfy({ $0 >= 0 && $0 <= time }) else { throw OpError("sequence_lens must hold \(batch) lengths ≤ \(time)") }
        let strides = stridesOf(x.shape)
        var map = Array(0 ..< x.elementCount)
        let inner = x.shape[2...].reduce(1, *)
        for b in 0 ..< batch {
            for t in 0 ..< lengths[b] {
                let src = lengths[b] - 1 - t
                for i in 0 ..< inner {
                    map[b * strides[batchAxis] + t * strides[timeAxis] + i] = b * strides[batchAxis] + src * strides[timeAxis] + i
                }
            }
        }
        return gatherFlat(x, map, shape: x.shape)
    }

    /// `unique`: distinct elements (or slices along `axis`), sorted or in first-seen order, with
    /// first indices, the inverse map and counts.
    static func unique(_ x: NDArray, axis: Int?, sorted: Bool) throws -> [NDArray] {
        let c = x.contiguous()
        let size = c.elementSize
        let bytes = c.bytes
        let ax = try axis.map { try OpSet.normalize(axis: $0, rank: x.rank) }
        let (outer, count, inner) = ax.map { (x.shape[..<$0].reduce(1, *), x.shape[$0], x.shape[($0 + 1)...].reduce(1, *)) } ?? (1, x.elementCount, 1)
        // Each item's elements as doubles for ordering (NaN last) and bytes for equality.
        let values = try c.doubleValues()
        func key(_ i: Int) -> [UInt8] {
            var k: [UInt8] = []
            for o in 0 ..< outer {
                let start = ((o * count + i) * inner) * size
                k += bytes[start ..< start + inner * size]
            }
            return k
        }
        func less(_ a: Int, _ b: Int) -> Bool {
            for o in 0 ..< outer {
                for j in 0 ..< inner {
                    let (u, v) = (values[(o * count + a) * inner + j], values[(o * count + b) * inner + j])
                    if u != v { return u < v || (v.isNaN && !u.isNaN) }
                }
            }
            return false
        }
        var first: [Int] = [], slot: [[UInt8]: Int] = [:], inverse = [Int](repeating: 0, count: count), counts: [Int] = []
        for i in 0 ..< count {
            let k = key(i)
            if let s = slot[k] {
                inverse[i] = s
                counts[s] += 1
            } else {
                slot[k] = first.count
                inverse[i] = first.count
                first.append(i)
                counts.append(1)
            }
        }
        var order = Array(first.indices)
        if sorted { order.sort { less(first[$0], first[$1]) } }
        var rank = [Int](repeating: 0, count: order.count)
        for (r, s) in order.enumerated() { rank[s] = r }
        let picked = order.map { first[$0] }
        var outShape = ax == nil ? [picked.count] : x.shape
        if let ax { outShape[ax] = picked.count }
        var map: [Int] = []
        map.reserveCapacity(outer * picked.count * inner)
        for o in 0 ..< outer { for p in picked { for j in 0 ..< inner { map.append((o * count + p) * inner + j) } } }
        let y = gatherFlat(c, map, shape: outShape)
        return [y, NDArray.int64(picked), NDArray.int64(inverse.map { rank[$0] }), NDArray.int64(order.map { counts[$0] })]
    }

    /// `non_zero`: the indices [rank, n] of the nonzero elements in C order.
    static func nonZero(_ x: NDArray) throws -> NDArray {
        let values = try x.contiguous().doubleValues()
        let hits = values.indices.filter { values[$0] != 0 }
        let strides = stridesOf(x.shape), rank = x.rank
        var out = [Int64](repeating: 0, count: rank * hits.count)
        for (j, flat) in hits.enumerated() {
            for d in 0 ..< rank { out[d * hits.count + j] = Int64((flat / strides[d]) % x.shape[d]) }
        }
        return NDArray(shape: [rank, hits.count], scalars: out)
    }

    /// `bit_cast`: the same bytes read as another type of the same width.
    static func bitCast(_ x: NDArray, to: DataType) throws -> NDArray {
        guard to.bitWidth == x.scalarType.bitWidth, !to.isSubByte else { throw OpError("bit_cast to \(to.rawValue) changes the width") }
        var out = NDArray(shape: x.shape, scalarType: to)
        let bytes = x.contiguous().bytes
        out.withUnsafeMutableBytes { dst in
            for i in bytes.indices { dst[i] = bytes[i] }
            // A bool holds 0 or 1.
            if to == .bool { for i in bytes.indices { dst[i] = dst[i] == 0 ? 0 : 1 } }
        }
        return out
    }

    /// `det`: determinants of the innermost square matrices, by LU with partial pivoting in double.
    static func det(_ x: NDArray) throws -> NDArray {
        guard x.rank >= 2, x.shape[x.rank - 1] == x.shape[x.rank - 2] else { throw OpError("det needs [..., M, M], got \(x.shape)") }
        let m = x.shape[x.rank - 1], batch = x.shape.dropLast(2).reduce(1, *)
        let xs = try x.contiguous().values(Float.self)
        var out = [Float](repeating: 0, count: batch)
        for b in 0 ..< batch {
            var a = (0 ..< m * m).map { Double(xs[b * m * m + $0]) }
            var d = 1.0
            for col in 0 ..< m {
                var pivot = col
                for r in col + 1 ..< m where abs(a[r * m + col]) > abs(a[pivot * m + col]) { pivot = r }
                if a[pivot * m + col] == 0 { d = 0; break }
                if pivot != col {
                    for j in 0 ..< m { a.swapAt(col * m + j, pivot * m + j) }
                    d = -d
                }
                d *= a[col * m + col]
                for r in col + 1 ..< m {
                    let f = a[r * m + col] / a[col * m + col]
                    for j in col ..< m { a[r * m + j] -= f * a[col * m + j] }
                }
            }
            out[b] = Float(d)
        }
        return NDArray(shape: Array(x.shape.dropLast(2)), scalars: out)
    }

    /// `mean_variance_normalization`: (x − E[x]) / (√(E[x²] − E[x]²) + 1e-9) over `axes`.
    static func meanVarianceNormalization(_ x: NDArray, axes: [Int]) throws -> NDArray {
        let list = try axes.map { try OpSet.normalize(axis: $0, rank: x.rank) }
        let mean = try Reduction.reduceOp("reduce_mean", x, axes: list, keepDims: true, noopWithEmpty: false)
        let square = try Elementwise.arithmetic("mul", x, x)
        let meanSquare = try Reduction.reduceOp("reduce_mean", square, axes: list, keepDims: true, noopWithEmpty: false)
        let variance = try Elementwise.arithmetic("sub", meanSquare, try Elementwise.arithmetic("mul", mean, mean))
        let deviation = try Elementwise.mapFloat(variance) { $0.squareRoot() + 1e-9 }
        return try Elementwise.arithmetic("div", try Elementwise.arithmetic("sub", x, mean), deviation)
    }

    /// Parsed TfIdfVectorizer attributes: the n-gram pool as a trie keyed by token.
    struct NGrams: Sendable {
        final class Node: @unchecked Sendable {
            var children: [Int: Node] = [:]
            var id: Int?
        }
        let root = Node()
        var minLength: Int, maxLength: Int, maxSkip: Int
        var mode: String
        var indexes: [Int]
        var weights: [Float]?
        var width: Int

        init(_ a: [String: AttributeValue]) throws {
            minLength = try a.int("min_gram_length", 1)
            maxLength = try a.int("max_gram_length", 1)
            maxSkip = try a.int("max_skip_count", 0)
            mode = try a.string("mode", "TF")
            guard minLength >= 1, maxLength >= minLength, maxSkip >= 0, ["TF", "IDF", "TFIDF"].contains(mode) else {
                throw OpError("tfidf_vectorizer needs 1 ≤ min_gram_length ≤ max_gram_length, max_skip_count ≥ 0 and mode TF, IDF or TFIDF")
            }
            let counts = try a.ints("ngram_counts") ?? [], pool = try a.ints("pool_int64s") ?? []
            indexes = try a.ints("ngram_indexes") ?? []
            weights = try a.floats("weights").map { $0.map(Float.init) }
            width = (indexes.max() ?? -1) + 1
            guard counts.count <= maxLength, counts.allSatisfy({ $0 >= 0 && $0 <= pool.count }) else { throw OpError("ngram_counts do not fit the pool") }
            // Pool entries of length n start at counts[n − 1]; ids run in pool order.
            var id = 0
            for (n1, start) in counts.enumerated() {
                let n = n1 + 1, end = n1 + 1 < counts.count ? counts[n1 + 1] : pool.count
                guard end >= start, (end - start) % n == 0 else { throw OpError("the pool's \(n)-grams do not fill whole n-grams") }
                var i = start
                while i < end {
                    var node = root
                    for token in pool[i ..< i + n] {
                        if let next = node.children[token] { node = next } else {
                            let next = Node()
                            node.children[token] = next
                            node = next
                        }
                    }
                    node.id = id
                    id += 1
                    i += n
                }
            }
            guard indexes.count >= id, indexes.allSatisfy({ $0 >= 0 }) else { throw OpError("ngram_indexes must map each of the \(id) n-grams") }
            if let weights, weights.count < id { throw OpError("weights must hold one value per n-gram") }
        }
    }

    /// `tfidf_vectorizer` over integer tokens: counts of each pooled n-gram (tokens `skip + 1`
    /// apart, unigrams once), weighted per mode.
    static func tfidf(_ x: NDArray, _ g: NGrams) throws -> NDArray {
        guard x.rank == 1 || x.rank == 2 else { throw OpError("tfidf_vectorizer needs a 1-D or 2-D input") }
        let tokens = try x.contiguous().intValues()
        let rows = x.rank == 1 ? 1 : x.shape[0], length = x.rank == 1 ? x.shape[0] : x.shape[1]
        var out = [Float](repeating: 0, count: rows * g.width)
        for r in 0 ..< rows {
            var counts = [Int](repeating: 0, count: g.indexes.count)
            for skip in 0 ... g.maxSkip {
                for start in 0 ..< length {
                    var node = g.root
                    var n = 0, at = start
                    while at < length, n < g.maxLength, let next = node.children[tokens[r * length + at]] {
                        node = next
                        n += 1
                        if n >= g.minLength, n > 1 || skip == 0, let id = node.id { counts[id] += 1 }
                        at += skip + 1
                    }
                }
            }
            for (id, count) in counts.enumerated() where count > 0 {
                let w = g.weights?[id] ?? 1
                let value: Float = g.mode == "TF" ? Float(count) : g.mode == "IDF" ? w : Float(count) * w
                out[r * g.width + g.indexes[id]] = value
            }
        }
        return NDArray(shape: x.rank == 1 ? [g.width] : [rows, g.width], scalars: out)
    }
}
