import Foundation
import KilnFormat
import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

/// The three trained test models (`make models`) convert, and the converted packages
/// reproduce onnxruntime's outputs on the golden inputs.
final class SharedModelTests: XCTestCase {
    func convertAndRun(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws -> PortableModel {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/\(name).onnx")
        // Through the package format, as users get it.
        let dir = NSTemporaryDirectory() + "kiln-shared-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(model, to: "\(dir)/\(name).kiln")
        let back = try PackageReader.read(at: "\(dir)/\(name).kiln")
        let golden = try Golden(directory: "\(testGoldens)/\(name)")
        let outputs = try ReferenceInterpreter(model: back, function: "main").run(golden.inputs)
        for (outputName, want) in golden.outputs {
            assertMatches(outputs[outputName], want, "\(name) \(outputName)", file: file, line: line)
        }
        return back
    }

    func testMobileNetV3() throws {
        let model = try convertAndRun("mobilenetv3_orientation")
        let f = model.functions[0]
        XCTAssertEqual(f.inputs.map(\.name), ["x"])
        XCTAssertEqual(f.inputs[0].type.description, "float32[DynamicDimension.0, 3, 224, 224]")
        XCTAssertEqual(f.outputs[0].type.description, "float32[DynamicDimension.0, 4]")
        XCTAssertEqual(model.metadata.user["character"], "0\n90\n180\n270")
        XCTAssertFalse(f.operations.contains { $0.opType == "identity" })
    }

    func testMagika() throws {
        let model = try convertAndRun("magika_v3_3")
        let f = model.functions[0]
        XCTAssertEqual(f.inputs[0].type.description, "int32[unk__214, 2048]")
        XCTAssertEqual(f.outputs.map(\.name), ["target_label"])
        XCTAssertEqual(model.metadata.user["onnx.producer_name"], "tf2onnx")
    }

    func testMiniLM() throws {
        let model = try convertAndRun("minilm_l3_paraphrase")
        let f = model.functions[0]
        XCTAssertEqual(f.inputs.map(\.name), ["input_ids", "attention_mask"])
        for input in f.inputs { XCTAssertEqual(input.type.shape, ["batch_size", "sequence_length"]) }
        XCTAssertEqual(f.outputs.map(\.name), ["output", "463", "onnx::Shape_422", "461"])
        // Declared output shapes in the ONNX file are wrong; inference wins.
        XCTAssertEqual(f.outputs[2].type.description, "float32[batch_size, sequence_length, 384]")
        XCTAssertEqual(f.outputs[3].type.description, "float32[batch_size, 384]")
        // The pass-through outputs return the inputs themselves.
        XCTAssertEqual(f.outputs[0].value, "input_ids")
        XCTAssertEqual(model.parameterCount, 17_243_008)
        // Shape subgraphs over the sequence length fold into static reshapes.
        let reshapes = f.operations.filter { $0.opType == "reshape" }
        XCTAssertTrue(reshapes.allSatisfy { $0.attributes["shape"] != nil }, "\(reshapes.map(\.name))")
        XCTAssertLessThan(f.operations.filter { $0.opType == "shape" }.count, 10)
    }

    func testOtherSequenceLengthsRun() throws {
        let model = try ONNXImporter.convert(contentsOf: "\(sharedModels)/minilm_l3_paraphrase.onnx")
        let run = try ReferenceInterpreter(model: model, function: "main")
        for (batch, seq) in [(2, 5), (1, 40)] {
            let ids = NDArray(shape: [batch, seq], scalars: (0 ..< batch * seq).map { Int64(101 + $0 % 50) })
            let mask = NDArray(shape: [batch, seq], scalars: [Int64](repeating: 1, count: batch * seq))
            let out = try run.run(["input_ids": ids, "attention_mask": mask])
            XCTAssertEqual(out["461"]?.shape, [batch, 384])
            XCTAssertEqual(out["onnx::Shape_422"]?.shape, [batch, seq, 384])
        }
    }
}
