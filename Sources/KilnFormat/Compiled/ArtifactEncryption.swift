import COpenSSL
import Foundation

/// A 256-bit key that encrypts compiled artifacts at rest (AES-256-GCM).
///
/// A key file (`kiln keygen`) is three lines of text, written with mode 0600:
/// ```
/// kiln-key 1
/// id 0f3a…(32 hex digits)
/// key 9c41…(64 hex digits)
/// ```
/// The id is the first 16 bytes of SHA-256("kiln-key-id\0" ‖ key): it names the key in an
/// encrypted artifact's header without revealing it, so a loader can say which key it needs.
public struct ArtifactKey: Sendable, Equatable {
    /// The key bytes (32).
    public let bytes: [UInt8]
    /// The key id, 32 lowercase hex digits.
    public let id: String

    /// Wraps 32 key bytes.
    /// - Throws: ``ArtifactKeyError`` when `bytes` is not 32 bytes long.
    public init(bytes: [UInt8]) throws {
        guard bytes.count == 32 else { throw ArtifactKeyError(reason: "a key is 32 bytes, not \(bytes.count)") }
        self.bytes = bytes
        var h = SHA256()
        Array("kiln-key-id\0".utf8).withUnsafeBytes { h.update($0) }
        bytes.withUnsafeBytes { h.update($0) }
        id = SHA256.hex(Array(h.finalize().prefix(16)))
    }

    /// A new key from the operating system's random source (OpenSSL's `RAND_bytes`).
    /// - Throws: ``ArtifactKeyError`` when no random bytes are available.
    public static func generate() throws -> ArtifactKey {
        var b = [UInt8](repeating: 0, count: 32)
        guard RAND_bytes(&b, 32) == 1 else { throw ArtifactKeyError(reason: "the random source gave no key bytes") }
        return try ArtifactKey(bytes: b)
    }

    /// The key file's text.
    public var fileText: String { "kiln-key 1\nid \(id)\nkey \(SHA256.hex(bytes))\n" }

    /// Reads a key file.
    /// - Throws: ``ArtifactKeyError`` naming the file and what is wrong with it.
    public static func read(at path: String) throws -> ArtifactKey {
        let raw: [UInt8]
        do { raw = try FileSystem.readFile(path) } catch {
            throw ArtifactKeyError(path: path, reason: "cannot read the key file")
        }
        guard raw.count <= 4096, let text = String(validating: raw, as: UTF8.self) else {
            throw ArtifactKeyError(path: path, reason: "not a Kiln key file (not short UTF-8 text)")
        }
        var fields: [String: String] = [:]
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true).map { $0.trimmingCharacters(in: .whitespaces) }
        guard lines.first == "kiln-key 1" else {
            throw ArtifactKeyError(path: path, reason: "not a Kiln key file (the first line is not 'kiln-key 1')")
        }
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { throw ArtifactKeyError(path: path, reason: "malformed line '\(line.prefix(40))'") }
            fields[parts[0]] = parts[1]
        }
        guard let hex = fields["key"], let bytes = hexBytes(hex), bytes.count == 32 else {
            throw ArtifactKeyError(path: path, reason: "the 'key' line must hold 64 hex digits")
        }
        let key = try ArtifactKey(bytes: bytes)
        if let id = fields["id"], id.lowercased() != key.id {
            throw ArtifactKeyError(path: path, reason: "the 'id' line (\(id)) does not match the key (\(key.id)); the file is damaged")
        }
        return key
    }

    static func hexBytes(_ s: String) -> [UInt8]? {
        let u = Array(s.utf8)
        guard u.count % 2 == 0 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(u.count / 2)
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case 48 ... 57: return c - 48
            case 97 ... 102: return c - 87
            case 65 ... 70: return c - 55
            default: return nil
            }
        }
        var i = 0
        while i < u.count {
            guard let a = nibble(u[i]), let b = nibble(u[i + 1]) else { return nil }
            out.append(a << 4 | b)
            i += 2
        }
        return out
    }
}

/// A key problem: an encrypted artifact loaded without its key or with another one, or a key
/// file that cannot be used. Distinct from ``PackageError``, which means a damaged file.
public struct ArtifactKeyError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The artifact or key file.
    public var path: String?
    /// The id of the key the artifact needs, when the error is about a missing or wrong key.
    public var neededKeyID: String?
    /// What is wrong.
    public var reason: String

    public init(path: String? = nil, neededKeyID: String? = nil, reason: String) {
        self.path = path
        self.neededKeyID = neededKeyID
        self.reason = reason
    }

    public var description: String { [path, reason].compactMap { $0 }.joined(separator: ": ") }
}

/// Finds the key of an id (32 hex digits), or `nil` when the caller has none.
public typealias ArtifactKeyProvider = @Sendable (_ keyID: String) throws -> ArtifactKey?

