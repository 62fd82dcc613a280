import CKilnKernels
import Dispatch
import Foundation

/// Exact optimal 1-D k-means of a large group of values without sorting or copying them
/// (specs/compression.md, "Exact k-means on a compressed domain").
///
/// Values are read in place and binned by the high bits of their order-preserving key. A bin
/// (an *item*) keeps its count, mean and squared error, so a clustering whose cuts fall on item
/// boundaries is costed exactly. Each level bounds where the optimal cuts can lie:
/// - an upper bound `U`: the best clustering with every cut on an item boundary;
/// - for every place a cut could be (a boundary, or inside an item), a lower bound on any
///   clustering with a cut there: the same dynamic programming, except that an item holding a cut
///   may be left out at no cost (dropping points never raises a clustering's squared error).
/// An item whose lower bound exceeds `U` holds no optimal cut, whatever the points inside it, so it
/// stays one weighted point. The others are split into their sub-bins by one more pass over the
/// values, and the next level runs over those, each cut's dynamic programming confined to the
/// window where that cut can still lie. When no item can hold a cut, the best boundary clustering
/// is optimal. Items that hold one distinct value can never hold a cut, so the last level is exact.
///
/// Statistics of a pass are integer sums (a bin's values are evenly spaced keys), so they do not
/// depend on the number of threads; means and errors come from them in one deterministic order.
enum BoundedKMeans {
    /// A value that is NaN or infinite.
    struct NonFiniteValue: Error {}

    /// Order-preserving key of a float; −0 counts as +0.
    @inline(__always) static func key(_ v: Float) -> UInt32 {
        let b = v == 0 ? 0 : v.bitPattern
        return b & 0x8000_0000 != 0 ? ~b : b | 0x8000_0000
    }

    /// The float of a key.
    @inline(__always) static func value(_ key: UInt32) -> Float {
        Float(bitPattern: key & 0x8000_0000 != 0 ? key & 0x7FFF_FFFF : ~key)
    }

    /// The distance between consecutive keys' values within the key's 16-bit bin (one exponent).
    static func unit(_ key: UInt32) -> Double {
        let bits = key & 0x8000_0000 != 0 ? key & 0x7FFF_FFFF : ~key
        let e = Int((bits >> 23) & 0xFF)
        return Double(sign: .plus, exponent: max(e, 1) - 150, significand: 1)
    }

    /// Integer sums of the values in one bin of `2^shift` keys from `lo`: r = key − lo.
    typealias BinSums = kiln_kmeans_bin

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

