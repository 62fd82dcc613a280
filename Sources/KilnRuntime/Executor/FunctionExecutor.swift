import Dispatch
import Foundation
import KilnCompiler
import KilnFormat
import KilnReference

/// Runs one function of a compiled artifact. Its steps are prepared once when the function
/// loads. The first run with a new set of input shapes runs them generically (shapes worked
/// out step by step, results allocated) and records what it saw; from that record a
/// ``ShapePlan`` is built — shape arithmetic folded, every buffer at an arena offset — and
/// later runs with those shapes use it: no allocation or lookup per step. Runs may overlap.
final class FunctionExecutor: FunctionRunner, @unchecked Sendable {
    /// One prepared step.
    struct Step: Sendable {
        var name: String
        var opType: String
        var kernel: any StepKernel
        var reference: LoweredReference
        var inputs: [Int]
        var outputs: [Int]
    }

    let function: Function
    let steps: [Step]
    let slotCount: Int
    let constants: [Int: NDArray]
    let inputSlots: [Int]
    let outputSlots: [Int]
    let threads: Int
    /// Shapes are expected to change from run to run: plans derived for new sizes serve as the
    /// base of the next derivation but are not cached (see ``execute(_:)``).
    let frequentReshapes: Bool
    private let plans = PlanCache(capacity: 8)
    /// Plans derived ahead for the sizes runs are growing towards.
    let speculation: PlanSpeculation
    /// Plans bound per run to sizes that grow alike run after run (``SymbolicPlan``).
    let symbolic = SymbolicPlans()
    /// The newest plan derived under `frequentReshapes`.
    private let current = PlanCache(capacity: 1)
    let arenas: ArenaPool
    /// Steps that are concats a shape plan may have convolutions write into (``ShapePlan``).
    let lastAxisConcatCandidates: [Int]
    /// The last step reading each slot (`Int.max` for outputs), and the step writing it.
    let lastRead: [Int], producer: [Int]
    /// Per slot, the steps reading it, in order (each once).
    let consumers: [[Int]]
    /// Per step, whether only `shape`/`size` steps read its results (a plan never runs it).
    let onlyShapesRead: [Bool]
    /// Per input, the output it may be kept in place as when it is a state (``appendTargets``).
    let appendTargets: [(output: Int, axis: Int)?]
    /// Per step, a number shared by the steps that compute the same function of their inputs
    /// (op, attributes, config and kernel alike; -1 for control flow): a value folded for one is
    /// the value for another with equal inputs.
    let stepSignature: [Int]
    /// Runs made generically (recording or not).
    let genericRuns = Counter()
    let profile: StepProfile?

    deinit {
        guard let profile else { return }
        var notes: [String] = []
        for r in planReports {
            if let reason = r.generic { notes.append("shapes run generically: \(reason)") }
            notes += r.fallbacks.map { "fallback: \($0)" }
        }
        if symbolic.made + symbolic.refused > 0 {
            notes.append("symbolic plans made for growing sizes: \(symbolic.made), refused: \(symbolic.refused)")
        }
        if speculation.derivedAhead > 0 {
            notes.append("plans derived ahead of their run on another thread: \(speculation.derivedAhead), found ready by a run: \(speculation.used)")
        }
        profile.report(steps.map { "\($0.name) [\($0.kernel.id)]" }, notes: notes)
    }

