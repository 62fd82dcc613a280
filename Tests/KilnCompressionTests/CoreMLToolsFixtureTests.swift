import Foundation
@testable import KilnCompression
import KilnFormat
import XCTest

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()

/// Kiln's linear quantization gives coremltools 9.0's integers, scales and zero points,
/// bit for bit (fixtures by tools/make_compression_fixtures.py).
final class CoreMLToolsFixtureTests: XCTestCase {
    let dir = "\(repositoryRoot)/Tests/Fixtures/compression"

    /// A one-op model whose op consumes `w` the way the fixture's ML program did.
    static func model(op kind: String, weight w: NDArray) throws -> PortableModel {
        var b = ModelBuilder(name: "case")
        let weight = try b.addWeight("w", dtype: w.scalarType, shape: w.shape, bytes: w.bytes)
        var f = b.function("main")
        let y: ValueRef
        switch kind {
        case "linear":
            let x = f.input("x", TensorType(w.scalarType, [1, .size(w.shape[1])]))
            y = try f.apply1("linear", [x, f.use(weight)])
        case "conv":
            let x = f.input("x", TensorType(w.scalarType, [1, .size(w.shape[1]), 8, 8]))
            y = try f.apply1("conv", [x, f.use(weight)])
        default:
            let x = f.input("x", TensorType(w.scalarType, [2, .size(w.shape[0])]))
            y = try f.apply1("matmul", [x, f.use(weight)])
        }
        f.output("y", y)
        try b.add(f)
        return try b.build()
    }

    func integers(_ blob: WeightBlob) -> [Int] {
        switch blob.dtype {
        case .int8: return blob.data.bytes.map { Int(Int8(bitPattern: $0)) }
        case .uint8: return blob.data.bytes.map { Int($0) }
        default: return PackedBits.unpack(blob.data.bytes, bits: 4, count: blob.shape.reduce(1, *), signed: blob.dtype == .int4)
        }
    }

    func testLinearQuantizationIsIdenticalToCoreMLTools() throws {
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(dir)/manifest.json"))) as! [String: Any]
        let cases = manifest["cases"] as! [[String: Any]]
        XCTAssertEqual(cases.count, 72)
        for c in cases {
            let name = c["name"] as! String
            let w = try NDArray(npyFile: "\(dir)/\(c["weight"] as! String)")
            var setting = try CompressionSetting(json: ["mode": c["mode"]!, "dtype": c["dtype"]!, "granularity": c["granularity"]!,
                                                        "block_size": c["block_size"]!], path: "fixture", at: "$")
            setting.weightThreshold = 0
            let (compressed, report) = try Compressor.apply(CompressionConfig(global: .compress(setting)), to: try Self.model(op: c["op"] as! String, weight: w))
            guard case .quantized(let q) = compressed.weights[0].encoding else {
                XCTFail("\(name): not quantized (\(report.rows[0].detail))")
                continue
            }
            let data = try NDArray(npyFile: "\(dir)/\(c["data"] as! String)").scalars(as: Int32.self).map(Int.init)
            XCTAssertEqual(integers(q.data), data, "\(name): integers")
            let scale = try NDArray(npyFile: "\(dir)/\(c["scale"] as! String)")
            XCTAssertEqual(q.scale.shape, scale.shape, "\(name): scale shape")
            XCTAssertEqual(q.scale.dtype, scale.scalarType, "\(name): scale dtype")
            XCTAssertEqual(Array(q.scale.data.bytes), scale.bytes, "\(name): scale bits")
            if let offsetFile = c["offset"] as? String {
                let offset = try NDArray(npyFile: "\(dir)/\(offsetFile)").scalars(as: Int32.self).map(Int.init)
                let ours = q.zeroPoint.map(integers) ?? Array(repeating: 0, count: offset.count)
                XCTAssertEqual(ours, offset, "\(name): zero points")
            } else {
                XCTAssertTrue(q.zeroPoint.map(integers)?.allSatisfy { $0 == 0 } ?? true, "\(name): unexpected zero points")
            }
        }
    }
}
