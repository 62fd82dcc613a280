import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Reductions, softmax, normalization, cumulative sums and top-k.
enum Reduction {
    /// Splits `shape` around `axes` for reduction: (outer positions, reduced positions).
    /// Visits each output element with the flat input offsets it reduces over.
    static func reduce(_ x: NDArray, axes: [Int], keepDims: Bool, _ combine: ([Int]) -> Float) throws -> NDArray {
        let set = Set(axes)
        let kept = x.shape.indices.filter { !set.contains($0) }
        let reduced = x.shape.indices.filter { set.contains($0) }
        let strides = stridesOf(x.shape)
        let keptShape = kept.map { x.shape[$0] }, reducedShape = reduced.map { x.shape[$0] }
        // Offsets of the reduced positions relative to the first one.
        var inner: [Int] = []
        inner.reserveCapacity(reducedShape.reduce(1, *))
        forEachIndex(reducedShape, [reduced.map { strides[$0] }]) { _, off in inner.append(off[0]) }
        let outShape = keepDims ? x.shape.indices.map { set.contains($0) ? 1 : x.shape[$0] } : keptShape
        var offsets = inner
        return NDArray.make(outShape, Float.self) { out in
            forEachIndex(keptShape, [kept.map { strides[$0] }]) { i, base in
                for j in inner.indices { offsets[j] = base[0] + inner[j] }
                out[i] = combine(offsets)
            }
        }
    }