    init(plan: CompiledPlan, function index: Int, threads: Int, frequentReshapes: Bool) throws {
        let f = plan.model.functions[index], fp = plan.functions[index]
        function = f
        self.threads = max(1, threads)
        self.frequentReshapes = frequentReshapes
        speculation = PlanSpeculation()
        slotCount = fp.slotCount
        arenas = ArenaPool(slotCount: fp.slotCount)
        inputSlots = fp.inputSlots
        outputSlots = fp.outputSlots
        let kernels = try fp.steps.map { s -> KernelID in
            guard let id = KernelID(wireName: s.kernel) else {
                throw InferenceError(function: f.name, reason: "unknown kernel '\(s.kernel)'; this runtime has \(KernelID.catalog.count) kernels")
            }
            return id
        }
        let weightBySlot = Dictionary(fp.weights.map { ($0.slot, plan.model.weights[$0.weight]) }, uniquingKeysWith: { a, _ in a })
        // Weights a packed GEMM reads stay packed; the rest are decoded once (dense float32 ones are views of the mapping).
        let packedSlots = Set(zip(fp.steps, kernels).filter { [.gemm, .conv2d, .conv2dNHWC, .conv2dWinograd].contains($0.1.family) }.compactMap { $0.0.inputs.count > 1 ? $0.0.inputs[1] : nil })
        var constants: [Int: NDArray] = [:]
        for (slot, w) in weightBySlot where !packedSlots.contains(slot) {
            do {
                constants[slot] = try WeightDecoding.dense(w)
            } catch let e as OpError {
                throw InferenceError(function: f.name, reason: "weight '\(w.name)': \(e.reason)")
            }
        }
        self.constants = constants
        var steps: [Step] = []
        // Control-flow bodies are compiled for the artifact's arch and run by executors of their own.
        let (arch, bodyThreads) = (Architecture.named(plan.arch), self.threads)
        for (s, (op, id)) in zip(fp.steps, zip(f.operations, kernels)) {
            do {
                if op.hasSubgraphs {
                    // Artifacts compiled before the control_flow family name the reference kernel: the same step.
                    guard id.family == .controlFlow || id.family == .reference else {
                        throw OpError("a control-flow op needs the control_flow kernel, the plan names \(id)")
                    }
                    // The stored weights among the captures are compiled into the bodies (packed, as the function's own).
                    let captured = ControlFlowBodies.captured(op, inputs: s.inputs, weightBySlot: weightBySlot)
                    let planner: SubgraphPlanner = { body in try CompiledSubgraph(body, arch: arch, threads: bodyThreads, captured: captured) }
                    let reference = try LoweredReference(op, s.config, subgraphs: planner)
                    let kernel = ControlFlowStep(id: id, step: ReferenceStep(kernel: reference, fallback: nil))
                    steps.append(Step(name: op.name, opType: op.opType, kernel: kernel, reference: reference,
                                      inputs: s.inputs, outputs: s.outputs))
                    continue
                }
                let kernel = try StepFactory.make(id, op, s.config, inputs: s.inputs, weights: weightBySlot, constants: constants, threads: self.threads)
                steps.append(Step(name: op.name, opType: op.opType, kernel: kernel, reference: try LoweredReference(op, s.config),
                                  inputs: s.inputs, outputs: s.outputs))
            } catch let e as OpError {
                throw InferenceError(function: f.name, op: op.name, reason: "kernel \(id): \(e.reason)")
            }
        }
        self.steps = steps
        stepSignature = FunctionExecutor.stepSignatures(f, fp)
        lastRead = FunctionExecutor.lastRead(steps, slotCount: slotCount, outputSlots: outputSlots)
        producer = FunctionExecutor.producers(steps, slotCount: slotCount)
        consumers = FunctionExecutor.consumers(steps, slotCount: slotCount)
        onlyShapesRead = FunctionExecutor.onlyShapesRead(steps, consumers: consumers, outputSlots: outputSlots)
        appendTargets = FunctionExecutor.appendTargets(f, steps, inputSlots: inputSlots, outputSlots: outputSlots, consumers: consumers, onlyShapesRead: onlyShapesRead)
        // Only a concat with an input a channels-last convolution writes can take that input in place.
        let producer = self.producer
        lastAxisConcatCandidates = steps.indices.filter { j in
            (steps[j].kernel as? CopyStep)?.op.opType == "concat" && steps[j].outputs.count == 1 && steps[j].inputs.contains { s in
                s >= 0 && producer[s] >= 0 && (steps[producer[s]].kernel is ConvNHWCStep || steps[producer[s]].kernel is WinogradNHWCStep)
            }
        }
        profile = getenv("KILN_PROFILE") != nil ? StepProfile(steps.count) : nil
    }

    private static func stepSignatures(_ f: Function, _ fp: CompiledPlan.FunctionPlan) -> [Int] {
        struct Signature: Hashable {
            var opType: String, kernel: String, config: StepConfig, attributes: [String: AttributeValue], inputs: Int, outputs: Int
        }
        var numbers: [Signature: Int] = [:]
        return zip(f.operations, fp.steps).map { op, s in
            guard !op.hasSubgraphs else { return -1 }
            let key = Signature(opType: op.opType, kernel: s.kernel, config: s.config, attributes: op.attributes, inputs: op.inputs.count, outputs: op.outputs.count)
            if let n = numbers[key] { return n }
            numbers[key] = numbers.count
            return numbers.count - 1
        }
    }

    func run(_ inputs: [String: NDArray]) throws -> [String: NDArray] {
        var out = try runFloat32(inputs)
        // Outputs declared float16, bfloat16 or float64 are returned so, as the reference interpreter returns them.
        for arg in function.outputs where arg.type.dtype != .float32 && arg.type.dtype.isFloatingPoint {
            if let v = out[arg.name] { out[arg.name] = ReferenceKernel.narrow(v, to: arg.type.dtype) }
        }
        return out
    }

