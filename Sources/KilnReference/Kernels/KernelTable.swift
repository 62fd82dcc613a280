import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// One op, ready to run: attributes are parsed when the plan is made, not per call.
typealias Kernel = @Sendable ([NDArray?]) throws -> [NDArray]

/// Maps each op type of specs/ops.md to its reference kernel.
enum KernelTable {
    /// Input `i`, or an error naming it when it is missing.
    static func present(_ inputs: [NDArray?], _ i: Int) throws -> NDArray {
        guard i < inputs.count, let x = inputs[i] else { throw OpError("input \(i) is missing") }
        return x
    }

    /// A parameter given as an ints attribute, or else as an optional input tensor.
    static func intsParameter(_ op: Operation, _ name: String, input: Int) throws -> @Sendable ([NDArray?]) throws -> [Int]? {
        let fixed = try op.attributes.ints(name)
        return { inputs in
            if let fixed { return fixed }
            guard input < inputs.count, let t = inputs[input] else { return nil }
            return try t.intValues()
        }
    }

    /// An elementwise unary op: the registry's formula on float32 inputs (computed in Double);
    /// other dtypes (and clip with bound inputs) by the op's own kernel below.
    static func unaryKernel(for op: Operation, _ map: UnaryMap, subgraphs: SubgraphPlanner) throws -> Kernel {
        let f = try map.formula(OpAttributes(op))
        let other: Kernel? = map.acceptsIntegers ? try kernel(of: op, subgraphs: subgraphs) : nil
        let type = op.opType
        return { inputs in
            let x = try present(inputs, 0)
            if x.scalarType == .float32, inputs.count == 1 { return [try Elementwise.mapFloat(x) { Float(f(Double($0))) }] }
            guard let other else { throw OpError("\(type) needs a float32 input, got \(x.scalarType.rawValue)") }
            return try other(inputs)
        }
    }

    /// The kernel of `op`: a unary op's registry formula (with its own kernel for other dtypes), else
    /// ``kernel(of:subgraphs:)``'s.
    static func kernel(for op: Operation, subgraphs: SubgraphPlanner = ReferenceInterpreter.planSubgraph) throws -> Kernel {
        if let map = OpSet.schema(op.opType)?.unary { return try unaryKernel(for: op, map, subgraphs: subgraphs) }
        return try kernel(of: op, subgraphs: subgraphs)
    }

    /// The op families, in the order they are tried: the first that knows an op type makes its
    /// kernel; the shape and data-movement ops, last, reject unknown types.
    static let families: [@Sendable (Operation) throws -> Kernel?] = [
        arithmeticKernel, logicKernel, linearAlgebraKernel, convolutionKernel, normalizationKernel,
        reductionKernel, quantizationKernel, indexingKernel, visionKernel,
    ]

    /// The kernel of any op but the unary ones' float32 formulas: control flow (which plans its
    /// subgraphs with `subgraphs`), else the first family's that knows the op type.
    /// - Throws: ``OpError`` for an op type without a kernel or attributes that do not fit it.
    static func kernel(of op: Operation, subgraphs: SubgraphPlanner) throws -> Kernel {
        switch op.opType {
        case "if", "loop", "scan": return try ControlFlow.kernel(for: op, planner: subgraphs)
        default:
            for family in families {
                if let kernel = try family(op) { return kernel }
            }
            return try MovementKernels.kernel(for: op)
        }
    }
}
