import Foundation

/// One file that holds a directory of compiled artifacts and its `assets.json`
/// (`Name.kilnarchive`, `specs/deployment.md`).
///
/// ```
/// 0    8   magic "KILNARC\0"
/// 8    4   version (1)
/// 12   4   index bytes
/// 16   8   bytes of the whole archive
/// 24   4   CRC-32 of the index
/// 28   4   CRC-32 of bytes 0 ..< 28
/// 32       index: UTF-8 JSON {"members": [{"name", "offset", "bytes", "sha256"}, …]}
///          members, each at a 4096-byte aligned offset, so an artifact maps in place
/// ```
/// Member names are plain file names (no `/`), unique, in name order; members do not overlap
/// and lie inside the file. Writing is deterministic: the same files give the same bytes.
public struct ModelArchive: Sendable {
    /// One file in the archive.
    public struct Member: Sendable, Equatable {
        /// Its file name.
        public var name: String
        /// Its bytes in the archive.
        public var range: Range<Int>
        /// Its SHA-256, 64 lowercase hex digits.
        public var sha256: String
    }

    /// The archive file extension.
    public static let fileExtension = "kilnarchive"
    static let magic: [UInt8] = Array("KILNARC\0".utf8)
    static let alignment = 4096

    /// The members, in name order.
    public let members: [Member]
    /// The mapped archive.
    let file: MappedFile

    /// The whole archive's bytes.
    public var bytes: UnsafeRawBufferPointer { file.bytes }