    /// Centers of the optimal clustering of `source`'s values into `k` clusters, ascending
    /// (fewer when there are fewer distinct values).
    /// - Throws: ``NonFiniteValue`` when a value is NaN or infinite.
    static func centers(of source: GroupElements, k: Int) throws -> [Float] {
        let n = source.count
        guard n > 0, k > 0 else { return [] }
        precondition(n < 1 << 32, "a palettization group of 2^32 or more elements")
        let chunks = source.chunks
        // Level 0: every value into its 16-bit bin; unscaled float16 values are counted exactly.
        var nonempty: [Item] = []
        if source.isHalf, source.scales == nil {
            nonempty = try halfValues(source, chunks)
        } else {
            let bins = try histogram(source, chunks)
            for b in 0 ..< 65536 where bins[b].n > 0 {
                nonempty.append(Item(lo: UInt32(b) << 16, shift: 16, sums: bins[b]))
            }
        }
        // The first level's windows span everything: above this many bins, it runs over merged
        // bins (later levels split those that may hold a cut into their bins). Merging costs
        // pruning, so only as many as the first level's memory needs.
        let cap = max(1024, (1 << 19) / k)
        var items = nonempty.count <= cap ? nonempty : mergeByCount(nonempty[...], into: cap)
        let total = items.reduce(0) { $0 + $1.n }
        let mu = items.reduce(0) { $0 + $1.n * $1.mean } / total
        var windows = [ClosedRange<Int>](repeating: 0 ... 3 * items.count, count: max(k - 1, 0))
        while true {
            guard k > 1, items.count > k || items.contains(where: \.droppable) else {
                // One cluster, or each item its own.
                return k == 1 ? means(items, cuts: []) : means(items, cuts: Array(1 ..< items.count))
            }
            let (cuts, candidates, next) = Level(items: items, mu: mu, k: k).solve(windows: windows)
            guard let candidates else {
                return means(items, cuts: cuts)
            }
            // Split every candidate item into its sub-bins.
            var parts = [[Item]](repeating: [], count: items.count)
            var byPass: [Int] = []
            for g in candidates {
                if items[g].isMerged {
                    let first = firstItem(in: nonempty, from: items[g].lo), last = firstItem(in: nonempty, from: items[g].hi &+ 1)
                    let inside = items[g].hi == .max ? nonempty[first...] : nonempty[first ..< last]
                    parts[g] = inside.count <= 256 ? Array(inside) : mergeByCount(inside, into: 256)
                } else {
                    byPass.append(g)
                }
            }
            for (i, sub) in refine(source, chunks, byPass.map { items[$0] }).enumerated() { parts[byPass[i]] = sub }
            var newItems: [Item] = []
            newItems.reserveCapacity(items.count + parts.reduce(0) { $0 + $1.count })
            var newBoundary = [Int](repeating: 0, count: items.count + 1)
            for g in items.indices {
                newBoundary[g] = newItems.count
                if parts[g].isEmpty {
                    var kept = items[g]
                    kept.sealed = true
                    newItems.append(kept)
                } else {
                    newItems += parts[g]
                    parts[g] = []
                }
            }
            newBoundary[items.count] = newItems.count
            items = []
            (items, windows) = compact(newItems, next.map { w in 3 * newBoundary[w.lowerBound / 3] ... 3 * newBoundary[(w.upperBound + 2) / 3] })
        }
    }

    /// The index of the first of `items` (sorted, disjoint) starting at or after `key`.
    static func firstItem(in items: [Item], from key: UInt32) -> Int {
        var lo = 0, hi = items.count
        while lo < hi {
            let mid = (lo + hi) / 2
            if items[mid].lo < key { lo = mid + 1 } else { hi = mid }
        }
        return lo
    }

    /// The distinct values of unscaled float16 elements, each an item, from counts of their bit
    /// patterns.
    static func halfValues(_ source: GroupElements, _ chunks: [Range<Int>]) throws -> [Item] {
        let t = min(workers, chunks.count)
        var partial = [[UInt32]](repeating: [], count: t)
        partial.withUnsafeMutableBufferPointer { parts in
            nonisolated(unsafe) let p = parts
            DispatchQueue.concurrentPerform(iterations: t) { w in
                var counts = [UInt32](repeating: 0, count: 65536)
                counts.withUnsafeMutableBufferPointer { c in
                    for chunk in stride(from: w, to: chunks.count, by: t) {
                        source.forEachStretch(in: chunks[chunk]) { position, n, _ in
                            kiln_kmeans_histogram_half(source.base.advanced(by: 2 * position).assumingMemoryBound(to: UInt16.self), n, c.baseAddress)
                        }
                        source.release(chunks[chunk])
                    }
                }
                p[w] = counts
            }
        }
        var byKey: [(UInt32, UInt64)] = []
        for h in 0 ..< 65536 {
            var n: UInt64 = 0
            for w in 0 ..< t { n += UInt64(partial[w][h]) }
            guard n > 0 else { continue }
            let v = Float(Float16(bitPattern: UInt16(h)))
            guard v.isFinite else { throw NonFiniteValue() }
            byKey.append((key(v), n))
        }
        byKey.sort { $0.0 < $1.0 }
        var out: [Item] = []
        for (k, n) in byKey {
            // +0 and −0 are one value.
            if let last = out.last, last.lo == k {
                out[out.count - 1] = Item(lo: k, shift: 0, sums: BinSums(n: UInt64(last.n) + n, r: 0, r2: 0, min_key: k, max_key: k))
            } else {
                out.append(Item(lo: k, shift: 0, sums: BinSums(n: n, r: 0, r2: 0, min_key: k, max_key: k)))
            }
        }
        return out
    }

