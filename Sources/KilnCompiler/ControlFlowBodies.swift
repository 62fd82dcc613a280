import KilnFormat

/// Control-flow bodies (`if` branches, `loop` and `scan` bodies) are compiled for an artifact's
/// arch when the function holding them loads, each as a model of its own. This is that
/// preparation, shared by the runtime (which runs them), `kiln compile` (which reports the
/// steps the reference interpreter would run) and `kiln inspect` (which lists every step with
/// its kernel), so the three agree.
public enum ControlFlowBodies {
    /// One step of a plan or of a body compiled from it.
    public struct PlannedKernel: Sendable, Hashable {
        /// The op's name (body ops keep the names the converter gave them).
        public var op: String
        /// The op's type.
        public var opType: String
        /// The kernel's wire name, or `unavailable: reason` for a body that does not compile.
        public var kernel: String
        /// What the compiler chose beyond the op.
        public var config: StepConfig
        /// The input types of the op, where known (for the reasons a step runs the reference kernel).
        public var inputTypes: [TensorType?]
        /// The path of control-flow ops and graph attributes holding the step (`If_0.then_branch`), empty at the top.
        public var body: String

        /// Creates a row.
        public init(op: String, opType: String, kernel: String, config: StepConfig, inputTypes: [TensorType?], body: String) {
            self.op = op
            self.opType = opType
            self.kernel = kernel
            self.config = config
            self.inputTypes = inputTypes
            self.body = body
        }
    }

    /// The stored weights among a control-flow op's inputs that its bodies capture: for `if` each
    /// input after the condition, for `loop` and `scan` the trailing `captures` inputs; `nil` for
    /// run-time values. A loop's carried values and a scan's states and scanned inputs change per
    /// iteration and are never weights of the body.
    public static func captured(_ op: Operation, inputs: [Int], weightBySlot: [Int: Weight]) -> [Weight?] {
        let count = op.opType == "if" ? max(0, inputs.count - 1) : min(inputs.count, max(0, (try? op.attributes.int("captures", 0)) ?? 0))
        return inputs.suffix(count).map { $0 >= 0 ? weightBySlot[$0] : nil }
    }

    /// `body` as a model of its own: each captured weight (the trailing entries of `captured` line
    /// up with the body's trailing inputs) becomes a weight of the model under its own name, unless
    /// a body value has that name; also the body inputs (by index) that became weights.
    public static func model(_ body: Function, captured: [Weight?]) -> (model: PortableModel, constantInputs: Set<Int>) {
        var body = body, weights: [Weight] = [], constant = Set<Int>()
        let offset = body.inputs.count - captured.count
        var names = Set(body.inputs.map(\.name))
        for op in body.operations { for o in op.outputs { names.insert(o.name) } }
        for (j, w) in captured.enumerated() {
            let i = offset + j
            guard let w, i >= 0, i < body.inputs.count, !names.contains(w.name) || body.inputs[i].name == w.name,
                  !weights.contains(where: { $0.name == w.name }) else { continue }
            let local = body.inputs[i].name
            for k in body.operations.indices { body.operations[k].inputs = body.operations[k].inputs.map { $0 == local ? w.name : $0 } }
            for k in body.outputs.indices where body.outputs[k].value == local { body.outputs[k].value = w.name }
            weights.append(w)
            constant.insert(i)
        }
        body.inputs = body.inputs.enumerated().filter { !constant.contains($0.offset) }.map(\.element)
        return (PortableModel(metadata: Metadata(name: body.name), weights: weights, functions: [body]), constant)
    }

    /// The graph attributes of an op, by attribute name.
    public static func bodies(_ op: Operation) -> [(attribute: String, body: Function)] {
        op.attributes.keys.sorted().compactMap { key in
            guard case .graph(let g)? = op.attributes[key] else { return nil }
            return (key, g)
        }
    }

    /// Every step of each of the plan's functions with its kernel, each control-flow op followed
    /// by its bodies' steps (compiled for `arch` as the runtime compiles them, recursively).
    public static func steps(_ plan: CompiledPlan, arch: Architecture) -> [[PlannedKernel]] {
        zip(plan.functions, plan.model.functions).map { fp, f in steps(fp, f, weights: plan.model.weights, arch: arch, path: "") }
    }

    private static func steps(_ fp: CompiledPlan.FunctionPlan, _ f: Function, weights: [Weight], arch: Architecture, path: String) -> [PlannedKernel] {
        var types: [String: TensorType] = [:]
        for a in f.inputs { types[a.name] = a.type }
        for w in weights { types[w.name] = TensorType(w.dtype, w.shape.map { .size($0) }) }
        for op in f.operations { for o in op.outputs { types[o.name] = o.type } }
        let weightBySlot = Dictionary(fp.weights.map { ($0.slot, weights[$0.weight]) }, uniquingKeysWith: { a, _ in a })
        var out: [PlannedKernel] = []
        for (s, op) in zip(fp.steps, f.operations) {
            out.append(PlannedKernel(op: op.name, opType: op.opType, kernel: s.kernel, config: s.config, inputTypes: op.inputs.map { $0.isEmpty ? nil : types[$0] }, body: path))
            guard op.hasSubgraphs else { continue }
            let captured = captured(op, inputs: s.inputs, weightBySlot: weightBySlot)
            for (attribute, body) in bodies(op) {
                let where_ = path.isEmpty ? "\(op.name).\(attribute)" : "\(path)/\(op.name).\(attribute)"
                let (model, _) = model(body, captured: captured)
                do {
                    let (_, bodyPlan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [])
                    out += steps(bodyPlan.functions[0], bodyPlan.model.functions[0], weights: bodyPlan.model.weights, arch: arch, path: where_)
                } catch {
                    out.append(PlannedKernel(op: body.name, opType: "body", kernel: "unavailable: \(error)", config: .portable, inputTypes: [], body: where_))
                }
            }
        }
        return out
    }

    /// The steps the reference interpreter runs, summed by op type and input types:
    /// `reduce_min(int64) ×90`, most first.
    public static func referenceSummary(_ steps: [PlannedKernel]) -> [(what: String, count: Int)] {
        var counts: [String: Int] = [:]
        for s in steps where s.kernel == KernelID.reference.description || s.kernel.hasPrefix("unavailable") {
            let types = s.inputTypes.map { $0?.dtype.rawValue ?? "-" }.joined(separator: ", ")
            counts["\(s.opType)(\(types))", default: 0] += 1
        }
        return counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { ($0.key, $0.value) }
    }
}
