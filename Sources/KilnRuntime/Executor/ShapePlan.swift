import Dispatch
import Foundation
import KilnCompiler
import KilnFormat
import KilnReference

/// What a generic run saw: every value's shape and type, and the values known before any
/// input data is read (weights, and results computed only from them and from shapes).
final class Recording {
    var shapes: [[Int]?]
    var dtypes: [DataType?]
    /// Values fixed by the input shapes alone.
    var known: [NDArray?]
    /// Whether this record was derived from another's (no generic run made it).
    var derived = false
    /// Set when an op's result shape depends on input data too large to guard (the signature then runs generically).
    var dataDependentShape: String?
    /// Run-time values that decide a later step's shapes (a shape tensor computed from data): the
    /// plan checks each is what this run saw before the step that reads it (`step`), else the
    /// run is done again generically (``PlanMismatch``).
    var guards: [(step: Int, slot: Int, value: NDArray)] = []

    /// Results up to this size are folded when their inputs are known.
    static let foldLimit = 1 << 20

    /// Inputs of ops whose values decide the result's shape (the registry's `shapeInputs`).
    static let shapeInputs: [String: [Int]] = OpSet.schemas.compactMapValues { $0.shapeInputs.isEmpty ? nil : $0.shapeInputs }

    /// The largest shape-deciding value a plan guards (elements).
    static let guardLimit = 4096

    init(slotCount: Int) {
        shapes = Array(repeating: nil, count: slotCount)
        dtypes = Array(repeating: nil, count: slotCount)
        known = Array(repeating: nil, count: slotCount)
    }

    /// Records step `index`'s results; `values` are its inputs' arrays.
    func note(_ step: FunctionExecutor.Step, index: Int, inputs: [Int], values: [NDArray?], results: [NDArray]) {
        for (s, r) in zip(step.outputs, results) {
            shapes[s] = r.shape
            dtypes[s] = r.scalarType
        }
        // Control flow and ops whose result sizes are counted from data (non_zero) are planned
        // with this run's shapes: their bound steps throw ``PlanMismatch`` when a run differs.
        for i in Recording.shapeInputs[step.opType] ?? [] where i < inputs.count && inputs[i] >= 0 && known[inputs[i]] == nil {
            guard let v = values[i], v.elementCount <= Recording.guardLimit else {
                dataDependentShape = dataDependentShape ?? "op '\(step.name)' takes its shape from a large input computed at run time"
                continue
            }
            if !guards.contains(where: { $0.step == index && $0.slot == inputs[i] }) { guards.append((index, inputs[i], v.contiguous())) }
        }
        let shapeOnly = step.opType == "shape" || step.opType == "size"
        let allKnown = inputs.allSatisfy { $0 < 0 || known[$0] != nil }
        let bytes = results.reduce(0) { $0 + $1.elementCount * $1.elementSize }
        if shapeOnly || (allKnown && bytes <= Recording.foldLimit) {
            for (s, r) in zip(step.outputs, results) { known[s] = r.contiguous() }
        }
    }
}

/// A function's plan for one set of input shapes: shape arithmetic folded into constants,
/// views and contiguous slices sharing their source's memory, elementwise results written over an input that nothing
/// reads afterwards, every other result at an offset in one arena sized from the results'
/// lifetimes, each remaining step bound to its concrete shapes.
final class ShapePlan: @unchecked Sendable {
    /// Where a slot's memory is.
    enum Location { case constant(UnsafeMutableRawPointer), input(Int), arena(Int) }

    private struct PlannedStep {
        var index: Int
        var bound: BoundStep
    }

    private let steps: [PlannedStep]
    /// Slots that read a run input, by input index.
    private let inputSlots: [(slot: Int, input: Int, offset: Int)]
    /// Slot table entries fixed for every run (constants); arena offsets are added per arena.
    let fixed: [(slot: Int, pointer: UnsafeMutableRawPointer)]
    let arenaSlots: [(slot: Int, offset: Int)]
    private let outputs: [(name: String, slot: Int, shape: [Int], dtype: DataType)]
    /// Per output, the slots (with their byte offsets) of the arena buffer it alone occupies, or
    /// nil: such an output is allocated per run and its producers write into it (no copy out).
    private let direct: [[(slot: Int, offset: Int)]?]
    /// The arena's size in bytes, scratch included.
    let arenaBytes: Int
    let scratchOffset: Int
    let slotCount: Int
    private let constants: [NDArray]
    /// What the plan was built from: the base from which plans for other sizes are derived.
    let recording: Recording
    /// Tells apart the plans an arena's slot table was filled for.
    let serial = ShapePlan.nextSerial()
    /// Steps left after folding, and why any runs the reference kernel.
    let fallbacks: [String]
    /// Each planned step's binding by step index, for plans derived from this one: a step whose
    /// operands are the same there keeps its binding (bound steps read memory only through the
    /// slot table, so offsets do not matter).
    private let bindings: [Int: Binding]

