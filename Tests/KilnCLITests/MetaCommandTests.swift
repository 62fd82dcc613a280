import Foundation
import XCTest

final class MetaCommandTests: XCTestCase {
    func copyOfClassifier() throws -> String {
        let dir = try temporaryDirectory(self)
        let copy = "\(dir)/TinyClassifier.kiln"
        try FileManager.default.copyItem(atPath: "\(repositoryRoot)/examples/TinyClassifier.kiln", toPath: copy)
        return copy
    }

    func testSetThenGet() throws {
        let copy = try copyOfClassifier()
        let weights = try fileBytes("\(copy)/weights.bin")
        XCTAssertEqual(try kiln(["meta", copy, "set", "team=vision"]).status, 0)
        let r = try kiln(["meta", copy, "get", "team"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "vision\n")
        XCTAssertEqual(try fileBytes("\(copy)/weights.bin"), weights)
        XCTAssertEqual(try kiln(["inspect", copy]).status, 0)
    }

    func testSettersRemoveAndListing() throws {
        let copy = try copyOfClassifier()
        XCTAssertEqual(try kiln(["meta", copy, "set", "a=1", "b=x=y", "--author", "Team Vision", "--version", "2.0"]).status, 0)
        var r = try kiln(["meta", copy, "--json"])
        let root = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any])
        XCTAssertEqual(root["author"] as? String, "Team Vision")
        XCTAssertEqual(root["version"] as? String, "2.0")
        XCTAssertEqual(root["user"] as? [String: String], ["a": "1", "b": "x=y", "classes": "10", "task": "classification"])
        XCTAssertEqual(try kiln(["meta", copy, "remove", "a"]).status, 0)
        r = try kiln(["meta", copy, "get", "a"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: \(copy): no metadata key 'a'\n")
        r = try kiln(["meta", copy])
        XCTAssertTrue(r.stdout.contains("author"))
        XCTAssertTrue(r.stdout.contains("Team Vision"))
        XCTAssertTrue(r.stdout.contains("b            x=y") || r.stdout.contains("x=y"))
    }

    func testBadPairIsAUsageError() throws {
        let copy = try copyOfClassifier()
        let before = try tree(copy).map(\.1)
        let r = try kiln(["meta", copy, "set", "novalue"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("'novalue' is not KEY=VALUE"))
        XCTAssertEqual(try tree(copy).map(\.1), before)
    }

    func testBrokenPackageIsNotEdited() throws {
        let dir = try temporaryDirectory(self)
        let copy = "\(dir)/cycle.kiln"
        try FileManager.default.copyItem(atPath: "\(repositoryRoot)/Tests/Fixtures/malformed/cycle.kiln", toPath: copy)
        let before = try tree(copy).map(\.1)
        let r = try kiln(["meta", copy, "set", "team=vision"])
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("cycle"), r.stderr)
        XCTAssertEqual(try tree(copy).map(\.1), before)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: copy).sorted(), ["manifest.pb", "weights.bin"])
    }
}
