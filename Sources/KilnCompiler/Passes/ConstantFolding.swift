import KilnFormat
import KilnReference

/// Evaluates operations whose inputs are all dense weights (or that have no inputs, like
/// `constant`) once, at compile time, and stores their results as weights.
///
/// Before: `t = transpose(W); y = matmul(x, t)` — after: `y = matmul(x, t)` with `t` a weight.
/// Results above 64 MiB are left to run time, and compressed weights are never decoded here
/// (folding them would store them dense).
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
            for op in f.operations {
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
}