    /// A member's bytes.
    public func bytes(of member: Member) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: file.bytes[member.range])
    }

    /// A zero-copy view of bytes of the archive (kept alive by the returned storage).
    public func storage(_ range: Range<Int>) -> ByteStorage { file.storage(range) }

    /// The member named `name`.
    public func member(named name: String) -> Member? { members.first { $0.name == name } }

    /// Checks a member's SHA-256 against the index.
    /// - Throws: ``PackageError`` naming the member.
    public func verify(_ member: Member) throws {
        let digest = SHA256.hex(SHA256.hash(bytes(of: member)))
        guard digest == member.sha256 else {
            throw PackageError(path: file.path, field: member.name, reason: "SHA-256 \(digest) differs from the archive index's \(member.sha256); the archive is corrupt", kind: .damaged)
        }
    }

    /// Maps an archive and checks its header and index (not the members' digests).
    /// - Throws: ``PackageError`` naming the file and what is wrong.
    public init(at path: String) throws {
        let file: MappedFile
        do { file = try MappedFile(path: path) } catch let e as PackageError { throw e.inFile(path) }
        self.file = file
        do {
            members = try Self.index(file.bytes)
        } catch let e as PackageError {
            throw e.inFile(path)
        }
    }

    /// Whether `bytes` start like an archive.
    public static func isArchive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count >= 8 && Array(bytes[0 ..< 8]) == magic
    }

    static func index(_ b: UnsafeRawBufferPointer) throws -> [Member] {
        guard b.count >= 32 else { throw PackageError(reason: "is \(b.count) bytes, too short for a Kiln archive") }
        guard isArchive(b) else { throw PackageError(reason: "not a Kiln archive (bad magic)") }
        let headerCRC = crc32(UnsafeRawBufferPointer(rebasing: b[0 ..< 28]))
        guard headerCRC == b.loadLE(UInt32.self, at: 28) else {
            throw PackageError(field: "header", reason: "checksum mismatch; the archive is corrupt", kind: .damaged)
        }
        let version = b.loadLE(UInt32.self, at: 8)
        guard version == 1 else { throw PackageError(field: "header", reason: "archive version \(version) is not one this runtime reads (1)") }
        let total = b.loadLE(UInt64.self, at: 16)
        guard total == UInt64(b.count) else {
            throw PackageError(field: "header", reason: "the file is \(b.count) bytes, its header says \(total) (truncated or appended to)")
        }
        let indexBytes = Int(b.loadLE(UInt32.self, at: 12))
        guard indexBytes <= b.count - 32 else { throw PackageError(field: "index", reason: "runs past the end of the file") }
        let index = UnsafeRawBufferPointer(rebasing: b[32 ..< 32 + indexBytes])
        guard crc32(index) == b.loadLE(UInt32.self, at: 24) else {
            throw PackageError(field: "index", reason: "checksum mismatch; the archive is corrupt", kind: .damaged)
        }
        guard let root = (try? JSONSerialization.jsonObject(with: Data(index))) as? [String: Any],
              let list = root["members"] as? [[String: Any]] else {
            throw PackageError(field: "index", reason: "not a JSON object with a 'members' list")
        }
        var members: [Member] = []
        var end = 32 + indexBytes
        for (i, m) in list.enumerated() {
            guard let name = m["name"] as? String, let offset = m["offset"] as? Int, let count = m["bytes"] as? Int,
                  let sha = m["sha256"] as? String else {
                throw PackageError(field: "index member \(i)", reason: "needs name, offset, bytes and sha256")
            }
            guard isPlainFileName(name) else { throw PackageError(field: "index member \(i)", reason: "'\(name)' is not a plain file name") }
            guard sha.count == 64, sha.allSatisfy({ $0.isHexDigit && !$0.isUppercase }) else {
                throw PackageError(field: name, reason: "sha256 is not 64 lowercase hex digits")
            }
            guard offset >= end, offset % alignment == 0, count >= 0, count <= b.count - offset else {
                throw PackageError(field: name, reason: "bytes [\(offset), +\(count)) overlap another member, are misaligned or lie outside the file")
            }
            if let last = members.last, last.name >= name { throw PackageError(field: name, reason: "members are not unique and in name order") }
            members.append(Member(name: name, range: offset ..< offset + count, sha256: sha))
            end = offset + count
        }
        return members
    }

    /// A name without directories, `.` or `..`, or control characters.
    public static func isPlainFileName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 255 && name != "." && name != ".." && !name.contains("/")
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7f }
    }

    /// Serializes files into an archive.
    /// - Parameter files: (name, bytes) pairs with plain, unique names.
    /// - Returns: The archive's chunks in order.
    public static func serialize(_ files: [(name: String, bytes: [UInt8])]) -> [[UInt8]] {
        let sorted = files.sorted { $0.name < $1.name }
        // The index's size depends on the offsets' digit counts: lay out until it is stable.
        var indexBytes = 0
        var index: [UInt8] = []
        var offsets: [Int] = []
        for _ in 0 ..< 8 {
            var at = (32 + indexBytes + alignment - 1) / alignment * alignment
            offsets = []
            for f in sorted {
                offsets.append(at)
                at = (at + f.bytes.count + alignment - 1) / alignment * alignment
            }
            var json = "{\"members\": ["
            for (i, f) in sorted.enumerated() {
                let sha = f.bytes.withUnsafeBytes { SHA256.hex(SHA256.hash($0)) }
                json += (i > 0 ? ", " : "") + "{\"name\": \(jsonString(f.name)), \"offset\": \(offsets[i]), \"bytes\": \(f.bytes.count), \"sha256\": \"\(sha)\"}"
            }
            json += "]}\n"
            index = Array(json.utf8)
            if index.count <= indexBytes { break }
            indexBytes = index.count + 64
        }
        index += [UInt8](repeating: 0x20, count: indexBytes - index.count)
        var chunks: [[UInt8]] = []
        var at = 32 + indexBytes
        var pieces: [[UInt8]] = [index]
        for (i, f) in sorted.enumerated() {
            pieces.append([UInt8](repeating: 0, count: offsets[i] - at))
            pieces.append(f.bytes)
            at = offsets[i] + f.bytes.count
        }
        var h: [UInt8] = magic
        h.appendLE(UInt32(1))
        h.appendLE(UInt32(indexBytes))
        h.appendLE(UInt64(at))
        h.appendLE(index.withUnsafeBytes { crc32($0) })
        h.appendLE(h.withUnsafeBytes { crc32($0) })
        chunks.append(h)
        chunks += pieces
        return chunks
    }

    static func jsonString(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            default:
                if u.value < 0x20 { out += String(format: "\\u%04x", u.value) } else { out.unicodeScalars.append(u) }
            }
        }
        return out + "\""
    }
}

extension CompiledArtifact {
    /// Reads an artifact stored in an archive, in place (plain) or decrypted into memory.
    /// - Parameters:
    ///   - archive: The mapped archive.
    ///   - member: The artifact's member.
    ///   - verifyWeights: Check the weight section's CRC-32 too.
    ///   - keys: Keys for an encrypted artifact.
    /// - Throws: ``PackageError`` naming the archive and member; ``ArtifactKeyError``.
    public static func read(in archive: ModelArchive, member: ModelArchive.Member, verifyWeights: Bool = false,
                            keys: ArtifactKeyProvider? = nil) throws -> CompiledArtifact {
        try naming("\(archive.file.path) (\(member.name))") {
            let base = member.range.lowerBound
            var artifact = try read(archive.bytes(of: member), verifyWeights: verifyWeights, keys: keys) {
                archive.storage($0.lowerBound + base ..< $0.upperBound + base)
            }
            artifact.fileBytes = archive.storage(member.range)
            return artifact
        }
    }
}