    /// Consecutive items merged into about `count` items of similar counts.
    static func mergeByCount(_ items: ArraySlice<Item>, into count: Int) -> [Item] {
        let total = items.reduce(0) { $0 + $1.n }
        var out: [Item] = []
        var start = items.startIndex, seen = 0.0
        for i in items.indices {
            seen += items[i].n
            let target = total * Double(out.count + 1) / Double(count)
            if seen >= target || i == items.endIndex - 1 {
                out.append(Item(merging: items[start ... i]))
                start = i + 1
            }
        }
        return out
    }

    // MARK: Passes over the values

    /// How many threads a pass uses: its chunks are fixed, their sums are integers.
    static var workers: Int { max(1, min(2, ProcessInfo.processInfo.activeProcessorCount)) }

    /// One pass over the group's values: each thread takes every `t`-th chunk and reads it into
    /// its own `count` accumulators (starting at `zero`), through `read(block, n, accumulators)`
    /// (which returns true to flag a value), and lets the chunk's pages go. Returns each thread's
    /// accumulators and whether any block was flagged.
    static func pass<T>(_ source: GroupElements, _ chunks: [Range<Int>], count: Int, zero: T,
                        read: @escaping @Sendable (UnsafePointer<Float>, Int, UnsafeMutablePointer<T>) -> Bool) -> (parts: [[T]], flagged: Bool) {
        let t = min(workers, chunks.count)
        var partial = [[T]](repeating: [], count: t)
        var flags = [Bool](repeating: false, count: t)
        partial.withUnsafeMutableBufferPointer { parts in
            flags.withUnsafeMutableBufferPointer { flagged in
                nonisolated(unsafe) let (p, f, initial) = (parts, flagged, zero)
                DispatchQueue.concurrentPerform(iterations: t) { w in
                    var sums = [T](repeating: initial, count: count)
                    var any = false
                    sums.withUnsafeMutableBufferPointer { s in
                        for c in stride(from: w, to: chunks.count, by: t) {
                            source.forEachBlock(in: chunks[c]) { x, n in any = read(x, n, s.baseAddress!) || any }
                            source.release(chunks[c])
                        }
                    }
                    p[w] = sums
                    f[w] = any
                }
            }
        }
        return (partial, flags.contains(true))
    }

    /// Sums of every 16-bit bin of keys.
    static func histogram(_ source: GroupElements, _ chunks: [Range<Int>]) throws -> [BinSums] {
        let (partial, nonFinite) = pass(source, chunks, count: 65536, zero: BinSums.empty) { x, n, s in
            kiln_kmeans_histogram16(x, n, s) != 0
        }
        if nonFinite { throw NonFiniteValue() }
        var total = partial[0]
        for w in 1 ..< partial.count { for b in 0 ..< 65536 where partial[w][b].n > 0 { total[b].add(partial[w][b]) } }
        return total
    }

    /// Key bits a refinement adds: each candidate splits into `2^refineBits` sub-bins.
    static let refineBits = 4

    /// The nonempty sub-bins (each `2^(shift − refineBits)` keys) of single-bin items, by passes
    /// over the values. Sub-bins of one key (exact values) need only counts.
    static func refine(_ source: GroupElements, _ chunks: [Range<Int>], _ targets: [Item]) -> [[Item]] {
        var out = [[Item]](repeating: [], count: targets.count)
        // Per-thread sums of a pass stay under a sixteenth of the group's float32 bytes (at least 2 MiB).
        let budget = max(2 << 20, source.count / 4)
        for exact in [false, true] {
            let which = targets.indices.filter { (targets[$0].shift <= refineBits) == exact }
            let perTarget = (1 << refineBits) * (exact ? MemoryLayout<UInt32>.stride : MemoryLayout<BinSums>.stride)
            let batch = max(1, budget / perTarget)
            var start = 0
            while start < which.count {
                let end = min(which.count, start + batch)
                let part = which[start ..< end].map { targets[$0] }
                let result = exact ? refineExact(source, chunks, part) : refineBatch(source, chunks, part)
                for (i, t) in which[start ..< end].enumerated() { out[t] = result[i] }
                start = end
            }
        }
        return out
    }

