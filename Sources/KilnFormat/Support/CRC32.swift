import CKilnHash
import CZlib
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

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

/// CRC-32 of a large buffer with its pieces checksummed on several cores at once and combined
/// (zlib's `crc32_combine`): a mapped file's first touch costs page faults, which then run in
/// parallel too. Equal to ``crc32(_:)``.
/// - Parameter bytes: The bytes to check.
/// - Returns: The checksum.
public func crc32Parallel(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
    let cores = max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
    let pieces = min(cores, bytes.count / (8 << 20))
    guard pieces > 1, let base = bytes.baseAddress else { return crc32(bytes) }
    let size = (bytes.count / pieces + 4095) / 4096 * 4096
    let results = UnsafeMutableBufferPointer<UInt32>.allocate(capacity: pieces)
    defer { results.deallocate() }
    // Addresses cross the closure as integers; each task writes only its own slot.
    let address = Int(bitPattern: base), out = Int(bitPattern: results.baseAddress!), count = bytes.count
    DispatchQueue.concurrentPerform(iterations: pieces) { i in
        let lo = i * size, hi = min(count, lo + size)
        let c = crc32(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: address + lo), count: max(0, hi - lo)))
        UnsafeMutablePointer<UInt32>(bitPattern: out)![i] = c
    }
    var crc = UInt(results[0])
    for i in 1 ..< pieces {
        let lo = i * size, hi = min(bytes.count, lo + size)
        crc = CZlib.crc32_combine(crc, UInt(results[i]), off_t(max(0, hi - lo)))
    }
    return UInt32(truncatingIfNeeded: crc)
}
