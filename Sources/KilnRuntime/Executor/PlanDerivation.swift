import Foundation
import KilnCompiler
import KilnFormat
import KilnReference

/// A new shape signature planned from an earlier one instead of recorded.
///
/// A function whose inputs change size from run to run (a language model's past growing one
/// token per step, a batch that varies) would otherwise run generically once per new size —
/// every result allocated, every step's shapes worked out while it runs — and then build a plan
/// no later run uses. Derivation works the new sizes through the earlier plan's record instead:
/// only the steps downstream of a changed size are revisited, shape arithmetic is folded again
/// (as the generic run folds it), every other step's output types come from its kernel, and the
/// plan is built from that record and runs at once. Nothing reads input data, so a signature
/// whose shapes depend on data (guarded values, control flow, `non_zero`) is not derived: it is
/// recorded as before.
extension Recording {
    convenience init(copying other: Recording) {
        self.init(slotCount: other.shapes.count)
        (shapes, dtypes, known, stateExtents) = (other.shapes, other.dtypes, other.known, other.stateExtents)
        derived = true
    }

    /// The record a generic run on `args` would make, worked out from this one (a run whose
    /// inputs have the same types and ranks); `nil` when some step's shapes cannot be worked
    /// out without running it.
    func derived(_ executor: FunctionExecutor, _ args: [NDArray], extents: [Int: StateExtent] = [:]) throws -> Recording? {
        guard guards.isEmpty, dataDependentShape == nil, args.count == executor.inputSlots.count,
              Set(extents.keys) == Set(stateExtents.keys) else { return nil }
        let r = Recording(copying: self)
        r.derivedFrom = ObjectIdentifier(self)
        // Steps reading a changed slot, visited in order: a step's results feed only later steps.
        var pending = [Bool](repeating: false, count: executor.steps.count)
        var first = Int.max
        func changed(_ s: Int) {
            r.changedSlots.append(s)
            for j in executor.consumers[s] { pending[j] = true; first = min(first, j) }
        }
        // A state's new room changes the strides its readers and its append are bound to.
        for (s, e) in extents.sorted(by: { $0.key < $1.key }) where r.stateExtents[s] != e {
            r.stateExtents[s] = e
            changed(s)
        }
        for (s, x) in zip(executor.inputSlots, args) where r.shapes[s] != x.shape {
            guard r.dtypes[s] == x.scalarType, r.shapes[s]?.count == x.rank, r.known[s] == nil else { return nil }
            r.shapes[s] = x.shape
            changed(s)
        }
        // Exporters repeat the same shape arithmetic and the same layer in every layer: each step
        // signature is worked out once per operand shapes and values.
        var memo: [Memo: [(shape: [Int], dtype: DataType, value: NDArray?)]] = [:]
        var index = first
        while index < pending.count {
            defer { index += 1 }
            guard pending[index] else { continue }
            let inputs = executor.steps[index].inputs
            let operands = inputs.map { s -> Operand? in
                guard s >= 0, let shape = r.shapes[s] ?? r.known[s]?.shape ?? executor.constants[s]?.shape,
                      let dtype = r.dtypes[s] ?? r.known[s]?.scalarType ?? executor.constants[s]?.scalarType else { return nil }
                return Operand(slot: s, shape: shape, dtype: dtype, value: r.known[s] ?? executor.constants[s])
            }
            let key = Memo(executor.stepSignature[index], inputs, operands)
            let results: [(shape: [Int], dtype: DataType, value: NDArray?)]
            if let key, let known = memo[key] {
                results = known
            } else {
                guard let worked = try r.rederive(executor.steps[index], index, operands, executor) else { return nil }
                results = worked
                if let key { memo[key] = worked }
            }
            for (s, result) in zip(executor.steps[index].outputs, results) {
                let same = result.shape == r.shapes[s] && result.dtype == r.dtypes[s] && Recording.equal(result.value, r.known[s])
                if same { continue }
                (r.shapes[s], r.dtypes[s], r.known[s]) = (result.shape, result.dtype, result.value)
                changed(s)
            }
        }
        return r
    }