    /// Where the targets of a refinement pass lie: those of 16-bit bin b are
    /// `starts[b] ..< starts[b + 1]` (targets are sorted, each inside one 16-bit bin); `los` and
    /// `his` end with a sentinel; `probe` is the largest power of two not above the most targets of
    /// one bin (0 for one).
    struct TargetIndex {
        let starts: [Int32]
        let los: [UInt32]
        let his: [UInt32]
        let probe: Int

        init(_ targets: [Item]) {
            var s = [Int32](repeating: 0, count: 65537)
            for t in targets { s[Int(t.lo >> 16) + 1] += 1 }
            var most: Int32 = 0
            for b in 0 ..< 65536 {
                most = max(most, s[b + 1])
                s[b + 1] += s[b]
            }
            starts = s
            los = targets.map(\.lo) + [.max]
            his = targets.map(\.hi) + [0]
            var p = 1
            while p * 2 <= most { p *= 2 }
            probe = most <= 1 ? 0 : p
        }
    }

    static func refineBatch(_ source: GroupElements, _ chunks: [Range<Int>], _ targets: [Item]) -> [[Item]] {
        let index = TargetIndex(targets)
        let shifts = targets.map { UInt8(max(0, $0.shift - refineBits)) }
        let fan = 1 << refineBits
        let slots = targets.count * fan + 8
        let probe = Int64(index.probe), count = Int64(targets.count)
        var (partial, _) = pass(source, chunks, count: slots, zero: BinSums.empty) { x, n, s in
            kiln_kmeans_refine(x, n, index.starts, index.los, index.his, shifts, UInt32(refineBits), probe, count, s)
            return false
        }
        for w in 1 ..< partial.count {
            for i in 0 ..< slots - 8 where partial[w][i].n > 0 { partial[0][i].add(partial[w][i]) }
            partial[w] = []
        }
        let total = partial[0]
        return targets.indices.map { c in
            (0 ..< fan).compactMap { sub -> Item? in
                let sums = total[c * fan + sub]
                guard sums.n > 0 else { return nil }
                return Item(lo: index.los[c] &+ (UInt32(sub) << UInt32(shifts[c])), shift: Int(shifts[c]), sums: sums)
            }
        }
    }

    /// Sub-bins of single keys: counts of each exact value.
    static func refineExact(_ source: GroupElements, _ chunks: [Range<Int>], _ targets: [Item]) -> [[Item]] {
        let index = TargetIndex(targets)
        let fan = 1 << refineBits
        let slots = targets.count * fan + 8
        let probe = Int64(index.probe), count = Int64(targets.count)
        let (partial, _) = pass(source, chunks, count: slots, zero: UInt32(0)) { x, n, s in
            kiln_kmeans_refine_exact(x, n, index.starts, index.los, index.his, UInt32(refineBits), probe, count, s)
            return false
        }
        return targets.indices.map { c in
            (0 ..< fan).compactMap { sub -> Item? in
                var n: UInt64 = 0
                for part in partial { n += UInt64(part[c * fan + sub]) }
                guard n > 0 else { return nil }
                let key = index.los[c] &+ UInt32(sub)
                return Item(lo: key, shift: 0, sums: BinSums(n: n, r: 0, r2: 0, min_key: key, max_key: key))
            }
        }
    }

    /// The mean of each nonempty cluster of items `cuts[c − 1] ..< cuts[c]`, from the items' exact sums.
    static func means(_ items: [Item], cuts: [Int]) -> [Float] {
        let bounds = [0] + cuts + [items.count]
        return (0 ..< bounds.count - 1).compactMap { c in
            guard bounds[c] < bounds[c + 1] else { return nil }
            var sum = PreciseSum(), n = 0.0
            for it in items[bounds[c] ..< bounds[c + 1]] {
                sum.add(it.sum)
                n += it.n
            }
            return sum.mean(n)
        }
    }

