import Foundation
import XCTest

/// Every package in the committed corpus gets one `error:` line naming the file
/// and the problem, exit status 1, and no crash.
final class MalformedPackageTests: XCTestCase {
    let corpus = "\(repositoryRoot)/Tests/Fixtures/malformed"

    /// What each broken package's error must say.
    let expected: [String: (file: String, reason: String)] = [
        "truncated-manifest": ("manifest.pb", "manifest is truncated"),
        "bad-manifest-magic": ("manifest.pb", "not a Kiln manifest (bad magic)"),
        "manifest-checksum": ("manifest.pb", "manifest checksum mismatch"),
        "newer-format-version": ("manifest.pb", "format version 3 is newer than this Kiln reads (2)"),
        "blob-past-end": ("manifest.pb", "weights[0] 'fc1.weight'.dense: blob [69184, +32768) lies outside weights.bin"),
        "misaligned-blob": ("manifest.pb", "weights[1] 'fc1.bias'.dense: blob offset 32836 is not aligned to 64 bytes"),
        "crc-mismatch": ("weights.bin", "weights[5] 'fc3.bias'.dense: CRC-32 mismatch"),
        "truncated-weights": ("weights.bin", "is 68868 bytes, the manifest says 68968"),
        "unknown-dtype": ("manifest.pb", "weights[2] 'fc2.weight'.dtype: unknown dtype 99"),
        "cycle": ("manifest.pb", "op 'relu1': cycle: relu1 → fc2 → relu2 → relu1"),
        "use-before-definition": ("manifest.pb", "op 'fc2': input 'relu1' is used before its definition by op 'relu1'"),
        "duplicate-value-name": ("manifest.pb", "op 'relu2': value 'relu1' is defined more than once"),
        "huge-dimension": ("manifest.pb", "'features': shape [batch, 4611686018427387904] is too large"),
        "unknown-op-type": ("manifest.pb", "unknown op type 'frobnicate'"),
        "attribute-type": ("manifest.pb", "attribute 'axis' must be int, got string"),
        "undefined-output": ("manifest.pb", "returns value 'nowhere', which is not defined"),
        "weights-file-escapes": ("manifest.pb", "weights_file: '../weights.bin' is not a file name inside the package"),
    ]

    func testEveryBrokenPackageGetsOneClearLine() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: corpus).filter { $0.hasSuffix(".kiln") }.sorted()
        XCTAssertEqual(names.count, expected.count)
        for name in names {
            let key = String(name.dropLast(5))
            let want = try XCTUnwrap(expected[key], "no expectation for \(name)")
            let path = "\(corpus)/\(name)"
            for args in [["inspect", path], ["inspect", path, "--json"], ["meta", path, "get", "x"]] {
                let r = try kiln(args)
                XCTAssertEqual(r.status, 1, "\(args)")
                XCTAssertEqual(r.stdout, "")
                let lines = r.stderr.split(separator: "\n")
                XCTAssertEqual(lines.count, 1, r.stderr)
                XCTAssertTrue(r.stderr.hasPrefix("error: \(path)/\(want.file): "), r.stderr)
                XCTAssertTrue(r.stderr.contains(want.reason), "\(name): \(r.stderr)")
            }
        }
    }

    func testNotAPackage() throws {
        let dir = try temporaryDirectory(self)
        _ = FileManager.default.createFile(atPath: "\(dir)/plain.kiln", contents: Data("hello".utf8))
        var r = try kiln(["inspect", "\(dir)/plain.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(dir)/plain.kiln: not a Kiln package (expected a directory Name.kiln)\n")
        try FileManager.default.createDirectory(atPath: "\(dir)/empty.kiln", withIntermediateDirectories: false)
        r = try kiln(["inspect", "\(dir)/empty.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(dir)/empty.kiln: not a Kiln package (no manifest.pb)\n")
    }
}