    struct Binding {
        var inputs: [Operand?]
        var outputs: [Operand]
        var bound: BoundStep
        var scratchBytes: Int
        var fallback: String?
    }

    /// Plans `recording`; steps with the same operands as in `base` keep their bindings.
    init(_ executor: FunctionExecutor, _ recording: Recording, base: ShapePlan? = nil) throws {
        if let reason = recording.dataDependentShape { throw OpError(reason) }
        let slotCount = executor.slotCount
        self.slotCount = slotCount
        self.recording = recording
        var location = [Location?](repeating: nil, count: slotCount)
        var kept: [NDArray] = []
        for s in 0 ..< slotCount {
            if let v = recording.known[s] {
                kept.append(v)
                location[s] = .constant(v.unsafeBase)
            }
        }
        for (i, s) in executor.inputSlots.enumerated() where location[s] == nil { location[s] = .input(i) }
        // Roots own arena buffers; views point at their source's root.
        var rootOf = [Int](repeating: -1, count: slotCount)
        var rootBytes: [Int] = [], rootFirst: [Int] = [], rootLast: [Int] = []
        var planned: [(index: Int, inputs: [Operand?], outputs: [Operand])] = []
        func operand(_ s: Int) -> Operand? {
            guard s >= 0, let shape = recording.shapes[s] ?? recording.known[s]?.shape ?? executor.constants[s]?.shape,
                  let dtype = recording.dtypes[s] ?? recording.known[s]?.scalarType ?? executor.constants[s]?.scalarType else { return nil }
            return Operand(slot: s, shape: shape, dtype: dtype, value: recording.known[s] ?? executor.constants[s])
        }
        func use(_ s: Int, at step: Int) {
            if s >= 0, rootOf[s] >= 0 { rootLast[rootOf[s]] = max(rootLast[rootOf[s]], step) }
        }
        // The last step reading each slot, and per root the last read of any slot in it: an
        // elementwise step may write over an input whose memory nothing reads afterwards.
        var lastRead = [Int](repeating: -1, count: slotCount)
        for i in executor.steps.indices { for s in executor.steps[i].inputs where s >= 0 { lastRead[s] = max(lastRead[s], i) } }
        for s in executor.outputSlots { lastRead[s] = Int.max }
        var rootReads: [Int] = []
        // Where in its root, input or constant a slot starts (views of a slice start inside).
        var byteOffset = [Int](repeating: 0, count: slotCount)
        func join(_ s: Int, _ root: Int) {
            rootOf[s] = root
            if root >= 0 { rootReads[root] = max(rootReads[root], lastRead[s]) }
        }
        /// A new arena buffer for slot `s` of `bytes`, live from step `i`.
        func newRoot(_ s: Int, bytes: Int, at i: Int) {
            rootBytes.append(bytes)
            rootFirst.append(i)
            rootLast.append(i)
            rootReads.append(-1)
            join(s, rootBytes.count - 1)
        }
        var producer = [Int](repeating: -1, count: slotCount)
        for i in executor.steps.indices { for s in executor.steps[i].outputs { producer[s] = i } }
        let sliceOf = ShapePlan.concatSlices(executor, recording, operand: operand, producer: producer, lastRead: lastRead)
        for i in executor.steps.indices {
            if executor.steps[i].outputs.allSatisfy({ recording.known[$0] != nil }) { continue }
            let step = executor.steps[i]
            let inputs = step.inputs.map { operand($0) }
            for s in step.inputs { use(s, at: i) }
            // Views and contiguous slices take their source's memory (at an offset): no step runs.
            let sliceOffset = (step.kernel as? CopyStep)?.contiguousSliceOffset(inputs)
            if step.kernel.id.family == .view || sliceOffset != nil, let source = step.inputs.first, source >= 0, let out = step.outputs.first {
                location[out] = location[source]
                byteOffset[out] = byteOffset[source] + (sliceOffset ?? 0)
                join(out, rootOf[source])
                continue
            }
            var outputs: [Operand] = []
            for s in step.outputs {
                guard var o = operand(s) else { throw OpError("no shape recorded for a result of '\(step.name)'") }
                if let slice = sliceOf[s], let concat = executor.steps[slice.step].outputs.first, let c = operand(concat) {
                    // Written into its concat's output: that root exists from this step on.
                    if rootOf[concat] < 0 {
                        newRoot(concat, bytes: c.byteCount, at: i)
                        location[concat] = .arena(rootOf[concat])
                    }
                    join(s, rootOf[concat])
                    byteOffset[s] = byteOffset[concat] + slice.at * 4
                    location[s] = .arena(rootOf[concat])
                    o.rowStride = slice.width
                    outputs.append(o)
                    continue
                }
                if rootOf[s] >= 0 {
                    // A concat output whose root an in-place producer already made.
                    outputs.append(o)
                    continue
                }
                let reuse = ShapePlan.reusableInput(step, inputs, o, at: i, rootOf: rootOf, rootReads: rootReads)
                if let reuse {
                    join(s, rootOf[reuse])
                    byteOffset[s] = byteOffset[reuse]
                } else {
                    newRoot(s, bytes: o.byteCount, at: i)
                }
                location[s] = .arena(rootOf[s])
                outputs.append(o)
            }
            planned.append((i, zip(step.inputs, inputs).map { s, x in
                guard var x, let slice = sliceOf[s], slice.step == i else { return x }
                x.inPlace = true
                return x
            }, outputs))
        }
        for s in executor.outputSlots { use(s, at: Int.max) }
        var (offsets, end) = ShapePlan.placeRoots(bytes: rootBytes, first: rootFirst, last: rootLast)
        let (bound, bindings, scratchBytes) = try ShapePlan.bind(planned, executor, base: base?.bindings ?? [:])
        let steps = ShapePlan.guarded(bound, recording.guards, executor)
        scratchOffset = end
        end += scratchBytes
        arenaBytes = max(end, 64)
        self.steps = steps
        self.bindings = bindings
        fallbacks = planned.compactMap { bindings[$0.index]?.fallback }
        constants = kept + Array(executor.constants.values)
        (fixed, arenaSlots, inputSlots) = ShapePlan.slotTable(location, byteOffset: byteOffset, offsets: offsets, constants: executor.constants)
        outputs = try zip(executor.function.outputs, executor.outputSlots).map { arg, s in
            guard let o = operand(s) else { throw OpError("no shape recorded for output '\(arg.name)'") }
            return (arg.name, s, o.shape, o.dtype)
        }
        direct = ShapePlan.directOutputs(outputs, executor.outputSlots, location: location, byteOffset: byteOffset, rootBytes: rootBytes)
    }