    /// Runs with every float held as float32.
    private func runFloat32(_ inputs: [String: NDArray]) throws -> [String: NDArray] {
        _ = try function.bind(inputs)
        var args: [NDArray] = []
        args.reserveCapacity(inputSlots.count)
        for arg in function.inputs {
            let x = inputs[arg.name]!.contiguous()
            args.append(x.scalarType == .float16 || x.scalarType == .bfloat16 || x.scalarType == .float64 ? try ReferenceKernel.widen(x) : x)
        }
        return try execute(args)
    }

    /// Runs on arrays in signature order, already checked and widened.
    ///
    /// A new input-shape signature gets a plan derived from the newest plan with the same input
    /// types and ranks (``Recording/derived(_:_:extents:)``: steps revisited only downstream of a
    /// changed size, then bound); only when there is none, or its shapes depend on data, is the
    /// run generic and recorded. Plans are cached by signature (the 8 newest); with
    /// `frequentReshapes` a derived plan is kept only as the base of the next one. With `state`,
    /// the signature includes the room of each state kept in place, which grows (and the
    /// signature with it) before a plan that needs more runs.
    func execute(_ args: [NDArray], state: StateRun? = nil) throws -> [String: NDArray] {
        var args = args
        while true {
            let key = ShapeKey(args, capacities: state?.capacities ?? [])
            var cached = cachedEntry(key)
            if cached == nil {
                switch try runSymbolic(key, args, state: state) {
                case .ran(let out): return out
                case .grew: args = state?.arguments(args) ?? args; continue
                case .unbound: break
                }
            }
            if cached == nil, speculation.wait(for: key) { cached = cachedEntry(key) }
            let derivedNow = cached == nil
            if cached == nil, let plan = derive(key, args) { cached = .plan(plan) }
            switch cached {
            case .plan(let plan)?:
                if let state, state.makeRoom(for: plan) {
                    args = state.arguments(args)
                    continue
                }
                speculate(after: key, from: plan)
                do {
                    let out = try plan.run(args, executor: self)
                    state?.advance(plan)
                    symbolic.note(key, plan, self)
                    return out
                } catch let mismatch as PlanMismatch {
                    // Values decided other shapes than the plan's: planned again once (a new steady
                    // state), generic from the second time on. The plan wrote only its own memory.
                    guard derivedNow || plans.mismatch(key) < 2 else {
                        plans.insert(key, .generic(reason: "shapes decided by values changed between runs (\(mismatch))"))
                        profile?.countRun()
                        return try generic(args, recording: nil, state: state)
                    }
                    return try record(key, args, state: state)
                }
            case .generic?:
                profile?.countRun()
                return try generic(args, recording: nil, state: state)
            case nil:
                return try record(key, args, state: state)
            }
        }
    }

    /// A generic run; states kept in place are read dense and take the run's values.
    private func generic(_ args: [NDArray], recording: Recording?, state: StateRun?) throws -> [String: NDArray] {
        guard let state else { return try runGeneric(args, recording: recording) }
        var out = try runGeneric(state.dense(args), recording: recording)
        try state.absorb(&out, self)
        return out
    }

    /// A plan for `key` derived from the newest one like it, kept; `nil` when none can be.
    /// The plan or generic verdict kept for `key`.
    func cachedEntry(_ key: ShapeKey) -> PlanCache.Entry? { plans.entry(for: key) ?? current.entry(for: key) }

    /// Derives and keeps the plan for `key` from `base` (default: the newest plan for inputs of
    /// the same types and ranks); `nil` when there is none or derivation cannot tell the shapes.
    func derive(_ key: ShapeKey, _ args: [NDArray], from given: ShapePlan? = nil) -> ShapePlan? {
        guard let base = given ?? current.latest(like: key) ?? plans.latest(like: key) else { return nil }
        let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
        guard let recording = try? base.recording.derived(self, args, extents: stateExtents(key.capacities)), let plan = try? ShapePlan(self, recording, base: base) else { return nil }
        if frequentReshapes { current.insert(key, .plan(plan)) } else { plans.insert(key, .plan(plan)) }
        profile?.countDerived(DispatchTime.now().uptimeNanoseconds - started)
        return plan
    }

