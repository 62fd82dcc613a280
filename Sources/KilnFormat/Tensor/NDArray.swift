/// Memory behind one or more ``NDArray`` values.
final class NDStorage: @unchecked Sendable {
    let base: UnsafeMutableRawPointer
    let byteCount: Int
    /// Set when the memory belongs to someone else (a mapped weight); never written.
    let borrowed: ByteStorage?

    /// The block's size (``BlockRecycler``'s class of `byteCount`); 0 for borrowed memory.
    private let capacity: Int

    init(byteCount: Int, zeroed: Bool = true) {
        capacity = BlockRecycler.capacity(for: byteCount)
        base = BlockRecycler.take(capacity)
        if zeroed { base.initializeMemory(as: UInt8.self, repeating: 0, count: max(byteCount, 1)) }
        self.byteCount = byteCount
        borrowed = nil
    }

    init(borrowing bytes: ByteStorage) {
        base = UnsafeMutableRawPointer(mutating: bytes.baseAddress)
        byteCount = bytes.count
        borrowed = bytes
        capacity = 0
    }

    deinit {
        if borrowed == nil { BlockRecycler.give(base, capacity) }
    }
}

/// An n-dimensional array of one element type: the values functions take and return.
///
/// An `NDArray` is read-only; writes go through ``mutableView(as:_:)``, which copies
/// first when the memory is shared (copy-on-write). Views made by ``transposed(_:)``
/// share memory and may not be contiguous; ``contiguousElements`` is `nil` for them.
public struct NDArray: @unchecked Sendable {
    /// The dimensions, outermost first.
    public private(set) var shape: [Int]
    /// The element type.
    public let scalarType: DataType
    /// Element strides per dimension.
    public private(set) var strides: [Int]
    var offset: Int
    var storage: NDStorage

    /// A zero-filled contiguous array.
    /// - Parameters:
    ///   - shape: The dimensions (each ≥ 0).
    ///   - scalarType: The element type (not a sub-byte type).
    public init(shape: [Int], scalarType: DataType) {
        precondition(!scalarType.isSubByte, "NDArray cannot hold \(scalarType.rawValue)")
        let count = KilnFormat.elementCount(shape) ?? 0
        precondition(shape.allSatisfy { $0 >= 0 } && KilnFormat.elementCount(shape) != nil, "invalid shape \(shape)")
        self.shape = shape
        self.scalarType = scalarType
        strides = NDArray.contiguousStrides(shape)
        offset = 0
        storage = NDStorage(byteCount: count * scalarType.bitWidth / 8)
    }

    /// A contiguous array whose memory the caller fills before anyone reads it (kernels
    /// that write every element).
    package init(uninitializedShape shape: [Int], scalarType: DataType) {
        let count = KilnFormat.elementCount(shape) ?? 0
        precondition(!scalarType.isSubByte && shape.allSatisfy { $0 >= 0 })
        self.shape = shape
        self.scalarType = scalarType
        strides = NDArray.contiguousStrides(shape)
        offset = 0
        storage = NDStorage(byteCount: count * scalarType.bitWidth / 8, zeroed: false)
    }

    /// The first element's address. Only for contiguous arrays the caller keeps alive;
    /// writes only to arrays the caller just created.
    package var unsafeBase: UnsafeMutableRawPointer { storage.base + offset * elementSize }

