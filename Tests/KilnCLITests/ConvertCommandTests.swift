import Foundation
import KilnTestSupport
import XCTest

final class ConvertCommandTests: XCTestCase {
    let models = "\(repositoryRoot)/Tests/Fixtures/onnx/models"

    func testConvertThenInspectAndRunMiniLM() throws {
        let dir = try temporaryDirectory(self)
        var r = try kiln(["convert", "\(testModels)/minilm_l3_paraphrase.onnx", "-o", "\(dir)/MiniLM.kiln"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "")
        r = try kiln(["inspect", "\(dir)/MiniLM.kiln"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("minilm_l3_paraphrase\n"), r.stdout)
        XCTAssertTrue(r.stdout.contains("parameters     17,243,008 (17.2M)"), r.stdout)
        XCTAssertTrue(r.stdout.contains("input_ids       int64[batch_size, sequence_length]"), r.stdout)
        XCTAssertTrue(r.stdout.contains("attention_mask  int64[batch_size, sequence_length]"), r.stdout)
        XCTAssertTrue(r.stdout.contains("onnx::Shape_422  float32[batch_size, sequence_length, 384]"), r.stdout)
        let golden = "\(testGoldens)/minilm_l3_paraphrase"
        r = try kiln(["run", "\(dir)/MiniLM.kiln", "--input", "input_ids=\(golden)/in_0_input_ids.npy",
                      "--input", "attention_mask=\(golden)/in_1_attention_mask.npy", "--output-dir", "\(dir)/out"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let files = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/out").sorted()
        XCTAssertEqual(files, ["461.npy", "463.npy", "onnx__Shape_422.npy", "output.npy", "outputs.json"])
    }

    func testNameAndFunctionOptions() throws {
        let dir = try temporaryDirectory(self)
        let r = try kiln(["convert", "\(models)/metadata.onnx", "-o", "\(dir)/M.kiln", "--name", "Absolute", "--function-name", "forward"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(try kiln(["inspect", "\(dir)/M.kiln", "--json"]).stdout.utf8)) as! [String: Any]
        XCTAssertEqual(json["name"] as? String, "Absolute")
        XCTAssertEqual((json["functions"] as? [[String: Any]])?.first?["name"] as? String, "forward")
    }

    func testSeveralGraphsBecomeFunctionsOfOnePackage() throws {
        let dir = try temporaryDirectory(self)
        let minilm = "\(testModels)/minilm_l3_paraphrase.onnx", mobile = "\(testModels)/mobilenetv3_orientation.onnx"
        var r = try kiln(["convert", "encoder=\(minilm)", "again=\(minilm)", mobile, "-o", "\(dir)/Multi.kiln"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try kiln(["inspect", "\(dir)/Multi.kiln", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! [String: Any]
        XCTAssertEqual(json["name"] as? String, "minilm_l3_paraphrase")
        XCTAssertEqual((json["functions"] as? [[String: Any]])?.map { $0["name"] as? String }, ["encoder", "again", "mobilenetv3_orientation"])
        // The two encoders share their parameters: MiniLM's 17,243,008 and MobileNet's 1,687,589, once each.
        let text = try kiln(["inspect", "\(dir)/Multi.kiln"]).stdout
        XCTAssertTrue(text.contains("parameters     18,930,597 (18.9M)"), text)
        let golden = "\(testGoldens)/minilm_l3_paraphrase"
        r = try kiln(["run", "\(dir)/Multi.kiln", "--function", "again", "--input", "input_ids=\(golden)/in_0_input_ids.npy",
                      "--input", "attention_mask=\(golden)/in_1_attention_mask.npy", "--output-dir", "\(dir)/out"])
        XCTAssertEqual(r.status, 0, r.stderr)
        r = try kiln(["convert", "a=\(minilm)", "b=\(minilm)", "--function-name", "x", "-o", "\(dir)/X.kiln"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("--function-name names the function of one graph"), r.stderr)
        r = try kiln(["convert", "a=\(minilm)", "a=\(mobile)", "-o", "\(dir)/Y.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("two functions are called 'a'"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/Y.kiln"))
    }

    func testUnsupportedModelWritesNothing() throws {
        let dir = try temporaryDirectory(self)
        let r = try kiln(["convert", "\(models)/unsupported_ops.onnx", "-o", "\(dir)/U.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(models)/unsupported_ops.onnx: unsupported operators: Frobnicate ×2 (com.example, opset 3)\n")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), [])
    }

    func testMalformedModelWritesNothing() throws {
        let dir = try temporaryDirectory(self)
        let r = try kiln(["convert", "\(models)/truncated.onnx", "-o", "\(dir)/T.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), [])
    }

    func testUsageErrors() throws {
        var r = try kiln(["convert", "\(models)/metadata.onnx"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("missing -o Name.kiln"), r.stderr)
        r = try kiln(["convert", "-o", "x.kiln"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("missing MODEL.onnx"), r.stderr)
    }
}
