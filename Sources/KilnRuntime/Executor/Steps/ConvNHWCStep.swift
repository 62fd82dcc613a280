@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// Channels-last `conv` with a packed weight: the image is the GEMM's A as it lies for 1×1
/// windows of stride 1; wider windows (and every grouped convolution, one GEMM per group) go
/// through the indirect microkernel, or, on an ISA without one, im2col rows built in blocks of
/// output pixels that stay in cache; bias, activation and a fused residual (`accumulate`) are
/// applied by the microkernel before it stores.
struct ConvNHWCStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    let gemm: PackedGEMM
    let epilogue: kiln_epilogue
    let window: OpSet.Window

    /// Bytes of im2col rows per block.
    static let blockBytes = 1 << 20

    /// Whether the input is channels-first (layout `planesToChannelsLast`: windows read from planes).
    let planarInput: Bool
    /// The tile's indirect microkernel (windows read in place through per-pixel pointers), if the ISA has one.
    let indirect: kiln_f32_igemm_ukernel?

    /// Per group its weight (one entry for one group; `gemm` is the first).
    let groups: [PackedGEMM]
    /// The stacked per-group panels `[groups, panels, K, nr]` the group weights point into.
    let groupWeight: NDArray?
    /// For a channels-first input read by an indirect microkernel: the weight with K reordered
    /// from (c, ky, kx) to (ky, kx, c), so the planes can be gathered into padded channels-last
    /// cells and each kernel row read as one run of kw · c floats.
    let cellWeight: PackedGEMM?

    init(id: KernelID, op: KilnFormat.Operation, gemm: PackedGEMM, epilogue: kiln_epilogue, window: OpSet.Window, layout: StepConfig.Layout) throws {
        try self.init(id: id, op: op, groups: [gemm], weight: nil, epilogue: epilogue, window: window, layout: layout)
    }

    /// A grouped convolution: `weight` holds every group's panels.
    init(id: KernelID, op: KilnFormat.Operation, groups: [PackedGEMM], weight: NDArray?, epilogue: kiln_epilogue, window: OpSet.Window,
         layout: StepConfig.Layout) throws {
        self.id = id
        self.op = op
        gemm = groups[0]
        self.groups = groups
        groupWeight = weight
        self.epilogue = epilogue
        self.window = window
        guard layout.output else { throw OpError("a channels-last conv needs a channels-last layout") }
        planarInput = !layout.input
        indirect = id.indirectMicrokernel
        cellWeight = planarInput && indirect != nil && groups.count == 1 && window.kernel.count == 2
            ? ConvNHWCStep.cellOrder(groups[0], kh: window.kernel[0], kw: window.kernel[1]) : nil
    }

    /// A float32 packed weight with each panel's K rows moved from (c, ky, kx) to (ky, kx, c)
    /// order (a copy: only convolutions of a few input channels read planes, so it is small);
    /// nil for other encodings.
    static func cellOrder(_ g: PackedGEMM, kh: Int, kw: Int) -> PackedGEMM? {
        let (k, nr, panels) = (g.k, g.b.nr, g.panels)
        guard g.b.kind == Int32(KILN_B_F32), g.b.ldb == 0, kh > 0, kw > 0, k % (kh * kw) == 0, let source = g.b.data else { return nil }
        let c = k / (kh * kw)
        let floats = panels * k * nr
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(floats * 4, 1), alignment: 64)
        defer { bytes.deallocate() }
        let from = source.assumingMemoryBound(to: Float.self), to = bytes.baseAddress!.assumingMemoryBound(to: Float.self)
        for p in 0 ..< panels {
            for ch in 0 ..< c { for ky in 0 ..< kh { for kx in 0 ..< kw {
                let old = (ch * kh + ky) * kw + kx, new = (ky * kw + kx) * c + ch
                (to + (p * k + new) * nr).update(from: from + (p * k + old) * nr, count: nr)
            } } }
        }
        let storage = ByteStorage(copying: UnsafeRawBufferPointer(bytes))
        var b = g.b
        b.data = storage.baseAddress
        return PackedGEMM(b: b, ukernel: g.ukernel, mr: g.mr, storage: [storage])
    }

    /// Output channels (all groups).
    var outChannels: Int { gemm.n * groups.count }

    /// `[N, oh, ow, M]` (the packed weight is not a conv weight the schema could read).
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 4 else { return nil }
        let (h, w) = planarInput ? (x.shape[2], x.shape[3]) : (x.shape[1], x.shape[2])
        return [([x.shape[0], window.outputSize(0, size: h), window.outputSize(1, size: w), outChannels], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, window.kernel.count == 2 else {
            throw OpError("needs a float32 NHWC input")
        }
        if groups.count > 1 {
            let channels = gemm.k / (window.kernel[0] * window.kernel[1]) * groups.count
            guard let indirect, !planarInput, x.shape[3] == channels else {
                throw OpError("a grouped convolution needs a channels-last input of \(channels) channels and an indirect microkernel")
            }
            let bias = inputs.count > 2 ? inputs[2] : nil
            if let bias { guard bias.count == outChannels, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(outChannels) channels") } }
            let residual = inputs.count > 3 ? inputs[3] : nil
            if let residual { guard residual.shape == outputs[0].shape, residual.dtype == .float32 else { throw OpError("residual \(residual.shape) does not fit the output") } }
            try expectOutput(outputs, [x.shape[0], window.outputSize(0, size: x.shape[1]), window.outputSize(1, size: x.shape[2]), outChannels])
            return try bindIndirect(indirect, x: x, y: outputs[0], bias: bias, residual: residual, context: &context)
        }
        let (batch, h, w, c) = planarInput ? (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) : (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        guard c * kh * kw == gemm.k else { throw OpError("input \(x.shape) does not fit the weight (K = \(gemm.k))") }
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == gemm.n, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(gemm.n) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let pixels = oh * ow, n = gemm.n, k = gemm.k
        try expectOutput(outputs, [batch, oh, ow, n])
        let y = outputs[0]
        // Channels between pixels of the output: n, or a concat's width when it writes into a slice of one.
        let ldc = y.rowStride ?? n
        let residual = inputs.count > 3 ? inputs[3] : nil
        if let residual { guard residual.shape == y.shape, residual.dtype == .float32 else { throw OpError("residual \(residual.shape) does not fit the output \(y.shape)") } }
        guard residual == nil || ldc == n, k > 0 || ldc == n else { throw OpError("a residual or an empty window needs a dense output") }
        let pointwise = !planarInput && kh == 1 && kw == 1 && window.strides == [1, 1] && pt == 0 && pl == 0 && oh == h && ow == w
        let threads = context.threads
        let planar = planarInput
        if !pointwise, residual == nil, let indirect, let sparse = try bindSparseTaps(indirect, x: x, y: y, bias: bias, context: &context) {
            return sparse
        }
        if !pointwise, let indirect, (h + 2 * kh * window.dilations[0]) * (w + 2 * kw * window.dilations[1]) * c < Int(Int32.max) {
            return try bindIndirect(indirect, x: x, y: y, bias: bias, residual: residual, context: &context)
        }
        // Blocks of output pixels: all of them at once for 1×1 (A is the image), else as many
        // im2col rows as fit the block size, a multiple of the microkernel's rows.
        let rows = pointwise ? batch * pixels : pixels
        let perBlock = pointwise ? max(rows, 1) : min(max(pixels, 1), max(gemm.mr * threads, Self.blockBytes / max(k * 4, 1) / gemm.mr * gemm.mr))
        var blocks: [(rows: Range<Int>, chunks: [(rows: Range<Int>, panels: Range<Int>)], im2col: [Range<Int>])] = []
        var start = 0
        while start < rows {
            let r = start ..< min(rows, start + perBlock)
            blocks.append((r, gemm.chunks(m: r.count, threads: threads), splitRanges(r.count, parts: pointwise ? 1 : threads)))
            start = r.upperBound
        }
        let colsBytes = pointwise ? 0 : (perBlock * k * 4 + 63) / 64 * 64
        let chunkCount = blocks.map(\.chunks.count).max() ?? 1
        context.scratch(colsBytes + gemm.scratchBytes * max(chunkCount, 1))
        let (gemm, base, scratchSlot, window) = (gemm, epilogue, context.scratchSlot, window)
        return BoundStep { slots in
            guard rows > 0, n > 0 else { return }
            let py = y.floats(slots)
            var e = ConvNHWCStep.epilogue(base, bias: bias, residual: residual, output: y, slots)
            let scratch = slots[scratchSlot]
            let gemmScratch = scratch + colsBytes
            if k == 0 {
                if residual == nil { py.initialize(repeating: 0, count: y.count) }
                kiln_f32_epilogue(batch * pixels, n, py, n, e.bias, &e)
                return
            }
            if pointwise {
                gemm.run(a: x.floats(slots), lda: k, c: py, ldc: ldc, chunks: blocks[0].chunks, epilogue: e, scratch: gemmScratch, threads: threads)
                return
            }
            let cols = scratch.assumingMemoryBound(to: Float.self)
            for image in 0 ..< batch {
                let xi = x.floats(slots) + image * h * w * c, yi = py + image * pixels * ldc
                for block in blocks {
                    parallelFor(block.im2col.count, threads: threads) { i in
                        let r = block.im2col[i]
                        let (lo, hi) = (block.rows.lowerBound + r.lowerBound, block.rows.lowerBound + r.upperBound)
                        if planar {
                            kiln_f32_im2col_nchw_rows__scalar(c, h, w, xi, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                                              window.dilations[1], pt, pl, ow, lo, hi, cols + r.lowerBound * k)
                        } else {
                            kiln_f32_im2col_nhwc__scalar(h, w, c, xi, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                                         window.dilations[1], pt, pl, ow, lo, hi, cols + r.lowerBound * k)
                        }
                    }
                    gemm.run(a: cols, lda: k, c: yi + block.rows.lowerBound * ldc, ldc: ldc, chunks: block.chunks, epilogue: e,
                             scratch: gemmScratch, threads: threads)
                }
            }
        }
    }
}

extension ConvNHWCStep {
    /// The run's epilogue: the bias pointer, and with a residual `accumulate` set and (with
    /// `copyResidual`, unless the plan put the output over the residual's buffer) the output filled with it.
    static func epilogue(_ base: kiln_epilogue, bias: Operand?, residual: Operand?, output y: Operand, _ slots: SlotTable,
                         copyResidual: Bool = true) -> kiln_epilogue {
        var e = base
        e.bias = bias.map { UnsafePointer($0.floats(slots)) }
        if let residual {
            let (pr, py) = (residual.floats(slots), y.floats(slots))
            if copyResidual, pr != py { py.update(from: pr, count: y.count) }
            e.accumulate = 1
        }
        return e
    }

    /// Windows wider than a pixel without im2col copies: the image is copied once into a
    /// zero-padded buffer (when the window reaches outside it), each output pixel's window is a
    /// base pointer plus one offset per K step, and the indirect microkernel reads it in place.
    /// Threads take ranges of output pixels (of panels when the pixels are few).
    func bindIndirect(_ ukernel: kiln_f32_igemm_ukernel, x: Operand, y: Operand, bias: Operand?, residual: Operand?,
                      context: inout BindContext) throws -> BoundStep {
        let (batch, h, w, c) = planarInput ? (x.shape[0], x.shape[2], x.shape[3], x.shape[1]) : (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        // Rows and columns the windows reach past the image's end.
        let pb = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt), pr = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)
        let (hp, wp) = (h + pt + pb, w + pl + pr)
        // Gathered planes always go through the cell buffer.
        let padded = pt + pb + pl + pr > 0 || (planarInput && cellWeight != nil)
        // Planes with a reordered weight are gathered into padded cells and read as NHWC.
        let gather = planarInput ? cellWeight : nil
        let planes = planarInput && gather == nil
        // K in runs of contiguous elements, one offset each: with one group and undilated rows a
        // whole kernel row of cells (kw · c floats), else a tap's channels (NHWC; each group's window
        // reads its own C/groups channels); on planes a row of taps (undilated) or single taps.
        var offsets: [Int32] = []
        let run: Int
        if planes {
            run = dw == 1 ? kw : 1
            for ch in 0 ..< c { for ky in 0 ..< kh { for kx in stride(from: 0, to: kw, by: run) { offsets.append(Int32(ch * hp * wp + ky * dh * wp + kx * dw)) } } }
        } else if groups.count == 1 && dw == 1 {
            run = kw * c
            for ky in 0 ..< kh { offsets.append(Int32(ky * dh * wp * c)) }
        } else {
            run = c / groups.count
            for ky in 0 ..< kh { for kx in 0 ..< kw { offsets.append(Int32((ky * dh * wp + kx * dw) * c)) } }
        }
        let (rowStep, pixelStep) = planes ? (sh * wp, sw) : (sh * wp * c, sw * c)
        let weights = gather ?? gemm, gemms = gather.map { [$0] } ?? groups
        let pixels = oh * ow, n = outChannels, mr = weights.mr, threads = context.threads, panelCount = weights.panels
        let small = pixels * n * weights.k < 1 << 15
        let parts = small ? 1 : threads
        // Threads split the pixels, unless the weight is too large for L2 and has enough panels to
        // share: then each thread streams only its half of it.
        let weightBytes = weights.k * panelCount * weights.b.nr * 4
        let byRows = panelCount < 2 * parts || (pixels >= 2 * mr * parts && weightBytes <= l2WeightBytes)
        // Row splits walk pixel tiles outer (panels stay in each thread's L2), so finer chunks
        // cost nothing and even out threads that run at different speeds.
        let tiles = (pixels + mr - 1) / mr
        let chunkCount = small ? 1 : byRows ? max(workChunks(threads), min(4 * threads, tiles / 4)) : workChunks(threads)
        let split: [(rows: Range<Int>, panels: Range<Int>)] = byRows
            ? splitRanges(pixels, parts: chunkCount, align: mr).map { ($0, 0 ..< panelCount) }
            : splitRanges(panelCount, parts: chunkCount).map { (0 ..< pixels, $0) }
        // The same split for every group: (group, pixels, panels), pixel ranges outer so each
        // thread's home range (see kiln_parallel_for) holds the same pixels for every group.
        let chunks = split.flatMap { part in gemms.indices.map { g in (group: g, rows: part.rows, panels: part.panels) } }
        let padBytes = padded ? (hp * wp * c * 4 + 63) / 64 * 64 : 0
        let panelBytes = weights.scratchBytes
        context.scratch(padBytes + panelBytes * max(chunks.count, 1))
        let (base, scratchSlot, perGroup, gathering) = (epilogue, context.scratchSlot, weights.n, planarInput && !planes)
        let (groupChannels, groupCount) = (c / gemms.count, gemms.count)
        let ldc = y.rowStride ?? n
        guard residual == nil || ldc == n else { throw OpError("a residual needs a dense output") }
        // Before the product, threads share the copies: the padded image (rows over all its planes)
        // and the residual into the output.
        let padRows = padded ? (planes ? c * hp : hp) : 0
        let prepParts = small ? 1 : threads
        return BoundStep { slots in
            guard pixels > 0, n > 0 else { return }
            let py = y.floats(slots)
            let e = ConvNHWCStep.epilogue(base, bias: bias, residual: residual, output: y, slots, copyResidual: false)
            let residualSource = residual.map { UnsafePointer($0.floats(slots)) }.flatMap { $0 != UnsafePointer(py) ? $0 : nil }
            let scratch = slots[scratchSlot]
            let pad = scratch.assumingMemoryBound(to: Float.self)
            offsets.withUnsafeBufferPointer { offsets in
                for image in 0 ..< batch {
                    let xi = x.floats(slots) + image * h * w * c, yi = py + image * pixels * ldc
                    let copyResidual = image == 0 ? residualSource : nil
                    if padded || copyResidual != nil {
                        parallelFor(prepParts, threads: threads) { i in
                            if padded {
                                let (lo, hi) = (padRows * i / prepParts, padRows * (i + 1) / prepParts)
                                if gathering {
                                    kiln_f32_pad_planes_to_cells(c, h, w, xi, pt, pl, hp, wp, pad, lo, hi)
                                } else if planes {
                                    kiln_f32_pad_rows(c, h, w, 1, xi, pt, pl, hp, wp, pad, lo, hi)
                                } else {
                                    kiln_f32_pad_rows(1, h, w, c, xi, pt, pl, hp, wp, pad, lo, hi)
                                }
                            }
                            if let copyResidual {
                                let (lo, hi) = (y.count * i / prepParts, y.count * (i + 1) / prepParts)
                                (py + lo).update(from: copyResidual + lo, count: hi - lo)
                            }
                        }
                    }
                    let src = padded ? UnsafePointer(pad) : UnsafePointer(xi)
                    parallelFor(chunks.count, threads: threads) { i in
                        let (g, rows, panels) = chunks[i]
                        var part = e
                        if groupCount > 1 { part.bias = e.bias.map { $0 + g * perGroup } }
                        var b = gemms[g].b
                        let local = panelBytes > 0 ? (scratch + padBytes + i * panelBytes).assumingMemoryBound(to: Float.self) : nil
                        kiln_f32_igemm(ukernel, mr, &b, src + g * groupChannels, rowStep, pixelStep, ow, offsets.baseAddress, run,
                                       yi + g * perGroup, ldc, rows.lowerBound, rows.upperBound, panels.lowerBound, panels.upperBound, &part, local)
                    }
                }
            }
        }
    }
}
