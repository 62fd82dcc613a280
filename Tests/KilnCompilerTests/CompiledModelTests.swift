import Foundation
import KilnCompiler
import KilnCompression
import KilnFormat
import KilnONNX
import KilnReference
import KilnRuntime
import KilnTestSupport
import XCTest

/// Compiled artifacts of the shared models and the examples, for every x86-64 arch this
/// host runs, reproduce the reference interpreter and onnxruntime's goldens.
final class CompiledModelTests: XCTestCase {
    func checkShared(_ name: String) async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/\(name).onnx")
        let golden = try Golden(directory: "\(testGoldens)/\(name)")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        XCTAssertFalse(runnableArchitectures.isEmpty)
        for arch in runnableArchitectures {
            let path = "\(dir)/\(name).\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, "\(name) \(arch.name)")
            let got = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: golden.inputs,
                                                               label: "\(name) \(arch.name)")
            for (outputName, want) in golden.outputs {
                assertMatches(got[outputName], want, "\(name) \(arch.name) \(outputName) vs onnxruntime")
            }
        }
    }

    func testMobileNetV3() async throws { try await checkShared("mobilenetv3_orientation") }
    func testMagika() async throws { try await checkShared("magika_v3_3") }
    func testMiniLM() async throws { try await checkShared("minilm_l3_paraphrase") }

    func testExamples() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let classifier = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        let encoder = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        let features = NDArray(shape: [3, 64], scalars: (0 ..< 192).map { Float(sin(Double($0) * 0.37)) })
        let tokens = NDArray(shape: [2, 5], scalars: (0 ..< 10).map { Int64(($0 * 37) % 256) })
        for arch in runnableArchitectures {
            try compileArtifact(classifier, arch, to: "\(dir)/c.\(arch.name).compiled")
            _ = try await assertCompiledMatchesReference(classifier, artifact: "\(dir)/c.\(arch.name).compiled", function: "main",
                                                         inputs: ["features": features], label: "TinyClassifier \(arch.name)")
            try compileArtifact(encoder, arch, to: "\(dir)/e.\(arch.name).compiled")
            try assertNoReferenceSteps("\(dir)/e.\(arch.name).compiled", "TinyEncoder \(arch.name)")
            for function in ["embed", "encode"] {
                _ = try await assertCompiledMatchesReference(encoder, artifact: "\(dir)/e.\(arch.name).compiled", function: function,
                                                             inputs: ["tokens": tokens], label: "TinyEncoder.\(function) \(arch.name)")
            }
        }
    }

    /// Compressed MiniLM (int8 per-channel; 4-bit k-means palettized) compiles with its weights
    /// still compressed, and matches the reference interpreter running the same compressed package.
    func testCompressedMiniLM() async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/minilm_l3_paraphrase.onnx")
        let golden = try Golden(directory: "\(testGoldens)/minilm_l3_paraphrase")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let configs = [
            #"{"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}"#,
            #"{"global": {"mode": "kmeans", "nbits": 4}, "op_types": {"gather": null}}"#,
        ]
        guard let arch = Architecture.host else { throw XCTSkip("no runnable architecture") }
        for (i, text) in configs.enumerated() {
            let config = try CompressionConfig(data: Data(text.utf8), path: "config\(i).json")
            let (compressed, _) = try Compressor.apply(config, to: model, progress: nil)
            let path = "\(dir)/minilm\(i).\(arch.name).compiled"
            try compileArtifact(compressed, arch, to: path)
            let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
            let kinds = Set(artifact.plan.model.weights.filter { $0.name.contains("@") }.map(\.encoding.kindName))
            XCTAssertEqual(kinds, [i == 0 ? "quantized" : "palettized"], "packed GEMM weights stay compressed")
            _ = try await assertCompiledMatchesReference(compressed, artifact: path, function: "main", inputs: golden.inputs,
                                                         label: "MiniLM config \(i)")
        }
    }

    /// Many tasks calling one compiled function at once get the same answers as one call.
    func testConcurrentCallsAgree() async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/minilm_l3_paraphrase.onnx")
        let golden = try Golden(directory: "\(testGoldens)/minilm_l3_paraphrase")
        guard let arch = Architecture.host else { throw XCTSkip("no runnable architecture") }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try compileArtifact(model, arch, to: "\(dir)/m.\(arch.name).compiled")
        let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: "\(dir)/m.\(arch.name).compiled"))
        let f = try await compiled.loadFunction(named: "main")!
        let single = try await f.run(inputs: golden.inputs)["461"]!.scalars(as: Float.self)
        let inputs = golden.inputs
        try await withThrowingTaskGroup(of: [Float].self) { group in
            for _ in 0 ..< 8 { group.addTask { try await f.run(inputs: inputs)["461"]!.scalars(as: Float.self) } }
            for try await result in group { XCTAssertEqual(result, single) }
        }
    }

    func testCompilingTwiceGivesIdenticalBytes() throws {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/mobilenetv3_orientation.onnx")
        for arch in Architecture.all {
            let options = Compiler.Options(arch: arch)
            let a = try Compiler.compile(model, options: options, sourceDigest: [UInt8](repeating: 1, count: 32))
            let b = try Compiler.compile(model, options: options, sourceDigest: [UInt8](repeating: 1, count: 32))
            XCTAssertEqual(CompiledArtifact.serialize(header: a.0, plan: a.1), CompiledArtifact.serialize(header: b.0, plan: b.1), arch.name)
        }
    }

    /// Every single-byte corruption of the header and plan is refused with a clear error.
    func testCorruptHeaderOrPlanFailsToLoad() async throws {
        let model = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arch = Architecture.named("x86_64")!
        let good = try compileArtifact(model, arch, to: "\(dir)/m.x86_64.compiled")
        let planEnd = good.withUnsafeBytes { try! CompiledArtifact.readHeader($0).sections[0].upperBound }
        for offset in 0 ..< planEnd {
            var bad = good
            bad[offset] ^= 0x5A
            let path = "\(dir)/bad.x86_64.compiled"
            try Data(bad).write(to: URL(fileURLWithPath: path))
            do {
                _ = try await Model.load(contentsOf: URL(fileURLWithPath: path))
                XCTFail("byte \(offset) corrupted but the artifact loaded")
            } catch let e as PackageError {
                XCTAssertEqual(e.path, path)
                XCTAssertTrue(e.description.contains("corrupt") || e.description.contains("magic") || e.description.contains("version")
                    || e.description.contains("section"), "byte \(offset): \(e)")
            }
        }
    }

    func testArtifactForAnotherFamilyIsRefused() async throws {
        let model = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = "\(dir)/m.arm64.compiled"
        try compileArtifact(model, Architecture.named("arm64")!, to: path)
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: path))
            #if !arch(arm64)
            XCTFail("an arm64 artifact loaded on x86-64")
            #endif
        } catch let e as RuntimeError {
            XCTAssertTrue(e.reason.contains("arm64"), e.reason)
        }
    }
}
