/// Bytes owned by someone: a Swift array, or a region of a mapped file.
///
/// The storage is immutable once created and may be shared between threads.
public final class ByteStorage: @unchecked Sendable {
    /// The first byte.
    public let baseAddress: UnsafeRawPointer
    /// The number of bytes.
    public let count: Int
    private let owner: AnyObject?
    private let allocated: UnsafeMutableRawPointer?

    /// Copies `bytes` into new storage aligned to 64 bytes.
    /// - Parameter bytes: The bytes to keep.
    public init(copying bytes: UnsafeRawBufferPointer) {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 64)
        if let src = bytes.baseAddress, bytes.count > 0 {
            memory.copyMemory(from: src, byteCount: bytes.count)
        }
        baseAddress = UnsafeRawPointer(memory)
        count = bytes.count
        owner = nil
        allocated = memory
    }

    /// Copies an array of bytes into new storage.
    /// - Parameter bytes: The bytes to keep.
    public init(_ bytes: [UInt8]) {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(bytes.count, 1), alignment: 64)
        bytes.withUnsafeBytes { src in
            if let base = src.baseAddress, src.count > 0 { memory.copyMemory(from: base, byteCount: src.count) }
        }
        baseAddress = UnsafeRawPointer(memory)
        count = bytes.count
        owner = nil
        allocated = memory
    }

    /// New zeroed storage of `byteCount` bytes (aligned to 64), filled in by `body`.
    /// - Parameters:
    ///   - byteCount: The size.
    ///   - body: Writes the bytes.
    /// - Throws: What `body` throws.
    public init(byteCount: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        let memory = UnsafeMutableRawPointer.allocate(byteCount: max(byteCount, 1), alignment: 64)
        memory.initializeMemory(as: UInt8.self, repeating: 0, count: max(byteCount, 1))
        do {
            try body(UnsafeMutableRawBufferPointer(start: memory, count: byteCount))
        } catch {
            memory.deallocate()
            throw error
        }
        baseAddress = UnsafeRawPointer(memory)
        count = byteCount
        owner = nil
        allocated = memory
    }

    /// Wraps memory kept alive by `owner` (for example a mapped file), without copying.
    package init(borrowing base: UnsafeRawPointer, count: Int, owner: AnyObject) {
        baseAddress = base
        self.count = count
        self.owner = owner
        allocated = nil
    }

    deinit { allocated?.deallocate() }

    /// For storage read in place from a package's weights file: drops the process's resident
    /// copies of the whole pages inside `byteRange` (of this storage), which are read again when
    /// next touched. A pass that streams a large weight uses it to keep only what it is reading
    /// resident. Other storage is left as it is.
    /// - Parameter byteRange: The bytes, relative to `baseAddress`.
    public func releaseResidentPages(_ byteRange: Range<Int>) {
        guard let file = owner as? MappedFile, let fileBase = file.base else { return }
        let offset = fileBase.distance(to: baseAddress)
        let clamped = max(byteRange.lowerBound, 0) ..< min(byteRange.upperBound, count)
        guard !clamped.isEmpty else { return }
        file.releaseResidentPages(offset + clamped.lowerBound ..< offset + clamped.upperBound)
    }

    /// The bytes as a buffer.
    public var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: baseAddress, count: count) }
}

/// A typed tensor stored as raw bytes: a dense weight, or one part of a compressed one.
public struct WeightBlob: Sendable {
    /// The storage element type.
    public var dtype: DataType
    /// The storage shape.
    public var shape: [Int]
    /// The packed little-endian bytes.
    public var data: ByteStorage

    /// Creates a blob.
    public init(dtype: DataType, shape: [Int], data: ByteStorage) {
        self.dtype = dtype
        self.shape = shape
        self.data = data
    }
}

/// `value = scale * (data - zeroPoint)`, scale and zero point broadcast blockwise.
public struct QuantizedWeight: Sendable {
    /// Integers (`int8`, `uint8`, `int4`, `uint4`) with the weight's shape.
    public var data: WeightBlob
    /// Scales; same rank as the weight, each dim dividing the weight's.
    public var scale: WeightBlob
    /// Zero points shaped like `scale` and typed like `data`; `nil` means zero.
    public var zeroPoint: WeightBlob?

    /// Creates a quantized encoding.
    public init(data: WeightBlob, scale: WeightBlob, zeroPoint: WeightBlob?) {
        self.data = data
        self.scale = scale
        self.zeroPoint = zeroPoint
    }
}

/// `value = lut[group][indices] (* scale)`.
public struct PalettizedWeight: Sendable {
    /// Table indices (`uint1` … `uint6`, `uint8`) with the weight's shape.
    public var indices: WeightBlob
    /// Look-up tables: the weight's rank plus one trailing dim of `2^bits` entries.
    public var lut: WeightBlob
    /// Optional per-channel scale applied after look-up.
    public var scale: WeightBlob?

    /// Creates a palettized encoding.
    public init(indices: WeightBlob, lut: WeightBlob, scale: WeightBlob?) {
        self.indices = indices
        self.lut = lut
        self.scale = scale
    }
}

/// How a weight's values are stored.
public enum WeightEncoding: Sendable {
    case dense(WeightBlob)
    case quantized(QuantizedWeight)
    case palettized(PalettizedWeight)

    /// The blobs of this encoding, in manifest order.
    public var blobs: [WeightBlob] {
        switch self {
        case .dense(let b): return [b]
        case .quantized(let q): return [q.data, q.scale] + (q.zeroPoint.map { [$0] } ?? [])
        case .palettized(let p): return [p.indices, p.lut] + (p.scale.map { [$0] } ?? [])
        }
    }

    /// A short name of the storage kind: `dense`, `quantized` or `palettized`.
    public var kindName: String {
        switch self {
        case .dense: return "dense"
        case .quantized: return "quantized"
        case .palettized: return "palettized"
        }
    }
}

/// A named constant tensor in the model's shared weight pool.
public struct Weight: Sendable {
    /// The weight's name, unique in the model.
    public var name: String
    /// The logical (dense) element type.
    public var dtype: DataType
    /// The logical shape.
    public var shape: [Int]
    /// How the values are stored.
    public var encoding: WeightEncoding

    /// Creates a weight.
    public init(name: String, dtype: DataType, shape: [Int], encoding: WeightEncoding) {
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.encoding = encoding
    }

    /// The weight's type as a value in a function.
    public var type: TensorType { TensorType(dtype, shape.map { .size($0) }) }

    /// Dense element count (a compressed weight counts its decoded elements).
    public var elementCount: Int { KilnFormat.elementCount(shape) ?? 0 }

    /// Bytes of all its blobs.
    public var storedBytes: Int { encoding.blobs.reduce(0) { $0 + $1.data.count } }

    /// The storage type shown to people: `float32`, or `int8 (quantized)`.
    public var storageDescription: String {
        switch encoding {
        case .dense(let b): return b.dtype.rawValue
        case .quantized(let q): return "\(q.data.dtype.rawValue) quantized"
        case .palettized(let p): return "\(p.indices.dtype.rawValue) palettized"
        }
    }
}
