@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// `linear`/`matmul` with a packed weight: `y[…, N] = epilogue(x[…, K] · W + bias)`.
struct GEMMStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    let gemm: PackedGEMM
    let epilogue: kiln_epilogue

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil else { return nil }
        return [(Array(x.shape.dropLast()) + [gemm.n], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.last == gemm.k else {
            throw OpError("input \(inputs.first??.shape ?? []) does not fit the weight's \(gemm.k) inputs")
        }
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == gemm.n, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(gemm.n) outputs") } }
        try expectOutput(outputs, Array(x.shape.dropLast()) + [gemm.n])
        let y = outputs[0], m = x.count / max(gemm.k, 1), n = gemm.n, k = gemm.k
        let chunks = gemm.chunks(m: m, threads: context.threads)
        context.scratch(gemm.scratchBytes * max(chunks.count, 1))
        let (gemm, base, threads, scratchSlot) = (gemm, epilogue, context.threads, context.scratchSlot)
        return BoundStep { slots in
            var e = base
            e.bias = bias.map { UnsafePointer($0.floats(slots)) }
            if k == 0 {
                y.floats(slots).initialize(repeating: 0, count: m * n)
                kiln_f32_epilogue(m, n, y.floats(slots), n, e.bias, &e)
                return
            }
            gemm.run(a: x.floats(slots), lda: k, c: y.floats(slots), ldc: n, chunks: chunks, epilogue: e, scratch: slots[scratchSlot],
                     threads: threads)
        }
    }
}

