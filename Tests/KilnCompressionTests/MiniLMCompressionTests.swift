import Foundation
import KilnCompression
import KilnFormat
import KilnONNX
import KilnReference
import KilnTestSupport
import XCTest

/// The converted MiniLM keeps its sentence embedding (`461`) through compression of every
/// weight above the threshold, embedding table included.
final class MiniLMCompressionTests: XCTestCase {
    /// Compresses the converted MiniLM with `config`, writes both packages, and returns the
    /// size ratio and the cosine similarity of `461` to onnxruntime's on the golden input.
    func measure(_ config: String, file: StaticString = #filePath, line: UInt = #line) throws -> (ratio: Double, cosine: Double, report: CompressionReport) {
        let model = try ONNXImporter.convert(contentsOf: "\(testModels)/minilm_l3_paraphrase.onnx")
        let golden = "\(testGoldens)/minilm_l3_paraphrase"
        let inputs = ["input_ids": try NDArray(npyFile: "\(golden)/in_0_input_ids.npy"),
                      "attention_mask": try NDArray(npyFile: "\(golden)/in_1_attention_mask.npy")]
        let want = try NDArray(npyFile: "\(golden)/out_3_461.npy").scalars(as: Float.self)
        let (compressed, report) = try Compressor.apply(try CompressionConfig(data: Data(config.utf8), path: "cfg"), to: model)
        let dir = NSTemporaryDirectory() + "kiln-minilm-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(model, to: "\(dir)/original.kiln")
        try PackageWriter.write(compressed, to: "\(dir)/compressed.kiln")
        let ratio = Double(PackageReader.diskSize(ofPackageAt: "\(dir)/compressed.kiln")) / Double(PackageReader.diskSize(ofPackageAt: "\(dir)/original.kiln"))
        let back = try PackageReader.read(at: "\(dir)/compressed.kiln")
        let got = try ReferenceInterpreter(model: back, function: "main").run(inputs)["461"]!.scalars(as: Float.self)
        let dot = zip(got, want).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        let norms = sqrt(got.reduce(0.0) { $0 + Double($1 * $1) }) * sqrt(want.reduce(0.0) { $0 + Double($1 * $1) })
        return (ratio, dot / norms, report)
    }

    func testInt8PerChannel() throws {
        let m = try measure(#"{"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}"#)
        XCTAssertLessThan(m.ratio, 0.27)
        XCTAssertGreaterThanOrEqual(m.cosine, 0.999)
        XCTAssertTrue(m.report.rows.contains { $0.weight.contains("word_embeddings") && $0.method == "linear_symmetric" })
    }

    func testSixBitKMeans() throws {
        let m = try measure(#"{"global": {"mode": "kmeans", "nbits": 6}}"#)
        XCTAssertLessThan(m.ratio, 0.20)
        XCTAssertGreaterThanOrEqual(m.cosine, 0.995)
    }

    func testFourBitKMeans() throws {
        let m = try measure(#"{"global": {"mode": "kmeans", "nbits": 4}}"#)
        XCTAssertLessThan(m.ratio, 0.14)
        XCTAssertGreaterThanOrEqual(m.cosine, 0.97)
    }
}
