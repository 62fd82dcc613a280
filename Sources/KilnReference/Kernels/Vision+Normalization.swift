import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// `center_crop_pad`, `lrn`, `group_norm`.
extension Vision {
    // MARK: Cropping and normalization

    /// `center_crop_pad`: each listed axis cropped or zero-padded to its target, centered (the
    /// odd element goes to the end).
    static func centerCropPad(_ x: NDArray, shape target: [Int], axes: [Int]?) throws -> NDArray {
        let list = try (axes ?? Array(0 ..< x.rank)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
        guard list.count == target.count, target.allSatisfy({ $0 >= 0 }) else {
            throw OpError("center_crop_pad's shape has \(target.count) entries for \(list.count) axes")
        }
        var outShape = x.shape
        // Per axis: where the input's kept part starts in the input and in the output, and its length.
        var from = [Int](repeating: 0, count: x.rank), to = [Int](repeating: 0, count: x.rank), length = x.shape
        for (a, t) in zip(list, target) {
            let d = x.shape[a]
            outShape[a] = t
            if t < d { from[a] = (d - t) / 2; length[a] = t } else if t > d { to[a] = (t - d) / 2 }
        }
        let inStrides = stridesOf(x.shape), outStrides = stridesOf(outShape)
        let total = try checkedShape(outShape).reduce(1, *)
        // Each output element's source index, or the appended zero.
        var map = [Int](repeating: x.elementCount, count: total)
        var index = [Int](repeating: 0, count: x.rank)
        let count = length.reduce(1, *)
        for _ in 0 ..< count {
            var src = 0, dst = 0
            for a in 0 ..< x.rank {
                src += (index[a] + from[a]) * inStrides[a]
                dst += (index[a] + to[a]) * outStrides[a]
            }
            map[dst] = src
            var d = x.rank - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < length[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        let zero = NDArray(shape: [1], scalarType: x.scalarType)
        let combined = try Movement.concat([x.reshaped([x.elementCount]), zero], axis: 0)
        return gatherFlat(combined, map, shape: outShape)
    }

    /// `lrn`: x / (bias + alpha/size · Σ x² over the channel window)^beta.
    static func lrn(_ x: NDArray, size: Int, alpha: Float, beta: Float, bias: Float) throws -> NDArray {
        guard x.rank >= 3, size >= 1 else { throw OpError("lrn needs x [N, C, …] and size ≥ 1") }
        let (n, c) = (x.shape[0], x.shape[1]), inner = x.shape[2...].reduce(1, *)
        let xs = try x.contiguous().values(Float.self)
        let before = (size - 1) / 2, after = size - 1 - before
        return NDArray.make(x.shape, Float.self) { out in
            for b in 0 ..< n {
                for ch in 0 ..< c {
                    let lo = max(0, ch - before), hi = min(c - 1, ch + after)
                    for i in 0 ..< inner {
                        var sum: Float = 0
                        for k in lo ... hi { let v = xs[(b * c + k) * inner + i]; sum += v * v }
                        let at = (b * c + ch) * inner + i
                        out[at] = xs[at] / powf(bias + alpha / Float(size) * sum, beta)
                    }
                }
            }
        }
    }

    /// `group_norm`: each of `groups` channel groups normalized by its own mean and variance,
    /// then scaled and shifted per channel (or per group when scale holds one value per group).
    static func groupNorm(_ x: NDArray, scale: NDArray, bias: NDArray, groups: Int, epsilon: Float) throws -> NDArray {
        guard x.rank >= 2, groups >= 1, x.shape[1] % groups == 0 else { throw OpError("group_norm needs x [N, C, …] with C divisible by num_groups \(groups)") }
        let (n, c) = (x.shape[0], x.shape[1]), inner = x.shape[2...].reduce(1, *), per = c / groups
        let xs = try x.contiguous().values(Float.self), s = try scale.contiguous().values(Float.self), bs = try bias.contiguous().values(Float.self)
        guard (s.count == c || s.count == groups), bs.count == s.count else { throw OpError("group_norm's scale and bias must hold \(c) or \(groups) values") }
        let perChannel = s.count == c
        return NDArray.make(x.shape, Float.self) { out in
            for b in 0 ..< n {
                for g in 0 ..< groups {
                    let start = (b * c + g * per) * inner, count = per * inner
                    var mean: Double = 0
                    for i in 0 ..< count { mean += Double(xs[start + i]) }
                    mean /= Double(max(count, 1))
                    var variance: Double = 0
                    for i in 0 ..< count { let d = Double(xs[start + i]) - mean; variance += d * d }
                    variance /= Double(max(count, 1))
                    let inv = 1 / (Float(variance) + epsilon).squareRoot()
                    for i in 0 ..< count {
                        let ch = g * per + i / inner, k = perChannel ? ch : g
                        out[start + i] = (xs[start + i] - Float(mean)) * inv * s[k] + bs[k]
                    }
                }
            }
        }
    }
}