    /// Runs generically, recording, and keeps the plan built from the record for `key`.
    private func record(_ key: ShapeKey, _ args: [NDArray], state: StateRun? = nil) throws -> [String: NDArray] {
        let recording = Recording(slotCount: slotCount)
        recording.stateExtents = stateExtents(key.capacities)
        let outputs = try generic(args, recording: recording, state: state)
        do {
            plans.insert(key, .plan(try ShapePlan(self, recording)))
        } catch {
            plans.insert(key, .generic(reason: "\(error)"))
        }
        return outputs
    }

    /// The shape plans kept: for each, why it runs generically (or `nil`), its arena size, the
    /// steps that fell back to the reference kernel, and whether it was derived for new sizes.
    var planReports: [(generic: String?, arenaBytes: Int, fallbacks: [String], derived: Bool)] {
        (plans.all + current.all).map {
            switch $0 {
            case .plan(let p): return (nil, p.arenaBytes, p.fallbacks, p.recording.derived)
            case .generic(let reason): return (reason, 0, [], false)
            }
        }
    }

    /// Runs every step with shapes worked out as it goes, allocating each result; records
    /// shapes and foldable values when `recording` is given.
    func runGeneric(_ args: [NDArray], recording: Recording?) throws -> [String: NDArray] {
        profile?.countRun(generic: true)
        genericRuns.next()
        var values = [NDArray?](repeating: nil, count: slotCount)
        for (s, v) in constants { values[s] = v; recording?.known[s] = v }
        for (s, x) in zip(inputSlots, args) {
            values[s] = x
            recording?.shapes[s] = x.shape
            recording?.dtypes[s] = x.scalarType
        }
        for (index, step) in steps.enumerated() {
            let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
            let inputs = step.inputs.map { $0 < 0 ? nil : values[$0] }
            let results: [NDArray]
            do {
                results = try runStep(step, inputs)
            } catch let e as OpError {
                throw InferenceError(function: function.name, op: step.name, reason: e.reason)
            }
            guard results.count == step.outputs.count else {
                throw InferenceError(function: function.name, op: step.name, reason: "produced \(results.count) outputs, declared \(step.outputs.count)")
            }
            for (k, r) in results.enumerated() { values[step.outputs[k]] = r }
            recording?.note(step, index: index, inputs: step.inputs, values: inputs, results: results)
            profile?.add(index, DispatchTime.now().uptimeNanoseconds - started, generic: true)
        }
        var out: [String: NDArray] = [:]
        for (arg, s) in zip(function.outputs, outputSlots) {
            guard let v = values[s] else { throw InferenceError(function: function.name, reason: "output '\(arg.name)' was not computed") }
            out[arg.name] = v
        }
        return out
    }

    /// One step on arrays: its kernel when the output shapes follow from the inputs, else the reference kernel.
    func runStep(_ step: Step, _ inputs: [NDArray?]) throws -> [NDArray] {
        if step.kernel is ReferenceStep { return try step.reference(inputs) }
        let operands = inputs.enumerated().map { i, x in x.map { Operand(slot: i, shape: $0.shape, dtype: $0.scalarType, value: $0) } }
        guard let types = try step.kernel.outputTypes(operands) else { return try step.kernel.evaluate(inputs) ?? step.reference(inputs) }
        let results = types.map { NDArray(uninitializedShape: $0.shape, scalarType: $0.dtype) }
        let outputs = results.enumerated().map { k, r in Operand(slot: inputs.count + k, shape: r.shape, dtype: r.scalarType, value: nil) }
        var context = BindContext(threads: threads, scratchSlot: inputs.count + results.count)
        let bound: BoundStep
        do {
            bound = try step.kernel.bind(operands, outputs, &context)
        } catch is OpError {
            return try step.reference(inputs)
        }
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: max(context.scratchBytes, 64), alignment: 64)
        defer { scratch.deallocate() }
        var table = [UnsafeMutableRawPointer](repeating: scratch, count: inputs.count + results.count + 1)
        for (i, x) in inputs.enumerated() { if let x { table[i] = x.unsafeBase } }
        for (k, r) in results.enumerated() { table[inputs.count + k] = r.unsafeBase }
        try table.withUnsafeMutableBufferPointer { try bound.run($0.baseAddress!) }
        return results
    }
}

/// The concrete input shapes and types of one run: the key of a shape-specialized plan.
struct ShapeKey: Hashable {
    var shapes: [[Int]]
    var dtypes: [DataType]
    /// Per input, the room of the state kept in place there, -1 for other inputs; empty for a run without state.
    var capacities: [Int] = []

