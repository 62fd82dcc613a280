import KilnFormat

/// Linear quantization with coremltools' arithmetic (specs/compression.md): the same
/// ranges, scales, zero points and rounding, computed in the weight's own float type.
enum LinearQuantizer {
    /// Integer range of a storage type in a mode.
    static func range(_ dtype: String, symmetric: Bool) -> (min: Int, max: Int, bits: Int, signed: Bool) {
        let bits = dtype.hasSuffix("8") ? 8 : 4
        let signed = dtype.hasPrefix("int")
        let levels = 1 << bits
        var (lo, hi) = signed ? (-levels / 2, levels / 2 - 1) : (0, levels - 1)
        if symmetric { if signed { lo += 1 } else { hi -= 1 } }
        return (lo, hi, bits, signed)
    }

    struct Result {
        var weight: QuantizedWeight
        /// The values the encoding decodes to, for error measurement.
        var decoded: [Float]
    }

    /// Quantizes `values` (C order, `shape`) with one scale (and zero point) per block of `blockShape`,
    /// where `blockShape[d]` divides `shape[d]` and gives the number of blocks along dim `d`.
    static func quantize<T: BinaryFloatingPoint & NDArrayScalar>(_ values: UnsafeBufferPointer<T>, shape: [Int], blocks: [Int],
                                                               dtype: String, symmetric: Bool) -> Result {
        let r = range(dtype, symmetric: symmetric)
        let blockOf = blockIndexer(shape, blocks)
        let blockCount = blocks.reduce(1, *)
        var lo = [T](repeating: .infinity, count: blockCount), hi = [T](repeating: -.infinity, count: blockCount)
        for i in 0 ..< values.count {
            let b = blockOf(i), v = values[i]
            if v < lo[b] { lo[b] = v }
            if v > hi[b] { hi[b] = v }
        }
        var scale = [T](repeating: 0, count: blockCount), zero = [T](repeating: 0, count: blockCount)
        let span = T(r.max - r.min)
        for b in 0 ..< blockCount {
            var (vmin, vmax) = (lo[b], hi[b])
            if symmetric {
                let m = max(abs(vmin), abs(vmax))
                (vmin, vmax) = (-m, m)
            } else {
                vmin = min(0, vmin)
                vmax = max(0, vmax)
            }
            scale[b] = (vmax - vmin) / span
            if symmetric {
                zero[b] = r.signed ? 0 : T(r.max / 2)
            } else if vmax - vmin > 0 {
                let z = (T(r.min) * vmax - T(r.max) * vmin) / (vmax - vmin)
                zero[b] = min(max(z.rounded(.toNearestOrEven), T(r.min)), T(r.max))
            } else {
                zero[b] = min(max(0, T(r.min)), T(r.max))
            }
        }
        var q = [Int](repeating: 0, count: values.count)
        var decoded = [Float](repeating: 0, count: values.count)
        for i in 0 ..< values.count {
            let b = blockOf(i)
            let s = scale[b]
            var v: T
            if s == 0 {
                v = zero[b]
            } else {
                v = (values[i] / s).rounded(.toNearestOrEven) + zero[b]
            }
            v = min(max(v, T(r.min)), T(r.max))
            q[i] = Int(v)
            decoded[i] = Float(s) * Float(q[i] - Int(zero[b]))
        }
        let storage: DataType = dtype == "int8" ? .int8 : dtype == "uint8" ? .uint8 : dtype == "int4" ? .int4 : .uint4
        let zeroInts = zero.map { Int($0) }
        let zeroPoint: WeightBlob? = symmetric && r.signed ? nil
            : WeightBlob(dtype: storage, shape: blocks, data: ByteStorage(pack(zeroInts, storage)))
        let scaleBytes = scale.withUnsafeBytes { Array($0) }
        return Result(
            weight: QuantizedWeight(
                data: WeightBlob(dtype: storage, shape: shape, data: ByteStorage(pack(q, storage))),
                scale: WeightBlob(dtype: T.scalarType, shape: blocks, data: ByteStorage(scaleBytes)),
                zeroPoint: zeroPoint),
            decoded: decoded)
    }

    static func pack(_ values: [Int], _ dtype: DataType) -> [UInt8] {
        switch dtype {
        case .int8: return values.map { UInt8(bitPattern: Int8($0)) }
        case .uint8: return values.map { UInt8($0) }
        default: return PackedBits.pack(values, bits: 4)
        }
    }

    /// Maps a flat element index of `shape` to its block's flat index.
    static func blockIndexer(_ shape: [Int], _ blocks: [Int]) -> (Int) -> Int {
        var strides = [Int](repeating: 1, count: shape.count), blockStrides = strides
        for d in stride(from: shape.count - 2, through: 0, by: -1) {
            strides[d] = strides[d + 1] * shape[d + 1]
            blockStrides[d] = blockStrides[d + 1] * blocks[d + 1]
        }
        let sizes = zip(shape, blocks).map { $0 / max($1, 1) }
        if blocks.allSatisfy({ $0 == 1 }) { return { _ in 0 } }
        return { i in
            var b = 0
            for d in 0 ..< shape.count where blocks[d] > 1 {
                b += (i / strides[d] % shape[d]) / sizes[d] * blockStrides[d]
            }
            return b
        }
    }
}
