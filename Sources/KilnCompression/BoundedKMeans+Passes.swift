import CKilnCompression
import CKilnKernels
import Dispatch
import Foundation

/// The passes over a group's values: the first level's histogram (or exact float16 counts) and
/// the refinements that split candidate items into their sub-bins.
extension BoundedKMeans {
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
}
