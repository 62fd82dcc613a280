@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// `dynamic_quantize_lstm`'s weights as the recurrent step runs them.
struct QuantizedWeights: @unchecked Sendable {
    /// Per direction, W `[in, 4h]` and R `[h, 4h]` as packed 8-bit panels of the integers with
    /// their zero points and scale 1: the GEMM decodes `q − zero point` exactly.
    var w: [PackedGEMM], r: [PackedGEMM]
    /// Per direction, W's and R's per-column scales.
    var wScale: [[Float]], rScale: [[Float]]
}

extension RecurrentStep {
    /// W (input 1, `[dirs, in, 4h]`) and R (input 2, `[dirs, h, 4h]`), int8 or uint8, with their
    /// scales and zero points (inputs 8–11: `[dirs]` or `[dirs, 4h]`), packed for `kernel`'s tile.
    static func quantized(_ constant: (Int) -> NDArray?, directions: Int, hidden: Int, kernel id: KernelID) throws -> QuantizedWeights {
        guard let tile = id.tile else { throw OpError("kernel \(id) has no GEMM tile") }
        let n = 4 * hidden, nr = tile.nr, panels = (n + nr - 1) / nr
        func matrix(_ i: Int, _ name: String, scale s: Int) throws -> ([PackedGEMM], [[Float]]) {
            guard let m = constant(i), let scale = constant(s), let zero = constant(s + 1) else {
                throw OpError("\(name), its scale and its zero point must be weights")
            }
            guard [.int8, .uint8].contains(m.scalarType), m.rank == 3, m.shape[0] == directions, m.shape[2] == n,
                  scale.scalarType == .float32, zero.scalarType == m.scalarType, scale.shape == zero.shape,
                  scale.shape == [directions] || scale.shape == [directions, n],
                  let scales = scale.doubles(), let zeros = zero.doubles() else {
                throw OpError("\(name) must be 8-bit [\(directions), k, \(n)] with float32 scales and zero points of its type, [\(directions)] or [\(directions), \(n)]")
            }
            let k = m.shape[1], perColumn = scale.rank == 2
            let bytes = m.contiguous().bytes
            var gemms: [PackedGEMM] = [], columnScales: [[Float]] = []
            for d in 0 ..< directions {
                columnScales.append((0 ..< n).map { Float(scales[perColumn ? d * n + $0 : d]) })
                // Panels of nr columns, K rows each; padding columns hold zero point 0.
                var data = [UInt8](repeating: 0, count: panels * k * nr)
                var zeroRow = [Float](repeating: 0, count: panels * nr)
                for j in 0 ..< n {
                    zeroRow[j] = Float(zeros[perColumn ? d * n + j : d])
                    let (p, lane) = (j / nr, j % nr)
                    for row in 0 ..< k { data[(p * k + row) * nr + lane] = bytes[(d * k + row) * n + j] }
                }
                let ones = [Float](repeating: 1, count: panels * nr)
                func blob<T>(_ values: [T], _ dtype: DataType, _ shape: [Int]) -> WeightBlob {
                    WeightBlob(dtype: dtype, shape: shape, data: ByteStorage(values.withUnsafeBytes { Array($0) }))
                }
                let weight = Weight(name: "\(name)[\(d)]", dtype: .float32, shape: [k, n], encoding: .quantized(QuantizedWeight(
                    data: blob(data, m.scalarType, [panels, k, nr]), scale: blob(ones, .float32, [1, panels * nr]),
                    zeroPoint: blob(zeroRow, .float32, [1, panels * nr]))))
                gemms.append(try PackedGEMM(weight: weight, kernel: id))
            }
            return (gemms, columnScales)
        }
        let (w, ws) = try matrix(1, "W", scale: 8), (r, rs) = try matrix(2, "R", scale: 10)
        guard r[0].k == hidden else { throw OpError("R has \(r[0].k) rows, expected hidden_size \(hidden)") }
        return QuantizedWeights(w: w, r: r, wScale: ws, rScale: rs)
    }
}
