import Foundation
import XCTest

/// The committed examples and malformed corpus are exactly what the generator makes.
final class GeneratedFilesTests: XCTestCase {
    func testExamplesRegenerateByteForByte() throws {
        let dir = try temporaryDirectory(self)
        let r = try runProduct("KilnExamples", ["examples", dir])
        XCTAssertEqual(r.status, 0, r.stderr)
        for name in ["TinyClassifier.kiln", "TinyEncoder.kiln"] {
            let made = try tree("\(dir)/\(name)")
            let committed = try tree("\(repositoryRoot)/examples/\(name)")
            XCTAssertEqual(made.map(\.0), ["manifest.pb", "weights.bin"])
            XCTAssertEqual(made.map(\.0), committed.map(\.0))
            for (a, b) in zip(made, committed) {
                XCTAssertEqual(a.1, b.1, "\(name)/\(a.0) differs from the committed file; run 'make examples'")
            }
        }
    }

    func testMalformedCorpusRegeneratesByteForByte() throws {
        let dir = try temporaryDirectory(self)
        let r = try runProduct("KilnExamples", ["malformed", dir])
        XCTAssertEqual(r.status, 0, r.stderr)
        let made = try tree(dir)
        let committed = try tree("\(repositoryRoot)/Tests/Fixtures/malformed")
        XCTAssertEqual(made.map(\.0), committed.map(\.0))
        for (a, b) in zip(made, committed) {
            XCTAssertEqual(a.1, b.1, "\(a.0) differs from the committed file; run 'make fixtures'")
        }
    }
}
