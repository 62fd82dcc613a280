import KilnFormat
import KilnReference

/// Folds a multiplication or an addition by a stored scalar that follows a `conv` (or `linear`)
/// into that op's weight and bias, repeatedly (Paddle's learnable affine blocks: `conv`, `mul` by
/// a scale, `add` of a bias).
///
/// Before: `y = conv(x, W, b); z = add(mul(y, s), t)` — after: `z = conv(x, W·s, b·s + t)`.
/// Only when `y` (and the product) have no other reader, the producer has no fused activation,
/// and the scalar is a one-element float weight; the folded weight and bias are dense float32.
/// The results differ from the unfolded ones by float32 rounding of the scaled weights.
public struct ScaleFolding: CompilerPass {
    /// `scale_folding`.
    public static let name = "scale_folding"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be decoded.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var removed = Set<Int>()
            var uses = UseIndex(f)
            for (i, op) in f.operations.enumerated() where ["mul", "add"].contains(op.opType) && op.inputs.count == 2 && op.outputs.count == 1 {
                guard let (pi, scalar) = producer(of: op, f, uses, unit, removed: removed) else { continue }
                let producer = f.operations[pi]
                guard let w = unit.weight(producer.inputs[1]), w.dtype.isFloatingPoint, w.shape.first ?? 0 > 0,
                      op.outputs[0].type.shape == producer.outputs[0].type.shape else { continue }
                let bias = producer.inputs.count > 2 && !producer.inputs[2].isEmpty ? unit.weight(producer.inputs[2]) : nil
                if producer.inputs.count > 2, !producer.inputs[2].isEmpty, bias == nil { continue }
                let channels = w.shape[0]
                var weightValues: [Float], biasValues: [Float]
                do {
                    weightValues = try WeightDecoding.dense(w).scalars(as: Float.self)
                    biasValues = try bias.map { try WeightDecoding.dense($0).scalars(as: Float.self) } ?? [Float](repeating: 0, count: channels)
                } catch {
                    throw CompileError("\(op.opType) '\(op.name)': cannot decode the weights of '\(producer.name)': \(error)")
                }
                guard biasValues.count == channels else { continue }
                var inputs = producer.inputs
                if op.opType == "mul" {
                    weightValues = weightValues.map { $0 * scalar }
                    let wName = unit.freshWeightName("\(w.name).scaled")
                    unit.model.weights.append(Weight(name: wName, dtype: .float32, shape: w.shape, encoding: .dense(WeightBlob(
                        dtype: .float32, shape: w.shape, data: ByteStorage(weightValues.withUnsafeBytes { Array($0) })))))
                    inputs[1] = wName
                    biasValues = biasValues.map { $0 * scalar }
                } else {
                    biasValues = biasValues.map { $0 + scalar }
                }
                // A bias appears when the op adds one or scales an existing one.
                if bias != nil || op.opType == "add" {
                    let bName = unit.freshWeightName("\(op.name).bias")
                    unit.model.weights.append(Weight(name: bName, dtype: .float32, shape: [channels], encoding: .dense(WeightBlob(
                        dtype: .float32, shape: [channels], data: ByteStorage(biasValues.withUnsafeBytes { Array($0) })))))
                    if inputs.count > 2 { inputs[2] = bName } else { inputs.append(bName) }
                }
                var folded = producer
                folded.inputs = inputs
                folded.outputs = op.outputs
                f.operations[i] = folded
                removed.insert(pi)
                // The folded op now stands where the mul or add stood: later ops may fold into it.
                uses = UseIndex(f)
            }
            f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
            unit.model.functions[fi] = f
        }
    }

    /// The `conv` or `linear` producing `op`'s non-scalar input (read by `op` alone), and the scalar.
    func producer(of op: Operation, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit, removed: Set<Int>) -> (Int, Float)? {
        for (k, name) in op.inputs.enumerated() {
            let other = op.inputs[1 - k]
            guard let s = unit.weight(other), s.elementCount == 1, s.dtype.isFloatingPoint,
                  let v = try? WeightDecoding.dense(s), let scalar = (v.scalarType == .float32 ? v.scalars(as: Float.self).first : nil),
                  scalar.isFinite, let pi = uses.producer[name], !removed.contains(pi), uses.isPrivate(name) else { continue }
            let p = f.operations[pi]
            guard ["conv", "linear"].contains(p.opType), p.inputs.count >= 2, p.outputs.count == 1,
                  unit.config(of: p, in: f.name).activation == nil, unit.weight(p.inputs[1]) != nil else { continue }
            return (pi, scalar)
        }
        return nil
    }
}