    /// Runs of items that no window reaches into (no cut can lie inside them or between them)
    /// merged into one sealed item each, and the windows renumbered.
    static func compact(_ items: [Item], _ windows: [ClosedRange<Int>]) -> ([Item], [ClosedRange<Int>]) {
        let m = items.count
        var depth = [Int32](repeating: 0, count: 3 * m + 2)
        for w in windows {
            depth[max(0, w.lowerBound)] += 1
            depth[min(3 * m, w.upperBound) + 1] -= 1
        }
        var covered = [Bool](repeating: false, count: 3 * m + 1)
        var d: Int32 = 0
        for l in 0 ... 3 * m {
            d += depth[l]
            covered[l] = d > 0
        }
        var out: [Item] = []
        var start = [Int](repeating: 0, count: m + 1)
        var g = 0
        while g < m {
            var end = g + 1
            // Extend while this item and the boundary after it are out of every window.
            while end < m, !covered[3 * end - 2], !covered[3 * end - 1], !covered[3 * end], !covered[3 * end + 1], !covered[3 * end + 2] {
                end += 1
            }
            for i in g ..< end { start[i] = out.count }
            if end - g > 1 {
                var merged = Item(merging: items[g ..< end])
                merged.sealed = true
                out.append(merged)
            } else {
                out.append(items[g])
            }
            g = end
        }
        start[m] = out.count
        let renumber = { (l: Int) -> Int in 3 * start[l / 3] + l % 3 }
        return (out, windows.map { renumber(max(0, $0.lowerBound)) ... renumber(min(3 * m, $0.upperBound)) })
    }
}

extension BoundedKMeans {
    /// One level's dynamic programming over items. A cut has a *place*: `3b` is the boundary
    /// before item `b`; `3g + 1` and `3g + 2` are a cut inside a droppable item `g` that sends all of
    /// `g`'s values to the cluster on its right (`3g + 1`) or on its left (`3g + 2`), as a point mass
    /// at `g`'s edge facing that cluster — a lower bound on any split of `g` (see `solve`). Cut `j`
    /// (0-based) may only lie in `windows[j]`.
    struct Level {
        let items: [Item]
        let k: Int
        let mu: Double
        /// Prefix sums of count, centered sum and centered square sum over items, and the same
        /// over the items in reverse order.
        var w: [Double], s: [Double], q: [Double]
        var wr: [Double], sr: [Double], qr: [Double]

        init(items: [Item], mu: Double, k: Int) {
            self.items = items
            self.k = k
            self.mu = mu
            let m = items.count
            w = [Double](repeating: 0, count: m + 1)
            s = w
            q = w
            for (i, it) in items.enumerated() {
                let d = it.mean - mu
                w[i + 1] = w[i] + it.n
                s[i + 1] = s[i] + it.n * d
                q[i + 1] = q[i] + it.sse + it.n * d * d
            }
            wr = w
            sr = s
            qr = q
            for i in 0 ... m {
                wr[i] = w[m] - w[m - i]
                sr[i] = s[m] - s[m - i]
                qr[i] = q[m] - q[m - i]
            }
        }

        /// The largest float not above `x`.
        static func roundedDown(_ x: Double) -> Float {
            let f = Float(x)
            return Double(f) > x ? f.nextDown : f
        }

        func cost(_ a: Int, _ b: Int) -> Double {
            guard a < b else { return 0 }
            let n = w[b] - w[a], t = s[b] - s[a]
            return max(0, (q[b] - q[a]) - t * t / n)
        }

        /// Whether a cut can be at `place`.
        func valid(_ place: Int) -> Bool { place % 3 == 0 || items[place / 3].droppable }

        /// The point mass (count, centered sum, centered square) a place adds to a cluster, in
        /// kernel coordinates: columns of kind 1 and rows of kind 2 carry their item at the edge
        /// facing the cluster (`reversed`: places mirrored, items in reverse order).
        func mass(_ place: Int, column: Bool, reversed: Bool) -> (Double, Double, Double) {
            guard place % 3 == (column ? 1 : 2) else { return (0, 0, 0) }
            let m = items.count
            let g = reversed ? m - 1 - place / 3 : place / 3
            let it = items[g]
            // Forward, a column's mass lies at the item's top edge and a row's at its bottom;
            // mirrored, the other way round.
            let edge = column != reversed ? BoundedKMeans.value(it.maxKey) : BoundedKMeans.value(it.minKey)
            let d = Double(edge) - mu
            return (it.n, it.n * d, it.n * d * d)
        }

