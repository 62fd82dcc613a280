@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// 2-D `max_pool`/`average_pool` on NCHW; images × channels split across threads.
struct Pool2DStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int32, Int32, Int, Int, Int, UnsafePointer<Float>?, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int,
                                       Int, Int, UnsafeMutablePointer<Float>?) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    let window: OpSet.Window
    let kernel: Kernel

    init(id: KernelID, op: KilnFormat.Operation) throws {
        self.id = id
        self.op = op
        guard let shape = try op.attributes.ints("kernel_shape"), shape.count == 2 else { throw OpError("needs a 2-D kernel_shape") }
        window = try OpSet.Window(op.attributes, kernel: shape)
        kernel = VectorConfig(id.isa).pool2d
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, outputs.count == 1 else { throw OpError("needs a float32 NCHW input") }
        let (planes, h, w) = (x.shape[0] * x.shape[1], x.shape[2], x.shape[3])
        let (pt, pb) = window.padding(0, size: h), (pl, pr) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        try expectOutput(outputs, [x.shape[0], x.shape[1], oh, ow])
        let isMax: Int32 = op.opType == "max_pool" ? 1 : 0
        let countPad = Int32(try op.attributes.int("count_include_pad", 0) != 0 ? 1 : 0)
        let parts = splitRanges(planes, parts: planes * oh * ow * kh * kw < 1 << 15 ? 1 : context.threads)
        let (y, kernel, threads) = (outputs[0], kernel, context.threads)
        return BoundStep { slots in
            let px = x.floats(slots), py = y.floats(slots)
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                kernel(isMax, countPad, r.count, h, w, px + r.lowerBound * h * w, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow,
                       py + r.lowerBound * oh * ow)
            }
        }
    }
}

/// `global_average_pool`/`global_max_pool`: one value per image and channel.
struct GlobalPoolStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count >= 3 else { throw OpError("needs a float32 input [N, C, …]") }
        let planes = x.shape[0] * x.shape[1], spatial = x.shape[2...].reduce(1, *)
        guard spatial > 0 else { throw OpError("empty spatial dims") }
        try expectOutput(outputs, Array(x.shape[..<2]) + Array(repeating: 1, count: x.shape.count - 2))
        let y = outputs[0], isMax = op.opType == "global_max_pool"
        return BoundStep { slots in
            if isMax {
                kiln_f32_global_max_pool__scalar(planes, spatial, x.floats(slots), y.floats(slots))
            } else {
                kiln_f32_global_average_pool__scalar(planes, spatial, x.floats(slots), y.floats(slots))
            }
        }
    }
}

/// Channels-last 2-D `max_pool`/`average_pool`: output rows split across threads.
struct Pool2DNHWCStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int32, Int32, Int, Int, Int, UnsafePointer<Float>?, Int, Int, Int, Int, Int, Int, Int, Int, Int, Int,
                                       Int, Int, Int, Int, UnsafeMutablePointer<Float>?) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    let window: OpSet.Window
    let kernel: Kernel

    init(id: KernelID, op: KilnFormat.Operation) throws {
        self.id = id
        self.op = op
        guard let shape = try op.attributes.ints("kernel_shape"), shape.count == 2 else { throw OpError("needs a 2-D kernel_shape") }
        window = try OpSet.Window(op.attributes, kernel: shape)
        kernel = VectorConfig(id.isa).pool2dNHWC
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs, layout: .channelsLast) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 4, outputs.count == 1 else { throw OpError("needs a float32 NHWC input") }
        let (batch, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (pt, pb) = window.padding(0, size: h), (pl, pr) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        try expectOutput(outputs, [batch, oh, ow, c])
        let isMax: Int32 = op.opType == "max_pool" ? 1 : 0
        let countPad = Int32(try op.attributes.int("count_include_pad", 0) != 0 ? 1 : 0)
        let parts = splitRanges(oh, parts: c * oh * ow * kh * kw < 1 << 15 ? 1 : context.threads)
        let (y, kernel, threads) = (outputs[0], kernel, context.threads)
        return BoundStep { slots in
            for image in 0 ..< batch {
                let xi = x.floats(slots) + image * h * w * c, yi = y.floats(slots) + image * oh * ow * c
                parallelFor(parts.count, threads: threads) { i in
                    let r = parts[i]
                    kernel(isMax, countPad, h, w, c, xi, kh, kw, sh, sw, dh, dw, pt, pl, pb, pr, oh, ow, r.lowerBound, r.upperBound, yi)
                }
            }
        }
    }
}
