import Foundation
import KilnFormat
import XCTest

/// Inputs and expected outputs described by a golden `manifest.json` (names, files), as
/// Tests/Fixtures/models/golden holds them.
public struct Golden {
    /// Inputs by name.
    public var inputs: [String: NDArray]
    /// Expected outputs in manifest order.
    public var outputs: [(String, NDArray)]

    /// Reads `directory/manifest.json` and its `.npy` files.
    public init(directory: String) throws {
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(directory)/manifest.json"))) as! [String: Any]
        func load(_ list: Any?) throws -> [(String, NDArray)] {
            try (list as! [[String: Any]]).map { ($0["name"] as! String, try NDArray(npyFile: "\(directory)/\($0["file"] as! String)")) }
        }
        inputs = Dictionary(uniqueKeysWithValues: try load(json["inputs"]))
        outputs = try load(json["outputs"])
    }
}

/// Float outputs within `bound · max(1, max |want|)` (default 1e-4); integers exactly.
public func assertMatches(_ got: NDArray?, _ want: NDArray, _ label: String, bound: Double = 1e-4,
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
