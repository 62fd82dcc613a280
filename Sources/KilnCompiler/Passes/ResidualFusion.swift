import KilnFormat

/// Fuses a residual `add` into the channels-last convolution that produces one of its operands:
/// the microkernel adds the other operand to its accumulators before bias and activation, and
/// a shape plan writes the result over the residual's buffer when nothing reads it afterwards.
///
/// Before: `y = conv(x, W, b)` (channels-last) `; z = add(y, r)` — after:
/// `z = conv(x, W, b, r)` (channels-last; input 3 is the residual), placed where the add
/// was. Only when `y` has no other reader, the conv has one group and no fused activation yet
/// (an activation after the add fuses later, as `relu(conv + b + r)`), and `r` has `y`'s type.
public struct ResidualFusion: CompilerPass {
    /// `residual_fusion`.
    public static let name = "residual_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            let uses = UseIndex(f)
            var removed = Set<Int>()
            for (ai, add) in f.operations.enumerated() where add.opType == "add" && add.inputs.count == 2 && add.outputs.count == 1 {
                for (k, y) in add.inputs.enumerated() {
                    let residual = add.inputs[1 - k]
                    guard let ci = uses.producer[y], !removed.contains(ci), uses.isPrivate(y), residual != y,
                          Self.fusable(f.operations[ci], unit.config(of: f.operations[ci], in: f.name), unit), add.outputs[0].type == f.operations[ci].outputs[0].type,
                          Self.type(of: residual, in: f, unit) == add.outputs[0].type else { continue }
                    var fused = f.operations[ci]
                    if fused.inputs.count < 3 { fused.inputs.append("") }
                    fused.inputs.append(residual)
                    fused.outputs = add.outputs
                    f.operations[ai] = fused
                    removed.insert(ci)
                    break
                }
            }
            f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
            unit.model.functions[fi] = f
        }
    }

    /// A channels-last one-group conv with a weight, no residual and no fused activation.
    static func fusable(_ op: Operation, _ config: StepConfig, _ unit: CompilationUnit) -> Bool {
        guard op.opType == "conv", op.outputs.count == 1, op.outputs[0].type.dtype == .float32, (2 ... 3).contains(op.inputs.count),
              config.activation == nil, config.layout.output,
              (try? op.attributes.int("group", 1)) == 1, let w = unit.weight(op.inputs[1]), w.shape.count == 4 else { return false }
        return true
    }

    static func type(of value: String, in f: Function, _ unit: CompilationUnit) -> TensorType? {
        if let a = f.inputs.first(where: { $0.name == value }) { return a.type }
        for op in f.operations { if let o = op.outputs.first(where: { $0.name == value }) { return o.type } }
        return unit.weight(value)?.type
    }
}
