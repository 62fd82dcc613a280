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
    /// For a derived record: the record it was derived from, and the slots whose shape, type or
    /// known value differ from that record's (each once).
    var derivedFrom: ObjectIdentifier?
    var changedSlots: [Int] = []
    /// Set when an op's result shape depends on input data too large to guard (the signature then runs generically).
    var dataDependentShape: String?
    /// Run-time values that decide a later step's shapes (a shape tensor computed from data): the
    /// plan checks each is what this run saw before the step that reads it (`step`), else the
    /// run is done again generically (``PlanMismatch``).
    var guards: [(step: Int, slot: Int, value: NDArray)] = []
    /// The slots of states kept in place (each state's input and output slot) and their layout
    /// in this run (``FunctionExecutor/stateExtents(_:)``); empty for a run without state.
    var stateExtents: [Int: StateExtent] = [:]

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
    /// How many steps a run goes through (a ``SymbolicPlan`` binds some of them per run).
    var stepCount: Int { steps.count }
    /// Slots that read a run input, by input index.
    private let inputSlots: [(slot: Int, input: Int, offset: Int)]
    /// Slot table entries fixed for every run (constants); arena offsets are added per arena.
    let fixed: [(slot: Int, pointer: UnsafeMutableRawPointer)]
    let arenaSlots: [(slot: Int, offset: Int)]
    let outputs: [(name: String, slot: Int, shape: [Int], dtype: DataType)]
    /// The shapes states kept in place have after a run, by output index.
    let stateShapes: [(output: Int, shape: [Int])]
    /// Per output, the slots (with their byte offsets) of the arena buffer it alone occupies, or
    /// nil: such an output is allocated per run and its producers write into it (no copy out).
    private let direct: [[(slot: Int, offset: Int)]?]
    /// Per output, the arena buffer it alone occupies from its start, with that buffer's slots
    /// (and their byte offsets), or nil: `direct` when the buffer is exactly the output's size.
    private let outputRoots: [(root: Int, slots: [(slot: Int, offset: Int)])?]
    let scratchBytes: Int
    /// The arena's size in bytes, scratch included.
    let arenaBytes: Int
    let scratchOffset: Int
    let slotCount: Int
    /// What the plan was built from: the base from which plans for other sizes are derived. Its
    /// known values are the folded values the slot table points at (the executor holds the weights).
    let recording: Recording
    /// Tells apart the plans an arena's slot table was filled for.
    let serial = ShapePlan.nextSerial()
    /// Steps left after folding, and why any runs the reference kernel.
    let fallbacks: [String]
    /// Each planned step's binding by step index, for plans derived from this one: a step whose
    /// operands are the same there keeps its binding (bound steps read memory only through the
    /// slot table, so offsets do not matter).
    private let bindings: [Binding?]
    let layout: PlanLayout
    private let placement: Placement

    /// A step bound to its operands. A class: plans derived from one another share the bindings
    /// of their unchanged steps, and copying a plan's table of them then costs one reference each.
    final class Binding {
        let inputs: [Operand?]
        let outputs: [Operand]
        let bound: BoundStep
        let scratchBytes: Int
        let fallback: String?

        init(inputs: [Operand?], outputs: [Operand], bound: BoundStep, scratchBytes: Int, fallback: String?) {
            (self.inputs, self.outputs, self.bound, self.scratchBytes, self.fallback) = (inputs, outputs, bound, scratchBytes, fallback)
        }
    }

    /// Plans `recording`. With a `base` (a plan for other sizes), its layout is reused when the
    /// new sizes allow (``PlanLayout/rebased(_:from:_:_:)``), buffers keep their arena offsets
    /// while they fit the room the base gave them, and steps with the same operands keep their
    /// bindings.
    init(_ executor: FunctionExecutor, _ recording: Recording, base: ShapePlan? = nil) throws {
        if let reason = recording.dataDependentShape { throw OpError(reason) }
        slotCount = executor.slotCount
        self.recording = recording
        let layout: PlanLayout
        var sameBuffers = false
        if let base, let rebased = PlanLayout.rebased(base.layout, from: base.recording, recording, executor) {
            (layout, sameBuffers) = (rebased, true)
        } else {
            layout = try PlanLayout(executor, recording)
        }
        // A plan derived for new sizes gives each buffer an eighth more room, so sizes that keep
        // growing are placed again only every few runs.
        let placement: Placement
        if sameBuffers, let old = base?.placement, zip(layout.rootBytes, old.room).allSatisfy({ $0 <= $1 }) {
            placement = old
        } else {
            let room = base == nil ? layout.rootBytes : layout.rootBytes.map { $0 + $0 / 8 }
            let (offsets, end) = ShapePlan.placeRoots(bytes: room, first: layout.rootFirst, last: layout.rootLast)
            placement = Placement(room: room, offsets: offsets, end: end)
        }
        let (bound, bindings, scratchBytes) = try ShapePlan.bind(layout, executor, base: base)
        steps = ShapePlan.guarded(bound, recording.guards, executor)
        self.scratchBytes = scratchBytes
        scratchOffset = placement.end
        arenaBytes = max(placement.end + scratchBytes, 64)
        self.bindings = bindings
        self.layout = layout
        self.placement = placement
        // States kept in place are not results: their values stay in the state's buffers.
        let returned = zip(executor.function.outputs, executor.outputSlots).filter { recording.stateExtents[$0.1] == nil }
        outputs = try returned.map { arg, s in
            guard let o = PlanLayout.operand(s, recording, executor) else { throw OpError("no shape recorded for output '\(arg.name)'") }
            return (arg.name, s, o.shape, o.dtype)
        }
        stateShapes = try executor.outputSlots.enumerated().compactMap { k, s in
            guard recording.stateExtents[s] != nil else { return nil }
            guard let shape = recording.shapes[s] else { throw OpError("no shape recorded for state output '\(executor.function.outputs[k].name)'") }
            return (k, shape)
        }
        // A rebased layout has the base's arena buffers and its slots where they were, but for
        // values folded again (at new addresses) and buffers placed again.
        if let base, layout.rebuilt != nil {
            outputRoots = base.outputRoots
            if placement.offsets == base.placement.offsets {
                (arenaSlots, inputSlots) = (base.arenaSlots, base.inputSlots)
                fixed = !layout.locationsChanged ? base.fixed : base.fixed.map { s, p in
                    guard case .constant(let q)? = layout.location[s] else { return (s, p) }
                    return (s, q + layout.byteOffset[s])
                }
            } else {
                (fixed, arenaSlots, inputSlots) = ShapePlan.slotTable(layout.location, byteOffset: layout.byteOffset, offsets: placement.offsets, constants: executor.constants)
            }
        } else {
            outputRoots = ShapePlan.outputRoots(returned.map(\.1), location: layout.location, byteOffset: layout.byteOffset)
            (fixed, arenaSlots, inputSlots) = ShapePlan.slotTable(layout.location, byteOffset: layout.byteOffset, offsets: placement.offsets, constants: executor.constants)
        }
        fallbacks = ShapePlan.fallbacks(layout, bindings, base: base)
        direct = zip(outputs, outputRoots).map { o, candidate in
            guard let (root, slots) = candidate, !o.dtype.isSubByte, let count = elementCount(o.shape),
                  layout.rootBytes[root] == count * o.dtype.bitWidth / 8 else { return nil }
            return slots
        }
    }

    /// The fallbacks of the planned steps: the base's when no binding made again changed them.
    private static func fallbacks(_ layout: PlanLayout, _ bindings: [Binding?], base: ShapePlan?) -> [String] {
        if let base, let rebuilt = layout.rebuilt, rebuilt.allSatisfy({ bindings[$0]?.fallback == base.bindings[$0]?.fallback }) {
            return base.fallbacks
        }
        return layout.planned.compactMap { bindings[$0.index]?.fallback }
    }

    /// Arena offsets of a layout's buffers and the room each has there.
    struct Placement {
        var room: [Int]
        var offsets: [Int]
        var end: Int
    }

    /// Concats along the last dim whose inputs channels-last convolutions write straight into the
    /// concat's output (rows as wide as the concat): the slot of each such input → (concat step,
    /// its first channel, the concat's width); the concat then copies only its other inputs.
    static func concatSlices(_ executor: FunctionExecutor, _ recording: Recording, operand: (Int) -> Operand?, producer: [Int],
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
    /// steps, the bindings by step index and the scratch the steps need. A rebased layout binds
    /// only the steps it `rebuilt` (the others have the base's operands), over the base's steps.
    private static func bind(_ layout: PlanLayout, _ executor: FunctionExecutor, base: ShapePlan?) throws
        -> (steps: [PlannedStep], bindings: [Binding?], scratchBytes: Int) {
        if let base, let rebuilt = layout.rebuilt, base.recording.guards.isEmpty, base.steps.count == layout.planned.count {
            var (steps, bindings, scratchBytes) = (base.steps, base.bindings, base.scratchBytes)
            for i in rebuilt {
                let p = layout.plannedAt[i], planned = layout.planned[p]
                if let b = base.bindings[i], Operand.same(b.inputs, planned.inputs) && Operand.same(b.outputs, planned.outputs) { continue }
                let binding = try bind(planned, executor)
                scratchBytes = max(scratchBytes, binding.scratchBytes)
                bindings[i] = binding
                steps[p] = PlannedStep(index: i, bound: binding.bound)
            }
            return (steps, bindings, scratchBytes)
        }
        var steps: [PlannedStep] = []
        var bindings = [Binding?](repeating: nil, count: executor.steps.count)
        var scratchBytes = 0
        steps.reserveCapacity(layout.planned.count)
        for p in layout.planned {
            let binding: Binding
            if let b = base?.bindings[p.index], Operand.same(b.inputs, p.inputs) && Operand.same(b.outputs, p.outputs) {
                binding = b
            } else {
                binding = try bind(p, executor)
            }
            scratchBytes = max(scratchBytes, binding.scratchBytes)
            bindings[p.index] = binding
            steps.append(PlannedStep(index: p.index, bound: binding.bound))
        }
        return (steps, bindings, scratchBytes)
    }

    /// One step bound to its operands, or its reference kernel when the step's kernel does not fit them.
    static func bind(_ p: PlanLayout.Planned, _ executor: FunctionExecutor) throws -> Binding {
        let kernel = executor.steps[p.index].kernel
        var context = BindContext(threads: executor.threads, scratchSlot: executor.slotCount)
        if let out = p.outputs.first, out.extent != nil {
            return Binding(inputs: p.inputs, outputs: p.outputs, bound: try StateAppend.bind(p.inputs, out), scratchBytes: 0, fallback: nil)
        }
        do {
            let bound = try kernel.bind(p.inputs, p.outputs, &context)
            let fallback = kernel is ReferenceStep ? "\(executor.steps[p.index].name): reference" : nil
            return Binding(inputs: p.inputs, outputs: p.outputs, bound: bound, scratchBytes: context.scratchBytes, fallback: fallback)
        } catch let e as OpError {
            let step = executor.steps[p.index]
            // The reference kernel reads operands dense: a state kept in place has to be read by its kernel.
            if p.inputs.contains(where: { $0?.extent != nil }) { throw OpError("\(step.name): \(kernel.id) cannot read a state kept in place (\(e.reason))") }
            let fallback = ReferenceStep(kernel: step.reference, fallback: e.reason)
            context = BindContext(threads: executor.threads, scratchSlot: executor.slotCount)
            let bound = try fallback.bind(p.inputs, p.outputs, &context)
            return Binding(inputs: p.inputs, outputs: p.outputs, bound: bound, scratchBytes: context.scratchBytes,
                           fallback: "\(step.name): \(step.kernel.id) does not fit (\(e.reason)); reference")
        }
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
    static func reusableInput(_ step: FunctionExecutor.Step, _ inputs: [Operand?], _ o: Operand, at i: Int, rootOf: [Int],
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

    /// Per output, the arena buffer it starts and no other output shares, with every slot in
    /// that buffer: when the output is the whole buffer it is written in place of its copy (every
    /// slot in the buffer points into the run's result array).
    private static func outputRoots(_ outputSlots: [Int], location: [Location?], byteOffset: [Int]) -> [(root: Int, slots: [(slot: Int, offset: Int)])?] {
        var outputsPerRoot: [Int: Int] = [:]
        for s in outputSlots { if case .arena(let r)? = location[s] { outputsPerRoot[r, default: 0] += 1 } }
        var slotsOfRoot: [Int: [(slot: Int, offset: Int)]] = [:]
        for s in location.indices {
            if case .arena(let r)? = location[s], outputsPerRoot[r] == 1 { slotsOfRoot[r, default: []].append((s, byteOffset[s])) }
        }
        return outputSlots.map { s in
            guard case .arena(let r)? = location[s], byteOffset[s] == 0, outputsPerRoot[r] == 1, let slots = slotsOfRoot[r] else { return nil }
            return (r, slots)
        }
    }

    /// Runs the plan on inputs of the planned shapes, or of the sizes `bound` binds it to.
    func run(_ args: [NDArray], executor: FunctionExecutor, bound: SymbolicPlan.Bound? = nil) throws -> [String: NDArray] {
        let arena = executor.arenas.take(for: self)
        defer { executor.arenas.give(arena) }
        let slots = arena.slots
        for (s, i, o) in inputSlots { slots[s] = args[i].unsafeBase + o }
        for (s, p) in bound?.slots ?? [] { slots[s] = p }
        var results: [NDArray?] = []
        results.reserveCapacity(outputs.count)
        for (k, (o, d)) in zip(outputs, direct).enumerated() {
            // An output that grows with a symbolic plan's sizes is copied out of the arena.
            guard let d, bound?.outputShapes[k] == nil else { results.append(nil); continue }
            let y = NDArray(uninitializedShape: o.shape, scalarType: o.dtype)
            for (s, offset) in d { slots[s] = y.unsafeBase + offset }
            results.append(y)
        }
        let profile = executor.profile
        profile?.countRun()
        for (p, step) in steps.enumerated() {
            let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
            do {
                try (bound?.steps[p] ?? step.bound).run(slots)
            } catch let e as OpError {
                throw InferenceError(function: executor.function.name, op: executor.steps[step.index].name, reason: e.reason)
            } catch var m as PlanMismatch {
                m.op = m.op ?? executor.steps[step.index].name
                throw m
            }
            profile?.add(step.index, DispatchTime.now().uptimeNanoseconds - started)
        }
        var out: [String: NDArray] = [:]
        for (k, (o, result)) in zip(outputs, results).enumerated() {
            if let result {
                out[o.name] = result
                continue
            }
            let y = NDArray(uninitializedShape: bound?.outputShapes[k] ?? o.shape, scalarType: o.dtype)
            y.unsafeBase.copyMemory(from: slots[o.slot], byteCount: y.elementCount * y.elementSize)
            out[o.name] = y
        }
        return out
    }
}
