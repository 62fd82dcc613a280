import CKilnSpecs

/// The fixed header of a compiled artifact (specs/compiled-format.md).
public struct ArtifactHeader: Sendable, Equatable {
    /// Format version of the artifact.
    public var formatVersion: Int
    /// The architecture name the artifact is for.
    public var arch: String
    /// The oldest runtime version (major, minor) that may load it.
    public var minimumRuntime: RuntimeVersion
    /// The compiler that made it, e.g. `0.1.0`.
    public var compilerVersion: String
    /// SHA-256 of the source package (manifest then weights file).
    public var sourceDigest: [UInt8]
    /// SHA-256 of the compile options.
    public var optionsDigest: [UInt8]

    /// Creates a header.
    /// - Parameters:
    ///   - formatVersion: Artifact format version.
    ///   - arch: Architecture name.
    ///   - minimumRuntime: Oldest runtime allowed to load it.
    ///   - compilerVersion: The compiler's version.
    ///   - sourceDigest: 32 bytes.
    ///   - optionsDigest: 32 bytes.
    public init(formatVersion: Int = CompiledFormat.currentVersion, arch: String, minimumRuntime: RuntimeVersion,
                compilerVersion: String, sourceDigest: [UInt8], optionsDigest: [UInt8]) {
        self.formatVersion = formatVersion
        self.arch = arch
        self.minimumRuntime = minimumRuntime
        self.compilerVersion = compilerVersion
        self.sourceDigest = sourceDigest
        self.optionsDigest = optionsDigest
    }
}

/// A `major.minor` runtime version.
public struct RuntimeVersion: Sendable, Comparable, CustomStringConvertible {
    /// Major version.
    public var major: Int
    /// Minor version.
    public var minor: Int

    /// Creates a version.
    /// - Parameters:
    ///   - major: Major version.
    ///   - minor: Minor version.
    public init(_ major: Int, _ minor: Int) {
        self.major = major
        self.minor = minor
    }

    /// Parses `X.Y`.
    /// - Parameter text: The version text.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let a = Int(parts[0]), let b = Int(parts[1]), (0 ... 65535).contains(a),
              (0 ... 65535).contains(b) else { return nil }
        self.init(a, b)
    }

    /// `X.Y`.
    public var description: String { "\(major).\(minor)" }

    /// Version order.
    public static func < (a: RuntimeVersion, b: RuntimeVersion) -> Bool { (a.major, a.minor) < (b.major, b.minor) }
}

/// Constants of the compiled-artifact layout.
public enum CompiledFormat {
    /// The artifact format version this build writes and the newest it reads.
    public static let currentVersion = 6
    /// The oldest artifact format version this build reads (version 6 keeps layouts, fused
    /// activations and packed-weight layouts in typed step configs, version 5 packs 4-bit and
    /// table weights along K, version 4 adds the channels-last kernels, version 3 packs
    /// convolution weights in row tiles; every kernel and layout of version 3 remains).
    public static let oldestReadableVersion = 3
    /// The runtime version of this build.
    public static let runtimeVersion = RuntimeVersion(0, 8)
    /// The oldest runtime that can run what this compiler emits (the first with typed step configs).
    public static let oldestCompatibleRuntime = RuntimeVersion(0, 6)
    /// The compiler version of this build.
    public static let compilerVersion = "0.8.0"
    /// The artifact file extension.
    public static let fileExtension = "compiled"
    static let magic: [UInt8] = Array("KILNART\0".utf8)
    static let trailerMagic: [UInt8] = Array("KILNEND\0".utf8)
    /// Header bytes (fixed).
    public static let headerSize = 256
    /// Trailer bytes (fixed).
    public static let trailerSize = 32
}

/// A compiled artifact in memory: header and plan; the weights refer into its bytes.
public struct CompiledArtifact: Sendable {
    /// The header.
    public var header: ArtifactHeader
    /// The plan, with weights that refer into the artifact's bytes.
    public var plan: CompiledPlan
    /// Bytes of the weight section.
    public var weightBytes: Int
    /// Bytes of the plan.
    public var planBytes: Int
    /// The header's stored CRC-32 (it covers the section offsets and the plan's CRC).
    public var headerChecksum: UInt32 = 0
    /// The weight section's CRC-32 as the trailer stores it.
    public var weightsChecksum: UInt32 = 0
    /// The weight section, for ``verifyWeights()``.
    public var weightSection: ByteStorage? = nil
    /// The file it was mapped from, as it was when opened (`nil` for bytes in memory).
    public var file: FileIdentity? = nil
    /// The whole mapped file (for a digest of the file as a manifest lists it), `nil` for bytes in memory.
    public var fileBytes: ByteStorage? = nil
    /// Whether the weight section's checksum was checked while reading.
    public var weightsVerified = false
    /// The key id of an encrypted artifact (decrypted in memory), `nil` for a plain one.
    public var encryptionKeyID: String? = nil

