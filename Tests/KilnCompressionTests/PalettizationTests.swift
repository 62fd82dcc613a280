import Foundation
@testable import KilnCompression
import KilnFormat
import KilnReference
import XCTest

final class PalettizationTests: XCTestCase {
    /// Least squared error over every way to cut sorted values into k contiguous groups.
    func bruteForceError(_ values: [Float], k: Int) -> Double {
        let x = values.sorted().map(Double.init)
        func sse(_ a: Int, _ b: Int) -> Double {
            let part = x[a ..< b]
            let mean = part.reduce(0, +) / Double(part.count)
            return part.reduce(0) { $0 + ($1 - mean) * ($1 - mean) }
        }
        func best(_ start: Int, _ groups: Int) -> Double {
            if groups == 1 { return sse(start, x.count) }
            var b = Double.infinity
            for cut in start + 1 ... x.count - groups + 1 { b = min(b, sse(start, cut) + best(cut, groups - 1)) }
            return b
        }
        return best(0, k)
    }

    func error(_ values: [Float], _ centers: [Float]) -> Double {
        let idx = values.withUnsafeBufferPointer { KMeans1D.assign($0, centers: centers) }
        return zip(values, idx).reduce(0) { $0 + pow(Double($1.0) - Double(centers[$1.1]), 2) }
    }

    func testExactKMeansMatchesBruteForce() {
        var state: UInt64 = 99
        func next() -> Float {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Float(Int(state >> 40) % 1000) / 100 - 5
        }
        for n in [5, 8, 12, 13] {
            for k in [2, 3, 4, 5] {
                for _ in 0 ..< 5 {
                    let values = (0 ..< n).map { _ in next() }
                    let want = bruteForceError(values, k: k)
                    // Both ways of finding the splits: the split table, and divide and conquer.
                    for budget in [KMeans1D.splitTableBudget, 0] {
                        let centers = KMeans1D.centers(values, k: k, splitTableBudget: budget)
                        XCTAssertEqual(error(values, centers), want, accuracy: 1e-6, "n \(n) k \(k) budget \(budget) \(values)")
                        XCTAssertEqual(centers, centers.sorted())
                    }
                }
            }
        }
        // Fewer distinct values than clusters: each value is its own center.
        XCTAssertEqual(KMeans1D.centers([1, 1, 2, 2, 3], k: 4), [1, 2, 3])
    }

    func model(_ values: [Float], shape: [Int]) throws -> PortableModel {
        var b = ModelBuilder(name: "P")
        let w = try b.addWeight("w", shape: shape, values: values)
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, .size(shape[1])]))
        f.output("y", try f.apply1("linear", [x, f.use(w)]))
        try b.add(f)
        return try b.build()
    }

    func decoded(_ model: PortableModel) throws -> [Float] {
        // Decode through the reference interpreter: y = x · Wᵀ with x one-hot per column.
        let w = model.weights[0]
        let (rows, cols) = (w.shape[0], w.shape[1])
        let run = try ReferenceInterpreter(model: model, function: "main")
        var out = [Float](repeating: 0, count: rows * cols)
        for c in 0 ..< cols {
            var x = [Float](repeating: 0, count: cols)
            x[c] = 1
            let y = try run.run(["x": NDArray(shape: [1, cols], scalars: x)])["y"]!.scalars(as: Float.self)
            for r in 0 ..< rows { out[r * cols + c] = y[r] }
        }
        return out
    }

    func testModesGranularitiesAndDecoding() throws {
        let values = (0 ..< 64 * 40).map { Float(sin(Double($0) * 0.37) * 0.5) }
        let base = try model(values, shape: [64, 40])
        for json in [#"{"global": {"mode": "kmeans", "nbits": 3, "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "uniform", "nbits": 4, "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "kmeans", "nbits": 2, "granularity": "per_grouped_channel", "group_size": 16, "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "kmeans", "nbits": 6, "enable_per_channel_scale": true, "lut_dtype": "float16", "weight_threshold": 0}}"#] {
            let config = try CompressionConfig(data: Data(json.utf8), path: "cfg")
            let (out, report) = try Compressor.apply(config, to: base)
            guard case .palettized(let p) = out.weights[0].encoding else { return XCTFail("\(json): not palettized") }
            let bits = p.indices.dtype.bitWidth
            XCTAssertEqual(p.lut.shape.last, 1 << bits)
            XCTAssertEqual(report.rows[0].bits, bits)
            // Every decoded value is a LUT entry (times the channel scale), and the error is what the report says.
            let got = try decoded(out)
            let noise = zip(values, got).reduce(0.0) { $0 + pow(Double($1.0) - Double($1.1), 2) }
            let signal = values.reduce(0.0) { $0 + Double($1) * Double($1) }
            XCTAssertEqual(10 * log10(signal / noise), report.rows[0].snr!, accuracy: 0.01, json)
            if json.contains("per_grouped_channel") { XCTAssertEqual(p.lut.shape, [4, 1, 4]) }
            if json.contains("float16") { XCTAssertEqual(p.lut.dtype, .float16); XCTAssertNotNil(p.scale) }
        }
    }

    func testUniqueModeIsExact() throws {
        let values = (0 ..< 64 * 48).map { Float([-0.5, 0, 0.25, 1][$0 % 4]) }
        let config = try CompressionConfig(data: Data(#"{"global": {"mode": "unique", "nbits": 2, "weight_threshold": 0}}"#.utf8), path: "cfg")
        let (out, report) = try Compressor.apply(config, to: try model(values, shape: [64, 48]))
        XCTAssertEqual(report.rows[0].snr, .infinity)
        XCTAssertEqual(try decoded(out), values)
        let tooMany = try CompressionConfig(data: Data(#"{"global": {"mode": "unique", "nbits": 1, "weight_threshold": 0}}"#.utf8), path: "cfg")
        let (_, r) = try Compressor.apply(tooMany, to: try model(values, shape: [64, 48]))
        XCTAssertEqual(r.rows[0].detail, "4 distinct values do not fit 1 bits (unique mode)")
    }
}
