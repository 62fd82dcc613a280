@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat
import KilnReference

/// Integer values of a known operand (int64 or int32).
func knownIntegers(_ o: Operand?, _ what: String) throws -> [Int]? {
    guard let o else { return nil }
    guard let v = o.value else { throw OpError("\(what) is not known before the run") }
    let c = v.contiguous()
    switch c.scalarType {
    case .int64: return (0 ..< c.elementCount).map { Int(c.unsafeBase.load(fromByteOffset: $0 * 8, as: Int64.self)) }
    case .int32: return (0 ..< c.elementCount).map { Int(c.unsafeBase.load(fromByteOffset: $0 * 4, as: Int32.self)) }
    default: throw OpError("\(what) must be int64 or int32")
    }
}

/// Element strides of a contiguous shape, in bytes.
func byteStrides(_ shape: [Int], _ size: Int) -> [Int] {
    var out = [Int](repeating: 0, count: shape.count), acc = size
    for i in (0 ..< shape.count).reversed() {
        out[i] = acc
        acc *= shape[i]
    }
    return out
}

/// One strided block copy: `shape` elements read from input `source` at byte offset and
/// strides, written to output `target` at byte offset and strides.
struct BlockCopy {
    var shape: [Int]
    var source: Int
    var sourceOffset: Int
    var sourceStrides: [Int]
    var target: Int
    var targetOffset: Int
    var targetStrides: [Int]

    /// The same copy with size-1 dims dropped and neighbours merged where both sides stay
    /// regular, so contiguous runs become one long row.
    func merged() -> BlockCopy {
        var out = self
        out.shape = []; out.sourceStrides = []; out.targetStrides = []
        for (d, n) in shape.enumerated() where n != 1 {
            if let last = out.shape.last, out.sourceStrides.last! == sourceStrides[d] * n, out.targetStrides.last! == targetStrides[d] * n {
                out.shape[out.shape.count - 1] = last * n
                out.sourceStrides[out.sourceStrides.count - 1] = sourceStrides[d]
                out.targetStrides[out.targetStrides.count - 1] = targetStrides[d]
            } else {
                out.shape.append(n)
                out.sourceStrides.append(sourceStrides[d])
                out.targetStrides.append(targetStrides[d])
            }
        }
        if shape.contains(0) { out.shape = [0]; out.sourceStrides = [0]; out.targetStrides = [0] }
        return out
    }
}

/// `gather` along one axis (indices int64 or int32; negative ones wrap; out of range is an error).
struct GatherStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 2, let x = inputs[0], let idx = inputs[1], idx.dtype == .int64 || idx.dtype == .int32, !x.shape.isEmpty else {
            throw OpError("needs data of rank ≥ 1 and int64 or int32 indices")
        }
        let axis = try OpSet.normalize(axis: try op.attributes.int("axis", 0), rank: x.shape.count)
        let (outer, n, inner) = around(x.shape, axis: axis)
        let size = x.dtype.bitWidth / 8, count = idx.count, y = outputs[0], wide = idx.dtype == .int64
        if !wide { context.scratch(count * 8) }
        let scratchSlot = context.scratchSlot
        return BoundStep { slots in
            var indices = UnsafePointer(idx.pointer(slots).assumingMemoryBound(to: Int64.self))
            if !wide {
                let converted = slots[scratchSlot].assumingMemoryBound(to: Int64.self)
                let narrow = idx.pointer(slots).assumingMemoryBound(to: Int32.self)
                for i in 0 ..< count { converted[i] = Int64(narrow[i]) }
                indices = UnsafePointer(converted)
            }
            let bad = kiln_gather__scalar(size, outer, n, inner, x.pointer(slots), indices, count, y.pointer(slots))
            if bad > 0 { throw OpError("index \(indices[bad - 1]) is out of range for axis \(axis) of size \(n)") }
        }
    }
}

