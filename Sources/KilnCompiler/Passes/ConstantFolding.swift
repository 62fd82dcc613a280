import KilnFormat
import KilnReference

/// Evaluates operations whose inputs are all dense weights (or that have no inputs, like
/// `constant`) once, at compile time, and stores their results as weights.
///
/// Before: `t = transpose(W); y = matmul(x, t)` — after: `y = matmul(x, t)` with `t` a weight.
/// Results above 64 MiB are left to run time, and compressed weights are never decoded here
/// (folding them would store them dense).
///
/// Entries of a `shape` result that are fixed sizes fold too: `slice` or `gather` of a shape that
/// picks only dims of fixed size (exports compute attention's `1/√d` from the head size so) becomes
/// a weight, and a `shape` op left with no reader is removed.
public struct ConstantFolding: CompilerPass {
    /// `constant_folding`.
    public static let name = "constant_folding"
    static let largestResult = 64 << 20

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when an op fails on its constant inputs.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var kept: [Operation] = []
            var types: [String: TensorType] = [:]
            for a in f.inputs { types[a.name] = a.type }
            // `shape` results with -1 for the dims known only at run time.
            var partial: [String: NDArray] = [:]
            var foldedShapes = false
            for op in f.operations {
                for v in op.outputs { types[v.name] = v.type }
                if let p = ConstantFolding.partialShape(op, types) { partial[op.outputs[0].name] = p }
                if ["slice", "gather"].contains(op.opType), let p = op.inputs.first.flatMap({ partial[$0] }),
                   let result = try? evaluate(op, unit, first: p), result.scalarType == .int64 {
                    if result.contiguous().scalars(as: Int64.self).allSatisfy({ $0 >= 0 }) {
                        let dense = result.contiguous()
                        unit.model.weights.append(Weight(name: op.outputs[0].name, dtype: .int64, shape: dense.shape,
                                                         encoding: .dense(WeightBlob(dtype: .int64, shape: dense.shape, data: ByteStorage(dense.bytes)))))
                        foldedShapes = true
                        continue
                    }
                }
                let inputs = op.inputs.filter { !$0.isEmpty }.map { unit.weight($0) }
                let foldable = inputs.allSatisfy { w in
                    guard let w, case .dense = w.encoding else { return false }
                    return true
                }
                guard foldable, op.opType != "identity" || !op.inputs.isEmpty,
                      op.outputs.allSatisfy({ unit.weight($0.name) == nil }),
                      let results = try? evaluate(op, unit),
                      results.allSatisfy({ $0.elementCount * $0.elementSize <= ConstantFolding.largestResult && !$0.scalarType.isSubByte })
                else {
                    kept.append(op)
                    continue
                }
                for (value, result) in zip(op.outputs, results) {
                    let dense = result.contiguous()
                    unit.model.weights.append(Weight(
                        name: value.name, dtype: dense.scalarType, shape: dense.shape,
                        encoding: .dense(WeightBlob(dtype: dense.scalarType, shape: dense.shape, data: ByteStorage(dense.bytes)))))
                }
            }
            if foldedShapes {
                // The shapes whose entries all folded are read no more.
                let read = Set(kept.flatMap(\.inputs) + f.outputs.map(\.value))
                kept.removeAll { $0.opType == "shape" && !read.contains($0.outputs[0].name) }
            }
            f.operations = kept
            unit.model.functions[fi] = f
        }
    }

    func evaluate(_ op: Operation, _ unit: CompilationUnit) throws -> [NDArray] {
        let kernel = try ReferenceKernel(op)
        let inputs = try op.inputs.map { name -> NDArray? in
            guard !name.isEmpty, let w = unit.weight(name) else { return nil }
            return try WeightDecoding.dense(w)
        }
        return try kernel(inputs)
    }

    /// `op` evaluated with `first` as its first input and dense weights for the others; `nil`
    /// when another input is not one.
    func evaluate(_ op: Operation, _ unit: CompilationUnit, first: NDArray) throws -> NDArray? {
        var inputs: [NDArray?] = [first]
        for name in op.inputs.dropFirst() {
            if name.isEmpty { inputs.append(nil); continue }
            guard let w = unit.weight(name), case .dense = w.encoding else { return nil }
            inputs.append(try WeightDecoding.dense(w))
        }
        return try ReferenceKernel(op)(inputs).first
    }

    /// A `shape` op's result as far as its input's type fixes it: -1 for dims known at run time.
    static func partialShape(_ op: Operation, _ types: [String: TensorType]) -> NDArray? {
        guard op.opType == "shape", op.inputs.count == 1, op.outputs.count == 1, let t = types[op.inputs[0]] else { return nil }
        let rank = t.rank
        let clamp = { (v: Int) in min(max(v < 0 ? v + rank : v, 0), rank) }
        guard let s = (try? op.attributes.int("start", 0)).map(clamp), let e = (try? op.attributes.int("end", rank)).map(clamp), s <= e else { return nil }
        return NDArray(shape: [e - s], scalars: t.shape[s ..< e].map { Int64($0.size ?? -1) })
    }
}
