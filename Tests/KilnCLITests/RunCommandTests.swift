import Foundation
import KilnFormat
import XCTest

final class RunCommandTests: XCTestCase {
    func writeNPY(_ x: NDArray, _ dir: String, _ name: String) throws -> String {
        let path = "\(dir)/\(name).npy"
        try x.writeNPY(to: path)
        return path
    }

    func testClassifierEndToEnd() throws {
        let dir = try temporaryDirectory(self)
        let features = try writeNPY(NDArray(shape: [2, 64], scalars: (0 ..< 128).map { Float($0 % 13) / 13 }), dir, "features")
        let r = try kiln(["run", "\(repositoryRoot)/examples/TinyClassifier.kiln", "--input", "features=\(features)",
                          "--output-dir", "\(dir)/out", "--print"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("probabilities  float32[2, 10]\n  min "), r.stdout)
        XCTAssertTrue(r.stdout.contains("mean 0.1\n"), r.stdout)
        let p = try NDArray(npyFile: "\(dir)/out/probabilities.npy")
        XCTAssertEqual(p.shape, [2, 10])
        XCTAssertEqual(p.scalars(as: Float.self).reduce(0, +), 2, accuracy: 1e-5)
        let json = try JSONSerialization.jsonObject(with: try fileBytes("\(dir)/out/outputs.json")) as! [String: Any]
        let entries = json["outputs"] as! [[String: Any]]
        XCTAssertEqual(entries.count, 1)
        XCTAssertEqual(entries[0]["name"] as? String, "probabilities")
        XCTAssertEqual(entries[0]["file"] as? String, "probabilities.npy")
        XCTAssertEqual(entries[0]["dtype"] as? String, "float32")
        XCTAssertEqual(entries[0]["shape"] as? [Int], [2, 10])
    }

    func testEncoderFunctionsEndToEnd() throws {
        let dir = try temporaryDirectory(self)
        let tokens = try writeNPY(NDArray(shape: [1, 6], scalars: [Int64(1), 5, 9, 200, 3, 3]), dir, "tokens")
        for (function, output) in [("embed", "embeddings"), ("encode", "hidden")] {
            let r = try kiln(["run", "\(repositoryRoot)/examples/TinyEncoder.kiln", "--function", function,
                              "--input", "tokens=\(tokens)", "--output-dir", "\(dir)/\(function)"])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertEqual(r.stdout, "")
            XCTAssertEqual(try NDArray(npyFile: "\(dir)/\(function)/\(output).npy").shape, [1, 6, 64])
        }
    }

    func testOutputNamesBecomeFileSafe() throws {
        let dir = try temporaryDirectory(self)
        var b = ModelBuilder(name: "Names")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2]))
        f.output("onnx::Shape_422", try f.apply1("relu", [x]))
        f.output("461", try f.apply1("neg", [x]))
        f.output("a/b c", x)
        try b.add(f)
        try PackageWriter.write(try b.build(), to: "\(dir)/Names.kiln")
        let input = try writeNPY(NDArray(shape: [2], scalars: [Float(-1), 2]), dir, "x")
        let r = try kiln(["run", "\(dir)/Names.kiln", "--input", "x=\(input)", "--output-dir", "\(dir)/out"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/out/onnx__Shape_422.npy").scalars(as: Float.self), [0, 2])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/out/461.npy").scalars(as: Float.self), [1, -2])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/out/a_b_c.npy").scalars(as: Float.self), [-1, 2])
        let json = try JSONSerialization.jsonObject(with: try fileBytes("\(dir)/out/outputs.json")) as! [String: Any]
        let names = (json["outputs"] as! [[String: Any]]).map { "\($0["name"]!)=\($0["file"]!)" }
        XCTAssertEqual(names, ["onnx::Shape_422=onnx__Shape_422.npy", "461=461.npy", "a/b c=a_b_c.npy"])
    }

    func testMissingInputListsTheFunctionsInputs() throws {
        let r = try kiln(["run", "\(repositoryRoot)/examples/TinyEncoder.kiln", "--function", "encode", "--print"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.hasPrefix("error: missing --input for 'tokens'; function 'encode' takes:\n  tokens  int64[batch, seq]\n"), r.stderr)
        XCTAssertTrue(r.stderr.contains("See 'kiln run --help'."))
    }

    func testUsageErrors() throws {
        let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"
        var r = try kiln(["run", encoder, "--input", "tokens=x.npy"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("give --output-dir DIR, --print, or both"), r.stderr)
        r = try kiln(["run", encoder, "--input", "tokens=x.npy", "--print"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("several functions (embed, encode); choose one with --function"), r.stderr)
        r = try kiln(["run", encoder, "--function", "encod", "--input", "tokens=x.npy", "--print"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("has no function 'encod'; it has 'embed', 'encode'; did you mean 'encode'?"), r.stderr)
        r = try kiln(["run", encoder, "--function", "encode", "--input", "token=x.npy", "--print"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("function 'encode' has no input 'token'"), r.stderr)
        r = try kiln(["run", encoder, "--function", "encode", "--input", "tokens", "--print"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("'tokens' is not NAME=FILE.npy"), r.stderr)
    }

    func testBadInputFilesFailWithOneLine() throws {
        let dir = try temporaryDirectory(self)
        let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"
        let floats = try writeNPY(NDArray(shape: [1, 3], scalarType: .float32), dir, "floats")
        var r = try kiln(["run", encoder, "--function", "encode", "--input", "tokens=\(floats)", "--print"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: function 'encode': input 'tokens' must be int64, got float32\n")
        let fortran = "\(repositoryRoot)/Tests/Fixtures/npy/fortran.npy"
        r = try kiln(["run", encoder, "--function", "encode", "--input", "tokens=\(fortran)", "--print"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(fortran): Fortran-order arrays are not supported; save with np.ascontiguousarray\n")
        r = try kiln(["run", encoder, "--function", "encode", "--input", "tokens=\(dir)/none.npy", "--output-dir", "\(dir)/o"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.hasPrefix("error: \(dir)/none.npy: open failed"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/o"))
    }
}