/// Data movement as strided block copies: `transpose`, `slice`, `concat`, `split`, `pad`
/// (constant mode), `expand`, `tile`, `depth_to_space`, `space_to_depth`. The blocks are worked out when the step is bound.
struct CopyStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        switch op.opType {
        case "transpose", "concat": return try Self.inferred(op, inputs)
        default: return nil // shapes from input values: the generic path runs the reference kernel
        }
    }

    /// A slice's result shape, byte offset and byte strides into its input.
    func sliceLayout(_ inputs: [Operand?], size: Int) throws -> (shape: [Int], offset: Int, strides: [Int]) {
        guard let x = inputs.first ?? nil else { throw OpError("input 0 is missing") }
        let rank = x.shape.count, xs = byteStrides(x.shape, size)
        let starts = try knownIntegers(inputs.count > 1 ? inputs[1] : nil, "starts") ?? op.attributes.ints("starts") ?? []
        let ends = try knownIntegers(inputs.count > 2 ? inputs[2] : nil, "ends") ?? op.attributes.ints("ends") ?? []
        let axes = try knownIntegers(inputs.count > 3 ? inputs[3] : nil, "axes") ?? op.attributes.ints("axes") ?? Array(0 ..< starts.count)
        let steps = try knownIntegers(inputs.count > 4 ? inputs[4] : nil, "steps") ?? op.attributes.ints("steps") ?? Array(repeating: 1, count: starts.count)
        guard starts.count == ends.count, axes.count == starts.count, steps.count == starts.count else { throw OpError("slice parameters disagree") }
        var offset = 0, strides = xs, shape = x.shape
        for (j, a) in axes.enumerated() {
            let axis = try OpSet.normalize(axis: a, rank: rank)
            guard steps[j] != 0 else { throw OpError("step 0") }
            let (start, count) = OpSet.sliceRange(start: starts[j], end: ends[j], step: steps[j], size: x.shape[axis])
            shape[axis] = count
            if count > 0 { offset += start * xs[axis] }
            strides[axis] = xs[axis] * OpSet.sliceStep(steps[j], count: count)
        }
        return (shape, offset, strides)
    }

    /// The byte offset of a slice whose result is one contiguous run of its input, or 0 for a
    /// transpose that moves only size-1 dims (so a shape plan can give either the input's memory),
    /// else `nil`.
    func contiguousSliceOffset(_ inputs: [Operand?]) -> Int? {
        if op.opType == "transpose", let x = inputs.first ?? nil {
            // A transpose that moves only size-1 dims keeps every element where it was: a view.
            let perm = (try? op.attributes.ints("perm")) ?? Array((0 ..< x.shape.count).reversed())
            guard perm.count == x.shape.count else { return nil }
            let moved = perm.filter { x.shape[$0] != 1 }
            return moved == moved.sorted() ? 0 : nil
        }
        guard op.opType == "slice", let x = inputs.first ?? nil else { return nil }
        let size = x.dtype.bitWidth / 8
        guard let (shape, offset, strides) = try? sliceLayout(inputs, size: size), !shape.contains(0) else { return nil }
        // Contiguous when the result's strides are the dense strides of its shape (size-1 dims aside).
        let dense = byteStrides(shape, size)
        for d in shape.indices where shape[d] > 1 && strides[d] != dense[d] { return nil }
        return offset
    }

    /// The strided block copies of the op (and the pad's fill value), before merging and splitting.
    func copyBlocks(_ inputs: [Operand?], _ outputs: [Operand], x: Operand, size: Int) throws -> (blocks: [BlockCopy], fill: [UInt8]?) {
        let xs = byteStrides(x.shape, size)
        let rank = x.shape.count
        var blocks: [BlockCopy] = []
        var fill: [UInt8]? = nil
        switch op.opType {
        case "transpose":
            let perm = try op.attributes.ints("perm") ?? Array((0 ..< rank).reversed())
            let y = outputs[0]
            blocks = [BlockCopy(shape: y.shape, source: 0, sourceOffset: 0, sourceStrides: perm.map { xs[$0] }, target: 0, targetOffset: 0,
                                targetStrides: byteStrides(y.shape, size))]
        case "slice":
            let (shape, offset, strides) = try sliceLayout(inputs, size: size)
            guard shape == outputs[0].shape else { throw OpError("slice gives \(shape), the plan has \(outputs[0].shape)") }
            blocks = [BlockCopy(shape: shape, source: 0, sourceOffset: offset, sourceStrides: strides, target: 0, targetOffset: 0,
                                targetStrides: byteStrides(shape, size))]
        case "concat":
            let y = outputs[0]
            let axis = try OpSet.normalize(axis: try op.attributes.int("axis", 0), rank: y.shape.count)
            let ys = byteStrides(y.shape, size)
            var at = 0
            for (j, input) in inputs.enumerated() {
                guard let input else { continue }
                defer { at += input.shape[axis] }
                if input.inPlace { continue } // its producer wrote it into the output
                blocks.append(BlockCopy(shape: input.shape, source: j, sourceOffset: 0, sourceStrides: byteStrides(input.shape, size), target: 0,
                                        targetOffset: at * ys[axis], targetStrides: ys))
            }
        case "split":
            let axis = try OpSet.normalize(axis: try op.attributes.int("axis", 0), rank: rank)
            var at = 0
            for (k, y) in outputs.enumerated() {
                blocks.append(BlockCopy(shape: y.shape, source: 0, sourceOffset: at * xs[axis], sourceStrides: xs, target: k, targetOffset: 0,
                                        targetStrides: byteStrides(y.shape, size)))
                at += y.shape[axis]
            }
            guard at == x.shape[axis] else { throw OpError("split sizes cover \(at) of \(x.shape[axis])") }
        case "pad":
            (blocks, fill) = try padBlocks(x, inputs, outputs[0], size: size)
        case "expand":
            let y = outputs[0]
            let padded = [Int](repeating: 1, count: y.shape.count - rank) + x.shape
            let ps = [Int](repeating: 0, count: y.shape.count - rank) + xs
            blocks = [BlockCopy(shape: y.shape, source: 0, sourceOffset: 0, sourceStrides: zip(padded, ps).map { $0 == 1 ? 0 : $1 }, target: 0,
                                targetOffset: 0, targetStrides: byteStrides(y.shape, size))]
        case "tile":
            let y = outputs[0]
            guard y.shape.count == rank else { throw OpError("tile output rank differs") }
            let ys = byteStrides(y.shape, size)
            var shape: [Int] = [], ss: [Int] = [], ts: [Int] = []
            for a in 0 ..< rank {
                guard x.shape[a] > 0 else { shape = []; break }
                let repeats = y.shape[a] / x.shape[a]
                shape += [repeats, x.shape[a]]
                ss += [0, xs[a]]
                ts += [x.shape[a] * ys[a], ys[a]]
            }
            if !shape.isEmpty { blocks = [BlockCopy(shape: shape, source: 0, sourceOffset: 0, sourceStrides: ss, target: 0, targetOffset: 0, targetStrides: ts)] }
        case "depth_to_space", "space_to_depth":
            blocks = try depthSpaceBlocks(x, outputs[0], size: size)
        default:
            throw OpError("\(op.opType) is not a copy")
        }
        return (blocks, fill)
    }

    /// A constant `pad`: the input copied inside the output, which starts filled with the pad value.
    func padBlocks(_ x: Operand, _ inputs: [Operand?], _ y: Operand, size: Int) throws -> (blocks: [BlockCopy], fill: [UInt8]?) {
        let xs = byteStrides(x.shape, size)
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
        let ys = byteStrides(y.shape, size)
        var shape = x.shape, so = 0, to = 0
        for a in 0 ..< rank {
            shape[a] = max(0, x.shape[a] + min(0, begin[a]) + min(0, end[a]))
            if begin[a] >= 0 { to += begin[a] * ys[a] } else { so += -begin[a] * xs[a] }
        }
        var value = [UInt8](repeating: 0, count: size)
        if inputs.count > 2, let c = inputs[2] {
            guard let v = c.value, v.scalarType == x.dtype, v.elementCount == 1 else { throw OpError("constant_value is not a known scalar") }
            value.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: v.contiguous().unsafeBase, byteCount: size) }
        } else if let f = op.attributes["value"], case .float(let d) = f, d != 0 {
            guard x.dtype == .float32 else { throw OpError("a non-zero pad value for \(x.dtype.rawValue)") }
            var v = Float(d)
            withUnsafeBytes(of: &v) { value = Array($0) }
        }
        return ([BlockCopy(shape: shape, source: 0, sourceOffset: so, sourceStrides: xs, target: 0, targetOffset: to, targetStrides: ys)], value)
    }

    /// `depth_to_space` and `space_to_depth`: a reshape to rank 6, a transpose and a reshape back, as one strided copy.
    func depthSpaceBlocks(_ x: Operand, _ y: Operand, size: Int) throws -> [BlockCopy] {
        let rank = x.shape.count
        let blocks: [BlockCopy]
        guard rank == 4 else { throw OpError("needs NCHW input") }
        let bs = try op.attributes.int("blocksize", 1)
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let e = size
        if op.opType == "depth_to_space" {
            let c2 = c / (bs * bs)
            let crd = try op.attributes.string("mode", "DCR") == "CRD"
            // Output [N, C', H, b1, W, b2]; input channel = DCR: (b1·b + b2)·C' + c', CRD: c'·b² + b1·b + b2.
            let cs = crd ? bs * bs * h * w * e : h * w * e
            let b1s = crd ? bs * h * w * e : bs * c2 * h * w * e
            let b2s = crd ? h * w * e : c2 * h * w * e
            blocks = [BlockCopy(shape: [n, c2, h, bs, w, bs], source: 0, sourceOffset: 0,
                                sourceStrides: [c * h * w * e, cs, w * e, b1s, e, b2s], target: 0, targetOffset: 0,
                                targetStrides: byteStrides([n, c2, h, bs, w, bs], e))]
        } else {
            // Output [N, b1, b2, C, H', W'] (channel (b1·b + b2)·C + c; CRD: c·b² + b1·b + b2) from input
            // (c, h'·b + b1, w'·b + b2).
            let (h2, w2) = (h / bs, w / bs)
            let crd = try op.attributes.string("mode", "DCR") == "CRD"
            let plane = h2 * w2 * e
            blocks = [BlockCopy(shape: [n, bs, bs, c, h2, w2], source: 0, sourceOffset: 0,
                                sourceStrides: [c * h * w * e, w * e, e, h * w * e, bs * w * e, bs * e], target: 0, targetOffset: 0,
                                targetStrides: crd ? [c * bs * bs * plane, bs * plane, plane, bs * bs * plane, w2 * e, e]
                                    : byteStrides([n, bs, bs, c, h2, w2], e))]
        }
        guard blocks[0].shape.reduce(1, *) == y.count else { throw OpError("block size \(bs) does not fit \(x.shape)") }
        return blocks
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil else { throw OpError("input 0 is missing") }
        let size = x.dtype.bitWidth / 8
        if op.opType == "pad", let mode = try? op.attributes.string("mode", "constant"), mode != "constant" {
            return try bindBorderPad(x, inputs, outputs[0], size: size, mode: mode)
        }
        let (unmerged, fill) = try copyBlocks(inputs, outputs, x: x, size: size)
        let blocks = unmerged.map { $0.merged() }
        for b in blocks where b.shape.count > Int(KILN_MAX_RANK) { throw OpError("rank \(b.shape.count) is above \(KILN_MAX_RANK)") }
        // A float matrix (or a batch of them) transposed: 8 × 8 register blocks, rows split across threads.
        if size == 4, fill == nil, blocks.count == 1, let t = Transpose2D(blocks[0]) {
            let parts = splitRanges(t.rows, parts: t.rows * t.cols * t.batch < 1 << 16 ? 1 : context.threads, align: 8)
            let (x, y, threads) = (inputs[0]!, outputs[0], context.threads)
            return BoundStep { slots in
                for i in 0 ..< t.batch {
                    let xi = x.floats(slots) + i * t.rows * t.cols, yi = y.floats(slots) + i * t.rows * t.cols
                    parallelFor(parts.count, threads: threads) { p in kiln_f32_transpose_rows(t.rows, t.cols, xi, yi, parts[p].lowerBound, parts[p].upperBound) }
                }
            }
        }
        // Large copies split every block's outermost dim into the same ranges across threads, range
        // outer and block inner: thread t's home indices (kiln_parallel_for) then cover the same
        // part of every block (for a channels-last concat or split: the same pixels, which the
        // producer wrote and the consumer will read from that thread's core).
        let bytes = blocks.reduce(0) { $0 + $1.shape.reduce(size, *) }
        let parts = bytes < 1 << 16 || context.threads < 2 ? 1 : workChunks(context.threads)
        let pieces: [BlockCopy] = (0 ..< parts).flatMap { part in
            blocks.compactMap { b -> BlockCopy? in
                guard parts > 1, let outer = b.shape.first else { return part == 0 ? b : nil }
                let (lo, hi) = (outer * part / parts, outer * (part + 1) / parts)
                guard hi > lo else { return nil }
                var piece = b
                piece.shape[0] = hi - lo
                piece.sourceOffset += lo * b.sourceStrides[0]
                piece.targetOffset += lo * b.targetStrides[0]
                return piece
            }
        }
        let layouts = pieces.map { ShapeBuffer(shape: $0.shape, strides: [$0.sourceStrides, $0.targetStrides]) }
        let fillCount = outputs.first?.count ?? 0
        let threads = context.threads
        return BoundStep { slots in
            if let fill {
                fill.withUnsafeBytes { kiln_fill__scalar(size, fillCount, $0.baseAddress, outputs[0].pointer(slots)) }
            }
            parallelFor(pieces.count, threads: parts > 1 ? threads : 1) { i in
                let (b, layout) = (pieces[i], layouts[i])
                guard let source = inputs[b.source] else { return }
                kiln_copy_nd__scalar(size, layout.rank, layout.shape, source.pointer(slots) + b.sourceOffset, layout.strides(0),
                                     outputs[b.target].pointer(slots) + b.targetOffset, layout.strides(1))
            }
        }
    }
}

