import KilnFormat
import KilnReference

/// Folds a `batch_norm` that follows a `conv` (or `linear`) into that op's weight and bias.
///
/// Before: `y = conv(x, W, b); z = batch_norm(y, s, β, μ, σ²)` —
/// after: `z = conv(x, W', b')` with `W'[m] = W[m]·s[m]/√(σ²[m]+ε)` and
/// `b'[m] = (b[m] − μ[m])·s[m]/√(σ²[m]+ε) + β[m]`. Only when `y` has no other reader and
/// every parameter is a stored (dense or compressed) weight; the folded weight is dense float32.
public struct BatchNormFolding: CompilerPass {
    /// `batch_norm_folding`.
    public static let name = "batch_norm_folding"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be decoded.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var removed = Set<Int>()
            let uses = UseIndex(f)
            for (bi, bn) in f.operations.enumerated() where bn.opType == "batch_norm" && bn.inputs.count == 5 && bn.outputs.count == 1 {
                guard let pi = uses.producer[bn.inputs[0]], uses.isPrivate(bn.inputs[0]) else { continue }
                let producer = f.operations[pi]
                guard ["conv", "linear"].contains(producer.opType), producer.inputs.count >= 2,
                      producer.outputs.count == 1, unit.config(of: producer, in: f.name).activation == nil,
                      let w = unit.weight(producer.inputs[1]), w.dtype.isFloatingPoint else { continue }
                let params = bn.inputs[1...].map { unit.weight($0) }
                guard params.allSatisfy({ $0 != nil }) else { continue }
                let bias = producer.inputs.count > 2 && !producer.inputs[2].isEmpty ? unit.weight(producer.inputs[2]) : nil
                if producer.inputs.count > 2, !producer.inputs[2].isEmpty, bias == nil { continue }
                let channels = w.shape[0]
                let eps = Double((try? bn.attributes.float("epsilon", 1e-5)) ?? 1e-5)
                let decoded: [[Float]]
                let weightValues: [Float]
                let biasValues: [Float]?
                do {
                    decoded = try params.map { try WeightDecoding.dense($0!).scalars(as: Float.self) }
                    weightValues = try WeightDecoding.dense(w).scalars(as: Float.self)
                    biasValues = try bias.map { try WeightDecoding.dense($0).scalars(as: Float.self) }
                } catch {
                    throw CompileError("batch_norm '\(bn.name)': cannot decode its parameters: \(error)")
                }
                guard decoded.allSatisfy({ $0.count == channels }), biasValues?.count ?? channels == channels else { continue }
                let (scale, beta, mean, variance) = (decoded[0], decoded[1], decoded[2], decoded[3])
                let per = weightValues.count / max(channels, 1)
                var newW = weightValues, newB = [Float](repeating: 0, count: channels)
                for m in 0 ..< channels {
                    let s = Double(scale[m]) / (Double(variance[m]) + eps).squareRoot()
                    for i in 0 ..< per { newW[m * per + i] = Float(Double(weightValues[m * per + i]) * s) }
                    newB[m] = Float((Double(biasValues?[m] ?? 0) - Double(mean[m])) * s + Double(beta[m]))
                }
                let wName = unit.freshWeightName("\(w.name).bn_folded")
                unit.model.weights.append(Weight(name: wName, dtype: .float32, shape: w.shape,
                                                 encoding: .dense(WeightBlob(dtype: .float32, shape: w.shape, data: ByteStorage(newW.withUnsafeBytes { Array($0) })))))
                let bName = unit.freshWeightName("\(bn.name).bias")
                unit.model.weights.append(Weight(name: bName, dtype: .float32, shape: [channels],
                                                 encoding: .dense(WeightBlob(dtype: .float32, shape: [channels], data: ByteStorage(newB.withUnsafeBytes { Array($0) })))))
                var fused = producer
                fused.inputs = [producer.inputs[0], wName, bName]
                fused.outputs = bn.outputs
                f.operations[pi] = fused
                removed.insert(bi)
            }
            f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
            unit.model.functions[fi] = f
        }
    }
}
