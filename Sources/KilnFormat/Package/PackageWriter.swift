#if canImport(Glibc)
import Glibc
#endif

/// Writes `Name.kiln` packages: deterministic bytes, written atomically.
public enum PackageWriter {
    /// Validates `model` and writes it as a package directory at `path`, replacing
    /// any package there. The package is staged beside `path`, flushed, then moved in.
    /// - Parameters:
    ///   - model: The model to write.
    ///   - path: The package directory (conventionally `Name.kiln`).
    /// - Throws: ``PackageError`` when the model is invalid or a file cannot be written.
    public static func write(_ model: PortableModel, to path: String) throws {
        try model.validate()
        let (contents, blobs) = layout(model)
        let staged = "\(path).tmp-\(getpid())"
        try FileSystem.makeDirectories(FileSystem.parentDirectory(of: path))
        FileSystem.removeTree(staged)
        try FileSystem.makeDirectory(staged)
        do {
            try writeWeightsFile("\(staged)/\(PackageFormat.weightsFileName)", contents: contents, blobs: blobs)
            let manifest = manifestFile(contents)
            try manifest.withUnsafeBytes {
                try FileSystem.writeAtomically("\(staged)/\(PackageFormat.manifestFileName)", [$0])
            }
            try FileSystem.replaceDirectory(path, with: staged)
        } catch {
            FileSystem.removeTree(staged)
            throw error
        }
    }

    /// Replaces the package's metadata, rewriting only its manifest (atomically).
    /// The weights file is not touched; the package is fully validated first.
    /// - Parameters:
    ///   - metadata: The new metadata.
    ///   - path: The package directory.
    /// - Throws: ``PackageError`` when the package is invalid or cannot be written.
    public static func rewriteMetadata(_ metadata: Metadata, ofPackageAt path: String) throws {
        var model = try PackageReader.read(at: path)
        model.metadata = metadata
        do {
            try model.validate()
        } catch let e as PackageError {
            throw e.inFile(path)
        }
        var (contents, manifestPath) = try PackageReader.readManifest(at: path)
        contents.metadata = metadata
        let manifest = manifestFile(contents)
        try manifest.withUnsafeBytes { try FileSystem.writeAtomically(manifestPath, [$0]) }
    }

    /// Places every blob of `model` in the weights file: after the header, in weight
    /// order, each at the next multiple of 64 bytes.
    /// - Returns: The manifest contents and the blobs in file order.
    package static func layout(_ model: PortableModel) -> (ManifestContents, [(BlobLocation, WeightBlob)]) {
        var offset = PackageFormat.weightsHeaderSize
        var placed: [(BlobLocation, WeightBlob)] = []
        func place(_ b: WeightBlob) -> BlobRecord {
            let a = PackageFormat.blobAlignment
            offset = (offset + a - 1) / a * a
            let loc = BlobLocation(offset: offset, byteLength: b.data.count, crc32: crc32(b.data.bytes))
            offset += b.data.count
            placed.append((loc, b))
            return BlobRecord(dtype: b.dtype, shape: b.shape, location: loc)
        }
        let records = model.weights.map { w -> WeightRecord in
            let encoding: WeightRecord.Encoding
            switch w.encoding {
            case .dense(let b):
                encoding = .dense(place(b))
            case .quantized(let q):
                encoding = .quantized(data: place(q.data), scale: place(q.scale), zeroPoint: q.zeroPoint.map(place))
            case .palettized(let p):
                encoding = .palettized(indices: place(p.indices), lut: place(p.lut), scale: p.scale.map(place))
            }
            return WeightRecord(name: w.name, dtype: w.dtype, shape: w.shape, encoding: encoding)
        }
        let contents = ManifestContents(
            formatVersion: model.writtenFormatVersion, metadata: model.metadata, computePrecision: model.computePrecision,
            weights: records, functions: model.functions,
            weightsFile: PackageFormat.weightsFileName, weightsFileSize: offset)
        return (contents, placed)
    }

    /// The manifest file: 32-byte header (magic, version, flags, payload length,
    /// payload CRC-32, reserved) followed by the protobuf payload.
    package static func manifestFile(_ contents: ManifestContents) -> [UInt8] {
        frameManifest(ManifestCodec.encode(contents), version: contents.formatVersion)
    }

    /// Puts the manifest header in front of a protobuf payload.
    package static func frameManifest(_ payload: [UInt8], version: Int) -> [UInt8] {
        var out = PackageFormat.manifestMagic
        out.reserveCapacity(PackageFormat.manifestHeaderSize + payload.count)
        out.appendLE(UInt32(clamping: version))
        out.appendLE(UInt32(0))
        out.appendLE(UInt64(payload.count))
        out.appendLE(crc32(payload))
        out.appendLE(UInt32(0))
        out.append(contentsOf: payload)
        return out
    }

    /// The weights file's 64-byte header.
    package static func weightsHeader(version: Int) -> [UInt8] {
        var header = PackageFormat.weightsMagic
        header.appendLE(UInt32(clamping: version))
        header += [UInt8](repeating: 0, count: PackageFormat.weightsHeaderSize - header.count)
        return header
    }

    static func writeWeightsFile(_ path: String, contents: ManifestContents, blobs: [(BlobLocation, WeightBlob)]) throws {
        let header = weightsHeader(version: contents.formatVersion)
        let zeros = [UInt8](repeating: 0, count: PackageFormat.blobAlignment)
        try header.withUnsafeBytes { h in
            try zeros.withUnsafeBytes { z in
                var chunks = [h]
                var at = header.count
                for (loc, blob) in blobs {
                    if loc.offset > at { chunks.append(UnsafeRawBufferPointer(rebasing: z[0 ..< loc.offset - at])) }
                    chunks.append(blob.data.bytes)
                    at = loc.offset + loc.byteLength
                }
                try FileSystem.writeAtomically(path, chunks)
            }
        }
    }
}