/// A merged block copy of 4-byte elements that is `batch` dense row-major matrices of rows × cols
/// written transposed (`y[b][c][r] = x[b][r][c]`), from one dense input at offset 0.
struct Transpose2D {
    var batch, rows, cols: Int

    init?(_ b: BlockCopy) {
        guard b.sourceOffset == 0, b.targetOffset == 0, b.shape.count == 2 || b.shape.count == 3 else { return nil }
        let r = b.shape.count
        let (cols, rows) = (b.shape[r - 2], b.shape[r - 1]) // output [cols, rows] of an input [rows, cols]
        guard b.targetStrides == byteStrides(b.shape, 4), b.sourceStrides[r - 2] == 4, b.sourceStrides[r - 1] == cols * 4 else { return nil }
        if r == 3 { guard b.sourceStrides[0] == rows * cols * 4 else { return nil } }
        (batch, self.rows, self.cols) = (r == 3 ? b.shape[0] : 1, rows, cols)
    }
}

/// `reshape`, `flatten`, `squeeze`, `unsqueeze`, `identity`: a shape-specialized plan gives
/// the result its source's memory (no step runs); bound on its own it copies the bytes.
struct ViewStep: StepKernel {
    let id: KernelID

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, outputs.count == 1, outputs[0].byteCount == x.byteCount else { throw OpError("a view keeps its bytes") }
        let y = outputs[0]
        return BoundStep { slots in y.pointer(slots).copyMemory(from: x.pointer(slots), byteCount: y.byteCount) }
    }
}

/// `shape`, `size`, `constant`, `constant_of_shape`, `range`: values from shapes, scalars and
/// attributes. A shape-specialized plan folds them into constants; bound on its own
/// (a result too large to fold) it computes the value with the op set's routine.
struct GenerateStep: StepKernel {
    let id: KernelID
    let routine: ReferenceStep

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        try routine.bind(inputs, outputs, &context)
    }
}
