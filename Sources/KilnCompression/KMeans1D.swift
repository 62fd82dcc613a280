import CKilnCompression
import CKilnKernels
import Dispatch

/// Exact optimal 1-D k-means: the clustering of sorted values into `k` contiguous groups
/// with the least total squared error, by dynamic programming over the distinct values
/// (with multiplicities), using the monotonicity of optimal split points
/// (divide-and-conquer optimization, O(k · m log m) for m distinct values; each level's
/// two halves run on two cores). Deterministic: ties keep the leftmost split.
enum KMeans1D {
    /// Prefix sums of weight, weighted value and weighted square (values centred for precision).
    struct Sums: @unchecked Sendable {
        let w, s, q: UnsafeBufferPointer<Double>

        /// Squared error of one cluster holding distinct values `j ..< i`.
        @inline(__always) func cost(_ j: Int, _ i: Int) -> Double {
            let n = w[i] - w[j]
            let t = s[i] - s[j]
            return max(0, q[i] - q[j] - t * t / n)
        }
    }

    /// One DP level: `current[i] = min over j of previous[j] + cost(j, i)`, and the best j.
    struct Level: @unchecked Sendable {
        let sums: Sums
        let previous: UnsafeBufferPointer<Double>
        let current: UnsafeMutableBufferPointer<Double>
        let best: UnsafeMutableBufferPointer<Int32>

        /// Solves rows `lo...hi` knowing their optimal j lies in `optLo...optHi`. With
        /// `split`, stops after the first row and returns the two halves left to solve.
        func solve(_ lo: Int, _ hi: Int, _ optLo: Int, _ optHi: Int, split: Bool) -> [(Int, Int, Int, Int)] {
            var stack = [(lo, hi, optLo, optHi)]
            while let (lo, hi, optLo, optHi) = stack.popLast() {
                guard lo <= hi else { continue }
                let mid = (lo + hi) / 2
                var bestCost = Double.infinity, bestJ = optLo
                let last = min(mid - 1, optHi)
                if optLo <= last {
                    bestJ = KMeans1D.argmin(previous.baseAddress!, sums, optLo, last, mid, &bestCost)
                }
                current[mid] = bestCost
                best[mid] = Int32(bestJ)
                if split { return [(lo, mid - 1, optLo, bestJ), (mid + 1, hi, bestJ, optHi)] }
                stack.append((lo, mid - 1, optLo, bestJ))
                stack.append((mid + 1, hi, bestJ, optHi))
            }
            return []
        }
    }

    /// The j in lo...hi minimizing previous[j] + cost(j, i) (lowest j on ties), by the C scan
    /// (AVX2 when the CPU has it; identical results either way).
    static let vectorScan = kiln_cpu_features() & UInt32(KILN_CPU_X86_V3) != 0

    @inline(__always)
    static func argmin(_ previous: UnsafePointer<Double>, _ sums: Sums, _ lo: Int, _ hi: Int, _ i: Int, _ cost: inout Double) -> Int {
        let (w, s, q) = (sums.w.baseAddress!, sums.s.baseAddress!, sums.q.baseAddress!)
        #if arch(x86_64)
        if vectorScan { return kiln_kmeans_argmin__avx2(previous, w, s, q, lo, hi, i, &cost) }
        #endif
        return kiln_kmeans_argmin__scalar(previous, w, s, q, lo, hi, i, &cost)
    }

    /// Cluster centers (sorted ascending; fewer than `k` when there are fewer distinct values).
    /// Above this many bytes of split table (k × m × 4), the splits are found by divide and
    /// conquer over the clusters instead (O(m) memory, about twice the time).
    static let splitTableBudget = 1 << 30