/// `conv` (group 1) with a packed, possibly compressed weight: im2col rows per image, the
/// GEMM into pixel-major scratch, then a transpose to NCHW.
struct PackedConvStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    let gemm: PackedGEMM
    let epilogue: kiln_epilogue
    let window: OpSet.Window

    /// `[N, M, oh, ow]` from the packed weight's columns and the window (the packed weight's
    /// shape `[K, M]` is not a conv weight's, so the op's schema cannot say).
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 4, window.kernel.count == 2 else { return nil }
        return [([x.shape[0], gemm.n, window.outputSize(0, size: x.shape[2]), window.outputSize(1, size: x.shape[3])], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, window.kernel.count == 2 else { throw OpError("needs a float32 NCHW input") }
        let (batch, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        guard c * kh * kw == gemm.k else { throw OpError("input \(x.shape) does not fit the weight (K = \(gemm.k))") }
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == gemm.n, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(gemm.n) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let pixels = oh * ow, n = gemm.n, k = gemm.k
        try expectOutput(outputs, [batch, n, oh, ow])
        let y = outputs[0]
        let chunks = gemm.chunks(m: pixels, threads: context.threads)
        let colsBytes = (pixels * k * 4 + 63) / 64 * 64, tmpBytes = (pixels * n * 4 + 63) / 64 * 64
        context.scratch(colsBytes + tmpBytes + gemm.scratchBytes * max(chunks.count, 1))
        let (gemm, base, threads, scratchSlot, window) = (gemm, epilogue, context.threads, context.scratchSlot, window)
        let pointwise = kh == 1 && kw == 1 && window.strides == [1, 1] && pt == 0 && pl == 0 && oh == h && ow == w
        return BoundStep { slots in
            var e = base
            e.bias = bias.map { UnsafePointer($0.floats(slots)) }
            let scratch = slots[scratchSlot]
            let cols = scratch.assumingMemoryBound(to: Float.self)
            let tmp = (scratch + colsBytes).assumingMemoryBound(to: Float.self)
            for b in 0 ..< batch {
                let xi = x.floats(slots) + b * c * h * w
                if pointwise {
                    kiln_f32_transpose__scalar(c, h * w, xi, cols)
                } else {
                    kiln_f32_im2col__scalar(c, h, w, xi, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                            window.dilations[1], pt, pl, oh, ow, cols)
                }
                gemm.run(a: cols, lda: k, c: tmp, ldc: n, chunks: chunks, epilogue: e, scratch: scratch + colsBytes + tmpBytes, threads: threads)
                kiln_f32_transpose__scalar(pixels, n, tmp, y.floats(slots) + b * n * pixels)
            }
        }
    }
}

/// Dense `conv` in NCHW, any group count. The weight is the GEMM's A, packed at compile time in
/// row tiles of the microkernel (`[groups, tiles, K, mr]`); B is the image itself for 1×1
/// convolutions (each panel copied into L1 once when several row tiles reuse it) or its im2col
/// rows packed into panels of output pixels. Bias and activation are applied by the microkernel
/// before it stores; each thread takes a chunk of output channels.
struct ConvNCHWStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    /// The packed weight.
    let weight: NDArray
    /// The weight's logical shape `[M, C/g, kh, kw]`.
    let weightShape: [Int]
    let epilogue: kiln_epilogue
    let window: OpSet.Window
    let ukernel: kiln_f32_gemm_ukernel
    let tile: GEMMTile

    /// `[N, M, oh, ow]` from the logical weight shape (the packed blob's shape is not a conv weight's).
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 4 else { return nil }
        return [([x.shape[0], weightShape[0], window.outputSize(0, size: x.shape[2]), window.outputSize(1, size: x.shape[3])], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        let group = try op.attributes.int("group", 1)
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, group >= 1, x.shape[1] == weightShape[1] * group,
              weightShape[0] % group == 0 else {
            throw OpError("needs a float32 NCHW input with \(weightShape[1]) channels per group")
        }
        let (batch, channels, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (outChannels, kh, kw) = (weightShape[0], weightShape[2], weightShape[3])
        let (c, m) = (channels / group, outChannels / group)
        let k = c * kh * kw
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == outChannels, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(outChannels) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let pixels = oh * ow
        try expectOutput(outputs, [batch, outChannels, oh, ow])
        let y = outputs[0]
        let (mr, nr) = (tile.mr, tile.nr)
        let tiles = (m + mr - 1) / mr
        let pointwise = kh == 1 && kw == 1 && window.strides == [1, 1] && pt == 0 && pl == 0 && oh == h && ow == w
        // The im2col geometry. A column image (W = 1, a 1-D convolution exported as 2-D) is the
        // same memory as a row image with H and W swapped: its windows then run along rows, which
        // the packing copies as vectors instead of gathering pixel by pixel. K's order (c, ky, kx) is
        // unchanged, since one of the two kernel dims is 1.
        let column = w == 1 && kw == 1 && ow == 1 && h > 1
        let im = column
            ? Im2col(h: 1, w: h, kh: 1, kw: kh, sh: window.strides[1], sw: window.strides[0], dh: window.dilations[1],
                     dw: window.dilations[0], pt: pl, pl: pt, oh: 1, ow: oh)
            : Im2col(h: h, w: w, kh: kh, kw: kw, sh: window.strides[0], sw: window.strides[1], dh: window.dilations[0],
                     dw: window.dilations[1], pt: pt, pl: pl, oh: oh, ow: ow)
        let panels = (pixels + nr - 1) / nr
        let small = m * pixels * k < 1 << 15
        let threads = context.threads
        let panelRanges = splitRanges(panels, parts: small ? 1 : threads)
        // Threads take ranges of output pixels (every channel) when there are many pixels and few
        // channels: each panel is then packed or copied once, and the whole weight stays in cache.
        // Otherwise they take ranges of output channels over every pixel.
        let byPixels = !small && panels >= 4 * threads && m <= 128
        let rowChunks = splitRanges(m, parts: small || byPixels ? 1 : threads, align: mr)
        // A few pixels (squeeze-excitation, 1×1 feature maps) take dot products instead of a panel.
        let narrow = pointwise && pixels <= 4
        // 1×1 convolutions read the image as B where it lies (the driver copies a panel into the chunk's
        // scratch when several row tiles reuse it, and always the last, partial one).
        let panelBytes = k * nr * 4 + 64
        context.scratch(narrow ? k * pixels * 4 : pointwise || byPixels ? max(rowChunks.count, panelRanges.count) * panelBytes : panels * k * nr * 4)
        let (weight, base, ukernel, scratchSlot) = (weight, epilogue, ukernel, context.scratchSlot)
        return BoundStep { slots in
            guard pixels > 0, m > 0 else { return }
            let scratch = slots[scratchSlot].assumingMemoryBound(to: Float.self)
            let pw = weight.unsafeBase.assumingMemoryBound(to: Float.self)
            let biasPointer = bias.map { UnsafePointer($0.floats(slots)) }
            var b = kiln_packed_b()
            b.kind = Int32(KILN_B_F32); b.k = k; b.n = pixels; b.nr = nr; b.data = UnsafeRawPointer(scratch)
            for image in 0 ..< batch { for gi in 0 ..< group {
                let xi = x.floats(slots) + (image * channels + gi * c) * h * w
                let out = y.floats(slots) + (image * outChannels + gi * m) * pixels
                let pwg = pw + gi * tiles * k * mr, biasg = biasPointer.map { $0 + gi * m }
                if narrow {
                    for j in 0 ..< pixels { for kk in 0 ..< k { scratch[j * k + kk] = xi[kk * pixels + j] } }
                    parallelFor(rowChunks.count, threads: threads) { i in
                        let rows = rowChunks[i]
                        var e = base
                        e.row_bias = biasg.map { $0 + rows.lowerBound }
                        kiln_f32_gemm_narrow_packed(mr, rows.count, pixels, k, pwg + rows.lowerBound * k, scratch, out + rows.lowerBound * pixels,
                                                    pixels, &e)
                    }
                    continue
                }
                if byPixels {
                    parallelFor(panelRanges.count, threads: threads) { i in
                        let r = panelRanges[i]
                        let local = (UnsafeMutableRawPointer(scratch) + i * panelBytes).assumingMemoryBound(to: Float.self)
                        var e = base
                        e.row_bias = biasg
                        if pointwise {
                            var packedB = b
                            packedB.data = UnsafeRawPointer(xi)
                            packedB.ldb = pixels
                            kiln_f32_gemm(ukernel, mr, &packedB, pwg, 0, out, pixels, 0, m, r.lowerBound, r.upperBound, &e, local)
                            return
                        }
                        // One panel at a time: its im2col rows packed into L1, then every row tile over it.
                        for p in r {
                            im.pack(c, xi, nr, p, p + 1, local)
                            var one = b
                            one.data = UnsafeRawPointer(local)
                            one.n = min(nr, pixels - p * nr)
                            kiln_f32_gemm(ukernel, mr, &one, pwg, 0, out + p * nr, pixels, 0, m, 0, 1, &e, nil)
                        }
                    }
                    continue
                }
                if !pointwise {
                    // The im2col rows go straight into panels of output pixels.
                    parallelFor(panelRanges.count, threads: threads) { i in
                        let r = panelRanges[i]
                        im.pack(c, xi, nr, r.lowerBound, r.upperBound, scratch + r.lowerBound * k * nr)
                    }
                }
                parallelFor(rowChunks.count, threads: threads) { i in
                    let rows = rowChunks[i]
                    var packedB = b
                    var panel: UnsafeMutablePointer<Float>? = nil
                    if pointwise {
                        packedB.data = UnsafeRawPointer(xi)
                        packedB.ldb = pixels
                        panel = (UnsafeMutableRawPointer(scratch) + i * panelBytes).assumingMemoryBound(to: Float.self)
                    }
                    var e = base
                    e.row_bias = biasg
                    kiln_f32_gemm(ukernel, mr, &packedB, pwg, 0, out, pixels, rows.lowerBound, rows.upperBound, 0, panels, &e, panel)
                }
            } }
        }
    }
}

/// The geometry of one image's im2col packing.
struct Im2col {
    var h, w, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow: Int

    /// Packs panels [begin, end) of `nr` output pixels of `channels` planes at `x` into `out`.
    func pack(_ channels: Int, _ x: UnsafePointer<Float>, _ nr: Int, _ begin: Int, _ end: Int, _ out: UnsafeMutablePointer<Float>) {
        kiln_f32_im2col_pack(channels, h, w, x, kh, kw, sh, sw, dh, dw, pt, pl, oh, ow, nr, begin, end, out)
    }
}

/// `matmul` of two activations, batched (B broadcast when it has no batch dims): B packed
/// into panels per batch, then the GEMM.
struct MatMulStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let ukernel: kiln_f32_gemm_ukernel
    let tile: GEMMTile

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard inputs.count == 2, let a = inputs[0], let b = inputs[1], a.shape.count >= 2, b.shape.count >= 2 else { return nil }
        guard let batch = Self.batch(a.shape, b.shape) else { return nil }
        return [(batch + [a.shape[a.shape.count - 2], b.shape[b.shape.count - 1]], .float32)]
    }

    /// The output's batch dims: A's, when B's equal them or are all 1.
    static func batch(_ a: [Int], _ b: [Int]) -> [Int]? {
        let batchA = Array(a.dropLast(2)), batchB = Array(b.dropLast(2))
        guard batchA == batchB || batchB.allSatisfy({ $0 == 1 }) && batchB.count <= batchA.count else { return nil }
        return batchA
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 2, let a = inputs[0], let b = inputs[1], a.dtype == .float32, b.dtype == .float32,
              a.shape.count >= 2, b.shape.count >= 2, Self.batch(a.shape, b.shape) != nil else { throw OpError("operands do not fit a batched matmul") }
        let (m, k) = (a.shape[a.shape.count - 2], a.shape[a.shape.count - 1]), (k2, n) = (b.shape[b.shape.count - 2], b.shape[b.shape.count - 1])
        guard k == k2 else { throw OpError("inner dims differ: \(k) vs \(k2)") }
        try expectOutput(outputs, Array(a.shape.dropLast(2)) + [m, n])
        let batches = a.shape.dropLast(2).reduce(1, *), bBatches = b.shape.dropLast(2).reduce(1, *)
        let nr = tile.nr
        let panels = (n + nr - 1) / nr
        context.scratch(max(panels * k * nr, 1) * 4)
        var pb = kiln_packed_b()
        pb.kind = Int32(KILN_B_F32); pb.k = k; pb.n = n; pb.nr = nr
        let g = PackedGEMM(b: pb, ukernel: ukernel, mr: tile.mr)
        let chunks = g.chunks(m: m, threads: context.threads)
        let (y, threads, scratchSlot) = (outputs[0], context.threads, context.scratchSlot)
        return BoundStep { slots in
            let packed = slots[scratchSlot].assumingMemoryBound(to: Float.self)
            var gemm = g
            gemm.b.data = UnsafeRawPointer(packed)
            for i in 0 ..< batches {
                let out = y.floats(slots) + i * m * n
                if k == 0 { out.initialize(repeating: 0, count: m * n); continue }
                kiln_f32_pack_b(k, n, nr, b.floats(slots) + (bBatches == 1 ? 0 : i) * k * n, n, 1, packed)
                gemm.run(a: a.floats(slots) + i * m * k, lda: k, c: out, ldc: n, chunks: chunks, epilogue: kiln_epilogue(), scratch: nil,
                         threads: threads)
            }
        }
    }
}
