#if canImport(Glibc)
import Glibc
#endif

/// Reads `Name.kiln` packages, validating everything before anything uses it.
public enum PackageReader {
    /// Reads and validates the package at `path`.
    ///
    /// The weights file is mapped, not copied; weight blobs refer into the mapping.
    /// - Parameters:
    ///   - path: The package directory.
    ///   - verifyChecksums: Whether to check every blob's CRC-32 (default `true`).
    /// - Returns: The model.
    /// - Throws: ``PackageError`` naming the file and the problem.
    public static func read(at path: String, verifyChecksums: Bool = true) throws -> PortableModel {
        let (contents, manifestPath) = try readManifest(at: path)
        let weightsPath = "\(path)/\(contents.weightsFile)"
        let weights = try MappedFile(path: weightsPath)
        let model = try assemble(contents, weights: weights.bytes, weightsPath: weightsPath,
                                 manifestPath: manifestPath, verifyChecksums: verifyChecksums) { weights.storage($0) }
        // Verifying read every page; they are mapped again as they are used.
        weights.releaseResidentPages(0 ..< weights.count)
        return model
    }

    /// Reads and decodes a package's manifest, checking its framing and the weights file's name.
    /// - Returns: The contents and the manifest's path.
    package static func readManifest(at path: String) throws -> (ManifestContents, String) {
        let kind = FileSystem.kind(of: path)
        guard kind.exists else { throw PackageError(path: path, reason: "no such package") }
        guard kind.isDirectory else {
            throw PackageError(path: path, reason: "not a Kiln package (expected a directory Name.kiln)")
        }
        let manifestPath = "\(path)/\(PackageFormat.manifestFileName)"
        guard FileSystem.kind(of: manifestPath).exists else {
            throw PackageError(path: path, reason: "not a Kiln package (no \(PackageFormat.manifestFileName))")
        }
        let bytes = try FileSystem.readFile(manifestPath)
        do {
            let contents = try bytes.withUnsafeBytes { try decodeManifestFile($0) }
            let file = contents.weightsFile
            guard !file.isEmpty, !file.contains("/"), file != ".", file != ".." else {
                throw PackageError(field: "weights_file", reason: "'\(file)' is not a file name inside the package")
            }
            return (contents, manifestPath)
        } catch let e as PackageError {
            throw e.inFile(manifestPath)
        }
    }

    /// Decodes a whole manifest file: header, checksum, protobuf payload.
    /// - Throws: ``PackageError`` without a path; callers add it.
    package static func decodeManifestFile(_ file: UnsafeRawBufferPointer) throws -> ManifestContents {
        let headerSize = PackageFormat.manifestHeaderSize
        guard file.count >= headerSize else {
            throw PackageError(reason: "manifest is truncated (\(file.count) bytes; the header alone is \(headerSize))")
        }
        guard Array(file[0 ..< 8]) == PackageFormat.manifestMagic else {
            throw PackageError(reason: "not a Kiln manifest (bad magic)")
        }
        let version = Int(file.loadLE(UInt32.self, at: 8))
        guard version <= PackageFormat.currentVersion else {
            throw PackageError(reason: "format version \(version) is newer than this Kiln reads (\(PackageFormat.currentVersion)); upgrade Kiln", kind: .newerFormat)
        }
        guard version >= PackageFormat.oldestReadableVersion else {
            throw PackageError(reason: "format version \(version) is not supported")
        }
        let length = file.loadLE(UInt64.self, at: 16)
        let available = UInt64(file.count - headerSize)
        guard length == available else {
            throw PackageError(reason: length > available
                ? "manifest is truncated (header says \(length) payload bytes, file has \(available))"
                : "manifest has \(available - length) unexpected trailing bytes")
        }
        let payload = UnsafeRawBufferPointer(rebasing: file[headerSize...])
        let stored = file.loadLE(UInt32.self, at: 24)
        let actual = crc32(payload)
        guard stored == actual else {
            throw PackageError(reason: "manifest checksum mismatch (stored \(hex(stored)), computed \(hex(actual)))", kind: .damaged)
        }
        let contents = try ManifestCodec.decode(payload)
        guard contents.formatVersion == version else {
            throw PackageError(field: "format_version", reason: "\(contents.formatVersion) disagrees with the header's \(version)")
        }
        return contents
    }

