import CKilnCompression
import CKilnKernels
import Dispatch

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