    /// A contiguous array holding `scalars` in C order.
    /// - Parameters:
    ///   - shape: The dimensions; their product must equal `scalars.count`.
    ///   - scalars: The values.
    public init<T: NDArrayScalar>(shape: [Int], scalars: [T]) {
        self.init(shape: shape, scalarType: T.scalarType)
        precondition(scalars.count == elementCount, "\(scalars.count) values do not fill shape \(shape)")
        scalars.withUnsafeBytes { storage.base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
    }

    /// A scalar (rank 0) array.
    public init<T: NDArrayScalar>(scalar: T) {
        self.init(shape: [], scalars: [scalar])
    }

    /// An array over existing bytes (a weight blob), without copying.
    /// - Parameters:
    ///   - shape: The dimensions.
    ///   - scalarType: The element type of `bytes`.
    ///   - bytes: Exactly `elementCount × size` bytes.
    public init(shape: [Int], scalarType: DataType, borrowing bytes: ByteStorage) {
        precondition(KilnFormat.elementCount(shape).map { $0 * scalarType.bitWidth / 8 } == bytes.count)
        self.shape = shape
        self.scalarType = scalarType
        strides = NDArray.contiguousStrides(shape)
        offset = 0
        storage = NDStorage(borrowing: bytes)
    }

    static func contiguousStrides(_ shape: [Int]) -> [Int] {
        var strides = [Int](repeating: 1, count: shape.count)
        var s = 1
        for i in shape.indices.reversed() {
            strides[i] = s
            // Wrapping: the product only overflows for an empty array (a 0 dim beside huge ones,
            // whose element count is 0), and no stride of an empty array is ever used.
            s &*= max(shape[i], 1)
        }
        return strides
    }

    /// The number of dimensions.
    public var rank: Int { shape.count }

    /// The number of elements.
    public var elementCount: Int { shape.reduce(1, *) }

    /// Bytes per element.
    public var elementSize: Int { scalarType.bitWidth / 8 }

    /// Whether elements lie in C order without gaps.
    public var isContiguous: Bool {
        if shape.contains(0) { return true }
        var expected = 1
        for i in shape.indices.reversed() where shape[i] != 1 {
            if strides[i] != expected { return false }
            expected *= shape[i]
        }
        return true
    }

    /// The elements' bytes in C order, or `nil` when the layout is not contiguous.
    /// The pointer is valid only while this array is alive; prefer ``withUnsafeBytes(_:)``.
    public var contiguousElements: UnsafeRawBufferPointer? {
        guard isContiguous else { return nil }
        return UnsafeRawBufferPointer(start: storage.base + offset * elementSize, count: elementCount * elementSize)
    }

    /// Typed access to contiguous elements, or `nil` when the layout is not contiguous.
    /// - Parameter type: The element type; must match ``scalarType``.
    public func contiguousElements<T: NDArrayScalar>(as type: T.Type) -> UnsafeBufferPointer<T>? {
        precondition(T.scalarType == scalarType, "NDArray holds \(scalarType.rawValue), not \(T.scalarType.rawValue)")
        guard isContiguous else { return nil }
        return UnsafeBufferPointer(start: (storage.base + offset * elementSize).assumingMemoryBound(to: T.self), count: elementCount)
    }

    /// All elements in C order, copied out (works for any layout).
    /// - Parameter type: The element type; must match ``scalarType``.
    public func scalars<T: NDArrayScalar>(as type: T.Type) -> [T] {
        let c = contiguous()
        return withExtendedLifetime(c) { Array(c.contiguousElements(as: T.self)!) }
    }

    /// Runs `body` with the elements' bytes in C order (copying first when not contiguous).
    /// The bytes are valid only inside `body`.
    /// - Parameter body: Receives the bytes.
    /// - Returns: What `body` returns.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        let c = contiguous()
        return try withExtendedLifetime(c) { try body(c.contiguousElements!) }
    }

