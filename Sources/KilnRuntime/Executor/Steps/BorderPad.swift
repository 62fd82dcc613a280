@preconcurrency import CKilnKernels
import KilnFormat

extension CopyStep {
    /// A `reflect`, `edge` or `wrap` pad as strided copies: the input into the output's interior,
    /// then, one axis after another, each border copied from the part of the output already
    /// written (a reflected border reads the interior backwards, an edge border repeats one row
    /// with stride 0, a wrapped one reads the rows from the other side).
    func bindBorderPad(_ x: Operand, _ inputs: [Operand?], _ y: Operand, size: Int, mode: String) throws -> BoundStep {
        let rank = x.shape.count
        let pads = try knownIntegers(inputs.count > 1 ? inputs[1] : nil, "pads") ?? op.attributes.ints("pads") ?? []
        let axes = try knownIntegers(inputs.count > 3 ? inputs[3] : nil, "axes") ?? op.attributes.ints("axes") ?? Array(0 ..< rank)
        guard pads.count == 2 * axes.count else { throw OpError("pads has \(pads.count) entries for \(axes.count) axes") }
        var begin = [Int](repeating: 0, count: rank), end = [Int](repeating: 0, count: rank)
        for (j, a) in axes.enumerated() {
            let axis = try OpSet.normalize(axis: a, rank: rank)
            begin[axis] = pads[j]
            end[axis] = pads[j + axes.count]
        }
        // Negative amounts crop the input first (as onnxruntime does); the positive ones then pad what is kept.
        let xs = byteStrides(x.shape, size), ys = byteStrides(y.shape, size)
        var kept = x.shape, cropOffset = 0
        for a in 0 ..< rank {
            let (cropBegin, cropEnd) = (max(0, -begin[a]), max(0, -end[a]))
            guard cropBegin + cropEnd <= x.shape[a] else { throw OpError("a \(mode) pad crops \(cropBegin + cropEnd) from an axis of \(x.shape[a])") }
            kept[a] = x.shape[a] - cropBegin - cropEnd
            cropOffset += cropBegin * xs[a]
            (begin[a], end[a]) = (max(0, begin[a]), max(0, end[a]))
            guard y.shape[a] == kept[a] + begin[a] + end[a] else { throw OpError("pad gives \(y.shape), the plan has another shape") }
            if begin[a] + end[a] > 0 {
                guard kept[a] > 0 else { throw OpError("a \(mode) pad of an empty axis") }
                if mode == "reflect", begin[a] >= kept[a] || end[a] >= kept[a] {
                    throw OpError("a reflect pad of \(max(begin[a], end[a])) on an axis of \(kept[a]) (it must be smaller)")
                }
            }
        }
        guard OpSet.padModes.contains(mode) else { throw OpError("unknown pad mode '\(mode)'") }
        // Source -1: the output itself. Stages run in order; copies within a stage are independent.
        var copies = [BlockCopy(shape: kept, source: 0, sourceOffset: cropOffset, sourceStrides: xs, target: 0,
                                targetOffset: zip(begin, ys).reduce(0) { $0 + $1.0 * $1.1 }, targetStrides: ys)]
        for a in 0 ..< rank where begin[a] + end[a] > 0 {
            // Axes before a span the output, axes after it the interior.
            var shape = y.shape, base = 0
            for d in a + 1 ..< rank {
                shape[d] = kept[d]
                base += begin[d] * ys[d]
            }
            let n = kept[a], b = begin[a]
            /// Output rows [at, at + count) along a, read from row `from` on with step `step`.
            func border(_ at: Int, _ count: Int, from: Int, step: Int) {
                guard count > 0 else { return }
                var s = shape
                s[a] = count
                var strides = ys
                strides[a] = ys[a] * step
                copies.append(BlockCopy(shape: s, source: -1, sourceOffset: base + from * ys[a], sourceStrides: strides, target: 0,
                                        targetOffset: base + at * ys[a], targetStrides: ys))
            }
            switch mode {
            case "reflect":
                border(0, b, from: 2 * b, step: -1)
                border(b + n, end[a], from: b + n - 2, step: -1)
            case "edge":
                border(0, b, from: b, step: 0)
                border(b + n, end[a], from: b + n - 1, step: 0)
            default:
                // wrap: output row p holds input row (p − b) mod n, in runs of at most n rows.
                var p = 0
                while p < b {
                    let row = ((p - b) % n + n) % n, run = min(b - p, n - row)
                    border(p, run, from: b + row, step: 1)
                    p += run
                }
                p = b + n
                while p < b + n + end[a] {
                    let row = (p - b) % n, run = min(b + n + end[a] - p, n - row)
                    border(p, run, from: b + row, step: 1)
                    p += run
                }
            }
        }
        let blocks = copies.map { $0.merged() }
        for c in blocks where c.shape.count > Int(KILN_MAX_RANK) { throw OpError("rank \(c.shape.count) is above \(KILN_MAX_RANK)") }
        let layouts = blocks.map { ShapeBuffer(shape: $0.shape, strides: [$0.sourceStrides, $0.targetStrides]) }
        return BoundStep { slots in
            let out = y.pointer(slots)
            for (c, layout) in zip(blocks, layouts) {
                let source = c.source < 0 ? UnsafeRawPointer(out) : UnsafeRawPointer(x.pointer(slots))
                kiln_copy_nd__scalar(size, layout.rank, layout.shape, source + c.sourceOffset, layout.strides(0),
                                     out + c.targetOffset, layout.strides(1))
            }
        }
    }
}
