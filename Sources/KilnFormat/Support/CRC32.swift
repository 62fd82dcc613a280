import CZlib

/// CRC-32 with the zlib polynomial, as stored for every blob and manifest.
/// - Parameter bytes: The bytes to check.
/// - Returns: The checksum.
public func crc32(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    var crc: UInt = CZlib.crc32(0, nil, 0)
    guard var p = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self) else { return UInt32(crc) }
    var remaining = bytes.count
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
