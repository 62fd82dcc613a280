import KilnFormat

/// Turns a lowered unit into per-function plans: slot numbers for inputs, weights and
/// results, steps, and the liveness of every result (first defining step, last reader),
/// from which the runtime places results in one arena per concrete shape.
enum MemoryPlanning {
    static func plan(_ unit: CompilationUnit) throws -> CompiledPlan {
        let weightIndex = unit.weightIndex
        var used: [String] = []
        var usedSet = Set<String>()
        var plans: [CompiledPlan.FunctionPlan] = []
        for f in unit.model.functions {
            var slots: [String: Int] = [:]
            func slot(_ v: String) -> Int {
                if let s = slots[v] { return s }
                slots[v] = slots.count
                return slots.count - 1
            }
            let inputSlots = f.inputs.map { slot($0.name) }
            var weights: [(slot: Int, weight: String)] = []
            var steps: [CompiledPlan.Step] = []
            var first: [Int: Int] = [:], last: [Int: Int] = [:]
            let kernels = unit.kernels[f.name] ?? []
            guard kernels.count == f.operations.count else { throw CompileError("function '\(f.name)' was not lowered") }
            for (i, op) in f.operations.enumerated() {
                var inputs: [Int] = []
                for v in op.inputs {
                    if v.isEmpty { inputs.append(-1); continue }
                    if slots[v] == nil, weightIndex[v] != nil { weights.append((slot(v), v)) }
                    guard let s = slots[v] else { throw CompileError("function '\(f.name)' op '\(op.name)' reads '\(v)' before it is defined") }
                    inputs.append(s)
                    last[s] = i
                }
                let outputs = op.outputs.map { slot($0.name) }
                for s in outputs { first[s] = i; last[s] = i }
                steps.append(CompiledPlan.Step(kernel: kernels[i].description, inputs: inputs, outputs: outputs,
                                               config: unit.config(of: op, in: f.name)))
            }
            var outputSlots: [Int] = []
            for out in f.outputs {
                if slots[out.value] == nil, weightIndex[out.value] != nil { weights.append((slot(out.value), out.value)) }
                guard let s = slots[out.value] else { throw CompileError("function '\(f.name)' returns undefined '\(out.value)'") }
                outputSlots.append(s)
                last[s] = steps.count
            }
            for w in weights where !usedSet.contains(w.weight) {
                usedSet.insert(w.weight)
                used.append(w.weight)
            }
            let lifetimes = first.keys.sorted().map { CompiledPlan.Lifetime(slot: $0, firstStep: first[$0]!, lastStep: last[$0]!) }
            plans.append(CompiledPlan.FunctionPlan(
                name: f.name, slotCount: slots.count, inputSlots: inputSlots, outputSlots: outputSlots,
                weights: weights.map { (slot: $0.slot, weight: $0.weight) }.map { ($0.slot, 0) }, steps: steps, lifetimes: lifetimes))
            // Weight indices are fixed below, once the final weight list is known.
            plans[plans.count - 1].weights = weights.map { (slot: $0.slot, weight: used.firstIndex(of: $0.weight)!) }
        }
        var model = unit.model
        let byName = Dictionary(unit.model.weights.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        model.weights = used.map { byName[$0]! }
        return CompiledPlan(model: model, functions: plans, arch: unit.arch.name)
    }
}
