@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat
import KilnReference

/// The reference kernel of a lowered step: the portable op run by the reference interpreter,
/// with what the step's config adds around it — a channels-last layout (input 0 moved to
/// channels-first before, the result moved back after), a fused residual (a convolution's fourth
/// input, added), a fused bias (a `matmul`'s third input, added along the last axis), and a
/// fused activation (applied last, by the scalar C function the epilogues apply). A step whose
/// config is portable runs the op alone.
struct LoweredReference: Sendable {
    let kernel: ReferenceKernel
    let layout: StepConfig.Layout
    let activation: UnaryFunction.Application?
    /// Whether input 2 is a bias that epilogue fusion gave a `matmul`.
    let fusedBias: Bool

    /// Prepares the reference of `op` configured by `config`.
    /// - Throws: ``OpError`` when the op cannot be prepared or its activation is unknown.
    init(_ op: KilnFormat.Operation, _ config: StepConfig, subgraphs: SubgraphPlanner? = nil) throws {
        kernel = try ReferenceKernel(op, subgraphs: subgraphs)
        layout = config.layout
        activation = try UnaryFunction.fused(in: config)
        fusedBias = op.opType == "matmul" && op.inputs.count == 3
    }

    /// Runs the step on arrays.
    /// - Parameter inputs: Its inputs, in the step's layout (`nil` for absent optional ones).
    /// - Returns: Its outputs, in the step's layout.
    /// - Throws: ``OpError`` when the inputs do not fit.
    func callAsFunction(_ inputs: [NDArray?]) throws -> [NDArray] {
        if layout == .channelsFirst && activation == nil && !fusedBias { return try kernel(inputs) }
        var inputs = inputs
        let bias = fusedBias && inputs.count > 2 ? inputs[2] : nil
        if fusedBias { inputs.removeLast(inputs.count - 2) }
        if layout.input, let x = inputs.first ?? nil {
            guard x.rank >= 3 else { throw OpError("a channels-last step needs input 0 [N, …, C], got \(x.shape)") }
            inputs[0] = x.transposed(LoweredReference.toFirst(x.rank)).contiguous()
        }
        // The residual arrives in the output's layout; it is added after the move back.
        let residual = layout.output && inputs.count > 3 ? inputs[3] : nil
        if layout.output, inputs.count > 3 { inputs.removeLast(inputs.count - 3) }
        var outputs = try kernel(inputs)
        if layout.output, let y = outputs.first {
            outputs[0] = y.transposed(LoweredReference.toLast(y.rank)).contiguous()
            if let residual { outputs[0] = try LoweredReference.add(outputs[0], residual) }
        }
        if let bias, let y = outputs.first { outputs[0] = try LoweredReference.addRow(y, bias) }
        if let activation, let y = outputs.first { outputs[0] = try LoweredReference.apply(activation, y) }
        return outputs
    }

    /// The permutation `[N, …spatial, C]` → `[N, C, …spatial]`.
    static func toFirst(_ rank: Int) -> [Int] { [0, rank - 1] + Array(1 ..< rank - 1) }
    /// The permutation `[N, C, …spatial]` → `[N, …spatial, C]`.
    static func toLast(_ rank: Int) -> [Int] { [0] + Array(2 ..< rank) + [1] }

    static func add(_ y: NDArray, _ residual: NDArray) throws -> NDArray {
        guard residual.shape == y.shape, residual.scalarType == .float32, y.scalarType == .float32 else {
            throw OpError("the residual \(residual.scalarType.rawValue)\(residual.shape) does not fit the output \(y.shape)")
        }
        let r = residual.contiguous().scalars(as: Float.self), v = y.contiguous().scalars(as: Float.self)
        return NDArray(shape: y.shape, scalars: zip(v, r).map { $0 + $1 })
    }

    /// y + bias, the bias `[N]` added to every row of y's last axis N.
    static func addRow(_ y: NDArray, _ bias: NDArray) throws -> NDArray {
        guard let n = y.shape.last, bias.shape == [n], bias.scalarType == .float32, y.scalarType == .float32 else {
            throw OpError("the bias \(bias.scalarType.rawValue)\(bias.shape) does not fit the output \(y.scalarType.rawValue)\(y.shape)")
        }
        let b = bias.contiguous().scalars(as: Float.self), v = y.contiguous().scalars(as: Float.self)
        return NDArray(shape: y.shape, scalars: v.enumerated().map { $1 + b[$0 % n] })
    }

    static func apply(_ a: UnaryFunction.Application, _ y: NDArray) throws -> NDArray {
        guard y.scalarType == .float32 else { throw OpError("a fused activation needs a float32 result, got \(y.scalarType.rawValue)") }
        let x = y.contiguous().scalars(as: Float.self)
        var out = [Float](repeating: 0, count: x.count)
        x.withUnsafeBufferPointer { src in
            out.withUnsafeMutableBufferPointer { dst in
                kiln_f32_unary__scalar(a.function.code, src.count, src.baseAddress, dst.baseAddress, a.alpha, a.beta)
            }
        }
        return NDArray(shape: y.shape, scalars: out)
    }
}

extension StepKernel {
    /// Output types of a step in `layout`: the portable op's types for its input moved to
    /// channels-first, the first output moved back to channels-last; `nil` when a dim is unknown.
    static func inferred(_ op: KilnFormat.Operation, _ inputs: [Operand?], layout: StepConfig.Layout) throws -> [(shape: [Int], dtype: DataType)]? {
        guard layout != .channelsFirst else { return try inferred(op, inputs) }
        var portable = Array(inputs.prefix(3))
        if layout.input, let x = portable.first ?? nil {
            guard x.shape.count >= 3 else { throw OpError("a channels-last step needs input 0 [N, …, C], got \(x.shape)") }
            portable[0]?.shape = LoweredReference.toFirst(x.shape.count).map { x.shape[$0] }
        }
        guard var types = try inferred(op, portable) else { return nil }
        let y = types[0].shape
        guard y.count >= 3 else { return nil }
        types[0].shape = LoweredReference.toLast(y.count).map { y[$0] }
        return types
    }
}

extension LoweredReference {
    /// The reference interpreter of a function of a compilation unit whose passes chose step
    /// configs: each op runs as its config says, so the values keep the layouts the passes
    /// declared. Tests check a pass alone with it, as the portable model is checked with
    /// ``ReferenceInterpreter``.
    /// - Parameters:
    ///   - unit: The unit after some passes.
    ///   - function: The function's name.
    /// - Returns: The interpreter.
    /// - Throws: ``InferenceError`` when an op cannot be prepared.
    static func interpreter(of unit: CompilationUnit, function: String) throws -> ReferenceInterpreter {
        try ReferenceInterpreter(model: unit.model, function: function) { op in
            let step = try LoweredReference(op, unit.config(of: op, in: function))
            return { try step($0) }
        }
    }
}
