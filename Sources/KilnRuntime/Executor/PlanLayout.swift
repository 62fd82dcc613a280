import KilnCompiler
import KilnFormat
import KilnReference

/// Where every slot of a shape plan lives and which steps are left to run, before binding:
/// views and contiguous slices at an offset in their source, results written over an input
/// nothing reads afterwards, every other result the root of an arena buffer.
///
/// A plan for new sizes derived from another (``Recording/derived(_:_:)``) usually makes the
/// same decisions with other sizes: ``rebased(_:from:_:_:)`` then revisits only the steps whose
/// operands changed, checks their decisions still hold, and resizes the buffers — O(slots) of
/// plain array work instead of the whole layout.
struct PlanLayout {
    /// A step left to run with its operands. A class: a layout rebased from another shares the
    /// entries of its unchanged steps, one reference each.
    final class Planned {
        let index: Int
        let inputs: [Operand?]
        let outputs: [Operand]

        init(_ index: Int, _ inputs: [Operand?], _ outputs: [Operand]) { (self.index, self.inputs, self.outputs) = (index, inputs, outputs) }
    }

    var location: [ShapePlan.Location?]
    /// Where in its root, input or constant a slot starts (views of a slice start inside).
    var byteOffset: [Int]
    /// Each slot's arena buffer, or -1.
    var rootOf: [Int]
    /// Per buffer, the slot whose size it has, its size and the steps it is live over.
    var rootSlot: [Int] = [], rootBytes: [Int] = [], rootFirst: [Int] = [], rootLast: [Int] = []
    var planned: [Planned] = []
    /// Per step, its index in `planned` or -1.
    var plannedAt: [Int]
    /// Per step made a view: the byte offset into its source.
    var viewOffset: [Int?]
    /// Per slot, the input slot whose buffer it took over, or -1.
    var reused: [Int]
    var sliceOf: [Int: (step: Int, at: Int, width: Int)]
    /// For a rebased layout, the steps whose operands were worked out again (the others have
    /// the base's); `nil` for a layout made whole.
    var rebuilt: [Int]? = nil
    /// For a rebased layout, whether a slot's location moved (a folded value computed again).
    var locationsChanged = false

    static func operand(_ s: Int, _ recording: Recording, _ executor: FunctionExecutor) -> Operand? {
        guard s >= 0, let shape = recording.shapes[s] ?? recording.known[s]?.shape ?? executor.constants[s]?.shape,
              let dtype = recording.dtypes[s] ?? recording.known[s]?.scalarType ?? executor.constants[s]?.scalarType else { return nil }
        var o = Operand(slot: s, shape: shape, dtype: dtype, value: recording.known[s] ?? executor.constants[s])
        if !recording.stateExtents.isEmpty { o.extent = recording.stateExtents[s] }
        return o
    }

