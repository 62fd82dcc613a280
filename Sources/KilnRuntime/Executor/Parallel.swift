import CKilnKernels

/// Runs `body(i)` for `i` in `0..<count` on at most `threads` threads of the kernel thread pool
/// (`kiln_parallel_for_threads`), or inline when `threads` is 1. The bodies must write disjoint
/// memory (each kernel chunk owns its output rows or columns). Each thread owns a contiguous home
/// range of the indices and then steals from the others', so `count` may exceed `threads` (see
/// ``workChunks(_:)``), and steps that cut their output rows alike keep each band on one core.
@inline(__always)
func parallelFor(_ count: Int, threads: Int, _ body: (Int) -> Void) {
    if count <= 1 || threads <= 1 {
        for i in 0 ..< count { body(i) }
        return
    }
    withoutActuallyEscaping(body) { body in
        var closure = body
        withUnsafeMutablePointer(to: &closure) { p in
            kiln_parallel_for_threads(count, threads, { ctx, i in
                ctx!.assumingMemoryBound(to: ((Int) -> Void).self).pointee(Int(i))
            }, p)
        }
    }
}

/// A weight up to this size stays in each thread's L2 while the thread streams its own rows of
/// the activations, so threads split rows; a larger one with enough panels is split by panels,
/// each thread streaming only its share.
let l2WeightBytes = 1 << 19

/// Chunks a large kernel's work is cut into for `threads` threads: a few per thread, claimed
/// one at a time, so a thread that loses its core for a while (a busy shared machine, another
/// process) leaves its remaining chunks to the others instead of holding up the step.
@inline(__always)
func workChunks(_ threads: Int) -> Int { threads > 1 ? threads * 2 : 1 }

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
