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
        let cases = (manifest["cases"] as! [[String: Any]]).filter { $0["dtype"] != nil }
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

    /// uniform and unique give coremltools' tables and indices exactly; exact k-means is
    /// never worse than coremltools' k-means.
    func testPalettizationMatchesOrBeatsCoreMLTools() throws {
        let manifest = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(dir)/manifest.json"))) as! [String: Any]
        let cases = (manifest["cases"] as! [[String: Any]]).filter { $0["lut"] != nil }
        XCTAssertEqual(cases.count, 17)
        for c in cases {
            let name = c["name"] as! String
            let mode = c["mode"] as! String
            let w = try NDArray(npyFile: "\(dir)/\(c["weight"] as! String)")
            var json: [String: Any] = ["mode": mode, "granularity": c["granularity"]!, "group_size": c["group_size"]!, "weight_threshold": 0]
            if mode != "unique" { json["nbits"] = c["nbits"]! }
            let setting = try CompressionSetting(json: json, path: "fixture", at: "$")
            let (compressed, report) = try Compressor.apply(CompressionConfig(global: .compress(setting)), to: try Self.model(op: "linear", weight: w))
            guard case .palettized(let p) = compressed.weights[0].encoding else {
                XCTFail("\(name): not palettized (\(report.rows[0].detail))")
                continue
            }
            let theirLUT = try NDArray(npyFile: "\(dir)/\(c["lut"] as! String)")
            let theirIndices = try NDArray(npyFile: "\(dir)/\(c["indices"] as! String)").scalars(as: Int32.self).map(Int.init)
            let count = w.elementCount
            let ours = PackedBits.unpack(p.indices.data.bytes, bits: p.indices.dtype.bitWidth, count: count, signed: false)
            let rowsPerGroup = w.shape[0] / p.lut.shape[0]
            let entries = p.lut.shape.last!
            func lutValues(_ blob: WeightBlob) -> [Double] {
                blob.dtype == .float16 ? blob.data.bytes.bindMemory(to: Float16.self).map { Double(Float($0)) }
                    : blob.data.bytes.bindMemory(to: Float.self).map(Double.init)
            }
            let lut = lutValues(p.lut)
            let weights: [Double] = w.scalarType == .float16 ? w.scalars(as: Float16.self).map { Double(Float($0)) } : w.scalars(as: Float.self).map(Double.init)
            var mse = 0.0
            for i in 0 ..< count {
                let g = (i / w.shape[1]) / rowsPerGroup
                mse += pow(lut[g * entries + ours[i]] - weights[i], 2)
            }
            mse /= Double(count)
            if mode == "kmeans" {
                let theirs = (c["mse"] as! NSNumber).doubleValue
                XCTAssertLessThanOrEqual(mse, theirs * (1 + 1e-6), "\(name): k-means MSE \(mse) vs coremltools \(theirs)")
            } else {
                XCTAssertEqual(ours, theirIndices, "\(name): indices")
                XCTAssertEqual(p.lut.shape, Array(theirLUT.shape.dropLast()), "\(name): LUT shape")
                let theirValues: [Double] = theirLUT.scalarType == .float16 ? theirLUT.scalars(as: Float16.self).map { Double(Float($0)) }
                    : theirLUT.scalars(as: Float.self).map(Double.init)
                XCTAssertEqual(lut, theirValues, "\(name): LUT")
            }
        }
    }
}