    /// The elements' bytes in C order, copied out.
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }

    /// A contiguous array with the same elements (itself when already contiguous).
    public func contiguous() -> NDArray {
        if isContiguous { return self }
        var out = NDArray(shape: shape, scalarType: scalarType)
        let size = elementSize
        let dst = out.storage.base
        var index = [Int](repeating: 0, count: rank)
        let n = elementCount
        var src = offset
        for flat in 0 ..< n {
            (dst + flat * size).copyMemory(from: storage.base + src * size, byteCount: size)
            // Advance the multi-index odometer and the source offset with it.
            var d = rank - 1
            while d >= 0 {
                index[d] += 1
                src += strides[d]
                if index[d] < shape[d] { break }
                src -= strides[d] * shape[d]
                index[d] = 0
                d -= 1
            }
        }
        out.offset = 0
        return out
    }

    /// A view with dimensions permuted: result dim `i` is this array's dim `perm[i]`.
    /// - Parameter perm: A permutation of `0..<rank`.
    /// - Returns: A view sharing memory (usually not contiguous).
    public func transposed(_ perm: [Int]) -> NDArray {
        precondition(perm.sorted() == Array(0 ..< rank), "perm \(perm) is not a permutation of 0..<\(rank)")
        var v = self
        v.shape = perm.map { shape[$0] }
        v.strides = perm.map { strides[$0] }
        return v
    }

    /// The same elements with another shape of equal element count.
    /// - Parameter newShape: The new dimensions.
    /// - Returns: A view when contiguous, else a reshaped copy.
    public func reshaped(_ newShape: [Int]) -> NDArray {
        precondition(KilnFormat.elementCount(newShape) == elementCount, "cannot reshape \(shape) to \(newShape)")
        var v = contiguous()
        v.shape = newShape
        v.strides = NDArray.contiguousStrides(newShape)
        return v
    }

    /// Runs `body` with write access to the elements, in C order.
    ///
    /// The array is first made contiguous and given memory of its own when its memory is
    /// shared with another array or borrowed, so writes never show through other values.
    /// - Parameters:
    ///   - type: The element type; must match ``scalarType``.
    ///   - body: Receives a mutable buffer of ``elementCount`` elements.
    /// - Returns: What `body` returns.
    public mutating func mutableView<T: NDArrayScalar, R>(as type: T.Type, _ body: (UnsafeMutableBufferPointer<T>) throws -> R) rethrows -> R {
        precondition(T.scalarType == scalarType, "NDArray holds \(scalarType.rawValue), not \(T.scalarType.rawValue)")
        return try withUnsafeMutableBytes { raw in
            try body(raw.bindMemory(to: T.self))
        }
    }

    /// Runs `body` with write access to the elements' bytes, in C order, copying first
    /// like ``mutableView(as:_:)`` when the memory is shared or borrowed.
    /// - Parameter body: Receives the bytes of ``elementCount`` elements.
    /// - Returns: What `body` returns.
    public mutating func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) rethrows -> R {
        if !isContiguous || storage.borrowed != nil || !isKnownUniquelyReferenced(&storage) {
            let copy = NDArray(shape: shape, scalarType: scalarType)
            let src = contiguous()
            copy.storage.base.copyMemory(from: src.storage.base + src.offset * elementSize, byteCount: elementCount * elementSize)
            self = copy
        }
        return try body(UnsafeMutableRawBufferPointer(start: storage.base + offset * elementSize, count: elementCount * elementSize))
    }
}

extension NDArray: CustomStringConvertible {
    /// `NDArray(float32[2, 3])`.
    public var description: String {
        "NDArray(\(scalarType.rawValue)\(shape))"
    }
}

extension NDArray {
    /// The elements as doubles, for any numeric or bool array (bool as 0 and 1).
    /// - Returns: The values in row-major order, or `nil` for a sub-byte type.
    public func doubles() -> [Double]? {
        switch scalarType {
        case .float32: return scalars(as: Float.self).map { Double($0) }
        case .float64: return scalars(as: Double.self)
        case .float16: return scalars(as: Float16.self).map { Double(Float($0)) }
        case .bfloat16:
            return contiguous().withUnsafeBytes { raw in
                (0 ..< elementCount).map { Double(Float(bitPattern: UInt32(raw.load(fromByteOffset: 2 * $0, as: UInt16.self)) << 16)) }
            }
        case .int64: return scalars(as: Int64.self).map { Double($0) }
        case .int32: return scalars(as: Int32.self).map { Double($0) }
        case .int16: return scalars(as: Int16.self).map { Double($0) }
        case .int8: return scalars(as: Int8.self).map { Double($0) }
        case .uint8: return scalars(as: UInt8.self).map { Double($0) }
        case .uint16: return scalars(as: UInt16.self).map { Double($0) }
        case .uint32: return scalars(as: UInt32.self).map { Double($0) }
        case .uint64: return scalars(as: UInt64.self).map { Double($0) }
        case .bool: return scalars(as: Bool.self).map { $0 ? 1 : 0 }
        default: return nil
        }
    }
}
