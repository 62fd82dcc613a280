import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime
import XCTest

/// Crafted artifacts whose checksums are valid but whose plan bytes were altered: loading,
/// preparing and running them fails with errors, never a crash.
final class ArtifactMutationTests: XCTestCase {
    func crc(_ bytes: ArraySlice<UInt8>) -> UInt32 { crc32(Array(bytes)) }

    func storeLE(_ v: UInt32, _ bytes: inout [UInt8], at offset: Int) {
        for i in 0 ..< 4 { bytes[offset + i] = UInt8(truncatingIfNeeded: v >> (8 * UInt32(i))) }
    }

    func testMutatedPlansNeverCrash() async throws {
        guard let host = Architecture.host else { throw XCTSkip("no runnable arch") }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 0x5EED)
        func next() -> Int { Int(truncatingIfNeeded: rng.next() >> 33) }
        var loaded = 0
        for example in ["TinyClassifier", "TinyEncoder"] {
            let model = try PackageReader.read(at: "\(repositoryRoot)/examples/\(example).kiln")
            let good = try compileArtifact(model, host, to: "\(dir)/good.\(host.name).compiled")
            let sections = good.withUnsafeBytes { try! CompiledArtifact.readHeader($0).sections }
            let plan = sections[0]
            for _ in 0 ..< 1500 {
                var bytes = good
                for _ in 0 ..< 1 + next() % 3 {
                    let at = plan.lowerBound + next() % plan.count
                    bytes[at] = next() % 2 == 0 ? UInt8(truncatingIfNeeded: next()) : bytes[at] ^ (1 << UInt8(next() % 8))
                }
                // Re-seal: plan CRC in header and trailer, then the header CRC.
                let planCRC = crc(bytes[plan])
                storeLE(planCRC, &bytes, at: 168)
                storeLE(planCRC, &bytes, at: bytes.count - 32 + 20)
                storeLE(crc(bytes[0 ..< 252]), &bytes, at: 252)
                let path = "\(dir)/m.\(host.name).compiled"
                try Data(bytes).write(to: URL(fileURLWithPath: path))
                do {
                    let m = try await Model.load(contentsOf: URL(fileURLWithPath: path))
                    loaded += 1
                    for name in m.functionNames {
                        guard let f = try await m.loadFunction(named: name) else { continue }
                        var inputs: [String: NDArray] = [:]
                        for d in f.descriptor.inputs {
                            let shape = d.shape.map { $0.size ?? 2 }
                            guard shape.allSatisfy({ $0 >= 0 && $0 < 4096 }), shape.reduce(1, *) < 1 << 16 else { continue }
                            switch d.scalarType {
                            case .float32: inputs[d.name] = NDArray(shape: shape, scalars: [Float](repeating: 0.5, count: shape.reduce(1, *)))
                            case .int64: inputs[d.name] = NDArray(shape: shape, scalars: [Int64](repeating: 1, count: shape.reduce(1, *)))
                            default: break
                            }
                        }
                        _ = try? await f.run(inputs: inputs)
                    }
                } catch {
                    // Any error is fine; the process must simply survive.
                }
            }
        }
        XCTAssertGreaterThan(loaded, 0, "some mutations should still load (e.g. names and metadata)")
    }
}
