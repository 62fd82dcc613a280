import KilnFormat
import KilnReference

/// The weights the channels-last rewrite makes: a batch normalization's affine map and weights
/// transposed once, at compile time, for binary ops on twins.
extension ChannelsLastLayout.Walk {
    /// `batch_norm`'s per-channel scale s / √(σ² + ε) and shift β − μ·scale as `[1, 1, 1, C]`
    /// weights, when all four parameters are stored weights.
    mutating func batchNormAffine(_ op: Operation, _ unit: inout CompilationUnit) throws -> (String, String)? {
        let params = op.inputs[1...].map { unit.weight($0) }
        guard params.allSatisfy({ $0 != nil }) else { return nil }
        let values: [[Float]]
        do {
            values = try params.map { w -> [Float] in
                let d = try WeightDecoding.dense(w!)
                guard d.scalarType == .float32 else { throw CompileError("not float32") }
                return d.scalars(as: Float.self)
            }
        } catch { return nil }
        let c = values[0].count
        guard c > 0, values.allSatisfy({ $0.count == c }) else { return nil }
        let eps = Double((try? op.attributes.float("epsilon", 1e-5)) ?? 1e-5)
        var scale = [Float](repeating: 0, count: c), shift = scale
        for i in 0 ..< c {
            let k = Double(values[0][i]) / (Double(values[3][i]) + eps).squareRoot()
            scale[i] = Float(k)
            shift[i] = Float(Double(values[1][i]) - Double(values[2][i]) * k)
        }
        func add(_ v: [Float], _ suffix: String) -> String {
            let name = unit.freshWeightName("\(op.name).\(suffix)@nhwc")
            unit.model.weights.append(Weight(name: name, dtype: .float32, shape: [1, 1, 1, c], encoding: .dense(
                WeightBlob(dtype: .float32, shape: [1, 1, 1, c], data: ByteStorage(v.withUnsafeBytes { Array($0) })))))
            types[name] = TensorType(.float32, [.size(1), .size(1), .size(1), .size(c)])
            return name
        }
        return (add(scale, "scale"), add(shift, "shift"))
    }

    /// A weight of rank ≤ 4 broadcast as a rank-4 channels-last operand (transposed once, at compile time).
    mutating func transposedWeight(_ name: String, _ unit: inout CompilationUnit) throws -> String? {
        if let done = transposedWeights[name] { return done }
        guard let w = unit.weight(name), w.shape.count <= 4 else { return nil }
        if w.shape.allSatisfy({ $0 == 1 }) { return name }
        let dense: NDArray
        do { dense = try WeightDecoding.dense(w) } catch { throw CompileError("weight '\(name)': \(error)") }
        guard dense.scalarType == .float32 else { return nil }
        let shape = Array(repeating: 1, count: 4 - w.shape.count) + w.shape
        let moved = dense.reshaped(shape).transposed(ChannelsLastLayout.toLast).contiguous()
        let values = moved.scalars(as: Float.self)
        let newName = unit.freshWeightName("\(name)@nhwc")
        unit.model.weights.append(Weight(name: newName, dtype: .float32, shape: moved.shape, encoding: .dense(
            WeightBlob(dtype: .float32, shape: moved.shape, data: ByteStorage(values.withUnsafeBytes { Array($0) })))))
        transposedWeights[name] = newName
        types[newName] = TensorType(.float32, moved.shape.map { .size($0) })
        return newName
    }
}
