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
        (shapes, dtypes, known) = (other.shapes, other.dtypes, other.known)
    }

    /// The record a generic run on `args` would make, worked out from this one (a run whose
    /// inputs have the same types and ranks); `nil` when some step's shapes cannot be worked
    /// out without running it.
    func derived(_ executor: FunctionExecutor, _ args: [NDArray]) throws -> Recording? {
        guard guards.isEmpty, dataDependentShape == nil, args.count == executor.inputSlots.count else { return nil }
        let r = Recording(copying: self)
        r.derived = true
        var changed = [Bool](repeating: false, count: shapes.count)
        for (s, x) in zip(executor.inputSlots, args) where r.shapes[s] != x.shape {
            guard r.dtypes[s] == x.scalarType, r.shapes[s]?.count == x.rank, r.known[s] == nil else { return nil }
            r.shapes[s] = x.shape
            changed[s] = true
        }
        var folds = FoldMemo()
        for index in executor.steps.indices where executor.steps[index].inputs.contains(where: { $0 >= 0 && changed[$0] }) {
            let step = executor.steps[index]
            guard let results = try r.rederive(step, index, executor, &folds) else { return nil }
            for (s, result) in zip(step.outputs, results) {
                let same = result.shape == r.shapes[s] && result.dtype == r.dtypes[s] && Recording.equal(result.value, r.known[s])
                if same { continue }
                (r.shapes[s], r.dtypes[s], r.known[s]) = (result.shape, result.dtype, result.value)
                changed[s] = true
            }
        }
        return r
    }

    /// One step's results for the shapes and known values recorded so far, as ``note`` would
    /// record them: folded values for shape arithmetic and small results of known inputs, else
    /// the kernel's output types; `nil` when they depend on values not known before the run.
    private func rederive(_ step: FunctionExecutor.Step, _ index: Int, _ executor: FunctionExecutor, _ folds: inout FoldMemo) throws
        -> [(shape: [Int], dtype: DataType, value: NDArray?)]? {
        if step.kernel is ControlFlowStep { return nil }
        for i in Recording.shapeInputs[step.opType] ?? [] where i < step.inputs.count && step.inputs[i] >= 0 && known[step.inputs[i]] == nil {
            return nil
        }
        let operands = step.inputs.map { s -> Operand? in
            guard s >= 0, let shape = shapes[s] ?? known[s]?.shape ?? executor.constants[s]?.shape,
                  let dtype = dtypes[s] ?? known[s]?.scalarType ?? executor.constants[s]?.scalarType else { return nil }
            return Operand(slot: s, shape: shape, dtype: dtype, value: known[s] ?? executor.constants[s])
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
            // Folded as the generic run folds it (the same kernel, so the same bits), once per
            // signature and inputs: exporters repeat the same shape arithmetic in every layer.
            let key = FoldMemo.Key(executor.foldSignature[index], operands)
            let results: [NDArray]
            if let key, let memo = folds.results[key] {
                results = memo
            } else {
                results = try executor.runStep(step, operands.map { $0?.value })
                if let key { folds.results[key] = results }
            }
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

    /// Values folded during one derivation, by step signature and input values.
    struct FoldMemo {
        /// The signature, then per input its type, rank, dims and bytes (8 to a word), as one array.
        struct Key: Hashable {
            var words: [Int]

            /// `nil` for control flow and inputs over 64 bytes.
            init?(_ signature: Int, _ operands: [Operand?]) {
                guard signature >= 0 else { return nil }
                words = [signature]
                words.reserveCapacity(4 + operands.count * 8)
                for x in operands {
                    guard let x else { words.append(-1); continue }
                    guard let v = x.value, x.byteCount <= 64 else { return nil }
                    let c = v.contiguous()
                    words.append(c.scalarType.hashValue)
                    words.append(c.shape.count)
                    words += c.shape
                    let bytes = UnsafeRawBufferPointer(start: c.unsafeBase, count: c.elementCount * c.elementSize)
                    var word = 0, k = 0
                    for b in bytes {
                        word |= Int(b) << (8 * k)
                        k += 1
                        if k == 8 { words.append(word); (word, k) = (0, 0) }
                    }
                    if k > 0 { words.append(word) }
                }
            }
        }

        var results: [Key: [NDArray]] = [:]
    }

    private static func equal(_ a: NDArray?, _ b: NDArray?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        guard a.shape == b.shape, a.scalarType == b.scalarType else { return false }
        return memcmp(a.unsafeBase, b.unsafeBase, a.elementCount * a.elementSize) == 0
    }

    /// The address of every stand-in array (never read).
    nonisolated(unsafe) private static let unread = UnsafeRawPointer(UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64))
}
