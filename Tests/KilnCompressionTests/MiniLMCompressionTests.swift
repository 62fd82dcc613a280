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

    /// `--target-cosine 0.999` on the golden input: a mix smaller than int8 per-channel that keeps
    /// the outputs' cosine similarity at 0.999, measured here independently of the planner.
    func testTargetCosinePicksAMixSmallerThanInt8() throws {
        let model = try ONNXImporter.convert(contentsOf: "\(testModels)/minilm_l3_paraphrase.onnx")
        let golden = "\(testGoldens)/minilm_l3_paraphrase"
        let inputs = ["input_ids": try NDArray(npyFile: "\(golden)/in_0_input_ids.npy"),
                      "attention_mask": try NDArray(npyFile: "\(golden)/in_1_attention_mask.npy")]
        let outputs = model.functions[0].outputs.map(\.name)
        let run: @Sendable (PortableModel) throws -> [Float] = { m in
            let out = try ReferenceInterpreter(model: m, function: "main").run(inputs)
            return outputs.flatMap { out[$0]!.scalarType == .float32 ? out[$0]!.scalars(as: Float.self) : [] }
        }
        let plan = try MixedPrecision.plan(model, candidates: MixedPrecision.defaultCandidates, target: .cosine(0.999), evaluate: run)
        let (_, int8) = try Compressor.apply(try CompressionConfig(data: Data(#"{"global": {"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"}}"#.utf8), path: "cfg"), to: model)
        XCTAssertLessThan(plan.report.bytesAfter, int8.bytesAfter)
        XCTAssertGreaterThanOrEqual(plan.measured, 0.999)
        // Written, read back and run: the package keeps the target.
        let dir = NSTemporaryDirectory() + "kiln-mixed-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try PackageWriter.write(plan.model, to: "\(dir)/mixed.kiln")
        let back = try PackageReader.read(at: "\(dir)/mixed.kiln")
        let got = try run(back), want = try run(model)
        XCTAssertGreaterThanOrEqual(MixedPrecision.cosine(want, got), 0.999)
        // Some layers were kept at higher precision than others.
        XCTAssertGreaterThan(Set(plan.choices.map(\.candidate)).count, 1, "\(plan.choices)")
        XCTAssertEqual(plan.report.rows.count, model.weights.count)
    }

    /// An SNR target over all compressed weights: met, with the smallest settings that meet it.
    func testTargetSNR() throws {
        let model = try ONNXImporter.convert(contentsOf: "\(testModels)/minilm_l3_paraphrase.onnx")
        let plan = try MixedPrecision.plan(model, candidates: ["kmeans4", "kmeans6", "int8"], target: .snr(30))
        XCTAssertGreaterThanOrEqual(plan.measured, 30)
        // 4-bit k-means keeps about 20 dB on every layer: a 15 dB target takes it everywhere.
        let loose = try MixedPrecision.plan(model, candidates: ["kmeans4", "kmeans6", "int8"], target: .snr(15))
        XCTAssertLessThan(loose.report.bytesAfter, plan.report.bytesAfter)
        XCTAssertGreaterThanOrEqual(loose.measured, 15)
        XCTAssertTrue(loose.choices.allSatisfy { $0.candidate == "kmeans4" }, "\(loose.choices)")
    }
}
