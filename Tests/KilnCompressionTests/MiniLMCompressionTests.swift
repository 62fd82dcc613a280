import Foundation
import KilnCompression
import KilnFormat
import KilnONNX
import KilnReference
import XCTest

/// The converted MiniLM keeps its sentence embedding through compression.
final class MiniLMCompressionTests: XCTestCase {
    func testInt8PerChannelKeepsTheEmbedding() throws {
        let shared = "\(repositoryRoot)/../shared/models"
        let model = try ONNXImporter.convert(contentsOf: "\(shared)/minilm_l3_paraphrase.onnx")
        let golden = "\(shared)/golden/minilm_l3_paraphrase"
        let inputs = ["input_ids": try NDArray(npyFile: "\(golden)/in_0_input_ids.npy"),
                      "attention_mask": try NDArray(npyFile: "\(golden)/in_1_attention_mask.npy")]
        let want = try NDArray(npyFile: "\(golden)/out_3_461.npy").scalars(as: Float.self)
        let config = try CompressionConfig(data: Data(#"{"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}"#.utf8), path: "cfg")
        let (compressed, report) = try Compressor.apply(config, to: model)
        let dir = NSTemporaryDirectory() + "kiln-minilm-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(model, to: "\(dir)/original.kiln")
        try PackageWriter.write(compressed, to: "\(dir)/int8.kiln")
        let ratio = Double(PackageReader.diskSize(ofPackageAt: "\(dir)/int8.kiln")) / Double(PackageReader.diskSize(ofPackageAt: "\(dir)/original.kiln"))
        XCTAssertLessThan(ratio, 0.27)
        XCTAssertTrue(report.rows.contains { $0.weight.contains("word_embeddings") && $0.method == "linear_symmetric" })
        let back = try PackageReader.read(at: "\(dir)/int8.kiln")
        let got = try ReferenceInterpreter(model: back, function: "main").run(inputs)["461"]!.scalars(as: Float.self)
        let dot = zip(got, want).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        let norms = sqrt(got.reduce(0.0) { $0 + Double($1 * $1) }) * sqrt(want.reduce(0.0) { $0 + Double($1 * $1) })
        XCTAssertGreaterThanOrEqual(dot / norms, 0.999, "cosine similarity")
    }
}

extension MiniLMCompressionTests {
    /// Exact k-means palettization of every weight above the threshold, embedding included.
    func check(bits: Int, cosine: Double, ratio: Double) throws {
        let shared = "\(repositoryRoot)/../shared/models"
        let model = try ONNXImporter.convert(contentsOf: "\(shared)/minilm_l3_paraphrase.onnx")
        let golden = "\(shared)/golden/minilm_l3_paraphrase"
        let inputs = ["input_ids": try NDArray(npyFile: "\(golden)/in_0_input_ids.npy"),
                      "attention_mask": try NDArray(npyFile: "\(golden)/in_1_attention_mask.npy")]
        let want = try NDArray(npyFile: "\(golden)/out_3_461.npy").scalars(as: Float.self)
        let config = try CompressionConfig(data: Data(#"{"global": {"mode": "kmeans", "nbits": \#(bits)}}"#.utf8), path: "cfg")
        let (compressed, _) = try Compressor.apply(config, to: model)
        let dir = NSTemporaryDirectory() + "kiln-minilm-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(model, to: "\(dir)/original.kiln")
        try PackageWriter.write(compressed, to: "\(dir)/palettized.kiln")
        let size = Double(PackageReader.diskSize(ofPackageAt: "\(dir)/palettized.kiln")) / Double(PackageReader.diskSize(ofPackageAt: "\(dir)/original.kiln"))
        XCTAssertLessThan(size, ratio)
        let got = try ReferenceInterpreter(model: try PackageReader.read(at: "\(dir)/palettized.kiln"), function: "main").run(inputs)["461"]!.scalars(as: Float.self)
        let dot = zip(got, want).reduce(0.0) { $0 + Double($1.0) * Double($1.1) }
        let norms = sqrt(got.reduce(0.0) { $0 + Double($1 * $1) }) * sqrt(want.reduce(0.0) { $0 + Double($1 * $1) })
        XCTAssertGreaterThanOrEqual(dot / norms, cosine, "cosine similarity at \(bits) bits")
    }

    func testFourBitKMeans() throws { try check(bits: 4, cosine: 0.97, ratio: 0.14) }
    func testSixBitKMeans() throws { try check(bits: 6, cosine: 0.995, ratio: 0.20) }
}
