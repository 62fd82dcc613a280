import KilnFormat

/// Turns stored weights into the arrays the interpreter computes with: float types
/// widened to float32, compressed weights decoded per specs/package-format.md.
enum Weights {
    /// The weight's dense value.
    static func decode(_ w: Weight) throws -> NDArray {
        // The layouts below are a package's; a weight laid out otherwise (a mutated artifact's)
        // is an error here, not an out-of-bounds read.
        do {
            try w.validateEncoding()
        } catch let e as PackageError {
            throw OpError("\(e.field.map { "\($0): " } ?? "")\(e.reason)")
        }
        switch w.encoding {
        case .dense(let b):
            return try widened(NDArray(shape: b.shape, scalarType: b.dtype, borrowing: b.data))
        case .quantized(let q):
            let n = w.elementCount
            let ints = integers(q.data, count: n)
            let scale = try floats(q.scale)
            let zero = q.zeroPoint.map { integers($0, count: $0.shape.reduce(1, *)) }
            let block = blockIndex(w.shape, q.scale.shape)
            return NDArray.make(w.shape, Float.self) { out in
                for i in 0 ..< n {
                    let b = block(i)
                    out[i] = scale[b] * Float(ints[i] - (zero?[b] ?? 0))
                }
            }
        case .palettized(let p):
            let n = w.elementCount
            let bits = p.indices.dtype.bitWidth
            let idx = integers(p.indices, count: n)
            let lut = try floats(p.lut)
            let entries = 1 << bits
            let group = blockIndex(w.shape, Array(p.lut.shape.dropLast()))
            let scale = try p.scale.map(floats)
            let scaleBlock = p.scale.map { blockIndex(w.shape, $0.shape) }
            return NDArray.make(w.shape, Float.self) { out in
                for i in 0 ..< n {
                    var v = lut[group(i) * entries + idx[i]]
                    if let scale, let scaleBlock { v *= scale[scaleBlock(i)] }
                    out[i] = v
                }
            }
        }
    }

    /// float16, bfloat16 and float64 arrays as float32; other types unchanged.
    static func widened(_ x: NDArray) throws -> NDArray {
        switch x.scalarType {
        case .float16, .bfloat16, .float64:
            let values = try floats(WeightBlob(dtype: x.scalarType, shape: x.shape, data: ByteStorage(x.bytes)))
            return NDArray(shape: x.shape, scalars: values)
        default:
            return x
        }
    }

    /// A blob's values as float32.
    static func floats(_ b: WeightBlob) throws -> [Float] {
        let n = b.shape.reduce(1, *)
        let raw = b.data.bytes
        switch b.dtype {
        case .float32: return Array(raw.bindMemory(to: Float.self).prefix(n))
        case .float16: return (0 ..< n).map { Float(Float16(bitPattern: raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self))) }
        case .bfloat16: return (0 ..< n).map { Precision.bfloat16ToFloat(raw.loadUnaligned(fromByteOffset: 2 * $0, as: UInt16.self)) }
        case .float64: return (0 ..< n).map { Float(raw.loadUnaligned(fromByteOffset: 8 * $0, as: Double.self)) }
        default: throw OpError("expected a float blob, got \(b.dtype.rawValue)")
        }
    }

    /// A blob's integer values (int8, uint8, int4, uint1…uint8).
    static func integers(_ b: WeightBlob, count: Int) -> [Int] {
        switch b.dtype {
        case .int8: return b.data.bytes.prefix(count).map { Int(Int8(bitPattern: $0)) }
        case .uint8: return b.data.bytes.prefix(count).map { Int($0) }
        default: return PackedBits.unpack(b.data.bytes, bits: b.dtype.bitWidth, count: count, signed: b.dtype == .int4)
        }
    }

    /// Maps a flat element index of `shape` to the flat index of its block in `blocks`,
    /// where each of `blocks`' dims divides the matching dim of `shape`.
    static func blockIndex(_ shape: [Int], _ blocks: [Int]) -> (Int) -> Int {
        let strides = stridesOf(shape), blockStrides = stridesOf(blocks)
        let sizes = zip(shape, blocks).map { $1 == 0 ? 1 : $0 / $1 }
        return { i in
            var b = 0
            for d in 0 ..< shape.count {
                b += (i / strides[d] % shape[d]) / sizes[d] * blockStrides[d]
            }
            return b
        }
    }
}

/// Decoding of stored weights for other modules (the compiler packs compressed weights
/// from these pieces; the executor decodes weights no kernel reads compressed).
public enum WeightDecoding {
    /// The weight's dense value as float32 (or its integer type), decoding compressed encodings.
    /// - Parameter w: The weight.
    /// - Returns: The array.
    /// - Throws: ``OpError`` when the encoding's blobs do not fit.
    public static func dense(_ w: Weight) throws -> NDArray { try Weights.decode(w) }

    /// A blob's values as integers (sub-byte types unpacked LSB-first).
    /// - Parameters:
    ///   - blob: An integer blob.
    ///   - count: How many values.
    /// - Returns: The values.
    public static func integers(_ blob: WeightBlob, count: Int) -> [Int] { Weights.integers(blob, count: count) }

    /// A blob's values as float32.
    /// - Parameter blob: A float blob.
    /// - Returns: The values.
    /// - Throws: ``OpError`` for a non-float blob.
    public static func floats(_ blob: WeightBlob) throws -> [Float] { try Weights.floats(blob) }

    /// Maps a flat element index of `shape` to the flat index of its block in a blockwise
    /// parameter of `blockShape` (each dim 1, equal, or a divisor).
    /// - Parameters:
    ///   - shape: The weight's shape.
    ///   - blockShape: The parameter's shape.
    /// - Returns: The mapping.
    public static func blockIndex(_ shape: [Int], _ blockShape: [Int]) -> (Int) -> Int { Weights.blockIndex(shape, blockShape) }
}
