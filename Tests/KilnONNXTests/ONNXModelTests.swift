import Foundation
import KilnFormat
@testable import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

/// Whole-model fixtures (tools/make_onnx_fixtures.py): structure the importer must keep or
/// fold, and models it must refuse with a clear error.
final class ONNXModelTests: XCTestCase {
    let dir = "\(repositoryRoot)/Tests/Fixtures/onnx/models"

    struct Expected {
        var inputs: [String: NDArray]
        var outputs: [String: NDArray]
    }

    lazy var expected: [String: Expected] = {
        let json = try! JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(dir)/models.json"))) as! [String: Any]
        var out: [String: Expected] = [:]
        for c in json["cases"] as! [[String: Any]] {
            out[c["name"] as! String] = Expected(
                inputs: (c["inputs"] as! [String: [String: Any]]).mapValues(FixtureJSON.array),
                outputs: (c["outputs"] as! [String: [String: Any]]).mapValues(FixtureJSON.array))
        }
        return out
    }()

    @discardableResult
    func convertAndCheck(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> PortableModel {
        let model = try ONNXImporter.convert(contentsOf: "\(dir)/\(name).onnx")
        let e = try XCTUnwrap(expected[name], "no expected outputs for \(name)")
        let out = try ReferenceInterpreter(model: model, function: "main").run(e.inputs)
        for (k, want) in e.outputs { assertMatches(out[k], want, "\(name) \(k)", file: file, line: line) }
        return model
    }

    func testWeightsOnlyInConstantNodesBecomeWeights() throws {
        let model = try convertAndCheck("constants_only")
        XCTAssertEqual(Set(model.weights.map(\.name)), ["W", "B"])
        XCTAssertEqual(model.parameterCount, 12 + 3)
    }

    func testDynamicShapeSubgraphFoldsIntoStaticReshapes() throws {
        let model = try convertAndCheck("shape_subgraph")
        let ops = model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["reshape", "transpose", "reshape"])
        XCTAssertEqual(ops[0].attributes["shape"], .ints([0, 0, 2, 4]))
        XCTAssertEqual(ops[0].outputs[0].type.description, "float32[batch, seq, 2, 4]")
        XCTAssertEqual(ops[2].attributes["shape"], .ints([0, -1]))
        XCTAssertEqual(model.functions[0].outputs[0].type.shape.first, "batch")
        // Another batch and sequence length run through the same package.
        let x = NDArray(shape: [3, 5, 8], scalars: (0 ..< 120).map(Float.init))
        let out = try ReferenceInterpreter(model: model, function: "main").run(["x": x])["y"]!
        XCTAssertEqual(out.shape, [3, 40])
    }

    /// A cache concatenated with new rows, a mask as long as both, and shape arithmetic adding
    /// the two lengths: every such dim is the expression `past_sequence_length + sequence_length`
    /// (the mask's own spelling normalized), which the interpreter checks on every result, and
    /// which must hold for the inputs.
    func testGrownCacheDimsAreExpressions() throws {
        let model = try convertAndCheck("past_concat_expression")
        let f = model.functions[0]
        let grown = "past_sequence_length + sequence_length"
        XCTAssertEqual(f.inputs.map(\.type.description), ["float32[batch, sequence_length, 4]", "float32[batch, past_sequence_length, 4]", "int64[batch, \(grown)]"])
        XCTAssertEqual(f.outputs.map(\.type.description), ["float32[batch, \(grown), 4]", "float32[batch, \(grown), 4]", "int64[sequence_length]"])
        XCTAssertEqual(f.operations.first { $0.opType == "range" }?.outputs[0].type.description, "int64[\(grown)]")
        // The Expand's target [grown, 4], over a value whose dim there is the grown length, is the
        // static [1, 4]: no shape computed at run time for it.
        let expand = try XCTUnwrap(f.operations.first { $0.opType == "expand" })
        XCTAssertEqual(expand.attributes["shape"], .ints([1, 4]))
        XCTAssertEqual(expand.inputs.count, 1)
        // Another past length runs; a mask of the wrong length is refused before anything runs.
        let interpreter = try ReferenceInterpreter(model: model, function: "main")
        let x = NDArray(shape: [1, 1, 4], scalars: [Float](repeating: 1, count: 4))
        let past = NDArray(shape: [1, 5, 4], scalars: [Float](repeating: 0.5, count: 20))
        let out = try interpreter.run(["x": x, "past": past, "mask": NDArray(shape: [1, 6], scalars: [Int64](repeating: 1, count: 6))])
        XCTAssertEqual(out["y"]?.shape, [1, 6, 4])
        XCTAssertThrowsError(try interpreter.run(["x": x, "past": past, "mask": NDArray(shape: [1, 5], scalars: [Int64](repeating: 1, count: 5))])) { error in
            XCTAssertTrue(String(describing: error).contains("input 'mask' dim 1 (\(grown)) is 5, but \(grown) is 6"), "\(error)")
        }
    }

