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
        // One route per operator: one to one, filtered attributes, or a handler of its own. Only
        // Mul's own handler (a scaled integer weight) falls back to the one-to-one route.
        let direct = Set(NodeConverter.direct.keys), filtered = Set(NodeConverter.filtered.keys)
        let own = Set(NodeConverter.ownHandlers.keys)
        XCTAssertEqual(direct.intersection(filtered).sorted(), [])
        XCTAssertEqual(direct.intersection(own).sorted(), ["Mul"])
        XCTAssertEqual(filtered.intersection(own).sorted(), [])
        XCTAssertEqual(NodeConverter.supported, direct.union(filtered).union(own))
        for (onnx, op) in NodeConverter.filtered { XCTAssertNotNil(OpSet.schema(op.op), "\(onnx) converts to unknown op \(op.op)") }
    }

    func testReductionsAreTheRegistrysUnderTheirONNXNames() {
        XCTAssertEqual(Set(NodeConverter.reductions.values), Set(OpSet.reduceNames))
        XCTAssertEqual(NodeConverter.reductions.keys.sorted(), [
            "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum",
            "ReduceSumSquare",
        ])
        for (onnx, op) in NodeConverter.reductions { XCTAssertNotNil(OpSet.schema(op), "\(onnx) converts to unknown op \(op)") }
    }
}