    /// Checks the weight section against the trailer's CRC-32, in one pass at memory speed.
    /// - Throws: ``PackageError`` (field `weights`, no path) on a mismatch.
    public func verifyWeights() throws {
        guard let weightSection else { return }
        let c = crc32Parallel(weightSection.bytes)
        guard c == weightsChecksum else {
            throw PackageError(field: "weights", reason: "checksum mismatch (stored \(hex(weightsChecksum)), computed \(hex(c))); the artifact is corrupt", kind: .damaged)
        }
    }

    /// Serializes an artifact: header, plan, 64-byte aligned weight section, trailer.
    /// Deterministic: the same header and plan give the same bytes.
    /// - Parameters:
    ///   - header: The header.
    ///   - plan: The plan and packed weights.
    /// - Returns: The file's chunks in order (to write without another copy).
    public static func serialize(header: ArtifactHeader, plan: CompiledPlan) -> [[UInt8]] {
        var (contents, blobs) = PackageWriter.layout(plan.model)
        contents.weightsFile = ""
        let planBytes = CompiledPlanCodec.encode(contents, plan)
        let planOffset = CompiledFormat.headerSize
        let weightsOffset = (planOffset + planBytes.count + 63) / 64 * 64
        // The weight section has the layout of a package weights file.
        var weights = PackageWriter.weightsHeader(version: contents.formatVersion)
        for (loc, blob) in blobs {
            weights += [UInt8](repeating: 0, count: loc.offset - weights.count)
            weights += blob.data.bytes
        }
        var h: [UInt8] = CompiledFormat.magic
        h.appendLE(UInt32(header.formatVersion))
        h.appendLE(UInt32(CompiledFormat.headerSize))
        h += fixed(header.arch, 32)
        h.appendLE(UInt16(header.minimumRuntime.major))
        h.appendLE(UInt16(header.minimumRuntime.minor))
        h += fixed(header.compilerVersion, 16)
        h += fixed32(header.sourceDigest)
        h += fixed32(header.optionsDigest)
        h.appendLE(UInt32(0)) // flags
        h.appendLE(UInt64(planOffset))
        h.appendLE(UInt64(planBytes.count))
        h.appendLE(UInt64(weightsOffset))
        h.appendLE(UInt64(weights.count))
        h.appendLE(planBytes.withUnsafeBytes { crc32($0) })
        h += [UInt8](repeating: 0, count: CompiledFormat.headerSize - 4 - h.count)
        h.appendLE(h.withUnsafeBytes { crc32($0) })
        let padding = [UInt8](repeating: 0, count: weightsOffset - planOffset - planBytes.count)
        var t: [UInt8] = CompiledFormat.trailerMagic
        t.appendLE(UInt64(weightsOffset + weights.count + CompiledFormat.trailerSize))
        t.appendLE(weights.withUnsafeBytes { crc32($0) })
        t.appendLE(planBytes.withUnsafeBytes { crc32($0) })
        t += [UInt8](repeating: 0, count: CompiledFormat.trailerSize - t.count)
        return [h, planBytes, padding, weights, t]
    }

    /// Writes an artifact atomically (temp file, fsync, rename).
    /// - Parameters:
    ///   - header: The header.
    ///   - plan: The plan.
    ///   - path: Destination file.
    /// - Returns: The file's chunks (as ``serialize(header:plan:)`` made them).
    /// - Throws: ``PackageError`` when the file cannot be written.
    @discardableResult
    public static func write(header: ArtifactHeader, plan: CompiledPlan, to path: String) throws -> [[UInt8]] {
        let chunks = serialize(header: header, plan: plan)
        try FileSystem.makeDirectories(FileSystem.parentDirectory(of: path))
        try AtomicFile.write(chunks, to: path)
        return chunks
    }

    static func fixed(_ s: String, _ n: Int) -> [UInt8] {
        let b = Array(s.utf8.prefix(n))
        return b + [UInt8](repeating: 0, count: n - b.count)
    }

