import KilnFormat

/// A plain, obviously-correct interpreter of one function of a portable model: the
/// oracle the compiler is tested against, and `kiln run --reference`.
///
/// The plan is made once: value names become slot numbers, attributes are parsed into
/// kernels, weights are decoded, and each value is released after its last use.
/// A run only moves arrays between slots. Runs on one interpreter may overlap.
public final class ReferenceInterpreter: SubgraphRunner, Sendable {
    struct Step: Sendable {
        var op: String
        var kernel: Kernel
        var inputs: [Int]
        var outputs: [Int]
        var declared: [TensorType]
        var release: [Int]
    }

    /// The function this interpreter runs.
    public let function: Function
    private let steps: [Step]
    private let slotCount: Int
    private let constants: [(Int, NDArray)]
    private let inputSlots: [Int]
    private let outputSlots: [Int]

    /// Prepares one op of the function: the kernel that runs it.
    public typealias StepMaker = (Operation) throws -> @Sendable ([NDArray?]) throws -> [NDArray]

    /// Plans `function` of `model`.
    /// - Parameters:
    ///   - model: A validated portable model, or a compiler's lowered model when `prepare` is given.
    ///   - name: The function to run.
    ///   - prepare: Makes each op's kernel (default: the op set's reference kernel). A compiled
    ///     plan's reference runs a step's op as its step config says (layout, fused epilogue).
    /// - Throws: ``InferenceError`` when the function is absent or an op has no kernel.
    public init(model: PortableModel, function name: String, prepare: StepMaker? = nil) throws {
        guard let f = model.function(named: name) else {
            throw InferenceError(function: name, reason: "no such function; the model has \(model.functions.map { "'\($0.name)'" }.joined(separator: ", "))")
        }
        function = f
        var slots: [String: Int] = [:]
        func slot(_ value: String) -> Int {
            if let s = slots[value] { return s }
            slots[value] = slots.count
            return slots.count - 1
        }
        inputSlots = f.inputs.map { slot($0.name) }
        // Weights this function uses, decoded once.
        let weights = Dictionary(model.weights.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        var constants: [(Int, NDArray)] = []
        var lastUse: [Int: Int] = [:]
        var planned: [Step] = []
        for (i, op) in f.operations.enumerated() {
            var inputs: [Int] = []
            for v in op.inputs {
                if v.isEmpty { inputs.append(-1); continue }
                if slots[v] == nil, let w = weights[v] {
                    do {
                        constants.append((slot(v), try Weights.decode(w)))
                    } catch let e as OpError {
                        throw InferenceError(function: name, op: op.name, reason: "weight '\(v)': \(e.reason)")
                    }
                }
                let s = slot(v)
                inputs.append(s)
                lastUse[s] = i
            }
            let kernel: Kernel
            do {
                kernel = try prepare?(op) ?? KernelTable.kernel(for: op)
            } catch let e as OpError {
                throw InferenceError(function: name, op: op.name, reason: e.reason)
            }
            planned.append(Step(op: op.name, kernel: kernel, inputs: inputs, outputs: op.outputs.map { slot($0.name) },
                                declared: op.outputs.map(\.type), release: []))
        }
        var outputSlots: [Int] = []
        for out in f.outputs {
            if slots[out.value] == nil, let w = weights[out.value] {
                constants.append((slot(out.value), try Weights.decode(w)))
            }
            outputSlots.append(slot(out.value))
        }
        // Release each value after its last use, unless it is returned or constant.
        let kept = Set(outputSlots).union(constants.map(\.0))
        for (s, i) in lastUse where !kept.contains(s) { planned[i].release.append(s) }
        self.outputSlots = outputSlots
        self.constants = constants
        steps = planned
        slotCount = slots.count
    }

    /// Plans a closed subgraph (a control-flow body): the planner the reference kernels of
    /// `if`, `loop` and `scan` use unless they are given another.
    public static let planSubgraph: SubgraphPlanner = { body in
        try ReferenceInterpreter(model: PortableModel(metadata: Metadata(), weights: [], functions: [body]), function: body.name)
    }

    /// Runs the function as a subgraph: arrays in input order (floats as float32, shapes as
    /// they come: a loop-carried value may change shape), results in output order, floats as
    /// float32.
    /// - Parameter inputs: One array per input.
    /// - Returns: One array per output.
    /// - Throws: ``OpError`` naming the subgraph and the op that failed.
    public func run(_ inputs: [NDArray]) throws -> [NDArray] {
        guard inputs.count == inputSlots.count else {
            throw OpError("subgraph '\(function.name)' takes \(inputSlots.count) inputs, got \(inputs.count)")
        }
        for (arg, x) in zip(function.inputs, inputs) {
            let sameKind = x.scalarType == arg.type.dtype || (x.scalarType.isFloatingPoint && arg.type.dtype.isFloatingPoint)
            guard sameKind, x.rank == arg.type.rank else {
                throw OpError("subgraph '\(function.name)' input '\(arg.name)' is \(arg.type), got \(x.scalarType.rawValue)\(x.shape)")
            }
        }
        do {
            let values = try execute(try inputs.map { try Weights.widened($0.contiguous()) }, symbols: [:])
            return try zip(function.outputs, outputSlots).map { arg, s in
                guard let v = values[s] else { throw InferenceError(function: function.name, reason: "output '\(arg.name)' was not computed") }
                return v
            }
        } catch let e as InferenceError {
            throw OpError("\(e)")
        }
    }

    /// Runs the function.
    /// - Parameter inputs: Arrays by input name, matching the function's signature.
    /// - Returns: Arrays by output name.
    /// - Throws: ``InferenceError`` naming the input or op that failed.
    public func run(_ inputs: [String: NDArray]) throws -> [String: NDArray] {
        let symbols = try function.bind(inputs)
        let values = try execute(try function.inputs.map { try Weights.widened(inputs[$0.name]!.contiguous()) }, symbols: symbols)
        var out: [String: NDArray] = [:]
        for (arg, s) in zip(function.outputs, outputSlots) {
            guard let v = values[s] else {
                throw InferenceError(function: function.name, reason: "output '\(arg.name)' was not computed")
            }
            out[arg.name] = ReferenceKernel.narrow(v, to: arg.type.dtype)
        }
        return out
    }

    /// Every step on `inputs` (in signature order, floats widened); the slots afterwards.
    private func execute(_ inputs: [NDArray], symbols: [String: Int]) throws -> [NDArray?] {
        var values = [NDArray?](repeating: nil, count: slotCount)
        for (s, v) in constants { values[s] = v }
        for (x, s) in zip(inputs, inputSlots) { values[s] = x }
        for step in steps {
            let args = step.inputs.map { $0 < 0 ? nil : values[$0] }
            let results: [NDArray]
            do {
                results = try step.kernel(args)
            } catch let e as OpError {
                throw InferenceError(function: function.name, op: step.op, reason: e.reason)
            }
            guard results.count == step.outputs.count else {
                throw InferenceError(function: function.name, op: step.op, reason: "produced \(results.count) outputs, declared \(step.outputs.count)")
            }
            for (k, r) in results.enumerated() {
                try check(r, against: step.declared[k], symbols: symbols, op: step.op)
                values[step.outputs[k]] = r
            }
            for s in step.release { values[s] = nil }
        }
        return values
    }

    /// Evaluates one op on known inputs (constant folding at convert time).
    /// - Parameters:
    ///   - op: The op; its declared output types are not checked.
    ///   - inputs: Its inputs; `nil` for absent optional inputs.
    /// - Returns: The outputs, float results as float32.
    /// - Throws: ``OpError`` when the op cannot run on these inputs.
    public static func evaluate(_ op: Operation, _ inputs: [NDArray?]) throws -> [NDArray] {
        let kernel = try KernelTable.kernel(for: op)
        return try kernel(try inputs.map { try $0.map { try Weights.widened($0.contiguous()) } })
    }

    /// Checks a result against its declared type: rank, fixed dims, and symbols (and expressions
    /// of them) bound by the inputs.
    private func check(_ x: NDArray, against t: TensorType, symbols: [String: Int], op: String) throws {
        let sameKind = x.scalarType == t.dtype || (x.scalarType == .float32 && t.dtype.isFloatingPoint)
        var ok = sameKind && x.rank == t.rank
        if ok {
            for (d, n) in zip(t.shape, x.shape) {
                switch d {
                case .size(let s) where s != n: ok = false
                case .symbol(let s) where !s.isEmpty:
                    // A declared expression of bound symbols (a concat's grown length) is checked too.
                    if let bound = symbols[s] ?? (DimExpression.isPlainName(s) ? nil : DimExpression(parsing: s)?.evaluate(symbols)), bound != n { ok = false }
                default: break
                }
            }
        }
        guard ok else {
            throw InferenceError(function: function.name, op: op, reason: "produced \(x.scalarType.rawValue)\(x.shape) but declares \(t)")
        }
    }
}
