import Foundation
import KilnFormat
import KilnReference

/// Stateful runs of a compiled function (``InferenceState``).
///
/// A state is kept in place when the function's only use of its input is as the first operand
/// of a `concat` whose result is the state's output, and that result is read only by fused
/// attention as keys or values, on the sequence axis the concat grows (and by `shape` ops): the
/// decoder cache exports write. A plan then points the input and the output at the state's
/// buffer, binds the concat as an append of the new entries (``StateAppend``) and the attention
/// to the buffer's strides, and returns neither; every other state is passed back as an array.
extension FunctionExecutor {
    /// Runs with `state` supplying (and taking) the state inputs and outputs.
    func run(_ inputs: [String: NDArray], state: InferenceState) throws -> [String: NDArray] {
        try state.lock.withLock {
            try state.begin(function, inputs)
            var all = inputs
            for e in state.entries {
                guard inputs[e.pair.input] == nil else {
                    throw InferenceError(function: function.name, reason: "input '\(e.pair.input)' is a state: a stateful run reads it from the state, not from the caller")
                }
                all[e.pair.input] = state.argument(e)
            }
            _ = try function.bind(all)
            var args: [NDArray] = []
            args.reserveCapacity(inputSlots.count)
            var buffers = [StateBuffer?](repeating: nil, count: inputSlots.count)
            for e in state.entries where e.buffer != nil { buffers[e.input] = e.buffer }
            for (i, arg) in function.inputs.enumerated() {
                if buffers[i] != nil { args.append(all[arg.name]!); continue }
                let x = all[arg.name]!.contiguous()
                args.append(x.scalarType == .float16 || x.scalarType == .bfloat16 || x.scalarType == .float64 ? try ReferenceKernel.widen(x) : x)
            }
            var out = try execute(args, state: StateRun(buffers: buffers, targets: appendTargets))
            for arg in function.outputs where arg.type.dtype != .float32 && arg.type.dtype.isFloatingPoint {
                if let v = out[arg.name] { out[arg.name] = ReferenceKernel.narrow(v, to: arg.type.dtype) }
            }
            for e in state.entries where e.buffer == nil {
                guard let v = out.removeValue(forKey: e.pair.output) else {
                    throw InferenceError(function: function.name, reason: "state output '\(e.pair.output)' was not computed")
                }
                e.value = v
            }
            return out
        }
    }

    /// The layout of each state kept in place (input and output slot) for a signature's capacities.
    func stateExtents(_ capacities: [Int]) -> [Int: StateExtent] {
        var extents: [Int: StateExtent] = [:]
        for (i, c) in capacities.enumerated() where c >= 0 {
            guard let t = appendTargets[i] else { continue }
            let e = StateExtent(axis: t.axis, capacity: c)
            extents[inputSlots[i]] = e
            extents[outputSlots[t.output]] = e
        }
        return extents
    }

    /// Per step, whether its results are read only by `shape`/`size` steps (directly or through
    /// other such steps) and are not outputs: a plan folds those reads, so it never runs the step.
    static func onlyShapesRead(_ steps: [Step], consumers: [[Int]], outputSlots: [Int]) -> [Bool] {
        var only = [Bool](repeating: false, count: steps.count)
        let outputs = Set(outputSlots)
        for i in steps.indices.reversed() where !steps[i].outputs.isEmpty && !(steps[i].kernel is ControlFlowStep) {
            guard steps[i].outputs.allSatisfy({ !outputs.contains($0) && !consumers[$0].isEmpty }) else { continue }
            only[i] = steps[i].outputs.allSatisfy { s in
                consumers[s].allSatisfy { j in j > i && (steps[j].opType == "shape" || steps[j].opType == "size" || only[j]) }
            }
        }
        return only
    }

