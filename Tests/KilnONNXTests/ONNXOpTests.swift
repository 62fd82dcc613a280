import Foundation
import KilnFormat
@testable import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

/// Every ONNX model of Tests/Fixtures/onnx/ops (one operator each, across opsets; made with
/// onnxruntime's outputs by tools/make_op_fixtures.py) converts and reproduces those outputs.
final class ONNXOpTests: XCTestCase {
    struct Case {
        var name: String
        var onnx: String
        var opset: Int
        var inputs: [NDArray?]
        var outputs: [NDArray]
        var tolerance: Double
    }

    static let cases: [Case] = {
        let data = try! Data(contentsOf: URL(fileURLWithPath: "\(repositoryRoot)/Tests/Fixtures/ops/cases.json"))
        let json = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (json["cases"] as! [[String: Any]]).compactMap { c in
            guard let onnx = c["onnx"] as? String else { return nil }
            return Case(name: c["name"] as! String, onnx: onnx, opset: c["opset"] as! Int,
                        inputs: (c["inputs"] as! [Any]).map { ($0 as? [String: Any]).map(FixtureJSON.array) },
                        outputs: (c["outputs"] as! [[String: Any]]).map(FixtureJSON.array),
                        tolerance: (c["tolerance"] as! NSNumber).doubleValue)
        }
    }()

    func testEveryOperatorModelConvertsAndMatches() throws {
        XCTAssertGreaterThan(Self.cases.count, 300)
        for c in Self.cases {
            do {
                let model = try ONNXImporter.convert(contentsOf: "\(repositoryRoot)/Tests/Fixtures/onnx/ops/\(c.name).onnx")
                var feeds: [String: NDArray] = [:]
                for (i, x) in c.inputs.enumerated() {
                    guard var x else { continue }
                    // Kiln holds float64 inputs as float32 only when the model narrowed them.
                    if x.scalarType == .float64 { x = NDArray(shape: x.shape, scalars: x.scalars(as: Double.self).map { Float($0) }) }
                    feeds["in\(i)"] = x
                }
                let out = try ReferenceInterpreter(model: model, function: "main").run(feeds)
                // Outputs come back in the type the model declares (float64 included).
                for (k, want) in c.outputs.enumerated() {
                    guard let got = out["out\(k)"] else { XCTFail("\(c.name): no output out\(k)"); continue }
                    if let problem = compare(got, want, tolerance: c.tolerance) {
                        XCTFail("\(c.name) (\(c.onnx)-\(c.opset)) output \(k): \(problem)")
                    }
                }
            } catch {
                XCTFail("\(c.name) (\(c.onnx)-\(c.opset)): \(error)")
            }
        }
    }

    /// Operators the importer converts that have no fixture model: each runs in the ONNX
    /// conformance suite (`make conformance`), but SimplifiedLayerNormalization, which converts by
    /// RMSNormalization's handler.
    static let withoutFixture: Set<String> = ["CastLike", "Constant", "If", "Loop", "LpNormalization", "RMSNormalization", "Scan",
                                              "Scatter", "SimplifiedLayerNormalization", "SoftmaxCrossEntropyLoss", "Swish"]

    func testEveryOperatorTheImporterConvertsIsCovered() {
        let covered = Set(Self.cases.map(\.onnx))
        XCTAssertEqual(NodeConverter.supported.subtracting(covered).subtracting(Self.withoutFixture).sorted(), [])
        XCTAssertEqual(Self.withoutFixture.intersection(covered).sorted(), [], "these have a fixture now")
        XCTAssertEqual(Self.withoutFixture.subtracting(NodeConverter.supported).sorted(), [], "these are not converted")
    }

    func compare(_ got: NDArray, _ want: NDArray, tolerance: Double) -> String? {
        guard got.shape == want.shape else { return "shape \(got.shape), expected \(want.shape)" }
        guard got.scalarType == want.scalarType else { return "dtype \(got.scalarType.rawValue), expected \(want.scalarType.rawValue)" }
        func doubles(_ x: NDArray) -> [Double] { x.doubles() ?? [] }
        let (g, e) = (doubles(got), doubles(want))
        for i in g.indices where !(g[i].isNaN && e[i].isNaN) && g[i] != e[i] {
            if !want.scalarType.isFloatingPoint || abs(g[i] - e[i]) > tolerance * max(1, abs(e[i])) {
                return "element \(i): got \(g[i]), expected \(e[i])"
            }
        }
        return nil
    }
}
