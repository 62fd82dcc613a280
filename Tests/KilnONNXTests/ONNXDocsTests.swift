import Foundation
@testable import KilnONNX
import XCTest

/// specs/ops.md's ONNX → Kiln table against the importer's handler tables: every operator the
/// importer converts, of each domain, is named in it.
final class ONNXDocsTests: XCTestCase {
    func testEveryConvertedOperatorIsInTheONNXTable() throws {
        let text = try String(contentsOfFile: "\(repositoryRoot)/specs/ops.md", encoding: .utf8)
        guard let start = text.range(of: "## ONNX → Kiln") else { return XCTFail("specs/ops.md has no ONNX → Kiln section") }
        let rows = text[start.upperBound...].split(separator: "\n").drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }
        // The words of every row: an operator may be named in the notes (Upsample, Scatter).
        let named = Set(rows.flatMap { $0.split { !$0.isLetter && !$0.isNumber }.map(String.init) })
        let converted = NodeConverter.supported.union(NodeConverter.contribSupported).union(NodeConverter.mlSupported)
        XCTAssertEqual(converted.subtracting(named).sorted(), [], "specs/ops.md's ONNX table lacks these")
    }
}