    /// Concats along the last dim whose inputs channels-last convolutions write straight into the
    /// concat's output (rows as wide as the concat): the slot of each such input → (concat step,
    /// its first channel, the concat's width); the concat then copies only its other inputs.
    private static func concatSlices(_ executor: FunctionExecutor, _ recording: Recording, operand: (Int) -> Operand?, producer: [Int],
                                     lastRead: [Int]) -> [Int: (step: Int, at: Int, width: Int)] {
        var sliceOf: [Int: (step: Int, at: Int, width: Int)] = [:]
        for j in executor.lastAxisConcatCandidates {
            let step = executor.steps[j]
            guard let copy = step.kernel as? CopyStep, copy.op.opType == "concat", step.outputs.count == 1, let y = operand(step.outputs[0]),
                  y.dtype == .float32, y.shape.count >= 2, let a = try? copy.op.attributes.int("axis", 0),
                  (try? OpSet.normalize(axis: a, rank: y.shape.count)) == y.shape.count - 1 else { continue }
            var at = 0
            for s in step.inputs {
                guard s >= 0, let x = operand(s), let width = x.shape.last else { continue }
                defer { at += width }
                let p = producer[s]
                guard p >= 0, executor.steps[p].kernel is ConvNHWCStep || executor.steps[p].kernel is WinogradNHWCStep, executor.steps[p].inputs.count <= 3, executor.steps[p].outputs == [s],
                      lastRead[s] == j, step.inputs.filter({ $0 == s }).count == 1, recording.known[s] == nil, x.value == nil else { continue }
                sliceOf[s] = (j, at, y.shape.last!)
            }
        }
        return sliceOf
    }

    /// Arena offsets: largest buffers first, each at the lowest offset free over its lifetime
    /// (steps `first ... last`); also the end of the last buffer.
    private static func placeRoots(bytes: [Int], first: [Int], last: [Int]) -> (offsets: [Int], end: Int) {
        var offsets = [Int](repeating: 0, count: bytes.count)
        let size = bytes.map { ($0 + 63) / 64 * 64 }
        // Buffers placed so far, by offset: each new one is checked against those whose lifetime
        // overlaps its own, lowest offset first.
        var placed: [Int] = []
        placed.reserveCapacity(bytes.count)
        for r in bytes.indices.sorted(by: { (bytes[$0], $1) > (bytes[$1], $0) }) {
            var offset = 0
            for q in placed where first[q] <= last[r] && first[r] <= last[q] && offsets[q] < offset + size[r] && offset < offsets[q] + size[q] {
                offset = offsets[q] + size[q]
            }
            offsets[r] = offset
            let at = placed.firstIndex { offsets[$0] > offset } ?? placed.count
            placed.insert(r, at: at)
        }
        return (offsets, bytes.indices.map { offsets[$0] + size[$0] }.max() ?? 0)
    }

