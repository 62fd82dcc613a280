@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// Depthwise `conv` (one filter per channel) with its epilogue, channels split across threads.
struct DepthwiseStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int, Int, Int, UnsafePointer<Float>?, Int, Int, UnsafePointer<Float>?, Int, Int, Int, Int, Int, Int,
                                       Int, Int, UnsafeMutablePointer<Float>?, UnsafePointer<kiln_epilogue>?, UnsafeMutablePointer<Float>?) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    let weight: NDArray
    let epilogue: kiln_epilogue
    let window: OpSet.Window
    let kernel: Kernel

    init(id: KernelID, op: KilnFormat.Operation, weight: NDArray, epilogue: kiln_epilogue, window: OpSet.Window) {
        self.id = id
        self.op = op
        self.weight = weight
        self.epilogue = epilogue
        self.window = window
        kernel = VectorConfig(id.isa).dwconv2d
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, x.shape[1] == weight.shape[0] else {
            throw OpError("needs a float32 NCHW input with \(weight.shape[0]) channels")
        }
        let (batch, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == c, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(c) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let (kh, kw) = (weight.shape[2], weight.shape[3])
        guard weight.rank == 4, weight.scalarType == .float32, [kh, kw] == window.kernel else { throw OpError("weight \(weight.shape) does not fit the window") }
        try expectOutput(outputs, [batch, c, oh, ow])
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        let ranges = splitRanges(batch * c, parts: c * oh * ow * kh * kw < 1 << 15 ? 1 : context.threads)
        let perPart = (kiln_f32_dwconv2d_scratch_floats(kh, kw, sh, sw, dh, dw, oh, ow) * 4 + 63) / 64 * 64
        context.scratch(perPart * max(ranges.count, 1))
        let (y, weight, base, kernel, threads, scratchSlot) = (outputs[0], weight, epilogue, kernel, context.threads, context.scratchSlot)
        return BoundStep { slots in
            let px = x.floats(slots), py = y.floats(slots), pw = weight.unsafeBase.assumingMemoryBound(to: Float.self)
            let pb = bias.map { UnsafePointer($0.floats(slots)) }
            parallelFor(ranges.count, threads: threads) { r in
                let scratch = perPart > 0 ? (slots[scratchSlot] + r * perPart).assumingMemoryBound(to: Float.self) : nil
                var part = base
                for bc in ranges[r] {
                    let ch = bc % c
                    part.bias = pb.map { $0 + ch }
                    kernel(1, h, w, px + bc * h * w, kh, kw, pw + ch * kh * kw, sh, sw, dh, dw, pt, pl, oh, ow, py + bc * oh * ow, &part, scratch)
                }
            }
        }
    }
}

/// Channels-last depthwise `conv`: weight `[kh, kw, C]`; output rows (or, for short planes,
/// channel ranges) split across threads.
struct DepthwiseNHWCStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int, Int, Int, UnsafePointer<Float>?, Int, Int, UnsafePointer<Float>?, Int, Int, Int, Int, Int, Int,
                                       Int, Int, Int, Int, Int, Int, UnsafeMutablePointer<Float>?, UnsafePointer<kiln_epilogue>?) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    let weight: NDArray
    let epilogue: kiln_epilogue
    let window: OpSet.Window
    let kernel: Kernel

    init(id: KernelID, op: KilnFormat.Operation, weight: NDArray, epilogue: kiln_epilogue) throws {
        guard weight.rank == 3, weight.scalarType == .float32 else {
            throw OpError("weight is \(weight.scalarType.rawValue)\(weight.shape), expected float32 [kh, kw, C]; compile the package again")
        }
        self.id = id
        self.op = op
        self.weight = weight
        self.epilogue = epilogue
        window = try OpSet.Window(op.attributes, kernel: Array(weight.shape[..<2]))
        kernel = VectorConfig(id.isa).dwconv2dNHWC
    }

    /// `[N, oh, ow, C]` (the reordered weight is not a conv weight the schema could read).
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 4 else { return nil }
        return [([x.shape[0], window.outputSize(0, size: x.shape[1]), window.outputSize(1, size: x.shape[2]), weight.shape[2]], .float32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        let (kh, kw, channels) = (weight.shape[0], weight.shape[1], weight.shape[2])
        // A channel multiplier m (groups = input channels, m filters each): output channel k·m + j
        // reads input channel k, so each image's channels are repeated m times first.
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, x.shape[3] > 0, channels % x.shape[3] == 0 else {
            throw OpError("needs a float32 NHWC input whose channels divide \(channels)")
        }
        let multiplier = channels / x.shape[3]
        let (batch, h, w) = (x.shape[0], x.shape[1], x.shape[2])
        let bias = inputs.count > 2 ? inputs[2] : nil
        if let bias { guard bias.count == channels, bias.dtype == .float32 else { throw OpError("bias \(bias.shape) does not fit \(channels) channels") } }
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        try expectOutput(outputs, [batch, oh, ow, channels])
        let parts = channels * oh * ow * kh * kw < 1 << 15 ? 1 : context.threads
        // Short planes split channels (in whole 16-lane vectors), so both halves stay balanced.
        let byChannels = oh < 4 * parts && channels >= 32 * parts
        let chunks = parts > 1 ? workChunks(parts) : 1
        let rowParts = byChannels ? [0 ..< oh] : splitRanges(oh, parts: chunks)
        let channelParts = byChannels ? splitRanges(channels, parts: chunks, align: 16) : [0 ..< channels]
        // Channels past the last whole vector run a scalar loop: where AVX-512's 16 lanes leave 8 or
        // more of them over (a ghost module's 8 or 24 channels), AVX2's 8 lanes take one more vector.
        let kernel = id.isa == .avx512 && channels % 16 >= 8 ? VectorConfig(.avx2).dwconv2dNHWC : self.kernel
        let (y, weight, base, threads) = (outputs[0], weight, epilogue, context.threads)
        let work = rowParts.flatMap { r in channelParts.map { (r, $0) } }
        let inChannels = x.shape[3], pixelParts = splitRanges(h * w, parts: multiplier > 1 && h * w * channels >= 1 << 15 ? threads : 1)
        if multiplier > 1 { context.scratch(h * w * channels * 4) }
        let scratchSlot = context.scratchSlot
        return BoundStep { slots in
            let px = x.floats(slots), py = y.floats(slots), pw = weight.unsafeBase.assumingMemoryBound(to: Float.self)
            var e = base
            e.bias = bias.map { UnsafePointer($0.floats(slots)) }
            for image in 0 ..< batch {
                var xi = UnsafePointer(px + image * h * w * inChannels)
                let yi = py + image * oh * ow * channels
                if multiplier > 1 {
                    let repeated = slots[scratchSlot].assumingMemoryBound(to: Float.self), source = xi
                    parallelFor(pixelParts.count, threads: threads) { i in
                        let r = pixelParts[i]
                        kiln_f32_repeat_channels__scalar(r.count, inChannels, multiplier, source + r.lowerBound * inChannels,
                                                         repeated + r.lowerBound * channels)
                    }
                    xi = UnsafePointer(repeated)
                }
                parallelFor(work.count, threads: threads) { i in
                    let (r, cr) = work[i]
                    var part = e
                    kernel(h, w, channels, xi, kh, kw, pw, sh, sw, dh, dw, pt, pl, oh, ow, r.lowerBound, r.upperBound, cr.lowerBound,
                           cr.upperBound, yi, &part)
                }
            }
        }
    }
}
