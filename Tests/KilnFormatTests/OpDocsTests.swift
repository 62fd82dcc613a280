import Foundation
import KilnFormat
import XCTest

/// specs/ops.md against the op registry: every op has a row, every attribute default the registry
/// states is written in that row, and every ONNX operator converted one to one is in the mapping.
final class OpDocsTests: XCTestCase {
    /// The table rows of specs/ops.md, split into cells.
    static let rows: [[String]] = {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let text = (try? String(contentsOf: root.appendingPathComponent("specs/ops.md"), encoding: .utf8)) ?? ""
        return text.split(separator: "\n").filter { $0.hasPrefix("| ") }.map { line in
            line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        }
    }()

    /// The backticked names of a cell.
    func names(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    func testEveryOpHasARowWithItsDefaults() {
        XCTAssertFalse(Self.rows.isEmpty, "specs/ops.md not found")
        for schema in OpSet.schemas.values.sorted(by: { $0.name < $1.name }) {
            guard let row = Self.rows.first(where: { names($0[0]).contains(schema.name) }) else {
                XCTFail("specs/ops.md has no row for \(schema.name)")
                continue
            }
            for (name, spec) in schema.attributes where spec.defaultValue != nil {
                XCTAssertTrue(row.dropFirst().contains { $0.contains("\(name) = ") }, "specs/ops.md: \(schema.name)'s row lacks its default '\(name) = …'")
            }
        }
    }

    func testEveryOneToOneONNXOperatorIsMapped() {
        guard let start = Self.rows.firstIndex(where: { $0.first == "ONNX" }) else { return XCTFail("no ONNX → Kiln table") }
        let mapped = Set(Self.rows[start...].flatMap { $0[0].split(separator: " ").map(String.init) })
        for name in OpSet.onnxDirect.keys.sorted() { XCTAssertTrue(mapped.contains(name), "specs/ops.md's ONNX table lacks \(name)") }
    }
}
