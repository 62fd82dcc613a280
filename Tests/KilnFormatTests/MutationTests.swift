import XCTest
@testable import KilnFormat

/// Byte-level mutations of a valid package must only ever produce a model or a
/// ``PackageError`` — never a crash or another kind of error.
final class MutationTests: XCTestCase {
    typealias Generator = SplitMix64

    static func mutate(_ bytes: inout [UInt8], _ rng: inout Generator) {
        guard !bytes.isEmpty else { return }
        for _ in 0 ... rng.below(3) {
            switch rng.below(6) {
            case 0: bytes[rng.below(bytes.count)] ^= UInt8(1 << rng.below(8))
            case 1: bytes[rng.below(bytes.count)] = UInt8(truncatingIfNeeded: rng.next())
            case 2: bytes.removeLast(rng.below(bytes.count))
            case 3: bytes.insert(contentsOf: (0 ... rng.below(8)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }, at: rng.below(bytes.count))
            case 4:
                let start = rng.below(bytes.count)
                let end = min(bytes.count, start + 1 + rng.below(16))
                bytes.removeSubrange(start ..< end)
            default:
                // Varint-heavy fields: push a byte to a boundary value.
                bytes[rng.below(bytes.count)] = [0x00, 0x7F, 0x80, 0xFF][rng.below(4)]
            }
            if bytes.isEmpty { return }
        }
    }

    func testTenThousandMutationsNeverCrash() throws {
        let path = "\(repositoryRoot)/examples/TinyClassifier.kiln"
        let manifest = try fileBytes("\(path)/\(PackageFormat.manifestFileName)")
        let weights = try fileBytes("\(path)/\(PackageFormat.weightsFileName)")
        let payload = Array(manifest[PackageFormat.manifestHeaderSize...])
        var rng = Generator(seed: 20_261_129)
        var (accepted, rejected) = (0, 0)
        for i in 0 ..< 10_000 {
            var m = manifest
            var w = weights
            switch i % 5 {
            case 0, 1: Self.mutate(&m, &rng)
            case 2, 3:
                // Mutate the protobuf itself and fix up the header, so the
                // decoder and validator see the damage, not just the checksum.
                var p = payload
                Self.mutate(&p, &rng)
                m = PackageWriter.frameManifest(p, version: PackageFormat.currentVersion)
            default: Self.mutate(&w, &rng)
            }
            do {
                let storage = ByteStorage(w)
                let contents = try m.withUnsafeBytes { try PackageReader.decodeManifestFile($0) }
                _ = try PackageReader.assemble(contents, weights: storage.bytes, weightsPath: "weights.bin",
                                               manifestPath: "manifest.pb", verifyChecksums: true) { range in
                    ByteStorage(copying: UnsafeRawBufferPointer(rebasing: storage.bytes[range]))
                }
                accepted += 1
            } catch let e as PackageError {
                XCTAssertFalse(e.reason.isEmpty)
                rejected += 1
            } catch {
                XCTFail("mutation \(i) raised a non-package error: \(error)")
            }
        }
        XCTAssertEqual(accepted + rejected, 10_000)
        XCTAssertGreaterThan(rejected, 9000, "mutations should almost always be caught")
    }
}
