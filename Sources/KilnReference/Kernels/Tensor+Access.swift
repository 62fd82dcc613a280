import KilnFormat

/// Element access helpers the reference kernels share.
extension NDArray {
    /// A new contiguous array filled by `body`.
    static func make<T: NDArrayScalar>(_ shape: [Int], _: T.Type, _ body: (UnsafeMutableBufferPointer<T>) throws -> Void) rethrows -> NDArray {
        var out = NDArray(shape: shape, scalarType: T.scalarType)
        try out.mutableView(as: T.self, body)
        return out
    }

    /// The contiguous elements as `T`; the caller keeps the array alive while it uses the
    /// pointer. A compiled plan can wire any value into any op, so a kernel never assumes
    /// an input's element type: a mismatch is an ``OpError``, not a trap.
    func elements<T: NDArrayScalar>(_: T.Type) throws -> UnsafeBufferPointer<T> {
        guard scalarType == T.scalarType else {
            throw OpError("expected a \(T.scalarType.rawValue) tensor, got \(scalarType.rawValue)")
        }
        guard let p = contiguousElements(as: T.self) else { throw OpError("tensor is not contiguous") }
        return p
    }

    /// All elements as `T`, copied out in C order (any layout); a different element type is
    /// an ``OpError``.
    func values<T: NDArrayScalar>(_: T.Type) throws -> [T] {
        guard scalarType == T.scalarType else {
            throw OpError("expected a \(T.scalarType.rawValue) tensor, got \(scalarType.rawValue)")
        }
        return scalars(as: T.self)
    }

    /// Float32 elements (see ``elements(_:)``).
    var f32: UnsafeBufferPointer<Float> { get throws { try elements(Float.self) } }

    /// The elements as `Int`s (int64, int32, int16, int8, uint8 or bool arrays).
    func intValues() throws -> [Int] {
        let c = contiguous()
        return try withExtendedLifetime(c) { try c.intValuesOfContiguous() }
    }

    private func intValuesOfContiguous() throws -> [Int] {
        let c = self
        switch scalarType {
        case .int64: return try c.elements(Int64.self).map { Int($0) }
        case .int32: return try c.elements(Int32.self).map { Int($0) }
        case .int16: return try c.elements(Int16.self).map { Int($0) }
        case .int8: return try c.elements(Int8.self).map { Int($0) }
        case .uint8: return try c.elements(UInt8.self).map { Int($0) }
        case .uint16: return try c.elements(UInt16.self).map { Int($0) }
        case .uint32: return try c.elements(UInt32.self).map { Int($0) }
        // Values above Int64.max wrap (indices and shapes never hold them).
        case .uint64: return try c.elements(UInt64.self).map { Int(truncatingIfNeeded: $0) }
        case .bool: return try c.elements(Bool.self).map { $0 ? 1 : 0 }
        case .float32: return try c.elements(Float.self).map {
            guard let v = Int(exactly: $0.rounded(.towardZero)) else { throw OpError("value \($0) is not an integer") }
            return v
        }
        default: throw OpError("expected an integer tensor, got \(scalarType.rawValue)")
        }
    }

    /// The elements as `Double`s (any numeric array).
    func doubleValues() throws -> [Double] {
        guard let values = doubles() else { throw OpError("expected a numeric tensor, got \(scalarType.rawValue)") }
        return values
    }

    /// An int64 array of `values`.
    static func int64(_ values: [Int], shape: [Int]? = nil) -> NDArray {
        NDArray(shape: shape ?? [values.count], scalars: values.map { Int64($0) })
    }
}

/// The largest result the reference interpreter allocates (2^28 elements, 1 GiB of
/// float32); a shape beyond it comes from bad parameters, not a real model.
let maximumElements = 1 << 28

/// Checks that a result shape computed from parameters is sane before allocating it.
func checkedShape(_ shape: [Int]) throws -> [Int] {
    guard shape.allSatisfy({ $0 >= 0 }), let n = elementCount(shape), n <= maximumElements else {
        throw OpError("result shape \(shape) is negative or too large")
    }
    return shape
}

/// Row-major strides of a shape.
func stridesOf(_ shape: [Int]) -> [Int] {
    var s = [Int](repeating: 1, count: shape.count)
    var acc = 1
    for i in shape.indices.reversed() {
        s[i] = acc
        acc *= shape[i]
    }
    return s
}

/// Copies elements by source index: `out[i] = src[indices[i]]`, for any element type.
func gatherFlat(_ src: NDArray, _ indices: [Int], shape: [Int]) -> NDArray {
    let x = src.contiguous()
    defer { withExtendedLifetime(x) {} }
    var out = NDArray(shape: shape, scalarType: src.scalarType)
    let size = src.elementSize
    let from = x.contiguousElements!.baseAddress!
    out.withUnsafeMutableBytes { dst in
        let d = dst.baseAddress!
        switch size {
        case 4:
            let (s, t) = (from.assumingMemoryBound(to: UInt32.self), d.assumingMemoryBound(to: UInt32.self))
            for (i, j) in indices.enumerated() { t[i] = s[j] }
        case 8:
            let (s, t) = (from.assumingMemoryBound(to: UInt64.self), d.assumingMemoryBound(to: UInt64.self))
            for (i, j) in indices.enumerated() { t[i] = s[j] }
        case 1:
            let (s, t) = (from.assumingMemoryBound(to: UInt8.self), d.assumingMemoryBound(to: UInt8.self))
            for (i, j) in indices.enumerated() { t[i] = s[j] }
        default:
            for (i, j) in indices.enumerated() { (d + i * size).copyMemory(from: from + j * size, byteCount: size) }
        }
    }
    return out
}

/// Visits every index of `shape` in C order, giving the flat offset into each of
/// `strides` (one stride list per operand, 0 where an operand broadcasts).
func forEachIndex(_ shape: [Int], _ strides: [[Int]], _ body: (Int, [Int]) -> Void) {
    let n = shape.reduce(1, *)
    guard n > 0 else { return }
    let rank = shape.count
    var index = [Int](repeating: 0, count: rank)
    var offsets = [Int](repeating: 0, count: strides.count)
    for flat in 0 ..< n {
        body(flat, offsets)
        var d = rank - 1
        while d >= 0 {
            index[d] += 1
            for k in offsets.indices { offsets[k] += strides[k][d] }
            if index[d] < shape[d] { break }
            for k in offsets.indices { offsets[k] -= strides[k][d] * shape[d] }
            index[d] = 0
            d -= 1
        }
    }
}

/// Strides of `shape` broadcast to `outShape` (0 on broadcast dims).
func broadcastStrides(_ shape: [Int], to outShape: [Int]) -> [Int] {
    let own = stridesOf(shape)
    let pad = outShape.count - shape.count
    return outShape.indices.map { i in
        i < pad ? 0 : (shape[i - pad] == 1 && outShape[i] != 1 ? 0 : own[i - pad])
    }
}

/// NumPy broadcast of fixed shapes.
func broadcastShapes(_ shapes: [[Int]]) throws -> [Int] {
    let rank = shapes.map(\.count).max() ?? 0
    var out = [Int](repeating: 1, count: rank)
    for s in shapes {
        let pad = rank - s.count
        for (i, d) in s.enumerated() {
            let o = out[i + pad]
            if o == 1 { out[i + pad] = d } else if d != 1 && d != o {
                throw OpError("shapes \(shapes.map { "\($0)" }.joined(separator: " and ")) cannot broadcast")
            }
        }
    }
    return out
}
