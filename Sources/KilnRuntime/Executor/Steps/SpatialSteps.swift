@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat
import KilnReference

/// `resize` (nearest, linear, cubic; every coordinate transformation but `tf_crop_and_resize`)
/// as one separable pass per resized axis, with the interpolation taps worked out at binding.
struct ResizeStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let options: Resize.Options

    init(id: KernelID, op: KilnFormat.Operation) throws {
        self.id = id
        self.op = op
        options = try Resize.options(op.attributes)
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, options.transform != "tf_crop_and_resize" else {
            throw OpError("needs float32 input and a transformation other than tf_crop_and_resize")
        }
        func floats(_ i: Int) throws -> [Double]? {
            guard i < inputs.count, let o = inputs[i] else { return nil }
            guard let v = o.value, v.scalarType == .float32 else { throw OpError("input \(i) is not known before the run") }
            let c = v.contiguous()
            return (0 ..< c.elementCount).map { Double(c.unsafeBase.load(fromByteOffset: $0 * 4, as: Float.self)) }
        }
        var scales = try op.attributes.floats("scales"), sizes = try op.attributes.ints("sizes")
        if scales == nil, sizes == nil {
            if let s = try floats(2), !s.isEmpty { scales = s }
            if let s = try knownIntegers(inputs.count > 3 ? inputs[3] : nil, "sizes"), !s.isEmpty { sizes = s }
        }
        let g = try Resize.geometry(x.shape, scales: sizes == nil ? scales : nil, sizes: sizes, roi: nil, axes: try op.attributes.ints("axes"), options)
        guard g.output == outputs[0].shape else { throw OpError("resize gives \(g.output), the plan has \(outputs[0].shape)") }
        // One pass per resized axis, ping-ponging through scratch; the last pass writes the output.
        struct Pass { var outer, n, inner, m, taps: Int; var index: [Int32]; var weight: [Float] }
        var passes: [Pass] = []
        var shape = x.shape
        for a in 0 ..< shape.count where g.resizes(a, input: x.shape, options) {
            let (taps, _) = Resize.weights(input: x.shape[a], output: g.output[a], scale: g.scale[a], roi: (g.roiStart[a], g.roiEnd[a]), options)
            let t = taps.map(\.count).max() ?? 1
            var index = [Int32](repeating: 0, count: taps.count * t), weight = [Float](repeating: 0, count: taps.count * t)
            for (i, list) in taps.enumerated() { for (k, tap) in list.enumerated() { index[i * t + k] = Int32(tap.0); weight[i * t + k] = tap.1 } }
            passes.append(Pass(outer: shape[..<a].reduce(1, *), n: shape[a], inner: shape[(a + 1)...].reduce(1, *), m: g.output[a], taps: t,
                               index: index, weight: weight))
            shape[a] = g.output[a]
        }
        let y = outputs[0]
        if passes.isEmpty {
            // Every axis keeps its size and samples land on the input's pixels: a copy.
            let bytes = y.byteCount
            return BoundStep { slots in y.pointer(slots).copyMemory(from: x.pointer(slots), byteCount: bytes) }
        }
        let half = passes.dropLast().map { $0.outer * $0.m * $0.inner }.max() ?? 0
        let halfBytes = (half * 4 + 63) / 64 * 64
        context.scratch(2 * halfBytes)
        let scratchSlot = context.scratchSlot
        // Each pass's output rows split across threads (contiguous ranges: a channels-last image's
        // rows of pixels), one pass after another.
        let parts = passes.map { p in splitRanges(p.outer * p.m, parts: p.outer * p.m * p.inner < 1 << 15 ? 1 : workChunks(context.threads)) }
        let threads = context.threads
        return BoundStep { slots in
            var source = UnsafePointer(x.floats(slots))
            for (k, p) in passes.enumerated() {
                let target = k == passes.count - 1 ? y.floats(slots) : (slots[scratchSlot] + (k % 2) * halfBytes).assumingMemoryBound(to: Float.self)
                let ranges = parts[k]
                p.index.withUnsafeBufferPointer { index in
                    p.weight.withUnsafeBufferPointer { weight in
                        parallelFor(ranges.count, threads: threads) { i in
                            kiln_f32_resize_axis__scalar(p.outer, p.n, p.inner, source, p.m, p.taps, index.baseAddress, weight.baseAddress, target,
                                                         ranges[i].lowerBound, ranges[i].upperBound)
                        }
                    }
                }
                source = UnsafePointer(target)
            }
        }
    }
}