        /// One layer: rows (places, ascending) from columns (places, ascending, with values), in
        /// forward or mirrored coordinates.
        func layer(rows: [Int], cols: [Int], values: [Double], reversed: Bool) -> (best: [Double], arg: [Int32]) {
            let m = items.count
            var out = [Double](repeating: .infinity, count: rows.count)
            var arg = [Int32](repeating: -1, count: rows.count)
            guard !rows.isEmpty, !cols.isEmpty else { return (out, arg) }
            let rowPlace = reversed ? rows.reversed().map { 3 * m - $0 } : rows
            let colPlace = reversed ? cols.reversed().map { 3 * m - $0 } : cols
            let colValue = reversed ? Array(values.reversed()) : values
            let (pw, ps, pq) = reversed ? (wr, sr, qr) : (w, s, q)
            var ca = [UInt32](repeating: 0, count: cols.count)
            var aw = [Double](repeating: 0, count: cols.count), asum = aw, aq = aw
            for (c, l) in colPlace.enumerated() {
                let a = l % 3 == 0 ? l / 3 : l / 3 + 1
                let (vw, vs, vq) = mass(l, column: true, reversed: reversed)
                ca[c] = UInt32(a)
                aw[c] = pw[a] - vw
                asum[c] = ps[a] - vs
                aq[c] = pq[a] - vq
            }
            var rb = [UInt32](repeating: 0, count: rows.count)
            var bw = [Double](repeating: 0, count: rows.count), bs = bw, bq = bw
            var last = [Int64](repeating: -1, count: rows.count)
            var c = 0
            for (r, l) in rowPlace.enumerated() {
                let b = l / 3
                let (vw, vs, vq) = mass(l, column: false, reversed: reversed)
                rb[r] = UInt32(b)
                bw[r] = pw[b] + vw
                bs[r] = ps[b] + vs
                bq[r] = pq[b] + vq
                while c < colPlace.count, colPlace[c] <= l { c += 1 }
                last[r] = Int64(c - 1)
            }
            kiln_kmeans_window_layer(aw, asum, aq, ca, colValue, cols.count, bw, bs, bq, rb, last, rows.count, &out, &arg)
            if reversed {
                out.reverse()
                arg.reverse()
                arg = arg.map { $0 < 0 ? -1 : Int32(cols.count - 1) - $0 }
            }
            return (out, arg)
        }