    /// The layout of `recording`, every step considered.
    init(_ executor: FunctionExecutor, _ recording: Recording) throws {
        let slotCount = executor.slotCount
        location = [ShapePlan.Location?](repeating: nil, count: slotCount)
        for s in 0 ..< slotCount {
            if let v = recording.known[s] {
                location[s] = .constant(v.unsafeBase)
            }
        }
        for (i, s) in executor.inputSlots.enumerated() where location[s] == nil { location[s] = .input(i) }
        rootOf = [Int](repeating: -1, count: slotCount)
        byteOffset = [Int](repeating: 0, count: slotCount)
        reused = [Int](repeating: -1, count: slotCount)
        plannedAt = [Int](repeating: -1, count: executor.steps.count)
        viewOffset = [Int?](repeating: nil, count: executor.steps.count)
        let operand = { (s: Int) in PlanLayout.operand(s, recording, executor) }
        // The last step reading each slot, and per root the last read of any slot in it: an
        // elementwise step may write over an input whose memory nothing reads afterwards.
        let lastRead = executor.lastRead
        var rootReads: [Int] = []
        func use(_ s: Int, at step: Int) {
            if s >= 0, rootOf[s] >= 0 { rootLast[rootOf[s]] = max(rootLast[rootOf[s]], step) }
        }
        func join(_ s: Int, _ root: Int) {
            rootOf[s] = root
            if root >= 0 { rootReads[root] = max(rootReads[root], lastRead[s]) }
        }
        /// A new arena buffer for slot `s` of `bytes`, live from step `i`.
        func newRoot(_ s: Int, bytes: Int, at i: Int) {
            rootSlot.append(s)
            rootBytes.append(bytes)
            rootFirst.append(i)
            rootLast.append(i)
            rootReads.append(-1)
            join(s, rootBytes.count - 1)
        }
        sliceOf = ShapePlan.concatSlices(executor, recording, operand: operand, producer: executor.producer, lastRead: lastRead)
        for i in executor.steps.indices {
            if executor.steps[i].outputs.allSatisfy({ recording.known[$0] != nil }) || executor.onlyShapesRead[i] { continue }
            let step = executor.steps[i]
            let inputs = step.inputs.map { operand($0) }
            for s in step.inputs { use(s, at: i) }
            // A state kept in place: its append writes the new entries after the old ones, in the
            // state's own buffer (the output is where the input is).
            if step.outputs.count == 1, let out = operand(step.outputs[0]), out.extent != nil, let past = step.inputs.first, past >= 0 {
                location[step.outputs[0]] = location[past]
                plannedAt[i] = planned.count
                planned.append(Planned(i, inputs, [out]))
                continue
            }
            // Views and contiguous slices take their source's memory (at an offset): no step runs.
            let sliceOffset = (step.kernel as? CopyStep)?.contiguousSliceOffset(inputs)
            if step.kernel.id.family == .view || sliceOffset != nil, let source = step.inputs.first, source >= 0, let out = step.outputs.first {
                location[out] = location[source]
                byteOffset[out] = byteOffset[source] + (sliceOffset ?? 0)
                viewOffset[i] = sliceOffset ?? 0
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
                if let reuse = ShapePlan.reusableInput(step, inputs, o, at: i, rootOf: rootOf, rootReads: rootReads) {
                    join(s, rootOf[reuse])
                    byteOffset[s] = byteOffset[reuse]
                    reused[s] = reuse
                } else {
                    newRoot(s, bytes: o.byteCount, at: i)
                }
                location[s] = .arena(rootOf[s])
                outputs.append(o)
            }
            plannedAt[i] = planned.count
            planned.append(Planned(i, PlanLayout.marked(step.inputs, inputs, sliceOf, at: i), outputs))
        }
        for s in executor.outputSlots { use(s, at: Int.max) }
    }

    /// Inputs a producer already wrote into their concat's output, marked so.
    private static func marked(_ slots: [Int], _ inputs: [Operand?], _ sliceOf: [Int: (step: Int, at: Int, width: Int)], at i: Int) -> [Operand?] {
        zip(slots, inputs).map { s, x in
            guard var x, let slice = sliceOf[s], slice.step == i else { return x }
            x.inPlace = true
            return x
        }
    }

