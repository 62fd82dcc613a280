/// The plan of a compiled artifact: lowered functions and packed weights (a portable-model
/// shaped container) plus, per function, its steps, slots and liveness (specs/compiled-format.md).
public struct CompiledPlan: Sendable {
    /// One step: a kernel on operand slots (-1 for an absent optional input).
    public struct Step: Sendable, Hashable {
        /// The kernel's name, e.g. `f32_gemm_6x16__avx2`.
        public var kernel: String
        /// Input slots.
        public var inputs: [Int]
        /// Output slots.
        public var outputs: [Int]
        /// What the compiler chose beyond the op: layout, fused activation, packed-weight layout.
        public var config: StepConfig

        /// Creates a step.
        /// - Parameters:
        ///   - kernel: The kernel's name.
        ///   - inputs: Input slots.
        ///   - outputs: Output slots.
        ///   - config: The step's configuration.
        public init(kernel: String, inputs: [Int], outputs: [Int], config: StepConfig = .portable) {
            self.kernel = kernel
            self.inputs = inputs
            self.outputs = outputs
            self.config = config
        }
    }

    /// When a slot's value is defined and last read.
    public struct Lifetime: Sendable, Hashable {
        /// The slot.
        public var slot: Int
        /// The step that defines it.
        public var firstStep: Int
        /// The last step that reads it (or `firstStep` when never read).
        public var lastStep: Int

        /// Creates a lifetime.
        /// - Parameters:
        ///   - slot: The slot.
        ///   - firstStep: Its defining step.
        ///   - lastStep: Its last reader.
        public init(slot: Int, firstStep: Int, lastStep: Int) {
            self.slot = slot
            self.firstStep = firstStep
            self.lastStep = lastStep
        }
    }

    /// One function's executable plan. Step `i` runs operation `i` of the lowered function
    /// of the same name.
    public struct FunctionPlan: Sendable {
        /// The function's name.
        public var name: String
        /// Number of slots.
        public var slotCount: Int
        /// Slot of each input, in signature order.
        public var inputSlots: [Int]
        /// Slot of each output, in signature order.
        public var outputSlots: [Int]
        /// Weights bound before the first step: (slot, index into the model's weights).
        public var weights: [(slot: Int, weight: Int)]
        /// The steps in order.
        public var steps: [Step]
        /// The memory plan's liveness intervals.
        public var lifetimes: [Lifetime]

        /// Creates a function plan.
        /// - Parameters:
        ///   - name: The function.
        ///   - slotCount: Number of slots.
        ///   - inputSlots: Input slots.
        ///   - outputSlots: Output slots.
        ///   - weights: Weight bindings.
        ///   - steps: Steps.
        ///   - lifetimes: Liveness.
        public init(name: String, slotCount: Int, inputSlots: [Int], outputSlots: [Int],
                    weights: [(slot: Int, weight: Int)], steps: [Step], lifetimes: [Lifetime]) {
            self.name = name
            self.slotCount = slotCount
            self.inputSlots = inputSlots
            self.outputSlots = outputSlots
            self.weights = weights
            self.steps = steps
            self.lifetimes = lifetimes
        }
    }

    /// The lowered functions and packed weights.
    public var model: PortableModel
    /// The executable plans, one per function.
    public var functions: [FunctionPlan]
    /// The architecture the plan was made for.
    public var arch: String

    /// Creates a plan.
    /// - Parameters:
    ///   - model: Lowered functions and packed weights.
    ///   - functions: Per-function plans.
    ///   - arch: The architecture name.
    ///   - source: What the source package held (for inspection).
    public init(model: PortableModel, functions: [FunctionPlan], arch: String, source: SourceSummary? = nil) {
        self.model = model
        self.functions = functions
        self.arch = arch
        self.source = source
    }

    /// What the source package held (`nil` in artifacts of compiler 0.4.0 and older).
    public var source: SourceSummary?

    /// Checks every slot, step and weight reference, so the executor can index without checks.
    /// - Throws: ``PackageError`` naming the function and field.
    public func validateStructure() throws {
        guard functions.count == model.functions.count else {
            throw PackageError(field: "functions", reason: "\(functions.count) plans for \(model.functions.count) functions")
        }
        for (i, (plan, f)) in zip(functions, model.functions).enumerated() {
            let field = "functions[\(i)] '\(plan.name)'"
            guard plan.name == f.name else { throw PackageError(field: field, reason: "plan names function '\(f.name)'") }
            // Every slot holds an input, a weight or a step's output: no more slots than those.
            let defined = plan.inputSlots.count + plan.weights.count + plan.steps.reduce(0) { $0 + $1.outputs.count }
            guard plan.slotCount >= 0, plan.slotCount <= 1 << 24, plan.slotCount <= defined else {
                throw PackageError(field: field, reason: "slot count \(plan.slotCount) is out of range (the plan defines \(defined) values)")
            }
            func check(_ s: Int, _ what: String, optional: Bool = false) throws {
                guard (optional && s == -1) || (0 ..< plan.slotCount).contains(s) else {
                    throw PackageError(field: "\(field).\(what)", reason: "slot \(s) is outside 0..<\(plan.slotCount)")
                }
            }
            guard plan.inputSlots.count == f.inputs.count, plan.outputSlots.count == f.outputs.count else {
                throw PackageError(field: field, reason: "input or output slots disagree with the signature")
            }
            // The signature is what callers make arrays from: no sub-byte (weight storage) type.
            for a in f.inputs + f.outputs where a.type.dtype.isSubByte {
                throw PackageError(field: "\(field) '\(a.name)'", reason: "\(a.type.dtype.rawValue) is a weight storage type, not a tensor type")
            }
            for s in plan.inputSlots { try check(s, "input_slots") }
            for s in plan.outputSlots { try check(s, "output_slots") }
            for w in plan.weights {
                try check(w.slot, "weights")
                guard (0 ..< model.weights.count).contains(w.weight) else {
                    throw PackageError(field: "\(field).weights", reason: "weight \(w.weight) does not exist")
                }
            }
            guard plan.steps.count == f.operations.count else {
                throw PackageError(field: field, reason: "\(plan.steps.count) steps for \(f.operations.count) operations")
            }
            for (k, (step, op)) in zip(plan.steps, f.operations).enumerated() {
                guard step.outputs.count == op.outputs.count else {
                    throw PackageError(field: "\(field).steps[\(k)]", reason: "\(step.outputs.count) outputs for \(op.outputs.count) declared")
                }
                guard step.inputs.count == op.inputs.count else {
                    throw PackageError(field: "\(field).steps[\(k)]", reason: "\(step.inputs.count) inputs for the op's \(op.inputs.count)")
                }
                for s in step.inputs { try check(s, "steps[\(k)].inputs", optional: true) }
                for s in step.outputs { try check(s, "steps[\(k)].outputs") }
            }
            for l in plan.lifetimes {
                try check(l.slot, "lifetimes")
                guard l.firstStep <= l.lastStep, l.lastStep <= plan.steps.count else {
                    throw PackageError(field: "\(field).lifetimes", reason: "interval \(l.firstStep)...\(l.lastStep) is out of range")
                }
            }
        }
    }
}