    /// Per input, the output (index) and axis it may be kept in place as: see the type's note.
    static func appendTargets(_ f: Function, _ steps: [Step], inputSlots: [Int], outputSlots: [Int], consumers: [[Int]],
                              onlyShapesRead: [Bool]) -> [(output: Int, axis: Int)?] {
        func readsShape(_ j: Int) -> Bool { steps[j].opType == "shape" || steps[j].opType == "size" || onlyShapesRead[j] }
        return inputSlots.enumerated().map { i, si -> (output: Int, axis: Int)? in
            let readers = consumers[si].filter { !readsShape($0) }
            let rank = f.inputs[i].type.rank
            guard f.inputs[i].type.dtype == .float32, readers.count == 1, let j = readers.first,
                  let copy = steps[j].kernel as? CopyStep, copy.op.opType == "concat", steps[j].inputs.first == si,
                  steps[j].inputs.dropFirst().allSatisfy({ $0 >= 0 && $0 != si }), steps[j].outputs.count == 1,
                  let a = try? copy.op.attributes.int("axis", 0), let axis = try? OpSet.normalize(axis: a, rank: rank) else { return nil }
            let so = steps[j].outputs[0]
            guard outputSlots.filter({ $0 == so }).count == 1, let k = outputSlots.firstIndex(of: so) else { return nil }
            // Read by attention as keys or values on the sequence axis: [B, S, H·D] or [B, H, S, D].
            let attentionReads = consumers[so].filter { !readsShape($0) }
            guard !attentionReads.isEmpty, attentionReads.allSatisfy({ j in
                guard let attention = steps[j].kernel as? AttentionStep else { return false }
                let positions = steps[j].inputs.indices.filter { steps[j].inputs[$0] == so }
                return positions.allSatisfy { $0 == 1 || $0 == 2 } && axis == (attention.heads > 0 ? 1 : 2) && rank == (attention.heads > 0 ? 3 : 4)
            }) else { return nil }
            return (k, axis)
        }
    }
}

/// The states kept in place for one stateful run of a compiled function.
final class StateRun {
    /// Per input, the buffer of the state kept in place there.
    let buffers: [StateBuffer?]
    let targets: [(output: Int, axis: Int)?]

    init(buffers: [StateBuffer?], targets: [(output: Int, axis: Int)?]) {
        (self.buffers, self.targets) = (buffers, targets)
    }

    var capacities: [Int] { buffers.map { $0?.capacity ?? -1 } }

    /// Grows the buffers `plan` needs more room in; whether any grew (the signature then changes).
    func makeRoom(for plan: ShapePlan) -> Bool { makeRoom(plan.stateShapes) }

    /// Grows the buffers the states' shapes after a run (by output index) need more room in.
    func makeRoom(_ stateShapes: [(output: Int, shape: [Int])]) -> Bool {
        var grew = false
        for (output, shape) in stateShapes {
            guard let i = targets.firstIndex(where: { $0?.output == output }), let b = buffers[i] else { continue }
            if b.reserve(shape[b.axis]) { grew = true }
        }
        return grew
    }

    /// `args` with each buffer's stand-in at its current address.
    func arguments(_ args: [NDArray]) -> [NDArray] {
        zip(args, buffers).map { x, b in b?.view() ?? x }
    }

    /// After a planned run: each buffer holds the entries appended.
    func advance(_ plan: ShapePlan) { advance(plan.stateShapes) }

    /// After a planned run: each buffer holds the entries appended, its state now `stateShapes`.
    func advance(_ stateShapes: [(output: Int, shape: [Int])]) {
        for (output, shape) in stateShapes {
            guard let i = targets.firstIndex(where: { $0?.output == output }), let b = buffers[i] else { continue }
            b.advance(to: shape)
        }
    }

    /// `args` with the states' values dense, for a generic run.
    func dense(_ args: [NDArray]) -> [NDArray] {
        zip(args, buffers).map { x, b in b?.dense() ?? x }
    }

    /// After a generic run: each state kept in place takes its output's value (removed from `out`).
    func absorb(_ out: inout [String: NDArray], _ executor: FunctionExecutor) throws {
        for (i, b) in buffers.enumerated() {
            guard let b, let t = targets[i] else { continue }
            let name = executor.function.outputs[t.output].name
            guard let v = out.removeValue(forKey: name) else { continue }
            do {
                try b.assign(v)
            } catch let e as OpError {
                throw InferenceError(function: executor.function.name, reason: "state output '\(name)': \(e.reason)")
            }
        }
    }
}
