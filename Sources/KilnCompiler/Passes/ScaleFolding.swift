import KilnFormat
import KilnReference

/// Folds a multiplication or an addition by a stored scalar that follows a `conv` (or `linear`)
/// into that op's weight and bias, repeatedly (Paddle's learnable affine blocks: `conv`, `mul` by
/// a scale, `add` of a bias); after a `conv`, also by a stored value per output channel (shape
/// `[C, 1, …]` or `[1, C, 1, …]`: the layer scales of FastViT, ConvNeXt-style blocks, CaiT).
///
/// Before: `y = conv(x, W, b); z = add(mul(y, s), t)` — after: `z = conv(x, W·s, b·s + t)`.
/// Only when `y` (and the product) have no other reader, the producer has no fused activation,
/// and the scale is a float weight of one element (or one per channel); the folded weight and bias
/// are dense float32.
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
                guard let (pi, factors) = producer(of: op, f, uses, unit, removed: removed) else { continue }
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
                guard biasValues.count == channels, factors.count == 1 || factors.count == channels, weightValues.count % channels == 0 else { continue }
                func factor(_ c: Int) -> Float { factors.count == 1 ? factors[0] : factors[c] }
                let perChannel = weightValues.count / channels
                var inputs = producer.inputs
                if op.opType == "mul" {
                    for c in 0 ..< channels { for j in 0 ..< perChannel { weightValues[c * perChannel + j] *= factor(c) } }
                    let wName = unit.freshWeightName("\(w.name).scaled")
                    unit.model.weights.append(Weight(name: wName, dtype: .float32, shape: w.shape, encoding: .dense(WeightBlob(
                        dtype: .float32, shape: w.shape, data: ByteStorage(weightValues.withUnsafeBytes { Array($0) })))))
                    inputs[1] = wName
                    for c in 0 ..< channels { biasValues[c] *= factor(c) }
                } else {
                    for c in 0 ..< channels { biasValues[c] += factor(c) }
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

    /// The `conv` or `linear` producing `op`'s other input (read by `op` alone), and the factors:
    /// one scalar, or (after a `conv`) one per output channel.
    func producer(of op: Operation, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit, removed: Set<Int>) -> (Int, [Float])? {
        for (k, name) in op.inputs.enumerated() {
            let other = op.inputs[1 - k]
            guard let s = unit.weight(other), s.dtype.isFloatingPoint, s.elementCount <= 1 << 16, let v = try? WeightDecoding.dense(s), v.scalarType == .float32,
                  let pi = uses.producer[name], !removed.contains(pi), uses.isPrivate(name) else { continue }
            let p = f.operations[pi]
            guard ["conv", "linear"].contains(p.opType), p.inputs.count >= 2, p.outputs.count == 1,
                  unit.config(of: p, in: f.name).activation == nil, let w = unit.weight(p.inputs[1]) else { continue }
            let factors = v.scalars(as: Float.self)
            guard factors.allSatisfy(\.isFinite) else { continue }
            if factors.count == 1 { return (pi, factors) }
            guard p.opType == "conv", Self.perChannel(s.shape, channels: w.shape.first ?? 0, rank: p.outputs[0].type.rank) else { continue }
            return (pi, factors)
        }
        return nil
    }

    /// Whether a constant of `shape` broadcasts against a channels-first output of `rank` as one
    /// value per channel: `[C, 1, …]` or `[1, C, 1, …]` (leading ones dropped), C the channel count.
    static func perChannel(_ shape: [Int], channels: Int, rank: Int) -> Bool {
        guard channels > 1, rank >= 2, shape.count <= rank else { return false }
        let padded = [Int](repeating: 1, count: rank - shape.count) + shape
        return padded[1] == channels && padded.enumerated().allSatisfy { $0.offset == 1 || $0.element == 1 }
    }
}
