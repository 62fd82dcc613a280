/// Where a blob's bytes are in the weights file.
package struct BlobLocation: Sendable, Hashable {
    package var offset: Int
    package var byteLength: Int
    package var crc32: UInt32

    package init(offset: Int, byteLength: Int, crc32: UInt32) {
        self.offset = offset
        self.byteLength = byteLength
        self.crc32 = crc32
    }
}

/// A blob as the manifest describes it, before its bytes are checked and mapped.
package struct BlobRecord: Sendable, Hashable {
    package var dtype: DataType
    package var shape: [Int]
    package var location: BlobLocation
}

/// A weight as the manifest describes it.
package struct WeightRecord: Sendable {
    package enum Encoding: Sendable {
        case dense(BlobRecord)
        case quantized(data: BlobRecord, scale: BlobRecord, zeroPoint: BlobRecord?)
        case palettized(indices: BlobRecord, lut: BlobRecord, scale: BlobRecord?)

        package var blobs: [BlobRecord] {
            switch self {
            case .dense(let b): return [b]
            case .quantized(let d, let s, let z): return [d, s] + (z.map { [$0] } ?? [])
            case .palettized(let i, let l, let s): return [i, l] + (s.map { [$0] } ?? [])
            }
        }
    }

    package var name: String
    package var dtype: DataType
    package var shape: [Int]
    package var encoding: Encoding
}

/// Everything a manifest holds, decoded but not yet validated against the weights file.
package struct ManifestContents: Sendable {
    package var formatVersion: Int
    package var metadata: Metadata
    package var computePrecision: DataType
    package var weights: [WeightRecord]
    package var functions: [Function]
    package var weightsFile: String
    package var weightsFileSize: Int
}
