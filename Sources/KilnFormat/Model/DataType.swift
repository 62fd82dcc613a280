/// The element type of a tensor, a weight or a weight's storage blob.
///
/// Sub-byte types (`int4`, `uint1` … `uint6`) only appear as the storage type
/// of compressed weight blobs; they are packed least-significant bit first.
public enum DataType: String, Sendable, CaseIterable, Hashable, Codable {
    case float32, float16, bfloat16, float64
    case int64, int32, int16, int8, uint8, bool
    case uint16, uint32, uint64
    case int4, uint1, uint2, uint3, uint4, uint6

    /// Bits one element occupies in storage.
    public var bitWidth: Int {
        switch self {
        case .float32, .int32, .uint32: return 32
        case .float16, .bfloat16, .int16, .uint16: return 16
        case .int64, .float64, .uint64: return 64
        case .int8, .uint8, .bool: return 8
        case .int4, .uint4: return 4
        case .uint1: return 1
        case .uint2: return 2
        case .uint3: return 3
        case .uint6: return 6
        }
    }

    /// Whether elements are smaller than a byte and packed LSB-first.
    public var isSubByte: Bool { bitWidth < 8 }

    /// Whether the type holds floating-point numbers.
    public var isFloatingPoint: Bool {
        self == .float32 || self == .float16 || self == .bfloat16 || self == .float64
    }

    /// Bytes needed to store `count` elements (sub-byte types packed, rounded up).
    ///
    /// - Parameter count: The number of elements.
    /// - Returns: The byte count, or `nil` when it does not fit in `Int`.
    public func byteCount(elements count: Int) -> Int? {
        let (bits, overflow) = count.multipliedReportingOverflow(by: bitWidth)
        if overflow || count < 0 { return nil }
        return bits / 8 + (bits % 8 == 0 ? 0 : 1)
    }
}