        /// The optimal clustering with every cut on an item boundary (its cuts, as item
        /// boundaries), the items that may hold an optimal cut (nil when none can: the cuts are
        /// then optimal), and each cut's window of places where it can still lie.
        ///
        /// Why the lower bound holds: a clustering with a cut inside item `g` puts some of `g`'s
        /// values in the cluster on its left and the rest in the one on its right. Moving a cluster's
        /// values of `g` to `g`'s edge facing the cluster's other values, and leaving out the ones
        /// a cluster inside `g` holds, never raises its squared error; and the squared error of a
        /// set is concave in the weights of its points, so over all splits of `g` the least is at
        /// an end: all of `g` on one side.
        func solve(windows: [ClosedRange<Int>]) -> (cuts: [Int], candidates: [Int]?, next: [ClosedRange<Int>]) {
            let m = items.count, cutsCount = k - 1
            let clamped = windows.map { max(0, $0.lowerBound) ... min(3 * m, $0.upperBound) }
            // Each cut's places and boundaries in its window, made when a layer needs them (windows
            // of many cuts can overlap a lot).
            let places = { @Sendable (j: Int) -> [Int] in clamped[j].filter { valid($0) } }
            let boundaries = { @Sendable (j: Int) -> [Int] in
                stride(from: (clamped[j].lowerBound + 2) / 3 * 3, through: clamped[j].upperBound, by: 3).map { $0 }
            }
            // Backward: least cost after cut j at each of its places (all layers kept, as floats
            // rounded down, still lower bounds); and the upper bound's forward layers (argmins
            // kept); on two threads. Without droppable items no cut can lie inside one: the upper
            // bound alone is the answer.
            let bounding = items.contains(where: \.droppable)
            nonisolated(unsafe) var shared: ([[Float]], [[Int32]], [Double]) = ([], [], [])
            DispatchQueue.concurrentPerform(iterations: 2) { task in
                if task == 0 {
                    guard bounding else { return }
                    var b = [[Float]](repeating: [], count: cutsCount)
                    var rows = places(cutsCount - 1)
                    var layerBest = layer(rows: rows, cols: [3 * m], values: [0], reversed: true).best
                    b[cutsCount - 1] = layerBest.map(Self.roundedDown)
                    for j in stride(from: cutsCount - 2, through: 0, by: -1) {
                        let cols = rows
                        rows = places(j)
                        layerBest = layer(rows: rows, cols: cols, values: layerBest, reversed: true).best
                        b[j] = layerBest.map(Self.roundedDown)
                    }
                    shared.0 = b
                } else {
                    var args = [[Int32]](repeating: [], count: cutsCount)
                    var cols = boundaries(0)
                    var g = cols.map { cost(0, $0 / 3) }
                    for j in 1 ..< max(cutsCount, 1) {
                        let rows = boundaries(j)
                        let (best, arg) = layer(rows: rows, cols: cols, values: g, reversed: false)
                        cols = rows
                        args[j] = arg
                        g = best
                    }
                    shared.1 = args
                    shared.2 = g
                }
            }
            let (backward, boundaryArgs, boundaryLast) = shared
            // The upper bound and its cuts.
            var upper = Double.infinity, at = -1
            for (r, l) in boundaries(cutsCount - 1).enumerated() {
                let v = boundaryLast[r] + cost(l / 3, m)
                if v < upper { upper = v; at = r }
            }
            var cuts = [Int](repeating: 0, count: cutsCount)
            var r = at
            for j in stride(from: cutsCount - 1, through: 0, by: -1) {
                cuts[j] = (clamped[j].lowerBound + 2) / 3 + r
                if j > 0 { r = Int(boundaryArgs[j][r]) }
            }
            guard bounding else { return (cuts, nil, clamped) }
            // Forward, and the lower bound of a cut at every place.
            // Rounding: each bound is a sum of about k cluster costs, each a difference of prefix
            // sums no larger than q[m]; the margin is 64 times that error.
            let tolerance = 64 * Double(k + 2) * Double.ulpOfOne * q[m] + Double.leastNormalMagnitude
            var next = clamped
            var candidate = [Bool](repeating: false, count: m)
            var any = false
            var rows = places(0)
            var f = layer(rows: rows, cols: [0], values: [0], reversed: false).best
            for j in 0 ..< cutsCount {
                if j > 0 {
                    let cols = rows
                    rows = places(j)
                    f = layer(rows: rows, cols: cols, values: f, reversed: false).best
                }
                var lo = Int.max, hi = Int.min
                for (r, l) in rows.enumerated() where f[r] + Double(backward[j][r]) <= upper + tolerance {
                    lo = min(lo, l)
                    hi = max(hi, l)
                    if l % 3 != 0 { candidate[l / 3] = true; any = true }
                }
                if lo <= hi { next[j] = lo ... hi }
            }
            // Optimal cuts are ordered: cut j lies in no item before cut j − 1's window, nor
            // after cut j + 1's.
            for j in 1 ..< max(cutsCount, 1) {
                let lo = max(next[j].lowerBound, next[j - 1].lowerBound / 3 * 3)
                next[j] = min(lo, next[j].upperBound) ... next[j].upperBound
            }
            for j in stride(from: cutsCount - 2, through: 0, by: -1) {
                let hi = min(next[j].upperBound, (next[j + 1].upperBound + 2) / 3 * 3)
                next[j] = next[j].lowerBound ... max(hi, next[j].lowerBound)
            }
            return (cuts, any ? candidate.indices.filter { candidate[$0] } : nil, next)
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
