import CKilnCompression
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
