import KilnFormat

/// How big a run may get, and the inputs it runs on.
enum Sizes {
    /// Elements of any one input.
    static let inputCap = 1 << 16
    /// Elements of any one declared value (symbolic dims counted as 4, the most they are bound to).
    static let valueCap = 1 << 22

    /// Elements of `shape` with symbols counted as `symbol`, saturating past `cap`.
    static func count(_ shape: [Dimension], symbol: Int, cap: Int) -> Int {
        var n = 1
        for d in shape {
            let k = d.size ?? symbol
            if k == 0 { return 0 }
            guard n <= cap / k else { return cap + 1 }
            n *= k
        }
        return n
    }

    /// Whether every value the main function declares is small enough to run.
    static func runnable(_ model: PortableModel) -> Bool {
        model.functions.allSatisfy { f in
            f.inputs.allSatisfy { count($0.type.shape, symbol: 4, cap: inputCap) <= inputCap }
                && f.operations.allSatisfy { op in
                    op.outputs.allSatisfy { count($0.type.shape, symbol: 4, cap: valueCap) <= valueCap }
                }
        }
    }

    /// The size a symbol is bound to: 1–4, from its name and the input's seed (the same name
    /// gets the same size in every input of a run, so broadcasts line up).
    static func size(of symbol: String, seed: UInt8) -> Int {
        var h: UInt32 = 2_166_136_261
        for b in symbol.utf8 { h = (h ^ UInt32(b)) &* 16_777_619 }
        return 1 + Int((h ^ UInt32(seed)) % 4)
    }

    /// Inputs for `descriptors` (name, shape, element type): symbolic dims bound by
    /// ``size(of:seed:)``, values small and seeded (integers in -2…5, so some index past an
    /// axis); `nil` when an input would hold more than ``inputCap`` elements.
    static func inputs(_ descriptors: [(String, [Dimension], DataType)], seed: UInt8) -> [String: NDArray]? {
        var rng = SplitMix64(seed: UInt64(seed))
        var inputs: [String: NDArray] = [:]
        for (name, dims, dtype) in descriptors {
            let shape = dims.map { $0.size ?? size(of: $0.displayText, seed: seed) }
            let n = count(shape.map { .size($0) }, symbol: 1, cap: inputCap)
            guard n <= inputCap, !dtype.isSubByte else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(n * dtype.bitWidth / 8)
            for _ in 0 ..< n { append(&bytes, dtype, &rng) }
            inputs[name] = NDArray(shape: shape, scalarType: dtype, borrowing: ByteStorage(bytes))
        }
        return inputs
    }

    /// One element of `dtype`, little-endian.
    static func append(_ bytes: inout [UInt8], _ dtype: DataType, _ rng: inout SplitMix64) {
        func le<T: FixedWidthInteger>(_ v: T) { withUnsafeBytes(of: v.littleEndian) { bytes += $0 } }
        let x = rng.unit() * 4 - 2, k = rng.below(8) - 2
        switch dtype {
        case .float32: le(Float(x).bitPattern)
        case .float64: le(x.bitPattern)
        case .float16: le(Float16(x).bitPattern)
        case .bfloat16: le(UInt16(Float(x).bitPattern >> 16))
        case .int64: le(Int64(k))
        case .int32: le(Int32(k))
        case .int16: le(Int16(k))
        case .int8: le(Int8(k))
        case .uint8: le(UInt8(k + 2))
        case .uint16: le(UInt16(k + 2))
        case .uint32: le(UInt32(k + 2))
        case .uint64: le(UInt64(k + 2))
        case .bool: le(UInt8(k & 1))
        case .int4, .uint1, .uint2, .uint3, .uint4, .uint6: break
        }
    }
}
