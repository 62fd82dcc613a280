@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// `batch_norm` in inference form that was not folded into a convolution: a per-channel
/// affine map whose coefficients come from scale, bias, mean and variance at run time.
struct BatchNormStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, op.outputs.count == 1 else { return nil }
        return [(x.shape, x.dtype)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard outputs.count == 1, inputs.count == 5, let x = inputs[0], x.dtype == .float32, x.shape.count >= 2 else {
            throw OpError("needs float32 input [N, C, …] and one output")
        }
        let c = x.shape[1]
        let params = try (1 ... 4).map { i -> Operand in
            guard let p = inputs[i], p.count == c, p.dtype == .float32 else { throw OpError("parameter \(i) does not have \(c) float32 values") }
            return p
        }
        let eps = Float(try op.attributes.float("epsilon", 1e-5))
        let (batch, inner, y) = (x.shape[0], x.shape[2...].reduce(1, *), outputs[0])
        context.scratch(2 * c * 4)
        let scratchSlot = context.scratchSlot
        return BoundStep { slots in
            let a = slots[scratchSlot].assumingMemoryBound(to: Float.self), b = a + c
            let (scale, bias, mean, variance) = (params[0].floats(slots), params[1].floats(slots), params[2].floats(slots), params[3].floats(slots))
            for ch in 0 ..< c {
                a[ch] = scale[ch] / (variance[ch] + eps).squareRoot()
                b[ch] = bias[ch] - mean[ch] * a[ch]
            }
            kiln_f32_channel_affine__scalar(batch, c, inner, x.floats(slots), a, b, y.floats(slots))
        }
    }
}

/// `instance_norm`: each (n, c) plane normalized, then per-channel scale and bias.
struct InstanceNormStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 3, let x = inputs[0], let scale = inputs[1], let bias = inputs[2], x.dtype == .float32, x.shape.count >= 3,
              scale.count == x.shape[1], bias.count == x.shape[1], scale.dtype == .float32, bias.dtype == .float32 else {
            throw OpError("needs float32 input [N, C, …] with C scales and biases")
        }
        let eps = Float(try op.attributes.float("epsilon", 1e-5))
        let (batch, c, inner, y) = (x.shape[0], x.shape[1], x.shape[2...].reduce(1, *), outputs[0])
        guard inner > 0 else { throw OpError("empty planes") }
        // Planes split across threads; a part's planes are run batch entry by batch entry.
        let threads = context.threads
        let parts = splitRanges(batch * c, parts: batch * c * inner < 1 << 15 ? 1 : workChunks(threads))
        return BoundStep { slots in
            let (px, ps, pb, py) = (x.floats(slots), scale.floats(slots), bias.floats(slots), y.floats(slots))
            parallelFor(parts.count, threads: threads) { i in
                var plane = parts[i].lowerBound
                while plane < parts[i].upperBound {
                    let ch = plane % c, count = min(c - ch, parts[i].upperBound - plane)
                    kiln_f32_instance_norm__scalar(1, count, inner, px + plane * inner, ps + ch, pb + ch, eps, py + plane * inner)
                    plane += count
                }
            }
        }
    }
}

/// `top_k` of float32 along one axis: values and int64 indices, ties to the lower index.
struct TopKStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, !x.shape.isEmpty, outputs.count == 2 else { throw OpError("needs float32 input") }
        let axis = try OpSet.normalize(axis: try op.attributes.int("axis", -1), rank: x.shape.count)
        let (outer, n, inner) = around(x.shape, axis: axis)
        let k = outputs[0].shape[axis]
        guard k <= n, outputs[1].dtype == .int64 else { throw OpError("k = \(k) does not fit a dim of \(n)") }
        let largest: Int32 = try op.attributes.int("largest", 1) != 0 ? 1 : 0
        context.scratch(max(n, 1) * 16)
        let (values, indices, scratchSlot) = (outputs[0], outputs[1], context.scratchSlot)
        return BoundStep { slots in
            kiln_f32_top_k__scalar(largest, outer, n, inner, k, x.floats(slots), values.floats(slots),
                                   indices.pointer(slots).assumingMemoryBound(to: Int64.self), slots[scratchSlot])
        }
    }
}
