import Foundation
import KilnFormat
import XCTest

final class OptimizeCommandTests: XCTestCase {
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"

    func write(_ text: String, _ path: String) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path))
    }

    func testTableReportAndPackage() throws {
        let dir = try temporaryDirectory(self)
        try write(#"{"global": {"mode": "linear_symmetric", "dtype": "int8"}, "op_names": {"fc2*": {"mode": "kmeans", "nbits": 4}}}"#, "\(dir)/c.json")
        let r = try kiln(["optimize", classifier, "--config", "\(dir)/c.json", "-o", "\(dir)/out.kiln", "--report", "\(dir)/report.json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "")
        let lines = r.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines[0].hasPrefix("weight      consumer      method"), r.stdout)
        XCTAssertTrue(lines[1].hasPrefix("fc1.weight  fc1 (linear)  linear_symmetric  8     int8 per_channel"), r.stdout)
        XCTAssertTrue(lines[3].hasPrefix("fc2.weight  fc2 (linear)  kmeans            4     per_tensor"), r.stdout)
        XCTAssertTrue(r.stdout.contains("fc3.weight  fc3 (linear)  none              32    640 ≤ weight_threshold 2048"), r.stdout)
        XCTAssertTrue(lines.last!.hasPrefix("total: 67.3 KiB → "), r.stdout)
        let report = try JSONSerialization.jsonObject(with: fileBytes("\(dir)/report.json")) as! [String: Any]
        let rows = report["rows"] as! [[String: Any]]
        XCTAssertEqual(rows.map { $0["method"] as? String }, ["linear_symmetric", "none", "kmeans", "none", "none", "none"])
        XCTAssertGreaterThan(rows[0]["snrDecibels"] as! Double, 40)
        XCTAssertLessThan(report["bytesAfter"] as! Int, report["bytesBefore"] as! Int)
        let inspect = try kiln(["inspect", "\(dir)/out.kiln"])
        XCTAssertTrue(inspect.stdout.contains("int8 quantized: 1 weight"), inspect.stdout)
        XCTAssertTrue(inspect.stdout.contains("uint4 palettized: 1 weight"), inspect.stdout)
        let features = "\(dir)/f.npy"
        try NDArray(shape: [1, 64], scalars: (0 ..< 64).map { Float($0) / 64 }).writeNPY(to: features)
        XCTAssertEqual(try kiln(["run", "\(dir)/out.kiln", "--input", "features=\(features)", "--print"]).status, 0)
    }

    func testBadConfigFailsBeforeAnyWork() throws {
        let dir = try temporaryDirectory(self)
        try write(#"{"global": {"mode": "kmeans", "nbits": 5}}"#, "\(dir)/c.json")
        let r = try kiln(["optimize", classifier, "--config", "\(dir)/c.json", "-o", "\(dir)/out.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(dir)/c.json: $.global.nbits: must be one of 1, 2, 3, 4, 6, 8\n")
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/out.kiln"))
    }

    func testUsageErrors() throws {
        XCTAssertEqual(try kiln(["optimize", classifier, "-o", "x.kiln"]).status, 64)
        XCTAssertEqual(try kiln(["optimize", classifier, "--config", "c.json"]).status, 64)
        let features = "features=\(repositoryRoot)/examples/TinyClassifier.features.npy"
        for bad in [["--target-cosine", "0.99"], ["--target-snr", "30", "--target-cosine", "0.99", "--input", features],
                    ["--target-snr", "-3"], ["--target-cosine", "2", "--input", features], ["--config", "c.json", "--input", features],
                    ["--target-snr", "30", "--input", features], ["--target-cosine", "0.99", "--input", "nope=x.npy"]] {
            let r = try kiln(["optimize", classifier, "-o", "x.kiln"] + bad)
            XCTAssertEqual(r.status, 64, "\(bad): \(r.stderr)")
            XCTAssertTrue(r.stderr.hasPrefix("error: "), r.stderr)
        }
    }

    func testAccuracyTargets() throws {
        let dir = try temporaryDirectory(self)
        let features = "features=\(repositoryRoot)/examples/TinyClassifier.features.npy"
        let r = try kiln(["optimize", classifier, "--target-cosine", "0.9999", "--input", features, "-o", "\(dir)/c.kiln", "--json"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let report = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as! [String: Any]
        let target = report["target"] as! [String: Any]
        XCTAssertEqual(target["kind"] as? String, "cosine")
        XCTAssertGreaterThanOrEqual(target["measured"] as! Double, 0.9999)
        XCTAssertFalse((target["choices"] as! [[String: Any]]).isEmpty)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(dir)/c.kiln"))
        let snr = try kiln(["optimize", classifier, "--target-snr", "25", "--candidates", "kmeans4,int8", "-o", "\(dir)/s.kiln"])
        XCTAssertEqual(snr.status, 0, snr.stderr)
        XCTAssertTrue(snr.stdout.contains("target SNR 25.0 dB: "), snr.stdout)
        let bad = try kiln(["optimize", classifier, "--target-snr", "25", "--candidates", "kmeans5", "-o", "\(dir)/b.kiln"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasPrefix("error: \(classifier): unknown candidate 'kmeans5'"), bad.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/b.kiln"))
    }
}
