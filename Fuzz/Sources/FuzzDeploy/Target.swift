import Foundation
import FuzzSupport
import KilnFormat
import KilnRuntime
import KilnStore

/// The fixed key of the encrypted seeds (`tools/fuzz.sh` writes it with `kiln keygen`).
let key: ArtifactKey? = ProcessInfo.processInfo.environment["KILN_FUZZ_KEY"].flatMap { try? ArtifactKey.read(at: $0) }

/// Deployment inputs, by the first byte (mod 4): an `assets.json` (parse, then choose each
/// model's artifact for this host); a `.kilnarchive` (header and index CRCs recomputed, then
/// `Model.load`); an encrypted artifact (envelope CRC recomputed, then read with the seeds' key);
/// a key file.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input, size > 0 else { return 0 }
    var bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    func put(_ v: UInt32, _ at: Int) { for i in 0 ..< 4 { bytes[at + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) } }
    switch data[0] % 4 {
    case 0:
        if let manifest = try? AssetsManifest.parse(bytes, source: "fuzz"), let host = try? HostTarget.current() {
            for m in manifest.models { _ = host.choose(m) }
        }
    case 1:
        if bytes.count >= 32 {
            let n = Int(bytes[12]) | Int(bytes[13]) << 8 | Int(bytes[14]) << 16 | Int(bytes[15]) << 24
            if n <= bytes.count - 32 { put(crc32(bytes[32 ..< 32 + n]), 24) }
            put(crc32(bytes[0 ..< 28]), 28)
        }
        let path = bytes.withUnsafeBytes { Scratch.write($0, "deploy/M.kilnarchive") }
        var options = ModelLoadOptions()
        options.threads = 1
        options.rememberVerifiedFiles = false
        blocking { [options] in _ = try? await Model.load(contentsOf: URL(fileURLWithPath: path), options: options) }
    case 2:
        if bytes.count >= 512 { put(crc32(bytes[0 ..< 508]), 508) }
        let path = bytes.withUnsafeBytes { Scratch.write($0, "deploy/M.x86_64.compiled") }
        let k = key
        _ = try? CompiledArtifact.read(at: path, keys: { _ in k })
    default:
        let path = bytes.withUnsafeBytes { Scratch.write($0, "deploy/M.kilnkey") }
        _ = try? ArtifactKey.read(at: path)
    }
    return 0
}
