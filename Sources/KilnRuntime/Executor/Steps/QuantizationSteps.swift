@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// `dynamic_quantize_linear` of float32: one pass for the range, one to quantize.
struct DynamicQuantizeStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, outputs.count == 3, outputs[0].dtype == .uint8, outputs[0].count == x.count,
              outputs[1].dtype == .float32, outputs[1].count == 1, outputs[2].dtype == .uint8, outputs[2].count == 1 else {
            throw OpError("needs float32 x and outputs uint8 y, float32 scale, uint8 zero point")
        }
        let (y, scale, zero) = (outputs[0], outputs[1], outputs[2])
        return BoundStep { slots in
            kiln_f32_dynamic_quantize_u8__scalar(x.count, x.floats(slots), y.pointer(slots).assumingMemoryBound(to: UInt8.self), scale.floats(slots),
                                                 zero.pointer(slots).assumingMemoryBound(to: UInt8.self))
        }
    }
}