    init(_ inputs: [NDArray], capacities: [Int] = []) {
        shapes = inputs.map(\.shape)
        dtypes = inputs.map(\.scalarType)
        self.capacities = capacities
    }

    /// Whether a plan for `other` is laid out as one for this key may be: the same types, ranks
    /// and states kept in place.
    func isLike(_ other: ShapeKey) -> Bool {
        dtypes == other.dtypes && shapes.map(\.count) == other.shapes.map(\.count) && capacities.map { $0 >= 0 } == other.capacities.map { $0 >= 0 }
    }
}

/// Shape-specialized plans by input shapes, at most `capacity` (least recently built dropped).
final class PlanCache: @unchecked Sendable {
    enum Entry { case plan(ShapePlan), generic(reason: String) }
    private var entries: [ShapeKey: Entry] = [:]
    private var mismatches: [ShapeKey: Int] = [:]
    private var order: [ShapeKey] = []
    private let capacity: Int
    private let lock = NSLock()

    init(capacity: Int) { self.capacity = capacity }

    var count: Int { lock.withLock { entries.count } }
    var all: [Entry] { lock.withLock { order.compactMap { entries[$0] } } }

    func entry(for key: ShapeKey) -> Entry? { lock.withLock { entries[key] } }

    /// The newest plan whose inputs have `key`'s types and ranks.
    func latest(like key: ShapeKey) -> ShapePlan? {
        lock.withLock {
            for k in order.reversed() where k.isLike(key) {
                if case .plan(let p)? = entries[k] { return p }
            }
            return nil
        }
    }

    /// Counts a run whose values did not fit `key`'s plan; returns how many did before it.
    func mismatch(_ key: ShapeKey) -> Int {
        lock.withLock {
            defer { mismatches[key, default: 0] += 1 }
            return mismatches[key, default: 0]
        }
    }

    func insert(_ key: ShapeKey, _ entry: Entry) {
        lock.withLock {
            if entries[key] == nil { order.append(key) }
            entries[key] = entry
            while order.count > capacity {
                let dropped = order.removeFirst()
                (entries[dropped], mismatches[dropped]) = (nil, nil)
            }
        }
    }
}

/// A control-flow body compiled for an artifact's arch when the function that holds it loads,
/// run by an executor of its own (shape plans included) on arrays in its input order.
struct CompiledSubgraph: SubgraphRunner {
    let executor: FunctionExecutor

    /// Body inputs (by index) that are stored weights, dropped from each call's inputs.
    let constantInputs: Set<Int>

    /// Compiles `body`; `captured` is the op's inputs' weights (nil for run-time values), whose
    /// trailing entries line up with the body's trailing inputs.
    init(_ body: Function, arch: Architecture?, threads: Int, captured: [Weight?] = []) throws {
        guard let arch else { throw OpError("the artifact's arch is unknown to this runtime") }
        let (model, constant) = ControlFlowBodies.model(body, captured: captured)
        constantInputs = constant
        do {
            let (_, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [])
            executor = try FunctionExecutor(plan: plan, function: 0, threads: threads, frequentReshapes: false)
        } catch let e as OpError {
            throw e
        } catch {
            throw OpError("subgraph '\(body.name)': \(error)")
        }
    }

    func run(_ inputs: [NDArray]) throws -> [NDArray] {
        let f = executor.function
        let inputs = constantInputs.isEmpty ? inputs : inputs.enumerated().filter { !constantInputs.contains($0.offset) }.map(\.element)
        guard inputs.count == f.inputs.count else { throw OpError("subgraph '\(f.name)' takes \(f.inputs.count) inputs, got \(inputs.count)") }
        for (arg, x) in zip(f.inputs, inputs) {
            let sameKind = x.scalarType == arg.type.dtype || (x.scalarType.isFloatingPoint && arg.type.dtype.isFloatingPoint)
            guard sameKind, x.rank == arg.type.rank else {
                throw OpError("subgraph '\(f.name)' input '\(arg.name)' is \(arg.type), got \(x.scalarType.rawValue)\(x.shape)")
            }
        }
        do {
            let out = try executor.execute(try inputs.map { x in
                let c = x.contiguous()
                return c.scalarType == .float16 || c.scalarType == .bfloat16 || c.scalarType == .float64 ? try ReferenceKernel.widen(c) : c
            })
            return try f.outputs.map { arg in
                guard let v = out[arg.name] else { throw OpError("subgraph '\(f.name)' did not compute '\(arg.name)'") }
                return v
            }
        } catch let e as InferenceError {
            throw OpError("\(e)")
        }
    }
}