    /// One step's results for the shapes and known values recorded so far, as ``note`` would
    /// record them: folded values for shape arithmetic and small results of known inputs, else
    /// the kernel's output types; `nil` when they depend on values not known before the run.
    private func rederive(_ step: FunctionExecutor.Step, _ index: Int, _ operands: [Operand?], _ executor: FunctionExecutor) throws
        -> [(shape: [Int], dtype: DataType, value: NDArray?)]? {
        if step.kernel is ControlFlowStep { return nil }
        for i in Recording.shapeInputs[step.opType] ?? [] where i < operands.count && step.inputs[i] >= 0 && operands[i]?.value == nil {
            return nil
        }
        if step.opType == "shape" || step.opType == "size" {
            // The portable op reads only its input's shape: it is given a stand-in of that shape
            // whose bytes are never read (a step with a layout around it would move them: not derived).
            guard step.reference.layout == .channelsFirst, step.reference.activation == nil else { return nil }
            let phantom = operands.map { x in
                x.map { NDArray(shape: $0.shape, scalarType: $0.dtype, borrowing: ByteStorage(borrowing: Recording.unread, count: $0.byteCount, owner: ReferenceStep.Anchor.shared)) }
            }
            return try step.reference.kernel(phantom).map { ($0.shape, $0.scalarType, $0.contiguous()) }
        }
        if step.inputs.allSatisfy({ $0 < 0 || known[$0] != nil }) {
            // Folded as the generic run folds it (the same kernel, so the same bits).
            let results = try executor.runStep(step, operands.map { $0?.value })
            let bytes = results.reduce(0) { $0 + $1.elementCount * $1.elementSize }
            return results.map { ($0.shape, $0.scalarType, bytes <= Recording.foldLimit ? $0.contiguous() : nil) }
        }
        guard let types = try step.kernel.outputTypes(operands) ?? Recording.inferred(executor.function.operations[index], operands, step.reference) else { return nil }
        return types.map { ($0.shape, $0.dtype, nil) }
    }

    /// Output types from the op's schema, each known shape-deciding input given as the attribute
    /// of its name (a `reshape` target, `slice` bounds, `expand` and `tile` sizes, reduction and
    /// `squeeze` axes: the schema's alternative to the input); `nil` when that is not possible or
    /// a dim stays unknown. Steps with a layout or an epilogue around the op are not inferred so.
    private static func inferred(_ op: KilnFormat.Operation, _ inputs: [Operand?], _ reference: LoweredReference) throws -> [(shape: [Int], dtype: DataType)]? {
        guard reference.layout == .channelsFirst, reference.activation == nil, !reference.fusedBias, let schema = OpSet.schema(op.opType) else { return nil }
        var op = op, inputs = inputs
        for i in schema.shapeInputs where i < inputs.count && i < schema.inputs.count {
            guard let x = inputs[i], let v = x.value else { continue }
            let name = schema.inputs[i].name
            guard let kind = schema.attributes[name]?.kind, let values = Recording.integers(v) else { return nil }
            switch kind {
            case .ints: op.attributes[name] = .ints(values)
            case .int where values.count == 1: op.attributes[name] = .int(values[0])
            default: return nil
            }
            inputs[i] = nil
        }
        return try ReferenceStep.inferred(op, inputs)
    }

    private static func integers(_ v: NDArray) -> [Int]? {
        switch v.scalarType {
        case .int64: return v.contiguous().scalars(as: Int64.self).map { Int($0) }
        case .int32: return v.contiguous().scalars(as: Int32.self).map { Int($0) }
        default: return nil
        }
    }

    /// A step's signature (``FunctionExecutor/stepSignature``) with its operands' types, shapes
    /// and known values (their bytes up to 64, else the array's identity), as one array of words:
    /// steps with equal keys have equal results. An input with no operand here (a weight the
    /// kernel keeps packed) is keyed by its slot.
    struct Memo: Hashable {
        var words: [Int]

        /// `nil` for control flow.
        init?(_ signature: Int, _ slots: [Int], _ operands: [Operand?]) {
            guard signature >= 0 else { return nil }
            words = [signature]
            words.reserveCapacity(4 + operands.count * 8)
            for (s, x) in zip(slots, operands) {
                guard let x else { words += [-1, s]; continue }
                words.append(x.dtype.hashValue)
                words.append(x.shape.count)
                words += x.shape
                guard let v = x.value else { words.append(-2); continue }
                guard x.byteCount <= 64, v.isContiguous else {
                    words += [-3, Int(bitPattern: v.unsafeBase)]
                    continue
                }
                words.append(-4)
                var word = 0, k = 0
                for b in UnsafeRawBufferPointer(start: v.unsafeBase, count: x.byteCount) {
                    word |= Int(b) << (8 * k)
                    k += 1
                    if k == 8 { words.append(word); (word, k) = (0, 0) }
                }
                if k > 0 { words.append(word) }
            }
        }
    }

    private static func equal(_ a: NDArray?, _ b: NDArray?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        guard a.shape == b.shape, a.scalarType == b.scalarType else { return false }
        return memcmp(a.unsafeBase, b.unsafeBase, a.elementCount * a.elementSize) == 0
    }

    /// The address of every stand-in array (never read).
    nonisolated(unsafe) private static let unread = UnsafeRawPointer(UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64))
}
