import Foundation

/// Large blocks that arrays have let go of, kept for the next array of the same size class.
///
/// A decoder's outputs grow by a row every run (its `present` cache), so each run asks for a
/// slightly larger block than the last. The C allocator serves such sizes from fresh mappings
/// (its threshold for mapping follows the largest block freed, which a growing size always
/// passes), so every run had its output pages faulted in and zeroed by the kernel again. Blocks of
/// at least ``minimumBytes`` are instead sized up to a class (an eighth of their power of two, at
/// least a page), and a freed block waits here for the next request of its class: a cache growing
/// a row a run stays in one class for several runs. At most ``limitBytes`` wait in all; to make
/// room, the classes asked for least recently go back to the allocator first (a cache that grew
/// out of a class leaves it behind). A block's old bytes are not cleared: only arrays that write
/// every byte before reading it, or zero it themselves, take blocks.
enum BlockRecycler {
    /// Smaller blocks come from the allocator's own free lists.
    static let minimumBytes = 128 << 10
    /// The most bytes kept waiting.
    static let limitBytes = 64 << 20

    private struct Pool {
        var free: [Int: [UnsafeMutableRawPointer]] = [:]
        /// When each class that holds blocks was last given or taken (a count of those events).
        var used: [Int: Int] = [:]
        var clock = 0, kept = 0
    }

    nonisolated(unsafe) private static var pool = Pool()
    private static let lock = NSLock()

    /// The size a request of `bytes` is given: its class.
    static func capacity(for bytes: Int) -> Int {
        guard bytes >= minimumBytes else { return max(bytes, 1) }
        let log2 = Int.bitWidth - 1 - bytes.leadingZeroBitCount
        let step = 1 << max(log2 - 3, 12)
        return (bytes + step - 1) / step * step
    }

    /// A block of `capacity` bytes (a value ``capacity(for:)`` gave), aligned to 64.
    static func take(_ capacity: Int) -> UnsafeMutableRawPointer {
        if capacity >= minimumBytes, let block = lock.withLock({ () -> UnsafeMutableRawPointer? in
            guard let block = pool.free[capacity]?.popLast() else { return nil }
            pool.kept -= capacity
            if pool.free[capacity]!.isEmpty {
                (pool.free[capacity], pool.used[capacity]) = (nil, nil)
            } else {
                pool.clock += 1
                pool.used[capacity] = pool.clock
            }
            return block
        }) {
            return block
        }
        return UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
    }

    /// Gives back a block `take` returned for `capacity`.
    static func give(_ block: UnsafeMutableRawPointer, _ capacity: Int) {
        guard capacity >= minimumBytes, capacity <= limitBytes else { return block.deallocate() }
        let released: [UnsafeMutableRawPointer] = lock.withLock {
            pool.clock += 1
            pool.used[capacity] = pool.clock
            var released: [UnsafeMutableRawPointer] = []
            // Room is made from the classes used least recently (never this one).
            while pool.kept + capacity > limitBytes,
                  let (oldest, _) = pool.used.filter({ $0.key != capacity }).min(by: { $0.value < $1.value }) {
                let blocks = pool.free.removeValue(forKey: oldest) ?? []
                pool.used[oldest] = nil
                pool.kept -= blocks.count * oldest
                released += blocks
            }
            guard pool.kept + capacity <= limitBytes else { return released + [block] }
            pool.free[capacity, default: []].append(block)
            pool.kept += capacity
            return released
        }
        for b in released { b.deallocate() }
    }
}