    static func fixed32(_ d: [UInt8]) -> [UInt8] { Array((d + [UInt8](repeating: 0, count: 32)).prefix(32)) }

    /// Reads the header alone, checking magic, size, checksum and version.
    /// - Parameter bytes: The file (at least the header).
    /// - Returns: The header and the section offsets.
    /// - Throws: ``PackageError`` without a path.
    public static func readHeader(_ bytes: UnsafeRawBufferPointer) throws -> (ArtifactHeader, sections: [Range<Int>]) {
        let size = CompiledFormat.headerSize
        guard bytes.count >= size + CompiledFormat.trailerSize else {
            throw PackageError(reason: "is \(bytes.count) bytes, too short for a compiled artifact")
        }
        guard Array(bytes[0 ..< 8]) == CompiledFormat.magic else {
            throw PackageError(reason: "not a Kiln compiled artifact (bad magic)")
        }
        let stored = bytes.loadLE(UInt32.self, at: size - 4)
        let actual = crc32(UnsafeRawBufferPointer(rebasing: bytes[0 ..< size - 4]))
        guard stored == actual else {
            throw PackageError(field: "header", reason: "checksum mismatch (stored \(hex(stored)), computed \(hex(actual))); the artifact is corrupt", kind: .damaged)
        }
        let version = Int(bytes.loadLE(UInt32.self, at: 8))
        guard version <= CompiledFormat.currentVersion else {
            throw PackageError(field: "header", reason: "artifact format version \(version) is newer than this runtime reads (\(CompiledFormat.currentVersion))", kind: .newerFormat)
        }
        guard version >= CompiledFormat.oldestReadableVersion else {
            throw PackageError(field: "header", reason: "artifact format version \(version) is older than this runtime's kernels and weight layouts (it reads \(CompiledFormat.oldestReadableVersion)–\(CompiledFormat.currentVersion)); compile the package again")
        }
        guard Int(bytes.loadLE(UInt32.self, at: 12)) == size else {
            throw PackageError(field: "header", reason: "unsupported format version \(version) or header size")
        }
        func text(_ range: Range<Int>) throws -> String {
            let raw = Array(bytes[range].prefix { $0 != 0 })
            guard let s = String(validating: raw, as: UTF8.self) else {
                throw PackageError(field: "header", reason: "text field is not UTF-8")
            }
            return s
        }
        let header = ArtifactHeader(
            formatVersion: version, arch: try text(16 ..< 48),
            minimumRuntime: RuntimeVersion(Int(bytes.loadLE(UInt16.self, at: 48)), Int(bytes.loadLE(UInt16.self, at: 50))),
            compilerVersion: try text(52 ..< 68), sourceDigest: Array(bytes[68 ..< 100]), optionsDigest: Array(bytes[100 ..< 132]))
        var sections: [Range<Int>] = []
        for at in [136, 152] {
            let offset = bytes.loadLE(UInt64.self, at: at), length = bytes.loadLE(UInt64.self, at: at + 8)
            guard offset >= UInt64(size), length <= UInt64(bytes.count), offset <= UInt64(bytes.count) - length else {
                throw PackageError(field: "header", reason: "section [\(offset), +\(length)) lies outside the file (\(bytes.count) bytes)")
            }
            sections.append(Int(offset) ..< Int(offset + length))
        }
        guard sections[0].upperBound <= sections[1].lowerBound, sections[1].lowerBound % 64 == 0,
              sections[1].upperBound + CompiledFormat.trailerSize == bytes.count else {
            throw PackageError(field: "header", reason: "plan and weight sections overlap, are misaligned or do not end at the trailer")
        }
        return (header, sections)
    }

