/// Constants of the `Name.kiln` package layout (specs/package-format.md).
public enum PackageFormat {
    /// The format version this build writes and the newest it reads.
    public static let currentVersion = 2
    /// The first version with graph attributes (control-flow subgraphs); a package without
    /// them is written as version 1, which older readers still read.
    public static let subgraphVersion = 2
    /// The oldest format version this build reads.
    public static let oldestReadableVersion = 1
    /// The manifest's file name inside the package directory.
    public static let manifestFileName = "manifest.pb"
    /// The weights file's name inside the package directory.
    public static let weightsFileName = "weights.bin"
    /// The package directory's extension.
    public static let packageExtension = "kiln"
    /// Blob offsets are multiples of this.
    public static let blobAlignment = 64

    /// First 8 bytes of the manifest file.
    static let manifestMagic: [UInt8] = Array("KILNPKG\0".utf8)
    /// Manifest header: magic, u32 version, u32 flags, u64 payload length, u32 CRC-32, u32 reserved.
    static let manifestHeaderSize = 32
    /// First 8 bytes of the weights file.
    static let weightsMagic: [UInt8] = Array("KILNWTS\0".utf8)
    /// Weights header: magic, u32 version, then zero padding up to the first blob.
    static let weightsHeaderSize = 64
}