    static func axesList(_ x: NDArray, _ axes: [Int]?) throws -> [Int] {
        try (axes ?? Array(0 ..< x.rank)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
    }

    static func reduceOp(_ op: String, _ x: NDArray, axes: [Int]?, keepDims: Bool, noopWithEmpty: Bool) throws -> NDArray {
        if (axes?.isEmpty ?? true) && noopWithEmpty { return x }
        // Integer and bool inputs reduce in float32 and return in their own type.
        let isInt = !x.scalarType.isFloatingPoint
        let input = x.scalarType == .float32 ? x : try Elementwise.cast(x, to: .float32)
        guard input.scalarType == .float32 else { throw OpError("\(op) needs a numeric input") }
        let list = try axesList(x, axes?.isEmpty == true ? nil : axes)
        defer { withExtendedLifetime(input) {} }
        let p = try input.f32
        let result = try reduce(input, axes: list, keepDims: keepDims) { offs in
            switch op {
            case "reduce_sum": return offs.reduce(Float(0)) { $0 + p[$1] }
            case "reduce_mean": return offs.isEmpty ? .nan : offs.reduce(Float(0)) { $0 + p[$1] } / Float(offs.count)
            case "reduce_max": return offs.reduce(-Float.infinity) { $0.isNaN || p[$1].isNaN ? .nan : max($0, p[$1]) }
            case "reduce_min": return offs.reduce(Float.infinity) { $0.isNaN || p[$1].isNaN ? .nan : min($0, p[$1]) }
            case "reduce_prod": return offs.reduce(Float(1)) { $0 * p[$1] }
            case "reduce_l1": return offs.reduce(Float(0)) { $0 + abs(p[$1]) }
            case "reduce_sum_square": return offs.reduce(Float(0)) { $0 + p[$1] * p[$1] }
            case "reduce_log_sum": return logf(offs.reduce(Float(0)) { $0 + p[$1] })
            case "reduce_log_sum_exp":
                // Shifted by the largest value, so large inputs do not overflow.
                let m = offs.reduce(-Float.infinity) { max($0, p[$1]) }
                guard m.isFinite else { return offs.isEmpty ? -.infinity : m }
                return m + logf(offs.reduce(Float(0)) { $0 + expf(p[$1] - m) })
            default: return offs.reduce(Float(0)) { $0 + p[$1] * p[$1] }.squareRoot()
            }
        }
        // Bool max and min are any and all (an empty max is false, an empty min true).
        if x.scalarType == .bool { return try Elementwise.compare("greater", result, NDArray(scalar: Float(0))) }
        return isInt ? try Elementwise.cast(result, to: x.scalarType) : result
    }

    static func argExtreme(_ x: NDArray, axis: Int, keepDims: Bool, max isMax: Bool, last: Bool) throws -> NDArray {
        guard x.rank >= 1 else { throw OpError("argmax and argmin need an input of rank ≥ 1") }
        let input = x.scalarType == .float32 ? x : try Elementwise.cast(x, to: .float32)
        defer { withExtendedLifetime(input) {} }
        let p = try input.f32
        let r = try reduce(input, axes: [axis], keepDims: keepDims) { offs in
            var best = 0
            for (i, o) in offs.enumerated().dropFirst() {
                let v = p[o], b = p[offs[best]]
                if b.isNaN { break }
                if v.isNaN || (isMax ? (v > b || (last && v == b)) : (v < b || (last && v == b))) { best = i }
            }
            return Float(best)
        }
        return try Elementwise.cast(r, to: .int64)
    }

    /// Softmax or log-softmax along `axis`.
    static func softmax(_ x: NDArray, axis: Int, log: Bool) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("softmax needs float32 input") }
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        let p = try x.f32
        return NDArray.make(x.shape, Float.self) { out in
            for o in 0 ..< outer {
                for i in 0 ..< inner {
                    let base = o * n * inner + i
                    var m = -Float.infinity
                    for k in 0 ..< n { m = max(m, p[base + k * inner]) }
                    var sum: Float = 0
                    for k in 0 ..< n {
                        let e = expf(p[base + k * inner] - m)
                        out[base + k * inner] = e
                        sum += e
                    }
                    if log {
                        let ls = logf(sum)
                        for k in 0 ..< n { out[base + k * inner] = p[base + k * inner] - m - ls }
                    } else {
                        for k in 0 ..< n { out[base + k * inner] /= sum }
                    }
                }
            }
        }
    }

    /// Normalizes `x` over the trailing dims from `axis`, then applies scale and bias
    /// broadcast over those dims.
    static func layerNorm(_ x: NDArray, _ scale: NDArray, _ bias: NDArray?, axis: Int, epsilon: Float) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("layer_norm needs float32 input") }
        let inner = x.shape[axis...].reduce(1, *), outer = x.elementCount / max(inner, 1)
        let trailing = Array(x.shape[axis...])
        func expand(_ t: NDArray) throws -> [Float] {
            let target = trailing
            let s = try broadcastShapes([t.shape, target])
            guard s == target else { throw OpError("layer_norm scale/bias \(t.shape) do not broadcast to \(target)") }
            var v = [Float](repeating: 0, count: inner)
            let p = try t.f32
            forEachIndex(target, [broadcastStrides(t.shape, to: target)]) { i, off in v[i] = p[off[0]] }
            return v
        }
        let g = try expand(scale), b = try bias.map(expand)
        let p = try x.f32
        return NDArray.make(x.shape, Float.self) { out in
            for o in 0 ..< outer {
                let row = p.baseAddress! + o * inner
                var mean: Float = 0
                for i in 0 ..< inner { mean += row[i] }
                mean /= Float(inner)
                var variance: Float = 0
                for i in 0 ..< inner { let d = row[i] - mean; variance += d * d }
                variance /= Float(inner)
                let inv = 1 / (variance + epsilon).squareRoot()
                for i in 0 ..< inner {
                    out[o * inner + i] = (row[i] - mean) * inv * g[i] + (b?[i] ?? 0)
                }
            }
        }
    }

    /// Per-channel `scale · (x − mean) / sqrt(var + ε) + bias` with channels on dim 1.
    static func batchNorm(_ x: NDArray, _ scale: NDArray, _ bias: NDArray, _ mean: NDArray, _ variance: NDArray, epsilon: Float) throws -> NDArray {
        guard x.scalarType == .float32, x.rank >= 2 else { throw OpError("batch_norm needs float32 input [N, C, …]") }
        let c = x.shape[1]
        for t in [scale, bias, mean, variance] where t.elementCount != c {
            throw OpError("batch_norm parameters must have \(c) elements, got \(t.shape)")
        }
        let inner = x.shape[2...].reduce(1, *)
        let (ps, pb, pm, pv, px) = (try scale.f32, try bias.f32, try mean.f32, try variance.f32, try x.f32)
        return NDArray.make(x.shape, Float.self) { out in
            for n in 0 ..< x.shape[0] {
                for ch in 0 ..< c {
                    let k = ps[ch] / (pv[ch] + epsilon).squareRoot()
                    let s = pb[ch] - pm[ch] * k
                    let base = (n * c + ch) * inner
                    for i in 0 ..< inner { out[base + i] = px[base + i] * k + s }
                }
            }
        }
    }

    /// Normalizes each (n, c) plane, then per-channel scale and bias.
    static func instanceNorm(_ x: NDArray, _ scale: NDArray, _ bias: NDArray, epsilon: Float) throws -> NDArray {
        guard x.scalarType == .float32, x.rank >= 3 else { throw OpError("instance_norm needs float32 input [N, C, …]") }
        let c = x.shape[1], inner = x.shape[2...].reduce(1, *)
        guard scale.elementCount == c, bias.elementCount == c else { throw OpError("instance_norm scale and bias must have \(c) elements") }
        let (ps, pb, px) = (try scale.f32, try bias.f32, try x.f32)
        return NDArray.make(x.shape, Float.self) { out in
            for plane in 0 ..< x.shape[0] * c {
                let ch = plane % c, base = plane * inner
                var mean: Float = 0
                for i in 0 ..< inner { mean += px[base + i] }
                mean /= Float(inner)
                var v: Float = 0
                for i in 0 ..< inner { let d = px[base + i] - mean; v += d * d }
                v /= Float(inner)
                let k = ps[ch] / (v + epsilon).squareRoot()
                for i in 0 ..< inner { out[base + i] = (px[base + i] - mean) * k + pb[ch] }
            }
        }
    }

    /// Running sums (or products) along `axis`.
    static func cumsum(_ x: NDArray, axis: Int, exclusive: Bool, reverse: Bool, product: Bool = false) throws -> NDArray {
        let input = x.scalarType == .float32 ? x : try Elementwise.cast(x, to: .float32)
        let n = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        defer { withExtendedLifetime(input) {} }
        let p = try input.f32
        let r = NDArray.make(x.shape, Float.self) { out in
            for o in 0 ..< outer {
                for i in 0 ..< inner {
                    var acc: Float = product ? 1 : 0
                    for step in 0 ..< n {
                        let k = reverse ? n - 1 - step : step
                        let at = (o * n + k) * inner + i
                        if exclusive { out[at] = acc }
                        acc = product ? acc * p[at] : acc + p[at]
                        if !exclusive { out[at] = acc }
                    }
                }
            }
        }
        return x.scalarType == .float32 ? r : try Elementwise.cast(r, to: x.scalarType)
    }

    /// The `k` largest (or smallest) along `axis`, ties broken by lower index.
    static func topK(_ x: NDArray, k: Int, axis: Int, largest: Bool) throws -> (NDArray, NDArray) {
        let n = x.shape[axis]
        guard k >= 0, k <= n else { throw OpError("k = \(k) is out of range for a dim of \(n)") }
        let input = x.scalarType == .float32 ? x : try Elementwise.cast(x, to: .float32)
        let inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        var shape = x.shape
        shape[axis] = k
        defer { withExtendedLifetime(input) {} }
        let p = try input.f32
        var values = [Float](repeating: 0, count: outer * k * inner)
        var indices = [Int64](repeating: 0, count: values.count)
        for o in 0 ..< outer {
            for i in 0 ..< inner {
                let order = (0 ..< n).sorted { a, b in
                    let va = p[(o * n + a) * inner + i], vb = p[(o * n + b) * inner + i]
                    if va == vb { return a < b }
                    return largest ? va > vb : va < vb
                }
                for j in 0 ..< k {
                    values[(o * k + j) * inner + i] = p[(o * n + order[j]) * inner + i]
                    indices[(o * k + j) * inner + i] = Int64(order[j])
                }
            }
        }
        let v = NDArray(shape: shape, scalars: values)
        return (x.scalarType == .float32 ? v : try Elementwise.cast(v, to: x.scalarType), NDArray(shape: shape, scalars: indices))
    }
}
