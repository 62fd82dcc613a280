import Foundation
import KilnFormat
import KilnTestSupport
import XCTest

final class CompileCommandTests: XCTestCase {
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"
    let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"

    func testAllArchitecturesAndAssetsManifest() throws {
        let dir = try temporaryDirectory(self)
        let r = try kiln(["compile", classifier, "--arch", "all", "-o", "\(dir)/out", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let assets = try JSONSerialization.jsonObject(with: fileBytes("\(dir)/out/assets.json")) as! [String: Any]
        XCTAssertEqual(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! NSDictionary, assets as NSDictionary)
        let artifacts = assets["artifacts"] as! [[String: Any]]
        XCTAssertEqual(artifacts.map { $0["arch"] as! String },
                       ["x86_64", "x86_64_v2", "x86_64_v3", "x86_64_v4", "arm64", "arm64_dotprod"])
        for a in artifacts {
            let file = "\(dir)/out/\(a["file"] as! String)"
            let bytes = try fileBytes(file)
            XCTAssertEqual(a["bytes"] as? Int, bytes.count)
            XCTAssertEqual(a["sha256"] as? String, bytes.withUnsafeBytes { SHA256.hex(SHA256.hash($0)) })
            XCTAssertEqual(a["formatVersion"] as? Int, 6)
            XCTAssertEqual(a["minimumRuntimeVersion"] as? String, "0.8")
            XCTAssertEqual((a["sourceDigest"] as? String)?.count, 64)
        }
        // Byte-identical on a second run.
        let again = try kiln(["compile", classifier, "--arch", "all", "-o", "\(dir)/again"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(try tree("\(dir)/out").map(\.1), try tree("\(dir)/again").map(\.1))
    }

    func testHostArtifactRunsAndInspects() throws {
        let dir = try temporaryDirectory(self)
        let r = try kiln(["compile", encoder, "--arch", "host", "--min-runtime-version", "0.6", "-o", dir])
        XCTAssertEqual(r.status, 0, r.stderr)
        let file = try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasSuffix(".compiled") }!
        XCTAssertTrue(file.hasPrefix("TinyEncoder.x86_64") || file.hasPrefix("TinyEncoder.arm64"), file)
        let inspect = try kiln(["inspect", "\(dir)/\(file)", "--json"])
        XCTAssertEqual(inspect.status, 0, inspect.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(inspect.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(json["kind"] as? String, "compiled")
        let functions = (json["artifact"] as! [String: Any])["functions"] as! [[String: Any]]
        XCTAssertEqual(functions.map { $0["name"] as! String }, ["embed", "encode"])
        let kernels = (functions[1]["kernels"] as! [[String: Any]]).map { $0["kernel"] as! String }
        XCTAssertTrue(kernels.contains { $0.hasPrefix("f32_gemm_") }, "\(kernels)")
        XCTAssertGreaterThan(functions[1]["arenaBytes"] as! Int, 0)
        let text = try kiln(["inspect", "\(dir)/\(file)"])
        XCTAssertTrue(text.stdout.contains("Kiln compiled artifact, format version \(CompiledFormat.currentVersion)"), text.stdout)
        XCTAssertTrue(text.stdout.contains("steps"), text.stdout)
        // The artifact runs like the package and agrees with it.
        let tokens = NDArray(shape: [1, 4], scalars: [Int64(1), 2, 3, 4])
        try tokens.writeNPY(to: "\(dir)/tokens.npy")
        let compiled = try kiln(["run", "\(dir)/\(file)", "--function", "encode", "--input", "tokens=\(dir)/tokens.npy", "--output-dir", "\(dir)/c"])
        XCTAssertEqual(compiled.status, 0, compiled.stderr)
        let reference = try kiln(["run", encoder, "--function", "encode", "--input", "tokens=\(dir)/tokens.npy", "--output-dir", "\(dir)/r"])
        XCTAssertEqual(reference.status, 0, reference.stderr)
        let (a, b) = (try NDArray(npyFile: "\(dir)/c/hidden.npy"), try NDArray(npyFile: "\(dir)/r/hidden.npy"))
        for (x, y) in zip(a.scalars(as: Float.self), b.scalars(as: Float.self)) { XCTAssertEqual(x, y, accuracy: 1e-4) }
    }

    func testUsageAndFailures() throws {
        let dir = try temporaryDirectory(self)
        let unknown = try kiln(["compile", classifier, "--arch", "x86_64_v9", "-o", dir])
        XCTAssertEqual(unknown.status, 64)
        XCTAssertTrue(unknown.stderr.contains("unknown architecture 'x86_64_v9'"), unknown.stderr)
        let version = try kiln(["compile", classifier, "--arch", "all", "--min-runtime-version", "one", "-o", dir])
        XCTAssertEqual(version.status, 64)
        let missing = try kiln(["compile", "\(dir)/nothing.kiln", "--arch", "all", "-o", "\(dir)/o"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("nothing.kiln"), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/o"))
        // A corrupt artifact is one clear line, exit 1.
        XCTAssertEqual(try kiln(["compile", classifier, "--arch", "x86_64", "-o", "\(dir)/ok"]).status, 0)
        var bytes = try fileBytes("\(dir)/ok/TinyClassifier.x86_64.compiled")
        bytes[300] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: "\(dir)/bad.x86_64.compiled"))
        let bad = try kiln(["inspect", "\(dir)/bad.x86_64.compiled"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("error: \(dir)/bad.x86_64.compiled"), bad.stderr)
        XCTAssertEqual(bad.stderr.split(separator: "\n").count, 1, bad.stderr)
    }

    /// Steps left to the reference interpreter are summed on stderr by op and input types; with
    /// `--strict` they are the error and nothing is written.
    func testReferenceStepsNoteAndStrict() throws {
        let dir = try temporaryDirectory(self)
        let onnx = "\(repositoryRoot)/Tests/Fixtures/onnx/ops/grid_sample_linear_border.onnx"
        XCTAssertEqual(try kiln(["convert", onnx, "-o", "\(dir)/Grid.kiln"]).status, 0)
        let loose = try kiln(["compile", "\(dir)/Grid.kiln", "--arch", "x86_64_v3", "-o", "\(dir)/loose"])
        XCTAssertEqual(loose.status, 0, loose.stderr)
        XCTAssertTrue(loose.stderr.contains("note: x86_64_v3: 1 step runs the reference interpreter: grid_sample(float32, float32) ×1"), loose.stderr)
        let strict = try kiln(["compile", "\(dir)/Grid.kiln", "--arch", "x86_64_v3", "--strict", "-o", "\(dir)/strict"])
        XCTAssertEqual(strict.status, 1)
        XCTAssertTrue(strict.stderr.contains("--strict: for x86_64_v3, 1 step would run the reference interpreter: grid_sample(float32, float32) ×1"), strict.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/strict"))
        // A package every step of which has a kernel compiles under --strict without a note.
        let clean = try kiln(["compile", classifier, "--arch", "x86_64_v3", "--strict", "-o", "\(dir)/clean"])
        XCTAssertEqual(clean.status, 0, clean.stderr)
        XCTAssertFalse(clean.stderr.contains("reference"), clean.stderr)
    }

    func testBenchReport() throws {
        let dir = try temporaryDirectory(self)
        XCTAssertEqual(try kiln(["compile", classifier, "--arch", "host", "-o", dir]).status, 0)
        let file = try FileManager.default.contentsOfDirectory(atPath: dir).first { $0.hasSuffix(".compiled") }!
        for path in ["\(dir)/\(file)", classifier] {
            let r = try kiln(["bench", path, "--dim", "batch=4", "--repeat", "7", "--warmup", "1", "--json"])
            XCTAssertEqual(r.status, 0, r.stderr)
            let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! [String: Any]
            XCTAssertEqual(json["runs"] as? Int, 7)
            let l = json["latencySeconds"] as! [String: Double]
            XCTAssertTrue(l["min"]! <= l["median"]! && l["median"]! <= l["p90"]! && l["p90"]! <= l["p99"]! && l["p99"]! <= l["max"]!, "\(l)")
            XCTAssertGreaterThan(json["throughputPerSecond"] as! Double, 0)
            XCTAssertGreaterThan(json["peakResidentBytes"] as! Int, 0)
        }
        let unbound = try kiln(["bench", classifier])
        XCTAssertEqual(unbound.status, 64)
        XCTAssertTrue(unbound.stderr.contains("symbolic dim 'batch'"), unbound.stderr)
        let badInput = try kiln(["bench", classifier, "--input", "nope=x.npy", "--dim", "batch=1"])
        XCTAssertEqual(badInput.status, 64)
        XCTAssertTrue(badInput.stderr.contains("no input 'nope'"), badInput.stderr)
    }
}

/// `kiln bench` on a decoder-shaped package: the mask's dim `past_sequence_length +
/// sequence_length` takes its size from the two base dims.
final class BenchDimExpressionTests: XCTestCase {
    func testBaseDimsSizeExpressions() throws {
        let dir = try temporaryDirectory(self)
        let onnx = "\(repositoryRoot)/Tests/Fixtures/onnx/models/past_concat_expression.onnx"
        XCTAssertEqual(try kiln(["convert", onnx, "-o", "\(dir)/d.kiln"]).status, 0)
        let r = try kiln(["bench", "\(dir)/d.kiln", "--dim", "batch=1", "--dim", "sequence_length=1", "--dim", "past_sequence_length=9",
                          "--repeat", "2", "--warmup", "0", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let missing = try kiln(["bench", "\(dir)/d.kiln", "--dim", "batch=1", "--dim", "sequence_length=1"])
        XCTAssertEqual(missing.status, 64)
        XCTAssertTrue(missing.stderr.contains("bind it with --dim past_sequence_length=N"), missing.stderr)
        let inspect = try kiln(["inspect", "\(dir)/d.kiln"])
        let lines = inspect.stdout.split(separator: "\n").map { $0.split(separator: " ").joined(separator: " ") }
        XCTAssertTrue(lines.contains("present float32[batch, past_sequence_length + sequence_length, 4]"), inspect.stdout)
        XCTAssertTrue(lines.contains("new_positions int64[sequence_length]"), inspect.stdout)
    }
}

final class BenchSharedModelTests: XCTestCase {
    /// `kiln bench` on each shared model's package and compiled artifact: the table prints and
    /// the JSON parses, with the golden inputs.
    func testPackagesAndArtifacts() throws {
        let dir = try temporaryDirectory(self)
        for name in ["mobilenetv3_orientation", "magika_v3_3", "minilm_l3_paraphrase"] {
            let golden = "\(testGoldens)/\(name)"
            let manifest = try JSONSerialization.jsonObject(with: fileBytes("\(golden)/manifest.json")) as! [String: Any]
            let inputs = (manifest["inputs"] as! [[String: Any]]).flatMap { ["--input", "\($0["name"]!)=\(golden)/\($0["file"]!)"] }
            XCTAssertEqual(try kiln(["convert", "\(testModels)/\(name).onnx", "-o", "\(dir)/\(name).kiln"]).status, 0)
            XCTAssertEqual(try kiln(["compile", "\(dir)/\(name).kiln", "--arch", "host", "-o", "\(dir)/\(name)"]).status, 0)
            let artifact = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/\(name)").first { $0.hasSuffix(".compiled") }!
            for path in ["\(dir)/\(name).kiln", "\(dir)/\(name)/\(artifact)"] {
                let table = try kiln(["bench", path, "--repeat", "2", "--warmup", "0"] + inputs)
                XCTAssertEqual(table.status, 0, table.stderr)
                for field in ["load", "first run", "median", "p99", "throughput", "peak memory"] {
                    XCTAssertTrue(table.stdout.contains("  \(field) "), "\(name): \(field) missing in\n\(table.stdout)")
                }
                let json = try kiln(["bench", path, "--repeat", "2", "--warmup", "0", "--json"] + inputs)
                XCTAssertEqual(json.status, 0, json.stderr)
                let report = try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as! [String: Any]
                XCTAssertEqual(report["runs"] as? Int, 2)
                XCTAssertEqual(report["architecture"] is NSNull, path.hasSuffix(".kiln"), "\(path)")
            }
        }
    }
}