    static func centers(_ values: [Float], k: Int, splitTableBudget budget: Int = splitTableBudget) -> [Float] {
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
        let mean = zip(xs, counts).reduce(0) { $0 + $1.0 * $1.1 } / Double(sorted.count)
        var pw = [Double](repeating: 0, count: m + 1), ps = pw, pq = pw
        for i in 0 ..< m {
            let x = xs[i] - mean
            pw[i + 1] = pw[i] + counts[i]
            ps[i + 1] = ps[i] + counts[i] * x
            pq[i + 1] = pq[i] + counts[i] * x * x
        }
        if k * (m + 1) * 4 > budget {
            var bounds = [0, m]
            pw.withUnsafeBufferPointer { w in ps.withUnsafeBufferPointer { s in pq.withUnsafeBufferPointer { q in
                split(Sums(w: w, s: s, q: q), 0, m, k, into: &bounds)
            } } }
            bounds.sort()
            return clusterMeans(xs, counts, bounds)
        }
        var previous = [Double](repeating: 0, count: m + 1)
        var current = [Double](repeating: .infinity, count: m + 1)
        var splits = [[Int32]](repeating: [], count: k)
        pw.withUnsafeBufferPointer { w in ps.withUnsafeBufferPointer { s in pq.withUnsafeBufferPointer { q in
            let sums = Sums(w: w, s: s, q: q)
            for i in 1 ... m { previous[i] = sums.cost(0, i) }
            for level in 1 ..< k {
                var opt = [Int32](repeating: 0, count: m + 1)
                previous.withUnsafeBufferPointer { prev in current.withUnsafeMutableBufferPointer { cur in opt.withUnsafeMutableBufferPointer { op in
                    let dp = Level(sums: sums, previous: prev, current: cur, best: op)
                    // Rows level+1...m; their optimal j lies in level...m-1.
                    if m - level > 4096 {
                        let halves = dp.solve(level + 1, m, level, m - 1, split: true)
                        DispatchQueue.concurrentPerform(iterations: halves.count) { h in
                            let t = halves[h]
                            _ = dp.solve(t.0, t.1, t.2, t.3, split: false)
                        }
                    } else {
                        _ = dp.solve(level + 1, m, level, m - 1, split: false)
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
        return clusterMeans(xs, counts, bounds)
    }

    /// The mean of each cluster of distinct values `bounds[c] ..< bounds[c + 1]`, correctly
    /// rounded (as ``BoundedKMeans`` computes it, so both give the same centers).
    static func clusterMeans(_ xs: [Double], _ counts: [Double], _ bounds: [Int]) -> [Float] {
        (0 ..< bounds.count - 1).map { c in
            var sum = PreciseSum(), n = 0.0
            for i in bounds[c] ..< bounds[c + 1] {
                sum.add(xs[i], times: counts[i])
                n += counts[i]
            }
            return sum.mean(n)
        }
    }

    /// Least cost of points `[lo, i)` in `c` clusters, for every i in `lo...hi` (infinity where impossible).
    static func prefixCosts(_ sums: Sums, _ lo: Int, _ hi: Int, _ c: Int) -> [Double] {
        var previous = [Double](repeating: .infinity, count: hi - lo + 1)
        for i in lo + 1 ... hi { previous[i - lo] = sums.cost(lo, i) }
        guard c > 1 else { return previous }
        var current = previous
        for level in 1 ..< c {
            for i in 0 ..< current.count { current[i] = .infinity }
            // Rows i in lo+level+1...hi, optimal j in lo+level...i-1, monotone in i.
            var stack = [(lo + level + 1, hi, lo + level, hi - 1)]
            while let (rlo, rhi, olo, ohi) = stack.popLast() {
                guard rlo <= rhi else { continue }
                let mid = (rlo + rhi) / 2
                var best = Double.infinity, bestJ = olo
                if olo <= min(mid - 1, ohi) {
                    bestJ = previous.withUnsafeBufferPointer { p in
                        KMeans1D.argmin(p.baseAddress! - lo, sums, olo, min(mid - 1, ohi), mid, &best)
                    }
                }
                current[mid - lo] = best
                stack.append((rlo, mid - 1, olo, bestJ))
                stack.append((mid + 1, rhi, bestJ, ohi))
            }
            swap(&previous, &current)
        }
        return previous
    }

    /// Least cost of points `[i, hi)` in `c` clusters, for every i in `lo...hi`.
    static func suffixCosts(_ sums: Sums, _ lo: Int, _ hi: Int, _ c: Int) -> [Double] {
        var previous = [Double](repeating: .infinity, count: hi - lo + 1)
        for i in lo ..< hi { previous[i - lo] = sums.cost(i, hi) }
        guard c > 1 else { return previous }
        var current = previous
        for level in 1 ..< c {
            for i in 0 ..< current.count { current[i] = .infinity }
            // Rows i in lo...hi-level-1, optimal j in i+1...hi-level, monotone in i.
            var stack = [(lo, hi - level - 1, lo + 1, hi - level)]
            while let (rlo, rhi, olo, ohi) = stack.popLast() {
                guard rlo <= rhi else { continue }
                let mid = (rlo + rhi) / 2
                var best = Double.infinity, bestJ = max(olo, mid + 1)
                if max(olo, mid + 1) <= ohi {
                    for j in max(olo, mid + 1) ... ohi {
                        let v = sums.cost(mid, j) + previous[j - lo]
                        if v < best { best = v; bestJ = j }
                    }
                }
                current[mid - lo] = best
                stack.append((rlo, mid - 1, olo, bestJ))
                stack.append((mid + 1, rhi, bestJ, ohi))
            }
            swap(&previous, &current)
        }
        return previous
    }

    /// Appends the inner boundaries of an optimal split of points `[lo, hi)` into `c` clusters.
    static func split(_ sums: Sums, _ lo: Int, _ hi: Int, _ c: Int, into bounds: inout [Int]) {
        guard c > 1 else { return }
        let left = c / 2, right = c - left
        let f = prefixCosts(sums, lo, hi, left), b = suffixCosts(sums, lo, hi, right)
        var best = Double.infinity, at = lo + left
        for i in lo + left ... hi - right {
            let v = f[i - lo] + b[i - lo]
            if v < best { best = v; at = i }
        }
        bounds.append(at)
        split(sums, lo, at, left, into: &bounds)
        split(sums, at, hi, right, into: &bounds)
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
