import Foundation
import KilnFormat
import KilnONNX
import KilnReference
import XCTest

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()

let sharedModels = "\(repositoryRoot)/../shared/models"

/// Inputs and expected outputs described by a golden `manifest.json` (names, files).
struct Golden {
    var inputs: [String: NDArray]
    var outputs: [(String, NDArray)]

    init(directory: String) throws {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(directory)/manifest.json"))) as! [String: Any]
        func load(_ list: Any?) throws -> [(String, NDArray)] {
            try (list as! [[String: Any]]).map { ($0["name"] as! String, try NDArray(npyFile: "\(directory)/\($0["file"] as! String)")) }
        }
        inputs = Dictionary(uniqueKeysWithValues: try load(json["inputs"]))
        outputs = try load(json["outputs"])
    }
}

/// Float outputs within `1e-4 · max(1, max |golden|)` (or a given relative bound); integers exactly.
func assertMatches(_ got: NDArray?, _ want: NDArray, _ label: String, bound: Double = 1e-4,
                   file: StaticString = #filePath, line: UInt = #line) {
    guard let got else { return XCTFail("\(label): missing", file: file, line: line) }
    XCTAssertEqual(got.shape, want.shape, label, file: file, line: line)
    XCTAssertEqual(got.scalarType, want.scalarType, label, file: file, line: line)
    guard got.shape == want.shape, got.scalarType == want.scalarType else { return }
    switch want.scalarType {
    case .float32:
        let (g, w) = (got.scalars(as: Float.self), want.scalars(as: Float.self))
        let scale = max(1, w.map { abs(Double($0)) }.max() ?? 0)
        let diff = zip(g, w).map { abs(Double($0) - Double($1)) }.max() ?? 0
        XCTAssertLessThanOrEqual(diff, bound * scale, "\(label): max abs diff \(diff)", file: file, line: line)
    case .int64: XCTAssertEqual(got.scalars(as: Int64.self), want.scalars(as: Int64.self), label, file: file, line: line)
    case .int32: XCTAssertEqual(got.scalars(as: Int32.self), want.scalars(as: Int32.self), label, file: file, line: line)
    case .bool: XCTAssertEqual(got.scalars(as: Bool.self), want.scalars(as: Bool.self), label, file: file, line: line)
    default: XCTAssertEqual(Array(got.contiguousElements!), Array(want.contiguousElements!), label, file: file, line: line)
    }
}