    func testShapeArithmeticReshapeKeepsTheKnownDims() throws {
        // Target [batch·seq, 384 / 64, -1]: the product is not a named dim, the -1 is inferred at
        // run time, and the MatMul still sees the 64 (the value info's -1 dims are unknown, not sizes).
        let model = try convertAndCheck("shape_arithmetic_reshape")
        let ops = model.functions[0].operations
        let reshape = try XCTUnwrap(ops.first { $0.opType == "reshape" })
        XCTAssertEqual(reshape.outputs[0].type.shape.count, 3)
        XCTAssertEqual(reshape.outputs[0].type.shape[1], .size(6))
        XCTAssertNil(reshape.outputs[0].type.shape.compactMap(\.size).first { $0 < 0 })
        XCTAssertEqual(model.functions[0].outputs[0].type.shape.last, .size(16))
    }

    func testIdentityChainsVanish() throws {
        let model = try convertAndCheck("identity_chain")
        let f = model.functions[0]
        XCTAssertEqual(f.operations.map(\.opType), ["neg"])
        XCTAssertEqual(f.outputs.map(\.value), [f.operations[0].outputs[0].name, "x"])
    }

    func testUnnamedDimsAndWrongDeclaredShapes() throws {
        let model = try convertAndCheck("unnamed_dims_wrong_declared")
        XCTAssertEqual(model.functions[0].inputs[0].type.description, "float32[?, 6]")
        XCTAssertEqual(model.functions[0].outputs[0].type.description, "float32[?, 6]")
    }

    func testMetadataCarriesOver() throws {
        let model = try convertAndCheck("metadata")
        XCTAssertEqual(model.metadata.name, "metadata")
        XCTAssertEqual(model.metadata.description, "Absolute values.")
        XCTAssertEqual(model.metadata.version, "7")
        XCTAssertEqual(model.metadata.user["onnx.producer_name"], "kiln-fixtures")
        XCTAssertEqual(model.metadata.user["onnx.producer_version"], "1.2.3")
        XCTAssertEqual(model.metadata.user["author"], "fixtures")
        XCTAssertEqual(model.metadata.user["labels"], "a,b")
        XCTAssertEqual(model.metadata.user["onnx.opset"], "ai.onnx 17")
    }