    /// Checks every blob against the weights file and builds the validated model.
    package static func assemble(_ contents: ManifestContents, weights: UnsafeRawBufferPointer,
                                 weightsPath: String, manifestPath: String, verifyChecksums: Bool,
                                 validateModel: Bool = true,
                                 storage: (Range<Int>) -> ByteStorage) throws -> PortableModel {
        let file = contents.weightsFile
        guard weights.count == contents.weightsFileSize else {
            throw PackageError(path: weightsPath, reason: "is \(weights.count) bytes, the manifest says \(contents.weightsFileSize) (truncated or replaced)")
        }
        guard weights.count >= PackageFormat.weightsHeaderSize,
              Array(weights[0 ..< 8]) == PackageFormat.weightsMagic else {
            throw PackageError(path: weightsPath, reason: "not a Kiln weights file (bad header)")
        }
        func blob(_ r: BlobRecord, _ field: String) throws -> WeightBlob {
            let loc = r.location
            guard loc.offset % PackageFormat.blobAlignment == 0 else {
                throw PackageError(path: manifestPath, field: field, reason: "blob offset \(loc.offset) is not aligned to \(PackageFormat.blobAlignment) bytes")
            }
            guard loc.offset >= PackageFormat.weightsHeaderSize, loc.byteLength >= 0,
                  loc.offset <= weights.count, loc.byteLength <= weights.count - loc.offset else {
                throw PackageError(path: manifestPath, field: field, reason: "blob [\(loc.offset), +\(loc.byteLength)) lies outside \(file) (\(weights.count) bytes)")
            }
            let needed = try Validation.shape(r.shape, r.dtype, field)
            guard needed == loc.byteLength else {
                throw PackageError(path: manifestPath, field: field, reason: "byte length \(loc.byteLength) disagrees with \(r.dtype.rawValue)\(r.shape), which needs \(needed)")
            }
            let range = loc.offset ..< loc.offset + loc.byteLength
            if verifyChecksums {
                let actual = crc32(UnsafeRawBufferPointer(rebasing: weights[range]))
                guard actual == loc.crc32 else {
                    throw PackageError(path: weightsPath, field: field, reason: "CRC-32 mismatch (stored \(hex(loc.crc32)), computed \(hex(actual)))")
                }
            }
            return WeightBlob(dtype: r.dtype, shape: r.shape, data: storage(range))
        }
        if contents.formatVersion < PackageFormat.subgraphVersion, let f = contents.functions.first(where: \.hasSubgraphs) {
            throw PackageError(path: manifestPath, field: "functions '\(f.name)'",
                               reason: "has control-flow subgraphs, which need format version \(PackageFormat.subgraphVersion) (the file says \(contents.formatVersion))")
        }
        var modelWeights: [Weight] = []
        modelWeights.reserveCapacity(contents.weights.count)
        for (i, w) in contents.weights.enumerated() {
            let f = "weights[\(i)] '\(w.name)'"
            let encoding: WeightEncoding
            switch w.encoding {
            case .dense(let b):
                encoding = .dense(try blob(b, "\(f).dense"))
            case .quantized(let d, let s, let z):
                encoding = .quantized(QuantizedWeight(
                    data: try blob(d, "\(f).quantized.data"), scale: try blob(s, "\(f).quantized.scale"),
                    zeroPoint: try z.map { try blob($0, "\(f).quantized.zero_point") }))
            case .palettized(let idx, let lut, let s):
                encoding = .palettized(PalettizedWeight(
                    indices: try blob(idx, "\(f).palettized.indices"), lut: try blob(lut, "\(f).palettized.lut"),
                    scale: try s.map { try blob($0, "\(f).palettized.scale") }))
            }
            modelWeights.append(Weight(name: w.name, dtype: w.dtype, shape: w.shape, encoding: encoding))
        }
        let model = PortableModel(formatVersion: contents.formatVersion, metadata: contents.metadata,
                          computePrecision: contents.computePrecision, weights: modelWeights,
                          functions: contents.functions)
        guard validateModel else { return model }
        do {
            try model.validate()
        } catch let e as PackageError {
            throw e.inFile(manifestPath)
        }
        return model
    }
}

func hex(_ v: UInt32) -> String {
    let s = String(v, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 8 - s.count)) + s
}

extension PackageReader {
    /// Bytes on disk of the files in a package directory.
    /// - Parameter path: The package directory.
    /// - Returns: The total size of the manifest and weights files.
    public static func diskSize(ofPackageAt path: String) -> Int {
        [PackageFormat.manifestFileName, PackageFormat.weightsFileName].reduce(0) { total, name in
            var st = stat()
            return stat("\(path)/\(name)", &st) == 0 ? total + Int(st.st_size) : total
        }
    }
}

extension PackageReader {
    /// SHA-256 of a package's manifest and its weights file's size: a content digest at the
    /// granularity of the manifest, which records every blob's offset, length and CRC-32.
    /// O(manifest), so a specialization cache can key on content without hashing the weights.
    /// - Parameter path: The package directory.
    /// - Returns: 32 bytes.
    /// - Throws: ``PackageError`` when a file cannot be read.
    public static func manifestDigest(ofPackageAt path: String) throws -> [UInt8] {
        var h = SHA256()
        let manifest = try MappedFile(path: "\(path)/\(PackageFormat.manifestFileName)")
        h.update(manifest.bytes)
        let weights = try MappedFile(path: "\(path)/\(PackageFormat.weightsFileName)")
        withUnsafeBytes(of: UInt64(weights.count).littleEndian) { h.update($0) }
        return h.finalize()
    }

    /// SHA-256 over a package's manifest then weights file (the source digest of artifacts
    /// compiled from it): content only, never path or modification time.
    /// - Parameter path: The package directory.
    /// - Returns: 32 bytes.
    /// - Throws: ``PackageError`` when a file cannot be read.
    public static func digest(ofPackageAt path: String) throws -> [UInt8] {
        var h = SHA256()
        for name in [PackageFormat.manifestFileName, PackageFormat.weightsFileName] {
            let file = try MappedFile(path: "\(path)/\(name)")
            h.update(file.bytes)
        }
        return h.finalize()
    }
}
