import FuzzSupport
import KilnFormat

/// A package directory from one input: manifest.pb and weights.bin split at the first u32;
/// read with and without blob checksums, then summarized as `kiln inspect` does.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    let (manifest, weights) = Scratch.split(UnsafeRawBufferPointer(start: data, count: size))
    _ = Scratch.write(manifest, "P.kiln/manifest.pb")
    _ = Scratch.write(weights, "P.kiln/weights.bin")
    for verify in [true, false] {
        if let model = try? PackageReader.read(at: "\(Scratch.directory)/P.kiln", verifyChecksums: verify) {
            _ = SourceSummary(model)
        }
    }
    return 0
}