    /// Binds each planned step to its shapes (or takes its binding from `base` when its operands
    /// are the same); a step whose kernel does not fit them runs the reference kernel. Returns the
    /// steps, the bindings by step index and the scratch the steps need.
    private static func bind(_ planned: [(index: Int, inputs: [Operand?], outputs: [Operand])], _ executor: FunctionExecutor,
                             base: [Int: Binding]) throws -> (steps: [PlannedStep], bindings: [Int: Binding], scratchBytes: Int) {
        var steps: [PlannedStep] = []
        var bindings: [Int: Binding] = [:]
        var scratchBytes = 0
        steps.reserveCapacity(planned.count)
        bindings.reserveCapacity(planned.count)
        for p in planned {
            var binding: Binding
            if let b = base[p.index], Operand.same(b.inputs, p.inputs), Operand.same(b.outputs, p.outputs) {
                binding = b
            } else {
                let kernel = executor.steps[p.index].kernel
                var context = BindContext(threads: executor.threads, scratchSlot: executor.slotCount)
                do {
                    let bound = try kernel.bind(p.inputs, p.outputs, &context)
                    let fallback = kernel is ReferenceStep ? "\(executor.steps[p.index].name): reference" : nil
                    binding = Binding(inputs: p.inputs, outputs: p.outputs, bound: bound, scratchBytes: context.scratchBytes, fallback: fallback)
                } catch let e as OpError {
                    let step = executor.steps[p.index]
                    let fallback = ReferenceStep(kernel: step.reference, fallback: e.reason)
                    context = BindContext(threads: executor.threads, scratchSlot: executor.slotCount)
                    let bound = try fallback.bind(p.inputs, p.outputs, &context)
                    binding = Binding(inputs: p.inputs, outputs: p.outputs, bound: bound, scratchBytes: context.scratchBytes,
                                      fallback: "\(step.name): \(step.kernel.id) does not fit (\(e.reason)); reference")
                }
            }
            scratchBytes = max(scratchBytes, binding.scratchBytes)
            bindings[p.index] = binding
            steps.append(PlannedStep(index: p.index, bound: binding.bound))
        }
        return (steps, bindings, scratchBytes)
    }

    /// The steps with a check of each guarded value before the first step at or after the one that reads it.
    private static func guarded(_ steps: [PlannedStep], _ guards: [(step: Int, slot: Int, value: NDArray)], _ executor: FunctionExecutor) -> [PlannedStep] {
        guard !guards.isEmpty else { return steps }
        var out: [PlannedStep] = [], pending = guards.sorted { $0.step < $1.step }[...]
        func check(_ g: (step: Int, slot: Int, value: NDArray)) -> PlannedStep {
            let (slot, value, name) = (g.slot, g.value, executor.steps[g.step].name)
            let bytes = value.elementCount * value.elementSize
            return PlannedStep(index: g.step, bound: BoundStep { slots in
                guard memcmp(slots[slot], value.unsafeBase, bytes) == 0 else {
                    throw PlanMismatch(reason: "a shape input computed at run time differs from the one the plan was built for", op: name)
                }
            })
        }
        for s in steps {
            while let g = pending.first, g.step <= s.index { out.append(check(g)); pending.removeFirst() }
            out.append(s)
        }
        // Guards of steps folded away or views (no planned step at or after them) run last, before the outputs are read.
        out += pending.map(check)
        return out
    }

