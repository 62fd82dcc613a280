import Foundation
import KilnFormat
import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

/// Several ONNX graphs as the functions of one package (`PortableModel.merging`): weights equal
/// in content stored once, names that collide renamed, every function computing what its graph
/// computes alone.
final class MultiGraphTests: XCTestCase {
    func convert(_ name: String, as function: String) throws -> PortableModel {
        var options = ConvertOptions(name: name)
        options.functionName = function
        return try ONNXImporter.convert(contentsOf: "\(testModels)/\(name).onnx", options: options)
    }

    /// The model written as a package and read back, as users get it.
    func roundTrip(_ model: PortableModel) throws -> (model: PortableModel, bytes: Int) {
        let dir = NSTemporaryDirectory() + "kiln-multi-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(model, to: "\(dir)/M.kiln")
        var bytes = 0
        let files = FileManager.default.enumerator(atPath: "\(dir)/M.kiln")
        while let f = files?.nextObject() as? String {
            bytes += (try? FileManager.default.attributesOfItem(atPath: "\(dir)/M.kiln/\(f)")[.size] as? Int) ?? 0
        }
        return (try PackageReader.read(at: "\(dir)/M.kiln"), bytes)
    }

    func testSharedWeightsAreStoredOnce() throws {
        let encoder = try convert("minilm_l3_paraphrase", as: "encoder")
        let again = try convert("minilm_l3_paraphrase", as: "again")
        let mobile = try convert("mobilenetv3_orientation", as: "orientation")
        let merged = try PortableModel.merging([encoder, again, mobile])
        XCTAssertEqual(merged.functions.map(\.name), ["encoder", "again", "orientation"])
        XCTAssertEqual(merged.weights.count, encoder.weights.count + mobile.weights.count)
        XCTAssertEqual(merged.functions[1], again.functions[0], "the same weights keep their names")
        let (back, bytes) = try roundTrip(merged)
        let alone = try roundTrip(encoder).bytes + roundTrip(mobile).bytes
        // The second encoder adds its function's manifest, not its 17M parameters.
        XCTAssertLessThan(bytes, alone + (1 << 20))
        XCTAssertEqual(back.parameterCount, encoder.parameterCount + mobile.parameterCount)
        for (function, name) in [("encoder", "minilm_l3_paraphrase"), ("again", "minilm_l3_paraphrase"), ("orientation", "mobilenetv3_orientation")] {
            let golden = try Golden(directory: "\(testGoldens)/\(name)")
            let outputs = try ReferenceInterpreter(model: back, function: function).run(golden.inputs)
            for (output, want) in golden.outputs { assertMatches(outputs[output], want, "\(function) \(output)") }
        }
    }

    func testCollidingNamesAreRenamed() throws {
        let first = try convert("minilm_l3_paraphrase", as: "first")
        var second = try convert("minilm_l3_paraphrase", as: "second")
        // One weight of the second graph differs under the same name: both are kept.
        let i = try XCTUnwrap(second.weights.firstIndex { $0.dtype == .float32 && $0.elementCount > 1000 })
        guard case .dense(var blob) = second.weights[i].encoding else { return XCTFail("expected a dense weight") }
        let halved = blob.data.bytes.bindMemory(to: Float.self).map { $0 * 0.5 }
        blob.data = halved.withUnsafeBytes { ByteStorage(copying: $0) }
        second.weights[i].encoding = .dense(blob)
        let name = second.weights[i].name
        let merged = try PortableModel.merging([first, second])
        XCTAssertEqual(merged.weights.count, first.weights.count + 1)
        XCTAssertEqual(merged.weights.last?.name, "second.\(name)")
        XCTAssertTrue(merged.functions[1].operations.contains { $0.inputs.contains("second.\(name)") })
        XCTAssertFalse(merged.functions[1].operations.contains { $0.inputs.contains(name) })
        let (back, _) = try roundTrip(merged)
        let golden = try Golden(directory: "\(testGoldens)/minilm_l3_paraphrase")
        // Each function computes exactly what its graph computes alone.
        for (function, model) in [("first", first), ("second", second)] {
            let want = try ReferenceInterpreter(model: model, function: function).run(golden.inputs)
            let got = try ReferenceInterpreter(model: back, function: function).run(golden.inputs)
            for (output, w) in want { XCTAssertEqual(got[output]?.bytes, w.bytes, "\(function) \(output)") }
        }
        XCTAssertThrowsError(try PortableModel.merging([first, first])) { error in
            XCTAssertEqual("\(error)", "two functions are called 'first'")
        }
    }
}
