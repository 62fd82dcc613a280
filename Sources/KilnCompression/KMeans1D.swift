/// Exact optimal 1-D k-means: the clustering of sorted values into `k` contiguous groups
/// with the least total squared error, by dynamic programming over the distinct values
/// (with multiplicities), using the monotonicity of optimal split points
/// (divide-and-conquer optimization, O(k · m log m) for m distinct values).
/// Deterministic: ties keep the leftmost split.
enum KMeans1D {
    /// Cluster centers (sorted ascending; fewer than `k` when there are fewer distinct values).
    static func centers(_ values: [Float], k: Int) -> [Float] {
        guard !values.isEmpty, k > 0 else { return [] }
        let sorted = values.sorted()
        var xs: [Double] = [], counts: [Double] = []
        xs.reserveCapacity(sorted.count)
        for v in sorted {
            if let last = xs.last, last == Double(v) { counts[counts.count - 1] += 1 } else {
                xs.append(Double(v))
                counts.append(1)
            }
        }
        let m = xs.count
        if m <= k { return xs.map { Float($0) } }
        // Prefix sums of weight, weighted sum and weighted square, centred for precision.
        let mean = zip(xs, counts).reduce(0) { $0 + $1.0 * $1.1 } / Double(sorted.count)
        var pw = [Double](repeating: 0, count: m + 1), ps = pw, pq = pw
        for i in 0 ..< m {
            let x = xs[i] - mean
            pw[i + 1] = pw[i] + counts[i]
            ps[i + 1] = ps[i] + counts[i] * x
            pq[i + 1] = pq[i] + counts[i] * x * x
        }
        var previous = [Double](repeating: 0, count: m + 1)
        var current = [Double](repeating: .infinity, count: m + 1)
        var splits = [[Int32]](repeating: [], count: k)
        pw.withUnsafeBufferPointer { w in ps.withUnsafeBufferPointer { sp in pq.withUnsafeBufferPointer { q in
            @inline(__always) func cost(_ j: Int, _ i: Int) -> Double {
                let n = w[i] - w[j]
                let t = sp[i] - sp[j]
                return max(0, q[i] - q[j] - t * t / n)
            }
            for i in 1 ... m { previous[i] = cost(0, i) }
            var stack: [(Int, Int, Int, Int)] = []
            for level in 1 ..< k {
                var opt = [Int32](repeating: 0, count: m + 1)
                previous.withUnsafeBufferPointer { prev in current.withUnsafeMutableBufferPointer { cur in opt.withUnsafeMutableBufferPointer { op in
                    // cur[i] = min over j in [level, i) of prev[j] + cost(j, i), for i in [level+1, m].
                    stack.append((level + 1, m, level, m - 1))
                    while let (lo, hi, optLo, optHi) = stack.popLast() {
                        guard lo <= hi else { continue }
                        let mid = (lo + hi) / 2
                        var best = Double.infinity, bestJ = optLo
                        let last = min(mid - 1, optHi)
                        if optLo <= last {
                            for j in optLo ... last {
                                let c = prev[j] + cost(j, mid)
                                if c < best { best = c; bestJ = j }
                            }
                        }
                        cur[mid] = best
                        op[mid] = Int32(bestJ)
                        stack.append((lo, mid - 1, optLo, bestJ))
                        stack.append((mid + 1, hi, bestJ, optHi))
                    }
                } } }
                splits[level] = opt
                swap(&previous, &current)
                for i in 0 ... m { current[i] = .infinity }
            }
        } } }
        // Walk the splits back from the last cluster.
        var bounds = [m]
        var i = m
        for level in stride(from: k - 1, through: 1, by: -1) {
            i = Int(splits[level][i])
            bounds.append(i)
        }
        bounds.append(0)
        bounds.reverse()
        return (0 ..< k).map { c in
            let (a, b) = (bounds[c], bounds[c + 1])
            return Float((ps[b] - ps[a]) / (pw[b] - pw[a]) + mean)
        }
    }

    /// Index of the nearest center for each value (ties to the lower index); centers sorted.
    static func assign(_ values: UnsafeBufferPointer<Float>, centers: [Float]) -> [Int] {
        let mids = zip(centers, centers.dropFirst()).map { (Double($0) + Double($1)) / 2 }
        return values.map { v in
            var lo = 0, hi = mids.count
            let x = Double(v)
            while lo < hi {
                let m = (lo + hi) / 2
                if x > mids[m] { lo = m + 1 } else { hi = m }
            }
            return lo
        }
    }
}
