@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// Channels-last 3×3 stride-1 `conv` by Winograd F(2×2, 3×3) (the `winograd` entry of its ISA's
/// vector config): the output's 2×2 tiles split across threads in blocks whose transformed
/// patches and products stay in cache, 16 GEMMs per block on the compile-time transformed weight `[16, panels, C, nr]`;
/// bias, a fused residual and the activation applied by the output transform.
struct WinogradNHWCStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    /// The 16 packed B operands (U[ξ], K = C, N = M), pointing into `weight`.
    let gemms: [kiln_packed_b]
    let weight: NDArray
    let ukernel: kiln_f32_gemm_ukernel
    let mr: Int
    let epilogue: kiln_epilogue
    let window: OpSet.Window
    let channels: Int
    let outChannels: Int

    /// Tiles per block: the transformed patches and products of a block (16 · tiles · (C + M)
    /// floats) are reused by all 16 GEMMs; 128 tiles measured fastest from 64 to 256 channels.
    static let blockTiles = 128

    init(id: KernelID, op: KilnFormat.Operation, weight w: Weight, stacked: NDArray, epilogue: kiln_epilogue) throws {
        guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available on this host") }
        guard w.shape.count == 4, w.shape[2] == 3, w.shape[3] == 3 else { throw OpError("needs a [M, C, 3, 3] weight, got \(w.shape)") }
        let (m, c) = (w.shape[0], w.shape[1])
        let panels = (m + tile.nr - 1) / tile.nr
        guard stacked.scalarType == .float32, stacked.shape == [16, panels, c, tile.nr] else {
            throw OpError("weight '\(w.name)' is not a Winograd transform in panels of \(tile.nr) (blob \(stacked.shape)); compile the package again")
        }
        self.id = id
        self.op = op
        weight = stacked
        ukernel = uk
        mr = tile.mr
        self.epilogue = epilogue
        window = try OpSet.Window(op.attributes, kernel: [3, 3])
        guard window.strides == [1, 1], window.dilations == [1, 1] else {
            throw OpError("a Winograd conv needs stride 1 and no dilation")
        }
        channels = c
        outChannels = m
        gemms = (0 ..< 16).map { xi in
            var b = kiln_packed_b()
            b.kind = Int32(KILN_B_F32); b.k = c; b.n = m; b.nr = tile.nr
            b.data = UnsafeRawPointer(stacked.unsafeBase + xi * panels * c * tile.nr * 4)
            return b
        }
    }

    /// `[N, oh, ow, M]`.
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 4 else { return nil }
        return [([x.shape[0], window.outputSize(0, size: x.shape[1]), window.outputSize(1, size: x.shape[2]), outChannels], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, x.shape[3] == channels else {
            throw OpError("needs a float32 NHWC input of \(channels) channels")
        }
        let (batch, h, w, c, m) = (x.shape[0], x.shape[1], x.shape[2], channels, outChannels)
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == m, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(m) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        try expectOutput(outputs, [batch, oh, ow, m])
        let y = outputs[0]
        let ldc = y.rowStride ?? m
        let residual = inputs.count > 3 ? inputs[3] : nil
        if let residual { guard residual.shape == y.shape, residual.dtype == .float32 else { throw OpError("residual \(residual.shape) does not fit the output \(y.shape)") } }
        guard residual == nil || ldc == m else { throw OpError("a residual needs a dense output") }
        let tiles = (oh + 1) / 2 * ((ow + 1) / 2)
        let threads = context.threads
        // Threads split the tiles (a few chunks each), or, when all tiles fit one block and the
        // transformed weight is too large for L2, the output channels: each thread then transforms
        // every patch but streams only its share of the weight, which is larger than the patches on
        // such small maps. Each chunk has its own scratch.
        let panels = (m + Int(gemms[0].nr) - 1) / Int(gemms[0].nr)
        let parts = threads > 1 ? workChunks(threads) : 1
        let weightBytes = 16 * panels * c * Int(gemms[0].nr) * 4
        let byPanels = tiles <= Self.blockTiles && panels >= 2 && threads > 1 && weightBytes > l2WeightBytes
        let chunks: [(tiles: Range<Int>, panels: Range<Int>)] = byPanels
            ? splitRanges(panels, parts: parts).map { (0 ..< tiles, $0) }
            : splitRanges(tiles, parts: parts, align: mr).map { ($0, 0 ..< panels) }
        let block = byPanels ? max(tiles, 1) : min(Self.blockTiles, max(mr, (tiles + parts - 1) / parts))
        let scratchFloats = kiln_f32_winograd_scratch_floats(c, m, block)
        let chunkBytes = (scratchFloats * 4 + 63) / 64 * 64
        context.scratch(chunkBytes * max(chunks.count, 1))
        let winograd = VectorConfig(id.isa).winograd
        let (gemms, ukernel, mr, base, scratchSlot) = (gemms, ukernel, mr, epilogue, context.scratchSlot)
        return BoundStep { slots in
            guard tiles > 0, m > 0 else { return }
            let py = y.floats(slots)
            let e = ConvNHWCStep.epilogue(base, bias: bias, residual: residual, output: y, slots)
            let scratch = slots[scratchSlot]
            gemms.withUnsafeBufferPointer { u in
                for image in 0 ..< batch {
                    let xi = UnsafePointer(x.floats(slots) + image * h * w * c), yi = py + image * oh * ow * ldc
                    parallelFor(chunks.count, threads: threads) { i in
                        var part = e
                        let local = (scratch + i * chunkBytes).assumingMemoryBound(to: Float.self)
                        let (t, p) = chunks[i]
                        winograd(ukernel, mr, u.baseAddress, h, w, c, xi, pt, pl, oh, ow, yi, ldc,
                                 t.lowerBound, t.upperBound, p.lowerBound, p.upperBound, block, &part, local)
                    }
                }
            }
        }
    }
}
