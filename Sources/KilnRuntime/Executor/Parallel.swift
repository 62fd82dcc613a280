import Dispatch

/// A value handed to worker threads that only touch disjoint parts of it.
struct Unchecked<T>: @unchecked Sendable {
    let value: T
}

/// Runs `body(i)` for `i` in `0..<count`, on up to `threads` cores. The bodies must write
/// disjoint memory (each kernel chunk owns its output rows or columns).
@inline(__always)
func parallelFor(_ count: Int, threads: Int, _ body: (Int) -> Void) {
    if count <= 1 || threads <= 1 {
        for i in 0 ..< count { body(i) }
        return
    }
    withoutActuallyEscaping(body) { body in
        let shared = Unchecked(value: body)
        DispatchQueue.concurrentPerform(iterations: count) { shared.value($0) }
    }
}

/// `count` items split into at most `parts` contiguous ranges, each a multiple of `align`
/// (except the last).
func splitRanges(_ count: Int, parts: Int, align: Int = 1) -> [Range<Int>] {
    guard count > 0 else { return [] }
    let units = (count + align - 1) / align
    let n = max(1, min(parts, units))
    return (0 ..< n).map { i in
        let lo = units * i / n * align, hi = min(count, units * (i + 1) / n * align)
        return lo ..< hi
    }.filter { !$0.isEmpty }
}