    /// Reads and checks a whole artifact: header, plan checksum and structure, trailer,
    /// and (when asked) every weight blob's checksum. Weights are not copied.
    /// - Parameters:
    ///   - bytes: The file's bytes (kept alive by `storage`).
    ///   - verifyWeights: Check weight checksums too.
    ///   - storage: Makes a zero-copy view of a byte range of the file.
    /// - Returns: The artifact.
    /// - Throws: ``PackageError`` without a path.
    public static func read(_ bytes: UnsafeRawBufferPointer, verifyWeights: Bool,
                            storage: (Range<Int>) -> ByteStorage) throws -> CompiledArtifact {
        let (header, sections) = try readHeader(bytes)
        let planRange = sections[0], weightRange = sections[1]
        let t = bytes.count - CompiledFormat.trailerSize
        guard Array(bytes[t ..< t + 8]) == CompiledFormat.trailerMagic,
              bytes.loadLE(UInt64.self, at: t + 8) == UInt64(bytes.count) else {
            throw PackageError(field: "trailer", reason: "missing or wrong trailer (truncated or appended to)")
        }
        let planBytes = UnsafeRawBufferPointer(rebasing: bytes[planRange])
        let planCRC = crc32(planBytes)
        guard planCRC == bytes.loadLE(UInt32.self, at: 168), planCRC == bytes.loadLE(UInt32.self, at: t + 20) else {
            throw PackageError(field: "plan", reason: "checksum mismatch (computed \(hex(planCRC))); the artifact is corrupt", kind: .damaged)
        }
        let weights = UnsafeRawBufferPointer(rebasing: bytes[weightRange])
        let storedWeightsCRC = bytes.loadLE(UInt32.self, at: t + 16)
        // One pass over the whole weight section (its CRC is in the trailer); the per-blob
        // CRCs are not checked again.
        if verifyWeights {
            let c = crc32(weights)
            guard c == storedWeightsCRC else {
                throw PackageError(field: "weights", reason: "checksum mismatch (stored \(hex(storedWeightsCRC)), computed \(hex(c))); the artifact is corrupt", kind: .damaged)
            }
        }
        let (contents, functions, arch, source) = try CompiledPlanCodec.decode(planBytes)
        guard arch == header.arch else {
            throw PackageError(field: "plan", reason: "plan is for '\(arch)', the header says '\(header.arch)'")
        }
        let base = weightRange.lowerBound
        let model = try PackageReader.assemble(
            contents, weights: weights, weightsPath: "weights section", manifestPath: "plan",
            verifyChecksums: false, validateModel: false) { storage($0.lowerBound + base ..< $0.upperBound + base) }
        var plan = CompiledPlan(model: model, functions: functions, arch: arch, source: source)
        try plan.validateStructure()
        if header.formatVersion < 6 { try plan.adoptLegacyStepAttributes() }
        return CompiledArtifact(header: header, plan: plan, weightBytes: weightRange.count, planBytes: planRange.count,
                                headerChecksum: bytes.loadLE(UInt32.self, at: CompiledFormat.headerSize - 4),
                                weightsChecksum: storedWeightsCRC, weightSection: storage(weightRange),
                                weightsVerified: verifyWeights)
    }

    /// Maps and reads the artifact at `path`.
    /// - Parameters:
    ///   - path: The `.compiled` file.
    ///   - verifyWeights: Check weight checksums too.
    /// - Returns: The artifact; its weights refer into the mapping.
    /// - Throws: ``PackageError`` naming the file.
    public static func read(at path: String, verifyWeights: Bool = false, keys: ArtifactKeyProvider? = nil) throws -> CompiledArtifact {
        try naming(path) {
            let file = try MappedFile(path: path)
            var artifact = try read(file.bytes, verifyWeights: verifyWeights, keys: keys) { file.storage($0) }
            artifact.file = file.identity
            artifact.fileBytes = file.storage(0 ..< file.count)
            return artifact
        }
    }

    /// Reads a plain artifact in place (through `storage`), or an encrypted one decrypted into
    /// process memory, authenticated, then checked as any artifact (weights included).
    /// - Throws: ``PackageError`` or ``ArtifactKeyError`` without a path.
    static func read(_ bytes: UnsafeRawBufferPointer, verifyWeights: Bool, keys: ArtifactKeyProvider?,
                     inPlace storage: (Range<Int>) -> ByteStorage) throws -> CompiledArtifact {
        guard ArtifactEncryption.isEncrypted(bytes) else { return try read(bytes, verifyWeights: verifyWeights, storage: storage) }
        let plain = try ArtifactEncryption.decrypt(bytes, keys: keys)
        var artifact = try read(UnsafeRawBufferPointer(start: plain.baseAddress, count: plain.count), verifyWeights: true) {
            ByteStorage(borrowing: plain.baseAddress + $0.lowerBound, count: $0.count, owner: plain)
        }
        artifact.encryptionKeyID = try ArtifactEncryption.keyID(bytes)
        return artifact
    }

    /// Runs `body`, giving its package and key errors `place` as their path.
    static func naming<T>(_ place: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let e as PackageError {
            throw e.inFile(place)
        } catch var e as ArtifactKeyError {
            if e.path == nil { e.path = place }
            throw e
        }
    }
}
