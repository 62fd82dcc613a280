import KilnFormat
@testable import KilnONNX
import XCTest

/// The importer's op table against the registry: an ONNX operator maps to one op, by one route.
final class RegistryMappingTests: XCTestCase {
    func testEveryONNXNameMapsToOneOp() {
        var claims: [String: [String]] = [:]
        for schema in OpSet.schemas.values { for name in schema.onnx { claims[name, default: []].append(schema.name) } }
        for (name, ops) in claims where ops.count > 1 { XCTFail("ONNX \(name) maps to \(ops.sorted())") }
        XCTAssertEqual(Set(claims.keys), Set(NodeConverter.direct.keys))
        // One route per operator: one to one, a handler of its own, or filtered attributes.
        let direct = Set(NodeConverter.direct.keys), filtered = Set(NodeConverter.filtered.keys)
        XCTAssertEqual(direct.intersection(NodeConverter.handled).sorted(), [])
        XCTAssertEqual(direct.intersection(filtered).sorted(), [])
        XCTAssertEqual(filtered.intersection(NodeConverter.handled).sorted(), [])
        for (onnx, op) in NodeConverter.filtered { XCTAssertNotNil(OpSet.schema(op.op), "\(onnx) converts to unknown op \(op.op)") }
    }
}