    /// The input slot whose buffer the single output `o` of step `i` may take over: elementwise
    /// steps may write over any input, a convolution over the residual it adds (input 3) unless
    /// the residual is its image too (windows still to be read would be overwritten); the buffer
    /// must have the output's shape and type and nothing may read it after step `i`.
    private static func reusableInput(_ step: FunctionExecutor.Step, _ inputs: [Operand?], _ o: Operand, at i: Int, rootOf: [Int],
                                      rootReads: [Int]) -> Int? {
        let elementwise: Set<KernelFamily> = [.unary, .binary]
        let family = step.kernel.id.family
        let residualIsImage = step.inputs.count > 3 && step.inputs[0] >= 0 && step.inputs[3] >= 0
            && (step.inputs[0] == step.inputs[3] || (rootOf[step.inputs[0]] >= 0 && rootOf[step.inputs[0]] == rootOf[step.inputs[3]]))
        let candidates = step.outputs.count != 1 ? [] : elementwise.contains(family) ? Array(zip(step.inputs, inputs))
            : (family == .conv2dNHWC || family == .conv2dWinograd) && step.inputs.count > 3 && !residualIsImage
            ? [(step.inputs[3], inputs[3])] : []
        return candidates.first { s, x in
            guard s >= 0, let x, rootOf[s] >= 0, x.shape == o.shape, x.dtype == o.dtype, x.value == nil else { return false }
            return rootReads[rootOf[s]] <= i
        }?.0
    }

    /// Each slot's address: fixed (constants), at an offset in the arena, or at an offset in a run input.
    private static func slotTable(_ location: [Location?], byteOffset: [Int], offsets: [Int], constants: [Int: NDArray])
        -> (fixed: [(slot: Int, pointer: UnsafeMutableRawPointer)], arena: [(slot: Int, offset: Int)], inputs: [(slot: Int, input: Int, offset: Int)]) {
        var fixed: [(slot: Int, pointer: UnsafeMutableRawPointer)] = []
        var arena: [(slot: Int, offset: Int)] = []
        var inputs: [(slot: Int, input: Int, offset: Int)] = []
        for s in location.indices {
            switch location[s] {
            case .constant(let p)?: fixed.append((s, p + byteOffset[s]))
            case .input(let i)?: inputs.append((s, i, byteOffset[s]))
            case .arena(let r)?: arena.append((s, offsets[r] + byteOffset[s]))
            case nil:
                if let c = constants[s] { fixed.append((s, c.unsafeBase)) }
            }
        }
        return (fixed, arena, inputs)
    }

    /// An output that is the whole of an arena buffer no other output shares is written in
    /// place of its copy: every slot in that buffer points into the run's result array.
    private static func directOutputs(_ outputs: [(name: String, slot: Int, shape: [Int], dtype: DataType)], _ outputSlots: [Int],
                                      location: [Location?], byteOffset: [Int], rootBytes: [Int]) -> [[(slot: Int, offset: Int)]?] {
        var outputsPerRoot: [Int: Int] = [:]
        for s in outputSlots { if case .arena(let r)? = location[s] { outputsPerRoot[r, default: 0] += 1 } }
        var slotsOfRoot: [Int: [(slot: Int, offset: Int)]] = [:]
        for s in location.indices { if case .arena(let r)? = location[s] { slotsOfRoot[r, default: []].append((s, byteOffset[s])) } }
        return outputs.map { o in
            guard case .arena(let r)? = location[o.slot], byteOffset[o.slot] == 0, outputsPerRoot[r] == 1, !o.dtype.isSubByte,
                  let count = elementCount(o.shape), rootBytes[r] == count * o.dtype.bitWidth / 8 else { return nil }
            return slotsOfRoot[r]
        }
    }


    /// Runs the plan on inputs of the planned shapes.
    func run(_ args: [NDArray], executor: FunctionExecutor) throws -> [String: NDArray] {
        let arena = executor.arenas.take(for: self)
        defer { executor.arenas.give(arena) }
        let slots = arena.slots
        for (s, i, o) in inputSlots { slots[s] = args[i].unsafeBase + o }
        var results: [NDArray?] = []
        results.reserveCapacity(outputs.count)
        for (o, d) in zip(outputs, direct) {
            guard let d else { results.append(nil); continue }
            let y = NDArray(uninitializedShape: o.shape, scalarType: o.dtype)
            for (s, offset) in d { slots[s] = y.unsafeBase + offset }
            results.append(y)
        }
        let profile = executor.profile
        profile?.countRun()
        for step in steps {
            let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
            do {
                try step.bound.run(slots)
            } catch let e as OpError {
                throw InferenceError(function: executor.function.name, op: executor.steps[step.index].name, reason: e.reason)
            } catch var m as PlanMismatch {
                m.op = m.op ?? executor.steps[step.index].name
                throw m
            }
            profile?.add(step.index, DispatchTime.now().uptimeNanoseconds - started)
        }
        var out: [String: NDArray] = [:]
        for (o, result) in zip(outputs, results) {
            if let result {
                out[o.name] = result
                continue
            }
            let y = NDArray(uninitializedShape: o.shape, scalarType: o.dtype)
            y.unsafeBase.copyMemory(from: slots[o.slot], byteCount: y.elementCount * y.elementSize)
            out[o.name] = y
        }
        return out
    }
}
