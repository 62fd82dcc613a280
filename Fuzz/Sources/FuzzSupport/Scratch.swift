import Foundation

/// A per-process scratch directory in memory (`/dev/shm` when present) for targets whose reader
/// takes a path.
public enum Scratch {
    public static let directory: String = {
        let base = FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory()
        let dir = "\(base)/kiln-fuzz-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }()

    /// Writes `bytes` to `name` in the scratch directory and returns its path.
    public static func write(_ bytes: UnsafeRawBufferPointer, _ name: String) -> String {
        let path = "\(directory)/\(name)"
        let parent = (path as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: parent, withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: path, contents: Data(bytes))
        return path
    }

    /// Splits an input in two at the little-endian u32 length its first four bytes give.
    public static func split(_ data: UnsafeRawBufferPointer) -> (UnsafeRawBufferPointer, UnsafeRawBufferPointer) {
        guard data.count >= 4 else { return (data, UnsafeRawBufferPointer(start: nil, count: 0)) }
        let n = Int(data.loadUnaligned(as: UInt32.self).littleEndian) % (data.count - 3)
        let rest = UnsafeRawBufferPointer(rebasing: data[4...])
        return (UnsafeRawBufferPointer(rebasing: rest[..<n]), UnsafeRawBufferPointer(rebasing: rest[n...]))
    }
}

/// Runs `body` in a task and waits for it on the fuzzer's thread (libFuzzer calls the target
/// synchronously).
public func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task {
        await body()
        done.signal()
    }
    done.wait()
}

/// CRC-32 (zlib's polynomial), bitwise: the fuzz targets' own, independent of Kiln's.
public func crc32(_ bytes: ArraySlice<UInt8>) -> UInt32 {
    var c: UInt32 = 0xFFFF_FFFF
    for b in bytes {
        c ^= UInt32(b)
        for _ in 0 ..< 8 { c = (c >> 1) ^ (0xEDB8_8320 & (0 &- (c & 1))) }
    }
    return ~c
}

/// Recomputes a compiled artifact's checksums (plan in header and trailer, weights in the
/// trailer, then the header's own) wherever the section offsets lie inside the input, so mutated
/// plans and weights reach the parser instead of stopping at a checksum.
public func fixChecksums(_ b: inout [UInt8]) {
    let header = 256, trailer = 32
    guard b.count >= header + trailer else { return }
    func u64(_ at: Int) -> Int {
        var v: UInt64 = 0
        for i in 0 ..< 8 { v |= UInt64(b[at + i]) << (8 * UInt64(i)) }
        return v > UInt64(Int32.max) ? -1 : Int(v)
    }
    func put(_ v: UInt32, _ at: Int) { for i in 0 ..< 4 { b[at + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) } }
    let t = b.count - trailer
    let (po, pl, wo, wl) = (u64(136), u64(144), u64(152), u64(160))
    if po >= 0, pl >= 0, po + pl <= t {
        let c = crc32(b[po ..< po + pl])
        put(c, 168)
        put(c, t + 20)
    }
    if wo >= 0, wl >= 0, wo + wl <= t { put(crc32(b[wo ..< wo + wl]), t + 16) }
    put(crc32(b[0 ..< header - 4]), header - 4)
}