/// 2-D `conv_transpose` (groups, strides, dilations, pads, output padding): per image and group
/// one GEMM of the transposed weight with the input's pixels into columns, then col2im.
struct ConvTransposeStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    /// Per group, the weight transposed to [Cout/g · kh · kw, Cin/g] (row-major).
    let weightT: [Float]
    let weightShape: [Int]
    let window: OpSet.Window
    let group: Int
    let ukernel: kiln_f32_gemm_ukernel
    let tile: GEMMTile

    init(id: KernelID, op: KilnFormat.Operation, weight w: NDArray, ukernel: kiln_f32_gemm_ukernel, tile: GEMMTile) throws {
        self.id = id
        self.op = op
        self.ukernel = ukernel
        self.tile = tile
        group = try op.attributes.int("group", 1)
        guard w.rank == 4, group >= 1, w.shape[0] % group == 0 else { throw OpError("needs a 4-D weight whose channels split into \(group) groups") }
        weightShape = w.shape
        window = try OpSet.Window(op.attributes, kernel: Array(w.shape[2...]))
        let (cin, coutG, kk) = (w.shape[0], w.shape[1], w.shape[2] * w.shape[3])
        let cinG = cin / group, rows = coutG * kk
        let pw = w.unsafeBase.assumingMemoryBound(to: Float.self)
        var t = [Float](repeating: 0, count: cin * rows)
        for g in 0 ..< group {
            for ci in 0 ..< cinG { for r in 0 ..< rows { t[g * rows * cinG + r * cinG + ci] = pw[(g * cinG + ci) * rows + r] } }
        }
        weightT = t
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, x.shape[1] == weightShape[0] else {
            throw OpError("needs a float32 NCHW input with \(weightShape[0]) channels")
        }
        let y = outputs[0]
        let (batch, cin, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (coutG, kh, kw) = (weightShape[1], weightShape[2], weightShape[3])
        guard y.shape.count == 4, y.shape[0] == batch, y.shape[1] == coutG * group, y.dtype == .float32 else {
            throw OpError("output \(y.shape) does not fit the weight")
        }
        let (oh, ow) = (y.shape[2], y.shape[3])
        // Begin padding as the op set defines it.
        let outPad = try op.attributes.ints("output_padding") ?? [0, 0]
        let explicit = try op.attributes.ints("output_shape")
        var padBegin = [0, 0]
        for i in 0 ..< 2 {
            let input = i == 0 ? h : w
            let k = i == 0 ? kh : kw
            let full = window.strides[i] * (input - 1) + (i < outPad.count ? outPad[i] : 0) + (k - 1) * window.dilations[i] + 1
            if explicit != nil || window.autoPad == "SAME_UPPER" || window.autoPad == "SAME_LOWER" {
                let total = max(0, full - (i == 0 ? oh : ow))
                padBegin[i] = window.autoPad == "SAME_UPPER" ? total / 2 : total - total / 2
            } else {
                padBegin[i] = window.pads[i]
            }
        }
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == coutG * group, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(coutG * group) channels") } }
        let cinG = cin / group, rows = coutG * kh * kw, pixels = h * w
        let nr = tile.nr, panels = (pixels + nr - 1) / nr
        let colsBytes = (rows * pixels * 4 + 63) / 64 * 64
        context.scratch(colsBytes + panels * cinG * nr * 4)
        var pb = kiln_packed_b()
        pb.kind = Int32(KILN_B_F32); pb.k = cinG; pb.n = pixels; pb.nr = nr
        let gemm = PackedGEMM(b: pb, ukernel: ukernel, mr: tile.mr)
        let chunks = gemm.chunks(m: rows, threads: context.threads)
        // col2im, the bias and the zeros it starts from, per output channel: channels split across threads.
        let channelParts = splitRanges(coutG, parts: context.threads > 1 ? workChunks(context.threads) : 1)
        let (weightT, group, window, threads, scratchSlot) = (weightT, group, window, context.threads, context.scratchSlot)
        return BoundStep { slots in
            let cols = slots[scratchSlot].assumingMemoryBound(to: Float.self)
            let packed = (slots[scratchSlot] + colsBytes).assumingMemoryBound(to: Float.self)
            var g = gemm
            g.b.data = UnsafeRawPointer(packed)
            let out = y.floats(slots)
            let b = bias?.floats(slots)
            weightT.withUnsafeBufferPointer { wt in
                for n in 0 ..< batch {
                    for gi in 0 ..< group {
                        let xi = x.floats(slots) + (n * cin + gi * cinG) * pixels
                        kiln_f32_pack_b(cinG, pixels, nr, xi, pixels, 1, packed)
                        g.run(a: wt.baseAddress! + gi * rows * cinG, lda: cinG, c: cols, ldc: pixels, chunks: chunks, epilogue: kiln_epilogue(),
                              scratch: nil, threads: threads)
                        let first = n * coutG * group + gi * coutG
                        parallelFor(channelParts.count, threads: threads) { i in
                            let r = channelParts[i]
                            let planes = out + (first + r.lowerBound) * oh * ow
                            planes.initialize(repeating: 0, count: r.count * oh * ow)
                            kiln_f32_col2im__scalar(r.count, h, w, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                                    window.dilations[1], padBegin[0], padBegin[1], oh, ow, cols + r.lowerBound * kh * kw * pixels, planes)
                            guard let b else { return }
                            for c in r {
                                let plane = out + (first + c) * oh * ow, v = b[gi * coutG + c]
                                for i in 0 ..< oh * ow { plane[i] += v }
                            }
                        }
                    }
                }
            }
        }
    }
}
