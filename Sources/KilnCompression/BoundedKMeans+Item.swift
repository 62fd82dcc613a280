import CKilnCompression
import CKilnKernels

extension BoundedKMeans {
    /// A contiguous range of keys and the statistics of the values in it.
    struct Item {
        /// The keys it may hold (inclusive).
        var lo: UInt32
        var hi: UInt32
        /// Its sub-bins hold `2^shift` keys; a range wider than one such bin is a merged item.
        var shift: Int
        var n: Double
        var mean: Double
        var sse: Double
        var minKey: UInt32
        var maxKey: UInt32
        /// The exact sum of its values.
        var sum = PreciseSum()
        /// Shown to hold no optimal cut.
        var sealed = false
        /// Whether a cut may still lie inside it: it holds more than one distinct value and is not sealed.
        var droppable: Bool { minKey < maxKey && !sealed }
        var isMerged: Bool { UInt64(hi) - UInt64(lo) + 1 > UInt64(1) << shift }

        /// The item of one bin's sums.
        init(lo: UInt32, shift: Int, sums s: BinSums) {
            self.lo = lo
            hi = lo &+ UInt32((UInt64(1) << shift) - 1)
            self.shift = shift
            n = Double(s.n)
            let u = BoundedKMeans.unit(lo)
            mean = Double(BoundedKMeans.value(lo)) + Double(s.r) / n * u
            // n·Σr² − (Σr)², exactly.
            let spread = UInt128(s.n) * UInt128(s.r2) - UInt128(s.r) * UInt128(s.r)
            sse = Double(spread) / n * u * u
            minKey = s.min_key
            maxKey = s.max_key
            // n·value(lo) + Σr·u, each part exact as a pair (Σr < 2^53, u a power of two).
            sum.add(Double(BoundedKMeans.value(lo)), times: n)
            sum.add(Double(s.r) * u)
        }

        /// Consecutive items as one.
        init(merging parts: ArraySlice<Item>) {
            let first = parts.first!
            lo = first.lo
            hi = parts.last!.hi
            shift = first.shift
            n = parts.reduce(0) { $0 + $1.n }
            let total = n
            mean = parts.reduce(0) { $0 + $1.n * $1.mean } / total
            let center = mean
            sse = parts.reduce(0) { $0 + $1.sse + $1.n * ($1.mean - center) * ($1.mean - center) }
            minKey = parts.map(\.minKey).min()!
            maxKey = parts.map(\.maxKey).max()!
            for p in parts { sum.add(p.sum) }
        }
    }
}

extension kiln_kmeans_bin: @unchecked @retroactive Sendable {
    /// No values.
    static let empty = kiln_kmeans_bin(n: 0, r: 0, r2: 0, min_key: .max, max_key: 0)

    mutating func add(_ o: kiln_kmeans_bin) {
        n += o.n
        r += o.r
        r2 += o.r2
        min_key = min(min_key, o.min_key)
        max_key = max(max_key, o.max_key)
    }
}
