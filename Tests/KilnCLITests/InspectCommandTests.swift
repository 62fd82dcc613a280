import Foundation
import XCTest

final class InspectCommandTests: XCTestCase {
    let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"

    func testTextViewOfTheEncoder() throws {
        let r = try kiln(["inspect", encoder])
        XCTAssertEqual(r.status, 0, r.stderr)
        let out = r.stdout
        XCTAssertTrue(out.hasPrefix("TinyEncoder\n"), out)
        for fragment in [
            "description    One transformer encoder block",
            "author         Kiln examples",
            "license        Apache-2.0",
            "parameters     49,857 (49.9K)",
            "storage        float32: 18 weights, 49,857 parameters",
            "compute        float32",
            "user metadata  sequence = dynamic",
            "Functions (2)\n  embed\n",
            "\n  encode\n",
            "tokens  int64[batch, seq]",
            "embeddings  float32[batch, seq, 64]",
            "hidden  float32[batch, seq, 64]",
            "Operations (25)\n  linear      6\n",
        ] {
            XCTAssertTrue(out.contains(fragment), "missing «\(fragment)» in\n\(out)")
        }
        let size = try ["manifest.pb", "weights.bin"].reduce(0) { $0 + (try fileBytes("\(encoder)/\($1)")).count }
        var digits = String(size)
        for k in stride(from: digits.count - 3, to: 0, by: -3) {
            digits.insert(",", at: digits.index(digits.startIndex, offsetBy: k))
        }
        XCTAssertTrue(out.contains("size on disk   \(digits) bytes ("), out)
    }

    func testJSONHasTheSameFacts() throws {
        let r = try kiln(["inspect", encoder, "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(root["name"] as? String, "TinyEncoder")
        XCTAssertEqual(root["parameterCount"] as? Int, 49_857)
        XCTAssertEqual(root["computePrecision"] as? String, "float32")
        XCTAssertEqual(root["formatVersion"] as? Int, 1)
        let size = try ["manifest.pb", "weights.bin"].reduce(0) { $0 + (try fileBytes("\(encoder)/\($1)")).count }
        XCTAssertEqual(root["sizeBytes"] as? Int, size)
        let meta = try XCTUnwrap(root["metadata"] as? [String: Any])
        XCTAssertEqual(meta["author"] as? String, "Kiln examples")
        XCTAssertEqual((meta["user"] as? [String: String])?["sequence"], "dynamic")
        let functions = try XCTUnwrap(root["functions"] as? [[String: Any]])
        XCTAssertEqual(functions.map { $0["name"] as? String }, ["embed", "encode"])
        for f in functions {
            let input = try XCTUnwrap((f["inputs"] as? [[String: Any]])?.first)
            XCTAssertEqual(input["name"] as? String, "tokens")
            XCTAssertEqual(input["dtype"] as? String, "int64")
            XCTAssertEqual(input["shape"] as? [String], ["batch", "seq"])
        }
        let output = try XCTUnwrap((functions[1]["outputs"] as? [[String: Any]])?.first)
        XCTAssertEqual(output["name"] as? String, "hidden")
        XCTAssertEqual((output["shape"] as? [Any])?.count, 3)
        XCTAssertEqual((output["shape"] as? [Any])?.last as? Int, 64)
        let ops = try XCTUnwrap(root["operations"] as? [[String: Any]])
        XCTAssertEqual(ops.first?["opType"] as? String, "linear")
        XCTAssertEqual(ops.first?["count"] as? Int, 6)
        let counts = ops.compactMap { $0["count"] as? Int }
        XCTAssertEqual(counts, counts.sorted(by: >))
        let storage = try XCTUnwrap(root["storagePrecisions"] as? [[String: Any]])
        XCTAssertEqual(storage.first?["storage"] as? String, "float32")
        let weights = try XCTUnwrap(root["weights"] as? [[String: Any]])
        XCTAssertEqual(weights.reduce(0) { $0 + ($1["parameters"] as? Int ?? 0) }, 49_857)
    }

    func testClassifierSizesStraddleTheCompressionThreshold() throws {
        let r = try kiln(["inspect", classifier, "--json"])
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        let weights = try XCTUnwrap(root["weights"] as? [[String: Any]])
        let matrices = weights.filter { ($0["shape"] as? [Int])?.count == 2 }.compactMap { $0["parameters"] as? Int }
        XCTAssertEqual(matrices, [8192, 8192, 640])
    }
}
