import Foundation
import KilnCompiler
import KilnCompression
import KilnFormat
import KilnONNX
import KilnReference
@testable import KilnRuntime
import XCTest

/// Compressed weights through the compiled GEMMs (decoded in the microkernels) against the
/// reference interpreter, which dequantizes them and multiplies in float32: every quantization
/// granularity and every table width, shapes off the tiles' edges, one to seventeen rows.
final class CompressedGEMMTests: XCTestCase {
    /// y = relu(x · Wᵀ + b) through `linear` (W [N, K]) and z = x · V through `matmul` (V [K, N]).
    func model(k: Int, n: Int) throws -> PortableModel {
        var rng = SplitMix64(seed: 0x5eed)
        func values(_ count: Int) -> [Float] { (0 ..< count).map { _ in Float(rng.unit() * 2 - 1) } }
        var b = ModelBuilder(name: "q")
        let w = try b.addWeight("w", shape: [n, k], values: values(n * k))
        let v = try b.addWeight("v", shape: [k, n], values: values(n * k))
        let bias = try b.addWeight("bias", shape: [n], values: values(n))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["m", .size(k)]))
        let l = try f.apply1("linear", [x, f.use(w), f.use(bias)], name: "linear")
        f.output("y", try f.apply1("relu", [l], name: "act"))
        f.output("z", try f.apply1("matmul", [x, f.use(v)], name: "matmul"))
        try b.add(f)
        return try b.build()
    }

    static let configs = [
        #"{"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_tensor"}"#,
        #"{"mode": "linear_symmetric", "dtype": "int8"}"#,
        #"{"mode": "linear_symmetric", "dtype": "int8", "granularity": "per_block", "block_size": 8}"#,
        #"{"mode": "linear", "dtype": "uint8"}"#,
        #"{"mode": "linear", "dtype": "int8", "granularity": "per_block", "block_size": 16}"#,
        #"{"mode": "linear_symmetric", "dtype": "int4"}"#,
        #"{"mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 16}"#,
        #"{"mode": "linear", "dtype": "uint4"}"#,
        #"{"mode": "linear", "dtype": "uint4", "granularity": "per_block", "block_size": 4}"#,
        #"{"mode": "kmeans", "nbits": 1}"#,
        #"{"mode": "kmeans", "nbits": 2, "granularity": "per_grouped_channel", "group_size": 16}"#,
        #"{"mode": "kmeans", "nbits": 3}"#,
        #"{"mode": "kmeans", "nbits": 4}"#,
        #"{"mode": "kmeans", "nbits": 4, "granularity": "per_grouped_channel", "group_size": 16, "enable_per_channel_scale": true}"#,
        #"{"mode": "uniform", "nbits": 4, "granularity": "per_grouped_channel", "group_size": 8}"#,
        #"{"mode": "kmeans", "nbits": 6, "granularity": "per_grouped_channel", "group_size": 40}"#,
        #"{"mode": "uniform", "nbits": 6, "granularity": "per_grouped_channel", "group_size": 16, "enable_per_channel_scale": true}"#,
        #"{"mode": "kmeans", "nbits": 8}"#,
    ]

    func testCompressedGEMMsMatchDequantizedFloat() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // K: a multiple of every block and word; N: off every panel width (8, 16, 32) and group.
        let (k, n) = (48, 80)
        let base = try model(k: k, n: n)
        var rng = SplitMix64(seed: 7)
        for (ci, setting) in Self.configs.enumerated() {
            let text = #"{"global": "# + setting.dropLast() + #", "weight_threshold": 0}}"#
            let config = try CompressionConfig(data: Data(text.utf8), path: "c.json")
            let (compressed, report) = try Compressor.apply(config, to: base, progress: nil)
            XCTAssertEqual(report.rows.filter { $0.method != "none" }.count, 2, text)
            for arch in runnableArchitectures {
                let path = "\(dir)/q\(ci).\(arch.name).compiled"
                try compileArtifact(compressed, arch, to: path)
                try assertNoReferenceSteps(path, "\(text) \(arch.name)")
                // Packed weights stay compressed in the artifact.
                let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
                for w in artifact.plan.model.weights where w.name.contains("@") {
                    if case .dense = w.encoding { XCTFail("\(text) \(arch.name): \(w.name) was packed as float32") }
                }
                for m in [1, 3, 8, 17] {
                    let x = NDArray(shape: [m, k], scalars: (0 ..< m * k).map { _ in Float(rng.unit() * 2 - 1) })
                    _ = try await assertCompiledMatchesReference(compressed, artifact: path, function: "main", inputs: ["x": x],
                                                                 label: "\(text) \(arch.name) m=\(m)")
                }
            }
        }
    }

    /// An ONNX model with int8 weights behind DequantizeLinear (and Cast/Mul) compiles with the
    /// weights still int8 in the artifact and runs through the compressed kernels.
    func testImportedInt8WeightsRunCompressed() async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(repositoryRoot)/Tests/Fixtures/onnx/models/int8_weights.onnx")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 3)
        let ids = NDArray(shape: [3, 5], scalars: (0 ..< 15).map { _ in Int64(rng.below(50)) })
        for arch in runnableArchitectures {
            let path = "\(dir)/m.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
            let packed = artifact.plan.model.weights.filter { $0.name.contains("@") }
            XCTAssertEqual(packed.count, 3, arch.name)
            for w in packed {
                guard case .quantized = w.encoding else { return XCTFail("\(arch.name): \(w.name) is not quantized") }
            }
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: ["ids": ids], label: arch.name)
        }
    }
}
