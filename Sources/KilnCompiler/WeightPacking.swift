import KilnFormat
import KilnReference

/// Packs a GEMM weight operand B (K × N) into panels of `nr` columns, each panel K rows of
/// `nr` entries (the last zero-padded): the layout the arch's GEMM microkernel streams.
///
/// Dense float weights become float32 panels. Compressed weights stay compressed:
/// linear-quantized ones as 8-bit integer panels, or 4-bit ones packed along K (eight per
/// word, `int32`/`uint32` blobs by signedness), with float32 scale and zero point per
/// (K block, column), panel by panel ([panels, K blocks, nr]); palettized ones as indices packed along K (32 / nbits per word) with
/// their tables and optional per-column scale. A compressed weight whose blocks do not
/// follow (K block, column) is packed dense.
package enum WeightPacking {
    /// Reads element (k, n) of the weight from its flat index.
    struct Orientation {
        var k: Int
        var n: Int
        var flat: (Int, Int) -> Int
    }

    static func pack(_ w: Weight, name: String, _ o: Orientation, nr: Int) throws -> Weight {
        let panels = (o.n + nr - 1) / nr
        let npad = panels * nr
        func panelOrder<T>(_ value: (Int, Int) -> T, pad: T) -> [T] {
            var out: [T] = []
            out.reserveCapacity(panels * o.k * nr)
            for p in 0 ..< panels { for k in 0 ..< o.k { for j in 0 ..< nr {
                let n = p * nr + j
                out.append(n < o.n ? value(k, n) : pad)
            } } }
            return out
        }
        func blob<T>(_ values: [T], _ dtype: DataType, _ shape: [Int]) -> WeightBlob {
            WeightBlob(dtype: dtype, shape: shape, data: ByteStorage(values.withUnsafeBytes { Array($0) }))
        }
        switch w.encoding {
        case .quantized(let q) where !q.data.dtype.isFloatingPoint:
            let ints = WeightDecoding.integers(q.data, count: w.elementCount)
            let scale = try WeightDecoding.floats(q.scale)
            let block = WeightDecoding.blockIndex(w.shape, q.scale.shape)
            let zero = q.zeroPoint.map { WeightDecoding.integers($0, count: $0.shape.reduce(1, *)) }
            let zeroBlock = q.zeroPoint.map { WeightDecoding.blockIndex(w.shape, $0.shape) }
            guard let kb = Self.kBlock(o, block), zeroBlock.map({ Self.kBlock(o, $0).map { kb % $0 == 0 || $0 % kb == 0 } ?? false }) ?? true else { break }
            let kBlock = min(kb, zeroBlock.flatMap { Self.kBlock(o, $0) } ?? kb)
            let blocks = o.k / kBlock
            let signed = [.int8, .int4].contains(q.data.dtype)
            let data: WeightBlob
            if q.data.dtype.bitWidth == 4, blocks == 1 || kBlock % 8 == 0 {
                // Four-bit integers stay four bits, packed along K (eight per word).
                let words = kPacked(o, nr: nr, bits: 4) { UInt32(truncatingIfNeeded: ints[o.flat($0, $1)]) & 15 }
                data = blob(words, signed ? .int32 : .uint32, [panels, (o.k + 7) / 8, nr])
            } else if signed {
                data = blob(panelOrder({ Int8(ints[o.flat($0, $1)]) }, pad: 0), .int8, [panels, o.k, nr])
            } else {
                data = blob(panelOrder({ UInt8(ints[o.flat($0, $1)]) }, pad: 0), .uint8, [panels, o.k, nr])
            }
            // Scales and zero points panel by panel, [panels, K blocks, nr]: beside the panel's values in the stream.
            var scales = [Float](repeating: 0, count: blocks * npad), zeros = [Float](repeating: 0, count: blocks * npad)
            for b in 0 ..< blocks { for n in 0 ..< o.n {
                let i = o.flat(b * kBlock, n), at = ((n / nr) * blocks + b) * nr + n % nr
                scales[at] = scale[block(i)]
                if let zero, let zeroBlock { zeros[at] = Float(zero[zeroBlock(i)]) }
            } }
            return Weight(name: name, dtype: .float32, shape: [o.k, o.n], encoding: .quantized(QuantizedWeight(
                data: data, scale: blob(scales, .float32, [panels, blocks, nr]),
                zeroPoint: zero == nil ? nil : blob(zeros, .float32, [panels, blocks, nr]))))
        case .palettized(let p):
            let bits = p.indices.dtype.bitWidth
            let entries = 1 << bits
            guard [1, 2, 3, 4, 6, 8].contains(bits) else { break }
            let idx = WeightDecoding.integers(p.indices, count: w.elementCount)
            let lut = try WeightDecoding.floats(p.lut)
            let groups = lut.count / entries
            let group = WeightDecoding.blockIndex(w.shape, Array(p.lut.shape.dropLast()))
            guard groups >= 1, o.n % groups == 0, columnOnly(o, group) else { break }
            let groupSize = o.n / groups
            guard (0 ..< o.n).allSatisfy({ group(o.flat(0, $0)) == $0 / groupSize }) else { break }
            var columnScale: [Float]?
            if let s = p.scale {
                let values = try WeightDecoding.floats(s)
                let sb = WeightDecoding.blockIndex(w.shape, s.shape)
                guard columnOnly(o, sb) else { break }
                columnScale = (0 ..< o.n).map { values[sb(o.flat(0, $0))] }
            }
            let g = 32 / bits
            let words = kPacked(o, nr: nr, bits: bits) { UInt32(idx[o.flat($0, $1)]) }
            return Weight(name: name, dtype: .float32, shape: [o.k, o.n], encoding: .palettized(PalettizedWeight(
                indices: blob(words, .uint32, [panels, (o.k + g - 1) / g, nr]),
                lut: blob(lut, .float32, [groups, entries]),
                scale: columnScale.map { blob($0, .float32, [o.n]) })))
        default:
            break
        }
        let dense = try WeightDecoding.dense(w)
        guard dense.scalarType == .float32 else { throw CompileError("weight '\(w.name)' is \(dense.scalarType.rawValue), not a float") }
        let values = dense.scalars(as: Float.self)
        return Weight(name: name, dtype: .float32, shape: [o.k, o.n], encoding: .dense(
            blob(panelOrder({ values[o.flat($0, $1)] }, pad: Float(0)), .float32, [panels, o.k, nr])))
    }

    /// Values of `bits` bits packed along K: per panel, ceil(K / G) rows of `nr` words, word (g, j)
    /// holding column j's values for k = g·G + t at bits t·bits (G = 32 / bits; padding zero).
    static func kPacked(_ o: Orientation, nr: Int, bits: Int, _ value: (Int, Int) -> UInt32) -> [UInt32] {
        let g = 32 / bits, rows = (o.k + g - 1) / g, panels = (o.n + nr - 1) / nr
        var out = [UInt32](repeating: 0, count: panels * rows * nr)
        for p in 0 ..< panels { for j in 0 ..< nr where p * nr + j < o.n { for k in 0 ..< o.k {
            out[(p * rows + k / g) * nr + j] |= value(k, p * nr + j) << UInt32(bits * (k % g))
        } } }
        return out
    }

    /// Packs a dense convolution weight [M, C/g, kh, kw] as the GEMM's A operand, per group, in
    /// tiles of `mr` output channels: blob [groups, tiles, K, mr] with K = C/g·kh·kw, element
    /// (row i of tile t, step p) at [g][t][p][i], rows past the group's last zero. The weight keeps
    /// its logical shape; the microkernel reads one contiguous stream per tile.
    static func packRows(_ w: Weight, name: String, groups: Int, mr: Int) throws -> Weight {
        let dense = try WeightDecoding.dense(w)
        guard dense.scalarType == .float32, w.shape.count == 4, groups >= 1, w.shape[0] % groups == 0 else {
            throw CompileError("weight '\(w.name)' is not a float32 [M, C/g, kh, kw] convolution weight for \(groups) groups")
        }
        let values = dense.scalars(as: Float.self)
        let m = w.shape[0] / groups, k = w.shape[1] * w.shape[2] * w.shape[3]
        let tiles = (m + mr - 1) / mr
        var out = [Float](repeating: 0, count: groups * tiles * k * mr)
        for g in 0 ..< groups { for row in 0 ..< m {
            let (t, i) = row.quotientAndRemainder(dividingBy: mr)
            let src = (g * m + row) * k, dst = (g * tiles + t) * k * mr + i
            for p in 0 ..< k { out[dst + p * mr] = values[src + p] }
        } }
        let blob = WeightBlob(dtype: .float32, shape: [groups, tiles, k, mr], data: ByteStorage(out.withUnsafeBytes { Array($0) }))
        return Weight(name: name, dtype: .float32, shape: w.shape, encoding: .dense(blob))
    }

    /// Packs a grouped convolution weight [M, C/g, kh, kw] (float32) for channels-last indirect
    /// GEMMs: per group g its B (K × M/g, K = kh·kw·C/g in (ky, kx, c) order) in panels of `nr`,
    /// blob [groups, panels, K, nr]; the weight keeps its logical shape.
    static func packGroups(_ w: Weight, name: String, groups: Int, nr: Int) throws -> Weight {
        let dense = try WeightDecoding.dense(w)
        guard dense.scalarType == .float32, w.shape.count == 4, groups >= 1, w.shape[0] % groups == 0 else {
            throw CompileError("weight '\(w.name)' is not a float32 [M, C/g, kh, kw] convolution weight for \(groups) groups")
        }
        let values = dense.scalars(as: Float.self)
        let (m, c, kh, kw) = (w.shape[0] / groups, w.shape[1], w.shape[2], w.shape[3])
        let k = c * kh * kw, panels = (m + nr - 1) / nr
        var out = [Float](repeating: 0, count: groups * panels * k * nr)
        for g in 0 ..< groups { for p in 0 ..< panels { for kk in 0 ..< k { for j in 0 ..< nr where p * nr + j < m {
            let (tap, ch) = kk.quotientAndRemainder(dividingBy: c)
            let n = g * m + p * nr + j
            out[((g * panels + p) * k + kk) * nr + j] = values[((n * c + ch) * kh + tap / kw) * kw + tap % kw]
        } } } }
        let blob = WeightBlob(dtype: .float32, shape: [groups, panels, k, nr], data: ByteStorage(out.withUnsafeBytes { Array($0) }))
        return Weight(name: name, dtype: .float32, shape: w.shape, encoding: .dense(blob))
    }

    /// Transforms a 3×3 convolution weight [M, C, 3, 3] for Winograd F(2×2, 3×3): U = G g Gᵀ for
    /// each (output, input) channel pair (G = [1 0 0; ½ ½ ½; ½ −½ ½; 0 0 1], computed in double,
    /// rounded once), packed as 16 GEMM B operands of K = C, N = M in panels of `nr`: blob
    /// [16, panels, C, nr], element ξ = 4i + j of U at [ξ][n / nr][c][n % nr].
    static func packWinograd(_ w: Weight, name: String, nr: Int) throws -> Weight {
        let dense = try WeightDecoding.dense(w)
        guard dense.scalarType == .float32, w.shape.count == 4, w.shape[2] == 3, w.shape[3] == 3 else {
            throw CompileError("weight '\(w.name)' is not a float32 [M, C, 3, 3] convolution weight")
        }
        let values = dense.scalars(as: Float.self)
        let (m, c) = (w.shape[0], w.shape[1])
        let panels = (m + nr - 1) / nr
        let g: [[Double]] = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]
        var out = [Float](repeating: 0, count: 16 * panels * c * nr)
        for n in 0 ..< m { for ch in 0 ..< c {
            let base = (n * c + ch) * 9
            // t = G · g (4×3), then U = t · Gᵀ (4×4).
            var t = [Double](repeating: 0, count: 12)
            for i in 0 ..< 4 { for b in 0 ..< 3 { t[i * 3 + b] = (0 ..< 3).reduce(0.0) { $0 + g[i][$1] * Double(values[base + $1 * 3 + b]) } } }
            for i in 0 ..< 4 { for j in 0 ..< 4 {
                let u = (0 ..< 3).reduce(0.0) { $0 + t[i * 3 + $1] * g[j][$1] }
                out[(((i * 4 + j) * panels + n / nr) * c + ch) * nr + n % nr] = Float(u)
            } }
        } }
        let blob = WeightBlob(dtype: .float32, shape: [16, panels, c, nr], data: ByteStorage(out.withUnsafeBytes { Array($0) }))
        return Weight(name: name, dtype: .float32, shape: w.shape, encoding: .dense(blob))
    }

    /// Reorders a depthwise convolution weight [C, 1, kh, kw] to [kh, kw, C] (float32): each tap's
    /// channels contiguous, as the channels-last kernel reads them in vectors.
    static func packTaps(_ w: Weight, name: String) throws -> Weight {
        let dense = try WeightDecoding.dense(w)
        guard dense.scalarType == .float32, w.shape.count == 4, w.shape[1] == 1 else {
            throw CompileError("weight '\(w.name)' is not a float32 [C, 1, kh, kw] depthwise weight")
        }
        let values = dense.scalars(as: Float.self)
        let (c, kh, kw) = (w.shape[0], w.shape[2], w.shape[3])
        var out = [Float](repeating: 0, count: values.count)
        for ch in 0 ..< c { for t in 0 ..< kh * kw { out[t * c + ch] = values[ch * kh * kw + t] } }
        let blob = WeightBlob(dtype: .float32, shape: [kh, kw, c], data: ByteStorage(out.withUnsafeBytes { Array($0) }))
        return Weight(name: name, dtype: .float32, shape: w.shape, encoding: .dense(blob))
    }

    /// The K block size when the block of (k, n) depends only on (k / size, n); nil otherwise.
    static func kBlock(_ o: Orientation, _ block: (Int) -> Int) -> Int? {
        guard o.k > 0, o.n > 0 else { return nil }
        var size = o.k
        for k in 1 ..< max(o.k, 1) where block(o.flat(k, 0)) != block(o.flat(0, 0)) {
            size = k
            break
        }
        guard o.k % size == 0 else { return nil }
        for n in 0 ..< o.n { for k in 0 ..< o.k where block(o.flat(k, n)) != block(o.flat(k / size * size, n)) { return nil } }
        return size
    }

    /// Whether the block of (k, n) depends only on n.
    static func columnOnly(_ o: Orientation, _ block: (Int) -> Int) -> Bool {
        for n in 0 ..< o.n { for k in 1 ..< max(o.k, 1) where block(o.flat(k, n)) != block(o.flat(0, n)) { return false } }
        return true
    }
}
