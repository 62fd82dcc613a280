import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime
import XCTest

/// Loads, specializations and runs from many tasks at once: the same answers as one at a time, and
/// one cache entry. `make sanitize` runs these (with the other `Concurrent` tests) under
/// ThreadSanitizer.
final class ConcurrentLoaderTests: XCTestCase {
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"
    let features = NDArray(shape: [4, 64], scalars: (0 ..< 256).map { Float(sin(Double($0) * 0.17)) })

    func probabilities(_ model: Model) async throws -> [Float] {
        try await model.loadFunction(named: "main")!.run(inputs: ["features": features])["probabilities"]!.scalars(as: Float.self)
    }

    /// Eight tasks specialize one package into one cache at once: every load succeeds with the
    /// same answers, and the cache holds one artifact (no half-written or duplicate entries).
    func testConcurrentSpecializationsShareOneCacheEntry() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let reference = try await probabilities(try await Model.load(contentsOf: URL(fileURLWithPath: classifier)))
        // A directory with the package and only an artifact for another family: every load specializes.
        guard let host = Architecture.host else { throw XCTSkip("no runnable architecture") }
        let foreign = Architecture.named(host.family == Architecture.named("arm64")!.family ? "x86_64" : "arm64")!
        try compileArtifact(try PackageReader.read(at: classifier), foreign, to: "\(dir)/TinyClassifier.\(foreign.name).compiled")
        try FileManager.default.copyItem(atPath: classifier, toPath: "\(dir)/TinyClassifier.kiln")
        let url = URL(fileURLWithPath: dir), cacheDir = "\(dir)/cache", input = features
        let results = try await withThrowingTaskGroup(of: [Float].self) { group in
            for _ in 0 ..< 8 {
                group.addTask {
                    var options = ModelLoadOptions()
                    options.cache = SpecializationCache(directory: cacheDir)
                    options.threads = 2
                    let model = try await Model.load(contentsOf: url, options: options)
                    return try await model.loadFunction(named: "main")!.run(inputs: ["features": input])["probabilities"]!
                        .scalars(as: Float.self)
                }
            }
            var all: [[Float]] = []
            for try await r in group { all.append(r) }
            return all
        }
        XCTAssertEqual(results.count, 8)
        for r in results { XCTAssertEqual(r, results[0]) }
        for (a, b) in zip(results[0], reference) { XCTAssertEqual(a, b, accuracy: 1e-5) }
        XCTAssertEqual(SpecializationCache(directory: cacheDir).entries().count, 1)
        let leftovers = try FileManager.default.subpathsOfDirectory(atPath: cacheDir).filter { $0.contains(".tmp") }
        XCTAssertEqual(leftovers, [])
    }

    /// Directory loads from many tasks at once, each verifying the artifact and writing the
    /// verified-file memo, then runs of one function from many tasks with two threads each.
    func testConcurrentVerifiedLoadsAndRuns() async throws {
        guard let host = Architecture.host else { throw XCTSkip("no runnable architecture") }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try compileArtifact(try PackageReader.read(at: classifier), host, to: "\(dir)/TinyClassifier.\(host.name).compiled")
        let url = URL(fileURLWithPath: dir), cacheDir = "\(dir)/cache", input = features
        let models = try await withThrowingTaskGroup(of: Model.self) { group in
            for _ in 0 ..< 6 {
                group.addTask {
                    var options = ModelLoadOptions()
                    options.cache = SpecializationCache(directory: cacheDir)
                    options.threads = 2
                    return try await Model.load(contentsOf: url, options: options)
                }
            }
            var all: [Model] = []
            for try await m in group { all.append(m) }
            return all
        }
        for m in models { XCTAssertEqual(m.explanation.chosen, "\(dir)/TinyClassifier.\(host.name).compiled") }
        let main = try await models[0].loadFunction(named: "main")!
        let single = try await main.run(inputs: ["features": input])["probabilities"]!.scalars(as: Float.self)
        try await withThrowingTaskGroup(of: [Float].self) { group in
            for _ in 0 ..< 16 {
                group.addTask { try await main.run(inputs: ["features": input])["probabilities"]!.scalars(as: Float.self) }
            }
            for try await r in group { XCTAssertEqual(r, single) }
        }
    }
}

/// Artifacts `make fuzz` found crashing (checksums made valid, so they load): each run on zero
/// inputs is now a clear error. The map must name every file of `Tests/Fixtures/fuzz/artifact`.
final class FuzzArtifactRegressionTests: XCTestCase {
    func testFuzzFoundArtifactsRunToClearErrors() async throws {
        let dir = "\(repositoryRoot)/Tests/Fixtures/fuzz/artifact"
        let expected = ["argmax_of_a_scalar.x86_64.compiled": "argmax needs an input of rank ≥ 1",
                        "batch_norm_non_float_input.x86_64.compiled": "op 'batch_norm': expected a float32 tensor, got bool",
                        "dense_weight_of_a_storage_type.x86_64.compiled": "weight 'go'.dense: blob is int4[], weight is bool[]: a dense blob holds whole-byte elements",
                        "gru_weights_not_float32.x86_64.compiled": "R must be float32, got bool",
                        "input_of_a_storage_type.x86_64.compiled": "is a weight storage type, not a tensor type",
                        "pool_not_channels_last.x86_64.compiled": "the step's config (portable: channels-first, no epilogue, weight as stored) does not fit kernel f32_pool2d_nhwc__scalar",
                        "quantize_zero_point_mismatch.x86_64.compiled": "zero point [2, 2] does not match scale [2, 3, 2]",
                        "step_with_fewer_inputs.x86_64.compiled": "steps[0]: 0 inputs for the op's 3",
                        "top_k_of_a_scalar.x86_64.compiled": "axis 0 is out of range for rank 0"]
        let files = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".compiled") }.sorted()
        XCTAssertEqual(files, expected.keys.sorted())
        for file in files {
            var options = ModelLoadOptions()
            options.rememberVerifiedFiles = false
            do {
                // Loading (the plan is checked against the op set), preparing the function (its
                // steps check the plan against the ops) or running it fails.
                let model = try await Model.load(contentsOf: URL(fileURLWithPath: "\(dir)/\(file)"), options: options)
                let main = try await model.loadFunction(named: model.functionNames[0])!
                var inputs: [String: NDArray] = [:]
                for d in main.descriptor.inputs {
                    inputs[d.name] = NDArray(shape: d.shape.map { $0.size ?? 1 }, scalarType: d.scalarType)
                }
                _ = try await main.run(inputs: inputs)
                XCTFail("\(file): expected an error")
            } catch {
                XCTAssertTrue("\(error)".contains(expected[file] ?? "?"), "\(file): \(error)")
            }
        }
    }
}
