import KilnFormat

/// The elements of one palettization group, read in place from a weight's bytes: `runs` runs
/// (one per index of the axes before the output axis) of `channels × inner` elements each, a
/// run every `runStride` elements, the first at `offset`. With per-channel scales, element values
/// are divided by their channel's scale (in `Float`, as the scale is applied when compressing).
struct GroupElements: @unchecked Sendable {
    let base: UnsafeRawPointer
    let isHalf: Bool
    let runs: Int
    let channels: Int
    let inner: Int
    let runStride: Int
    let offset: Int
    /// Per output channel of the group, or nil.
    let scales: UnsafePointer<Float>?
    /// The weight's storage, when its pages may be released after a pass reads them.
    var storage: ByteStorage? = nil

    var runLength: Int { channels * inner }
    var count: Int { runs * runLength }

    /// The element at tensor position `p`, before any channel scale.
    @inline(__always) func raw(_ p: Int) -> Float {
        isHalf ? Float(base.load(fromByteOffset: 2 * p, as: Float16.self)) : base.load(fromByteOffset: 4 * p, as: Float.self)
    }

    /// Calls `body(position, count, scale)` for each contiguous stretch of the group's elements
    /// with index in `range` (group order): tensor positions `position ..< position + count`, all
    /// of one channel when there are scales (`scale` is then that channel's, else 1).
    @inline(__always) func forEachStretch(in range: Range<Int>, _ body: (_ position: Int, _ count: Int, _ scale: Float) -> Void) {
        var j = range.lowerBound
        while j < range.upperBound {
            let run = j / runLength, within = j % runLength
            let position = offset + run * runStride + within
            if let scales {
                let channel = within / inner
                let n = min(inner - within % inner, range.upperBound - j)
                body(position, n, scales[channel])
                j += n
            } else {
                let n = min(runLength - within, range.upperBound - j)
                body(position, n, 1)
                j += n
            }
        }
    }

    /// The element values of stretches: calls `body(value)` for every element with group index in
    /// `range`, in order.
    @inline(__always) func forEachValue(in range: Range<Int>, _ body: (Float) -> Void) {
        forEachStretch(in: range) { p, n, scale in
            if scales == nil {
                if isHalf {
                    let h = base.advanced(by: 2 * p).assumingMemoryBound(to: Float16.self)
                    for i in 0 ..< n { body(Float(h[i])) }
                } else {
                    let f = base.advanced(by: 4 * p).assumingMemoryBound(to: Float.self)
                    for i in 0 ..< n { body(f[i]) }
                }
            } else {
                for i in 0 ..< n { body(raw(p + i) / scale) }
            }
        }
    }

    /// Calls `body(values, count)` for consecutive blocks of the values with group index in
    /// `range`, in order: long runs of float32 values read in place, anything else (float16,
    /// scaled, short strided runs) gathered into a buffer of 4096.
    func forEachBlock(in range: Range<Int>, _ body: (UnsafePointer<Float>, Int) -> Void) {
        if !isHalf, scales == nil, runLength >= 1024 || runs == 1 {
            forEachStretch(in: range) { p, n, _ in body(base.advanced(by: 4 * p).assumingMemoryBound(to: Float.self), n) }
            return
        }
        withUnsafeTemporaryAllocation(of: Float.self, capacity: 4096) { buffer in
            let out = buffer.baseAddress!
            var filled = 0
            forEachStretch(in: range) { p, n, scale in
                var done = 0
                while done < n {
                    let m = min(4096 - filled, n - done)
                    let dst = out + filled
                    if isHalf {
                        let h = base.advanced(by: 2 * (p + done)).assumingMemoryBound(to: Float16.self)
                        if scales == nil { for i in 0 ..< m { dst[i] = Float(h[i]) } } else { for i in 0 ..< m { dst[i] = Float(h[i]) / scale } }
                    } else {
                        let f = base.advanced(by: 4 * (p + done)).assumingMemoryBound(to: Float.self)
                        if scales == nil { dst.update(from: f, count: m) } else { for i in 0 ..< m { dst[i] = f[i] / scale } }
                    }
                    filled += m
                    done += m
                    if filled == 4096 {
                        body(out, filled)
                        filled = 0
                    }
                }
            }
            if filled > 0 { body(out, filled) }
        }
    }

    /// Lets the pages of the elements with group index in `range` go, when the group is one
    /// contiguous run of a weight read in place (the next pass maps them again).
    func release(_ range: Range<Int>) {
        guard let storage, runs == 1 || runStride == runLength else { return }
        let size = isHalf ? 2 : 4
        storage.releaseResidentPages(size * (offset + range.lowerBound) ..< size * (offset + range.upperBound))
    }

    /// Fixed chunks of the group's index space, so that results summed per chunk in chunk order
    /// do not depend on how many threads ran them.
    var chunks: [Range<Int>] {
        let n = count
        let parts = max(1, min(16, n >> 20))
        return (0 ..< parts).map { i in (n * i / parts) ..< (n * (i + 1) / parts) }
    }
}
