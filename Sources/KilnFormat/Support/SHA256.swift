import CKilnHash

/// SHA-256 (FIPS 180-4), for artifact digests and `assets.json`.
public struct SHA256: Sendable {
    private var state: [UInt32] = [
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19,
    ]
    private var buffer: [UInt8] = []
    private var length: UInt64 = 0

    /// The round constants (one table in `CKilnHash`, shared with the hardware path).
    private static let k: [UInt32] = withUnsafeBytes(of: kiln_sha256_k) { Array($0.bindMemory(to: UInt32.self)) }

    /// A fresh hash.
    public init() {}

    /// The digest of `bytes` in one call.
    /// - Parameter bytes: The message.
    /// - Returns: 32 bytes.
    public static func hash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var h = SHA256()
        h.update(bytes)
        return h.finalize()
    }

    /// The lowercase hex form of a digest.
    /// - Parameter digest: Bytes.
    /// - Returns: Two hex digits per byte.
    public static func hex(_ digest: [UInt8]) -> String {
        let digits = Array("0123456789abcdef")
        return String(digest.flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 15)]] })
    }

    /// Adds bytes to the message.
    /// - Parameter bytes: The next bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        length &+= UInt64(bytes.count)
        var start = 0
        if !buffer.isEmpty {
            let take = min(64 - buffer.count, bytes.count)
            buffer += bytes[0 ..< take]
            start = take
            if buffer.count == 64 {
                buffer.withUnsafeBytes { compress($0.baseAddress!) }
                buffer.removeAll(keepingCapacity: true)
            }
        }
        let blocks = (bytes.count - start) / 64
        if blocks > 0, state.withUnsafeMutableBufferPointer({
            kiln_sha256_blocks($0.baseAddress!, bytes.baseAddress!.assumingMemoryBound(to: UInt8.self) + start, blocks)
        }) != 0 {
            start += blocks * 64
        }
        while bytes.count - start >= 64 {
            compress(bytes.baseAddress! + start)
            start += 64
        }
        if start < bytes.count { buffer += bytes[start...] }
    }

    /// Finishes the hash.
    /// - Returns: The 32-byte digest.
    public mutating func finalize() -> [UInt8] {
        let bits = length &* 8
        var tail: [UInt8] = [0x80]
        while (buffer.count + tail.count) % 64 != 56 { tail.append(0) }
        for i in (0 ..< 8).reversed() { tail.append(UInt8(truncatingIfNeeded: bits >> (UInt64(i) * 8))) }
        let savedLength = length
        tail.withUnsafeBytes { update($0) }
        length = savedLength
        return state.flatMap { v in (0 ..< 4).map { UInt8(truncatingIfNeeded: v >> (24 - 8 * UInt32($0))) } }
    }

    /// Whether whole blocks run on the CPU's SHA instructions.
    public static var usesHardware: Bool { kiln_sha256_hardware() != 0 }

    /// The digest of `bytes` by the portable Swift code alone (for tests of the hardware path).
    public static func portableHash(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
        var h = SHA256()
        h.length = UInt64(bytes.count)
        var start = 0
        while bytes.count - start >= 64 {
            h.compress(bytes.baseAddress! + start)
            start += 64
        }
        h.buffer = Array(bytes[start...])
        return h.finalize()
    }

    private mutating func compress(_ p: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
            SHA256.k.withUnsafeBufferPointer { k in
                state.withUnsafeMutableBufferPointer { state in
                    SHA256.compress(p, w, k, state)
                }
            }
        }
    }

    @inline(__always)
    private static func compress(_ p: UnsafeRawPointer, _ w: UnsafeMutableBufferPointer<UInt32>,
                                 _ k: UnsafeBufferPointer<UInt32>, _ state: UnsafeMutableBufferPointer<UInt32>) {
        for i in 0 ..< 16 { w[i] = UInt32(bigEndian: p.loadUnaligned(fromByteOffset: i * 4, as: UInt32.self)) }
        @inline(__always) func rotr(_ x: UInt32, _ n: UInt32) -> UInt32 { (x >> n) | (x << (32 - n)) }
        for i in 16 ..< 64 {
            let s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ (w[i - 15] >> 3)
            let s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ (w[i - 2] >> 10)
            w[i] = w[i - 16] &+ s0 &+ w[i - 7] &+ s1
        }
        var (a, b, c, d, e, f, g, h) = (state[0], state[1], state[2], state[3], state[4], state[5], state[6], state[7])
        for i in 0 ..< 64 {
            let s1 = rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)
            let ch = (e & f) ^ (~e & g)
            let t1 = h &+ s1 &+ ch &+ k[i] &+ w[i]
            let s0 = rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)
            let maj = (a & b) ^ (a & c) ^ (b & c)
            let t2 = s0 &+ maj
            (h, g, f, e, d, c, b, a) = (g, f, e, d &+ t1, c, b, a, t1 &+ t2)
        }
        state[0] &+= a; state[1] &+= b; state[2] &+= c; state[3] &+= d
        state[4] &+= e; state[5] &+= f; state[6] &+= g; state[7] &+= h
    }
}