    func testExternalDataIsReadFromBesideTheModel() throws {
        let model = try convertAndCheck("external_data")
        XCTAssertEqual(model.weights.map(\.name), ["W"])
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: "\(dir)/external_escape.onnx")) { error in
            XCTAssertEqual("\(error)", "\(self.dir)/external_escape.onnx: tensor 'W': external data location '../outside.bin' is outside the model's folder")
        }
    }

    func testUnsortedNodesAndInitializersListedAsInputs() throws {
        try convertAndCheck("unsorted_nodes")
        let model = try convertAndCheck("initializer_as_input")
        XCTAssertEqual(model.functions[0].inputs.map(\.name), ["x"])
    }

    func testFloat16WeightsStayFloat16AndFloat64Narrows() throws {
        let model = try convertAndCheck("float16_weights")
        XCTAssertEqual(model.weights.map(\.dtype), [.float16])
        XCTAssertEqual(model.storagePrecisions.map(\.storage), ["float16"])
        try convertAndCheck("float64_constant")
    }

    func testInt8WeightsStayQuantized() throws {
        // DequantizeLinear per axis, blocked with zero points, and the Cast/Mul form: each weight
        // imports as a quantized weight (its int8/uint8 bytes kept), the outputs still match onnxruntime.
        let model = try convertAndCheck("int8_weights")
        var quantized = 0, stored = 0, dense = 0
        for w in model.weights {
            if case .quantized(let q) = w.encoding {
                quantized += 1
                XCTAssertTrue([.int8, .uint8].contains(q.data.dtype), w.name)
                stored += q.data.data.count + q.scale.data.count + (q.zeroPoint?.data.count ?? 0)
                dense += w.elementCount * 4
            }
        }
        XCTAssertEqual(quantized, 4, "\(model.weights.map(\.name))")
        XCTAssertLessThan(Double(stored), 0.3 * Double(dense))
        XCTAssertFalse(model.functions[0].operations.contains { $0.opType == "dequantize_linear" })
    }

    func testUnsupportedOperatorsAreListedTogether() throws {
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: "\(dir)/unsupported_ops.onnx")) { error in
            XCTAssertEqual("\(error)", "\(self.dir)/unsupported_ops.onnx: unsupported operators: Frobnicate ×2 (com.example, opset 3)")
        }
        // A Loop whose body does not take its counter, condition and carried value: named, with the arity.
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: "\(dir)/unsupported_loop.onnx")) { error in
            XCTAssertEqual("\(error)", "\(self.dir)/unsupported_loop.onnx: node '' (Loop): the body takes 0 inputs and returns 1 values for 1 carried values")
        }
    }

    /// Inputs `make fuzz` found crashing the importer, kept as regressions: each is a clear error.
    /// Inputs `make fuzz` found crashing, each now a clear error (or, where the model is valid,
    /// a conversion: `nil`).
    func testFuzzRegressionsGetClearErrors() throws {
        let fuzz = "\(repositoryRoot)/Tests/Fixtures/fuzz/onnx"
        let expected: [String: String?] = [
            "empty_tensor_with_huge_dims": nil,
            "gather_of_a_scalar": "node '' (Gather): data must have rank 1 or more, got a scalar",
            "pool_without_output": "node '' (AveragePool) has no output",
            "squeeze_more_axes_than_rank": "node '' (Squeeze): squeezes 2 axes of a rank-1 input",
            "tensor_shape_beyond_its_data": "tensor 'W' has external data without a location",
        ]
        let files = try FileManager.default.contentsOfDirectory(atPath: fuzz).filter { $0.hasSuffix(".onnx") }.sorted()
        XCTAssertEqual(files.map { String($0.dropLast(5)) }, expected.keys.sorted())
        for file in files {
            let path = "\(fuzz)/\(file)"
            guard let message = expected[String(file.dropLast(5))]! else {
                XCTAssertNoThrow(try ONNXImporter.convert(contentsOf: path), file)
                continue
            }
            XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: path), file) { error in
                XCTAssertEqual("\(error)", "\(path): \(message)")
            }
        }
    }

    func testMalformedModelsGetClearErrors() {
        let cases = [
            "truncated": "not a valid ONNX model (the protobuf is truncated or malformed)",
            "wrong_wire_type": "not a valid ONNX model (the protobuf is truncated or malformed)",
            "not_onnx": "not a valid ONNX model (the protobuf is truncated or malformed)",
            "tensor_length_mismatch": "tensor 'W' holds 48 bytes of raw data, but float32[4, 4] needs 64",
            "undefined_input": "node #0 (MatMul) reads 'nowhere', which no node, input or initializer defines",
        ]
        for (name, reason) in cases {
            let path = "\(dir)/\(name).onnx"
            XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: path), name) { error in
                XCTAssertEqual("\(error)", "\(path): \(reason)")
            }
        }
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: "\(dir)/missing.onnx")) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(self.dir)/missing.onnx: cannot open"), "\(error)")
        }
    }

    /// Byte-level mutations of valid ONNX models give a model or a ConvertError, never a crash.
    func testTenThousandMutationsNeverCrash() throws {
        var state: UInt64 = 4242
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: state >> 33)
        }
        let sources = try ["shape_subgraph", "constants_only", "metadata", "float16_weights"].map {
            [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(dir)/\($0).onnx")))
        } + [[UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(repositoryRoot)/Tests/Fixtures/onnx/ops/conv_groups.onnx")))]
        var (converted, refused) = (0, 0)
        for i in 0 ..< 10_000 {
            var b = sources[i % sources.count]
            for _ in 0 ... next() % 3 {
                switch next() % 4 {
                case 0: b[next() % b.count] ^= UInt8(1 << (next() % 8))
                case 1: b[next() % b.count] = UInt8(truncatingIfNeeded: next())
                case 2: b[next() % b.count] = [0x00, 0x7F, 0x80, 0xFF][next() % 4]
                default: b.removeLast(next() % max(b.count / 4, 1))
                }
                if b.isEmpty { break }
            }
            do {
                _ = try ONNXImporter.convert(bytes: b, path: "mutant.onnx")
                converted += 1
            } catch is ConvertError {
                refused += 1
            } catch {
                XCTFail("mutation \(i) raised \(error)")
            }
        }
        XCTAssertEqual(converted + refused, 10_000)
        XCTAssertGreaterThan(refused, 100)
        XCTAssertGreaterThan(converted, 100, "some mutations should still convert and exercise the importer")
    }

    /// Graphs nested 2000 deep in attributes are refused, not parsed recursively.
    func testDeepNestingIsRefused() {
        // Innermost: an empty graph; each level wraps it as Node.attribute(5) → Attribute.g(6) → Graph.node(1).
        func field(_ number: Int, _ payload: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [UInt8(number << 3 | 2)]
            var n = payload.count
            repeat {
                out.append(UInt8(n & 0x7F) | (n > 0x7F ? 0x80 : 0))
                n >>= 7
            } while n > 0
            return out + payload
        }
        var graph: [UInt8] = []
        for _ in 0 ..< 2000 { graph = field(1, field(5, field(6, graph))) }
        let model = field(7, graph)
        XCTAssertThrowsError(try ONNXImporter.convert(bytes: model, path: "deep.onnx")) { error in
            XCTAssertEqual("\(error)", "deep.onnx: not a valid ONNX model (messages nested more than 64 levels deep)")
        }
    }
}
