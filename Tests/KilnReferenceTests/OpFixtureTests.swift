import Foundation
import KilnFormat
import KilnReference
import KilnTestSupport
import XCTest

/// Runs every one-op case of Tests/Fixtures/ops/cases.json (expected values computed by
/// onnxruntime running the equivalent ONNX operator; see tools/make_op_fixtures.py)
/// through the reference interpreter.
public final class OpFixtureTests: XCTestCase {
    struct Case {
        var name: String
        var onnxOnly: Bool
        var hasModel: Bool
        var op: String
        var attributes: [String: AttributeValue]
        var inputs: [NDArray?]
        var outputs: [NDArray]
        var tolerance: Double
    }

    static let cases: [Case] = {
        let data = try! Data(contentsOf: URL(fileURLWithPath: "\(FixtureJSON.repositoryRoot)/Tests/Fixtures/ops/cases.json"))
        let json = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
        return (json["cases"] as! [[String: Any]]).map { c in
            Case(name: c["name"] as! String, onnxOnly: c["onnxOnly"] as? Bool ?? false, hasModel: c["onnx"] is String,
                 op: c["op"] as! String,
                 attributes: (c["attributes"] as! [String: [String: Any]]).mapValues(FixtureJSON.attribute),
                 inputs: (c["inputs"] as! [Any]).map { ($0 as? [String: Any]).map(FixtureJSON.array) },
                 outputs: (c["outputs"] as! [[String: Any]]).map(FixtureJSON.array),
                 tolerance: (c["tolerance"] as! NSNumber).doubleValue)
        }
    }()

    /// A one-op model: every present input is a function input with its exact shape;
    /// outputs are declared with the expected dtype and shape.
    static func model(for c: Case) throws -> PortableModel {
        var inputs: [Argument] = []
        var names: [String] = []
        for (i, x) in c.inputs.enumerated() {
            guard let x else { names.append(""); continue }
            inputs.append(Argument(name: "in\(i)", type: TensorType(x.scalarType, x.shape.map { .size($0) })))
            names.append("in\(i)")
        }
        let outputs = c.outputs.enumerated().map { Value(name: "out\($0.offset)", type: TensorType($0.element.scalarType, $0.element.shape.map { .size($0) })) }
        let op = Operation(opType: c.op, name: c.name, inputs: names, outputs: outputs, attributes: c.attributes)
        let f = Function(name: "main", inputs: inputs, outputs: outputs.map { Argument(name: $0.name, type: $0.type) }, operations: [op])
        let model = PortableModel(metadata: Metadata(name: c.name), weights: [], functions: [f])
        try model.validate()
        return model
    }

    /// Largest |got − want| relative to max(1, |want|), or an exact mismatch message.
    static func compare(_ got: NDArray, _ want: NDArray, tolerance: Double) -> String? {
        guard got.shape == want.shape else { return "shape \(got.shape), expected \(want.shape)" }
        let w = want.scalarType == .float16 ? DataType.float32 : want.scalarType
        guard got.scalarType == want.scalarType || (got.scalarType == .float16 && w == .float32) else {
            return "dtype \(got.scalarType.rawValue), expected \(want.scalarType.rawValue)"
        }
        func doubles(_ x: NDArray) -> [Double] { x.doubles() ?? [] }
        let (g, e) = (doubles(got), doubles(want))
        let exact = !want.scalarType.isFloatingPoint
        for i in g.indices {
            if g[i].isNaN && e[i].isNaN { continue }
            if g[i] == e[i] { continue }
            if exact || abs(g[i] - e[i]) > tolerance * max(1, abs(e[i])) {
                return "element \(i): got \(g[i]), expected \(e[i])"
            }
        }
        return nil
    }

