import CKilnHash
import CZlib

/// CRC-32 with the zlib polynomial, as stored for every blob and manifest: carry-less
/// multiplication folding (x86-64 PCLMULQDQ) or the CRC32 instructions (arm64) where the CPU has
/// them, zlib's tables for the rest.
/// - Parameter bytes: The bytes to check.
/// - Returns: The checksum.
public func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    crc32(continuing: 0, bytes)
}

/// Whether ``crc32(_:)`` runs on a hardware path on this CPU.
public var crc32UsesHardware: Bool { kiln_crc32_hardware() != 0 }

/// CRC-32 of `bytes` continued from the CRC-32 of what came before them.
/// - Parameters:
///   - previous: The checksum of the preceding bytes (0 for none).
///   - bytes: The bytes to check.
/// - Returns: The checksum of both.
public func crc32(continuing previous: UInt32, _ bytes: UnsafeRawBufferPointer) -> UInt32 {
    guard var p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return previous }
    var state = previous
    let used = kiln_crc32_bulk(&state, p, bytes.count)
    var crc = UInt(state)
    p += used
    var remaining = bytes.count - used
    // zlib takes a 32-bit length; feed large buffers in chunks.
    while remaining > 0 {
        let n = min(remaining, 1 << 30)
        crc = CZlib.crc32(crc, p, uInt(n))
        p += n
        remaining -= n
    }
    return UInt32(truncatingIfNeeded: crc)
}

/// CRC-32 of an array of bytes.
/// - Parameter bytes: The bytes to check.
/// - Returns: The checksum.
public func crc32(_ bytes: [UInt8]) -> UInt32 {
    bytes.withUnsafeBytes { crc32($0) }
}