/// The encrypted form of a compiled artifact (`specs/encryption.md`).
///
/// ```
/// 0    8   magic "KILNENC\0"
/// 8    4   envelope version (1)
/// 12   4   envelope header bytes (512)
/// 16   16  key id
/// 32   12  GCM nonce
/// 44   4   zero
/// 48   8   bytes of the plaintext artifact
/// 56   8   bytes of this file
/// 64   256 the plaintext artifact's header, in clear
/// 508  4   CRC-32 of bytes 0 ..< 508
/// 512      AES-256-GCM ciphertext of the artifact's bytes after its header (plan, weights, trailer)
/// end-16   GCM tag
/// ```
/// The 512 header bytes are the GCM's additional authenticated data, so the clear header (arch,
/// runtime, digests) cannot be changed either. The nonce is the first 12 bytes of
/// SHA-256("kiln-nonce\0" ‖ key ‖ plaintext): the same artifact and key give the same bytes
/// (outputs are deterministic), and two different artifacts never share a nonce under one key
/// unless SHA-256 collides on 96 bits.
public enum ArtifactEncryption {
    static let magic: [UInt8] = Array("KILNENC\0".utf8)
    /// Envelope header bytes.
    public static let headerSize = 512
    static let tagSize = 16

    /// Whether `bytes` start like an encrypted artifact.
    public static func isEncrypted(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 8 && Array(bytes[0 ..< 8]) == magic
    }

    /// Encrypts a serialized artifact.
    /// - Parameters:
    ///   - chunks: The plaintext artifact's bytes in order (as ``CompiledArtifact/serialize(header:plan:)`` gives them).
    ///   - key: The key.
    /// - Returns: The encrypted file's chunks.
    /// - Throws: ``PackageError`` when the input is not an artifact or the cipher fails.
    public static func encrypt(_ chunks: [[UInt8]], key: ArtifactKey) throws -> [[UInt8]] {
        let plain = chunks.count == 1 ? chunks[0] : Array(chunks.joined())
        guard plain.count > CompiledFormat.headerSize, Array(plain.prefix(8)) == CompiledFormat.magic else {
            throw PackageError(reason: "only a compiled artifact can be encrypted")
        }
        var nonceHash = SHA256()
        Array("kiln-nonce\0".utf8).withUnsafeBytes { nonceHash.update($0) }
        key.bytes.withUnsafeBytes { nonceHash.update($0) }
        plain.withUnsafeBytes { nonceHash.update($0) }
        let nonce = Array(nonceHash.finalize().prefix(12))
        let body = plain.count - CompiledFormat.headerSize
        let total = headerSize + body + tagSize
        var h: [UInt8] = magic
        h.appendLE(UInt32(1))
        h.appendLE(UInt32(headerSize))
        h += ArtifactKey.hexBytes(key.id)!
        h += nonce
        h.appendLE(UInt32(0))
        h.appendLE(UInt64(plain.count))
        h.appendLE(UInt64(total))
        h += plain[0 ..< CompiledFormat.headerSize]
        h += [UInt8](repeating: 0, count: headerSize - 4 - h.count)
        h.appendLE(h.withUnsafeBytes { crc32($0) })
        var out = [UInt8](repeating: 0, count: body + tagSize)
        try plain.withUnsafeBytes { p in
            try out.withUnsafeMutableBytes { o in
                try h.withUnsafeBytes { aad in
                    try gcm(encrypt: true, key: key.bytes, nonce: nonce, aad: aad,
                            input: UnsafeRawBufferPointer(rebasing: p[CompiledFormat.headerSize...]),
                            output: UnsafeMutableRawBufferPointer(rebasing: o[0 ..< body]),
                            tag: UnsafeMutableRawBufferPointer(rebasing: o[body...]))
                }
            }
        }
        return [h, out]
    }

    /// The key id an encrypted file names, after checking its envelope header.
    /// - Throws: ``PackageError`` (no path) for a damaged or truncated envelope.
    public static func keyID(_ bytes: UnsafeRawBufferPointer) throws -> String {
        try checkEnvelope(bytes)
        return SHA256.hex(Array(bytes[16 ..< 32]))
    }

    static func checkEnvelope(_ bytes: UnsafeRawBufferPointer) throws {
        guard bytes.count >= headerSize + tagSize else {
            throw PackageError(reason: "is \(bytes.count) bytes, too short for an encrypted artifact")
        }
        let stored = bytes.loadLE(UInt32.self, at: headerSize - 4)
        let actual = crc32(UnsafeRawBufferPointer(rebasing: bytes[0 ..< headerSize - 4]))
        guard stored == actual else {
            throw PackageError(field: "encryption header", reason: "checksum mismatch (stored \(hex(stored)), computed \(hex(actual))); the file is corrupt", kind: .damaged)
        }
        let version = bytes.loadLE(UInt32.self, at: 8)
        guard version == 1, bytes.loadLE(UInt32.self, at: 12) == UInt32(headerSize) else {
            throw PackageError(field: "encryption header", reason: "envelope version \(version) is not one this runtime reads (1)")
        }
        let plain = bytes.loadLE(UInt64.self, at: 48), total = bytes.loadLE(UInt64.self, at: 56)
        guard total == UInt64(bytes.count) else {
            throw PackageError(field: "encryption header", reason: "the file is \(bytes.count) bytes, its header says \(total) (truncated or appended to)")
        }
        guard plain > UInt64(CompiledFormat.headerSize), plain <= total,
              total - plain == UInt64(headerSize + tagSize - CompiledFormat.headerSize) else {
            throw PackageError(field: "encryption header", reason: "inconsistent sizes (plaintext \(plain), file \(total))")
        }
    }