    /// `base`'s layout (made for `baseRecording`) with `recording`'s sizes, or `nil` when a step
    /// whose operands changed would be laid out differently (a value folded in one and not the
    /// other, a slice at another offset, a buffer taken over whose shape no longer matches).
    static func rebased(_ base: PlanLayout, from baseRecording: Recording, _ recording: Recording, _ executor: FunctionExecutor) -> PlanLayout? {
        let slotCount = executor.slotCount
        var changed = [Bool](repeating: false, count: slotCount)
        var layout = base
        var rebuilt: [Int] = []
        var anyKnownChanged = false
        // A record derived from the base's lists the slots that differ; any other is compared whole.
        let candidates = recording.derivedFrom == ObjectIdentifier(baseRecording) ? recording.changedSlots : Array(0 ..< slotCount)
        for s in candidates {
            let (a, b) = (baseRecording.known[s], recording.known[s])
            guard (a == nil) == (b == nil) else { return nil }
            if let a, let b, a.unsafeBase != b.unsafeBase {
                changed[s] = true
                anyKnownChanged = true
                layout.location[s] = .constant(b.unsafeBase)
            }
            if baseRecording.shapes[s] != recording.shapes[s] || baseRecording.dtypes[s] != recording.dtypes[s]
                || baseRecording.stateExtents[s] != recording.stateExtents[s] { changed[s] = true }
        }
        layout.locationsChanged = anyKnownChanged
        let operand = { (s: Int) in PlanLayout.operand(s, recording, executor) }
        let sliceOf = ShapePlan.concatSlices(executor, recording, operand: operand, producer: executor.producer, lastRead: executor.lastRead)
        guard sliceOf.count == base.sliceOf.count, sliceOf.allSatisfy({ s, v in base.sliceOf[s].map { $0 == v } ?? false }) else { return nil }
        // The steps reading or writing a changed slot, in order.
        var touched = [Bool](repeating: false, count: executor.steps.count)
        for s in candidates where changed[s] {
            for j in executor.consumers[s] { touched[j] = true }
            if executor.producer[s] >= 0 { touched[executor.producer[s]] = true }
        }
        for i in executor.steps.indices where touched[i] {
            let (ins, outs) = (executor.steps[i].inputs, executor.steps[i].outputs)
            if let offset = base.viewOffset[i] {
                // A view stays one: a contiguous slice must start where it did.
                guard let step = executor.steps[i].kernel as? CopyStep else { continue }
                guard step.contiguousSliceOffset(ins.map(operand)) == offset else { return nil }
                continue
            }
            let p = base.plannedAt[i]
            guard p >= 0 else { continue }
            let inputs = ins.map(operand)
            var outputs: [Operand] = []
            for s in outs {
                guard var o = operand(s) else { return nil }
                if let slice = sliceOf[s] { o.rowStride = slice.width }
                let r = base.reused[s]
                if r >= 0 {
                    guard let x = operand(r), x.shape == o.shape, x.dtype == o.dtype, x.value == nil else { return nil }
                }
                outputs.append(o)
            }
            layout.planned[p] = Planned(i, marked(ins, inputs, sliceOf, at: i), outputs)
            rebuilt.append(i)
        }
        for r in layout.rootSlot.indices where changed[layout.rootSlot[r]] {
            guard let o = operand(layout.rootSlot[r]) else { return nil }
            layout.rootBytes[r] = o.byteCount
        }
        layout.rebuilt = rebuilt
        return layout
    }
}

extension FunctionExecutor {
    /// The last step reading each slot (`Int.max` for outputs, -1 for none).
    static func lastRead(_ steps: [Step], slotCount: Int, outputSlots: [Int]) -> [Int] {
        var lastRead = [Int](repeating: -1, count: slotCount)
        for i in steps.indices { for s in steps[i].inputs where s >= 0 { lastRead[s] = max(lastRead[s], i) } }
        for s in outputSlots { lastRead[s] = Int.max }
        return lastRead
    }

    /// Per slot, the steps reading it, in order (each once).
    static func consumers(_ steps: [Step], slotCount: Int) -> [[Int]] {
        var consumers = [[Int]](repeating: [], count: slotCount)
        for i in steps.indices { for s in steps[i].inputs where s >= 0 && consumers[s].last != i { consumers[s].append(i) } }
        return consumers
    }

    /// The step writing each slot, or -1.
    static func producers(_ steps: [Step], slotCount: Int) -> [Int] {
        var producer = [Int](repeating: -1, count: slotCount)
        for i in steps.indices { for s in steps[i].outputs { producer[s] = i } }
        return producer
    }
}