    func testEveryCaseMatchesOnnxRuntime() throws {
        XCTAssertGreaterThan(Self.cases.count, 250)
        for c in Self.cases where !c.onnxOnly {
            if ProcessInfo.processInfo.environment["KILN_TRACE_CASES"] != nil { FileHandle.standardError.write(Data("case \(c.name)\n".utf8)) }
            do {
                let model = try Self.model(for: c)
                let interpreter = try ReferenceInterpreter(model: model, function: "main")
                var feeds: [String: NDArray] = [:]
                for (i, x) in c.inputs.enumerated() { if let x { feeds["in\(i)"] = x } }
                let out = try interpreter.run(feeds)
                for (k, want) in c.outputs.enumerated() {
                    if let problem = Self.compare(out["out\(k)"]!, want, tolerance: c.tolerance) {
                        XCTFail("\(c.name) output \(k): \(problem)")
                    }
                }
            } catch {
                XCTFail("\(c.name): \(error)")
            }
        }
    }

    func testAssumePassesItsInputOrFailsWithItsMessage() throws {
        let x = NDArray(shape: [2], scalars: [Float(1), 2])
        let op = Operation(opType: "assume", name: "check", inputs: ["x", "c"], outputs: [], attributes: ["message": .string("dim is not 1")])
        let ok = try ReferenceInterpreter.evaluate(op, [x, NDArray(shape: [1], scalars: [true])])
        XCTAssertEqual(ok[0].scalars(as: Float.self), [1, 2])
        XCTAssertThrowsError(try ReferenceInterpreter.evaluate(op, [x, NDArray(shape: [], scalars: [false])])) { error in
            XCTAssertTrue("\(error)".contains("dim is not 1"), "\(error)")
        }
    }

    static func run(_ type: String, _ attributes: [String: AttributeValue], _ inputs: [NDArray?]) throws -> [NDArray] {
        try ReferenceInterpreter.evaluate(Operation(opType: type, name: "hostile", inputs: [], outputs: [], attributes: attributes), inputs)
    }

    func testHostileValuesGiveResultsOrErrorsNotTraps() throws {
        let image = NDArray(shape: [1, 1, 3, 3], scalars: (0 ..< 9).map(Float.init))
        // NaN, infinite and huge grid coordinates, every mode and padding: values, no trap.
        let grid = NDArray(shape: [1, 1, 4, 2], scalars: [Float.nan, 0, .infinity, -.infinity, 1e30, -1e30, 3e9, 0.5])
        for mode in ["nearest", "linear", "cubic"] {
            for padding in ["zeros", "border", "reflection"] {
                let r = try Self.run("grid_sample", ["mode": .string(mode), "padding_mode": .string(padding)], [image, grid])
                XCTAssertEqual(r[0].shape, [1, 1, 1, 4])
            }
        }
        // Integers too large for an Int, NaN edges and non-finite rois are errors.
        XCTAssertThrowsError(try Self.run("window", ["kind": .string("hann")], [NDArray(scalar: Int64.max)]))
        XCTAssertThrowsError(try Self.run("mel_weight_matrix", [:], (0 ..< 5).map { _ in NDArray(scalar: Float.nan) }))
        let rois = NDArray(shape: [1, 4], scalars: [Float.nan, 0, 1e30, 2])
        XCTAssertThrowsError(try Self.run("roi_align", [:], [image, rois, NDArray(shape: [1], scalars: [Int64(0)])]))
        // A circular cache of capacity 0 takes nothing.
        let empty = NDArray(shape: [1, 0, 2], scalarType: .float32), update = NDArray(shape: [1, 1, 2], scalars: [Float(1), 2])
        XCTAssertEqual(try Self.run("tensor_scatter", ["axis": .int(1), "mode": .string("circular")], [empty, update])[0].shape, [1, 0, 2])
    }

    func testEveryOpOfTheOpSetIsCovered() {
        // Control flow has whole-model fixtures instead (ControlFlowTests: its bodies are graphs), and
        // `assume`, which no ONNX operator maps to, its own test below and ImportedModelTests, as has
        // `dynamic_quantize_lstm` (onnxruntime's com.microsoft operator, whole-model fixtures).
        let covered = Set(Self.cases.filter { !$0.onnxOnly }.map(\.op)).union(["if", "loop", "scan", "assume", "dynamic_quantize_lstm"])
        let missing = Set(OpSet.schemas.keys).subtracting(covered)
        XCTAssertEqual(missing.sorted(), [], "ops without a fixture case")
    }
}