    /// Decrypts an encrypted artifact into new process memory (64-byte aligned).
    /// - Parameters:
    ///   - bytes: The encrypted file.
    ///   - keys: Finds the key the file names.
    /// - Returns: The plaintext artifact's bytes.
    /// - Throws: ``ArtifactKeyError`` when no key or another key is given; ``PackageError``
    ///   (no path) when the file is damaged or fails authentication.
    public static func decrypt(_ bytes: UnsafeRawBufferPointer, keys: ArtifactKeyProvider?) throws -> ByteStorage {
        let id = try keyID(bytes)
        let found: ArtifactKey?
        do {
            found = try keys?(id)
        } catch let e as ArtifactKeyError {
            throw e
        } catch {
            throw ArtifactKeyError(neededKeyID: id, reason: "needs key \(id): the key provider failed: \(error)")
        }
        guard let key = found else {
            throw ArtifactKeyError(neededKeyID: id, reason: "is encrypted and needs key \(id); give its key file (--key FILE, ModelLoadOptions.keyProvider)")
        }
        guard key.id == id else {
            throw ArtifactKeyError(neededKeyID: id, reason: "needs key \(id); the key given is \(key.id)")
        }
        let plain = Int(bytes.loadLE(UInt64.self, at: 48))
        let body = plain - CompiledFormat.headerSize
        var tag = Array(bytes[(bytes.count - tagSize)...])
        return try ByteStorage(byteCount: plain) { out in
            out.copyMemory(from: UnsafeRawBufferPointer(rebasing: bytes[64 ..< 64 + CompiledFormat.headerSize]))
            do {
                try tag.withUnsafeMutableBytes { t in
                    try gcm(encrypt: false, key: key.bytes, nonce: Array(bytes[32 ..< 44]),
                            aad: UnsafeRawBufferPointer(rebasing: bytes[0 ..< headerSize]),
                            input: UnsafeRawBufferPointer(rebasing: bytes[headerSize ..< headerSize + body]),
                            output: UnsafeMutableRawBufferPointer(rebasing: out[CompiledFormat.headerSize...]), tag: t)
                }
            } catch {
                // Unauthenticated plaintext is not left in freed memory.
                memset(out.baseAddress!, 0, out.count)
                throw error
            }
        }
    }

    /// One AES-256-GCM pass. Decryption fails with ``PackageError`` when the tag does not match.
    static func gcm(encrypt: Bool, key: [UInt8], nonce: [UInt8], aad: UnsafeRawBufferPointer,
                    input: UnsafeRawBufferPointer, output: UnsafeMutableRawBufferPointer, tag: UnsafeMutableRawBufferPointer) throws {
        guard let ctx = EVP_CIPHER_CTX_new() else { throw PackageError(field: "encryption", reason: "OpenSSL could not make a cipher context") }
        defer { EVP_CIPHER_CTX_free(ctx) }
        func check(_ r: Int32, _ what: String) throws {
            guard r == 1 else { throw PackageError(field: "encryption", reason: "OpenSSL \(what) failed") }
        }
        let initialize = encrypt ? EVP_EncryptInit_ex : EVP_DecryptInit_ex
        let update = encrypt ? EVP_EncryptUpdate : EVP_DecryptUpdate
        try check(initialize(ctx, EVP_aes_256_gcm(), nil, nil, nil), "cipher setup")
        try check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, 12, nil), "nonce length")
        try key.withUnsafeBufferPointer { k in
            try nonce.withUnsafeBufferPointer { n in try check(initialize(ctx, nil, nil, k.baseAddress, n.baseAddress), "key setup") }
        }
        var n: Int32 = 0
        try check(update(ctx, nil, &n, aad.baseAddress?.assumingMemoryBound(to: UInt8.self), Int32(aad.count)), "header authentication")
        // EVP takes an Int32 length: 1 GiB steps.
        let step = 1 << 30
        var at = 0
        while at < input.count {
            let count = min(step, input.count - at)
            try check(update(ctx, output.baseAddress!.advanced(by: at).assumingMemoryBound(to: UInt8.self), &n,
                             input.baseAddress!.advanced(by: at).assumingMemoryBound(to: UInt8.self), Int32(count)), "cipher")
            at += count
        }
        var scratch = [UInt8](repeating: 0, count: 32)
        if encrypt {
            try check(EVP_EncryptFinal_ex(ctx, &scratch, &n), "cipher finish")
            try check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, Int32(tagSize), tag.baseAddress), "tag")
        } else {
            try check(EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, Int32(tagSize), tag.baseAddress), "tag")
            guard EVP_DecryptFinal_ex(ctx, &scratch, &n) == 1 else {
                throw PackageError(field: "encryption", reason: "authentication failed: the encrypted file was altered or damaged")
            }
        }
    }
}
