import Foundation
import KilnCompiler
import KilnFormat
@testable import KilnONNX
import KilnReference
import KilnRuntime
import KilnTestSupport
import XCTest

/// The symbolic-dim sweep: every ONNX fixture and test model converted with each input dim a
/// symbol of its own and every other stated shape dropped (so the converter and the compiler infer
/// all of it), compiled for the host, run on the original inputs (the first run and the planned
/// one) and compared with onnxruntime's outputs.
final class SymbolicDimSweepTests: XCTestCase {
    /// Fixtures that cannot pass by design, with why: Kiln fixes every value's rank, and a
    /// convolution's window, at convert time.
    static let exceptions: [String: String] = {
        let shapeOperand = "an input is a shape, axes or index operand: its length is a rank, which Kiln fixes at convert time"
        let kernel = "the kernel is a graph input: with its dims symbolic, the window's size is unknown at convert time"
        let squeeze = "Squeeze without axes: which dims go depends on their run-time sizes; Kiln keeps run-time dims (checked when it runs)"
        let packed = "a packed QKV or bias whose hidden size is symbolic: the head split is fixed at convert time"
        var out: [String: String] = [:]
        for name in ["reshape", "reshape_zero_minus_one", "reshape_allowzero_empty", "reshape_int64", "squeeze", "unsqueeze", "gather_nd",
                     "gather_nd_full", "gather_nd_batch", "expand", "expand_smaller_shape", "constant_of_shape", "constant_of_shape_int64",
                     "constant_of_shape_default", "affine_grid_2d", "affine_grid_3d_aligned", "col2im_strided_padded"] { out[name] = shapeOperand }
        for op in ["mean", "sum", "max", "min", "prod", "l2"] { out["reduce_\(op)_negative_axes_nokeep"] = shapeOperand }
        for name in ["conv_basic", "conv_pads_strides", "conv_asymmetric_pads", "conv_dilation", "conv_groups", "conv_depthwise",
                     "conv_groups_dilation_asym", "conv_same_upper", "conv_same_lower", "conv_valid", "conv_1d", "conv_3d", "conv_1x1",
                     "conv_transpose_basic", "conv_transpose_strides", "conv_transpose_output_padding", "conv_transpose_groups_dilation",
                     "conv_transpose_output_shape", "conv_transpose_1d", "conv_integer_grouped_padded", "qlinear_conv_per_channel"] { out[name] = kernel }
        for name in ["squeeze_all", "squeeze_no_axes_runtime_dim"] { out[name] = squeeze }
        for name in ["contrib_gqa_prompt", "contrib_gqa_genai_decode", "contrib_gqa_genai_prompt", "contrib_mha"] { out[name] = packed }
        return out
    }()

    /// Converts, compiles and runs `path` with symbolic input dims; the problem, or nil.
    func sweep(_ path: String, inputs: [String: NDArray], outputs: [String: NDArray], bound: Double) async -> String? {
        guard let arch = Architecture.host else { return nil }
        do {
            var options = ConvertOptions()
            options.symbolicInputDims = true
            let model = try ONNXImporter.convert(contentsOf: path, options: options)
            let tmp = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: tmp) }
            let artifact = "\(tmp)/m.\(arch.name).compiled"
            try compileArtifact(model, arch, to: artifact)
            let loaded = try await Model.load(contentsOf: URL(fileURLWithPath: artifact))
            guard let f = try await loaded.loadFunction(named: "main") else { return "no function main" }
            for run in ["first run", "planned run"] {
                let got = try await f.run(inputs: inputs)
                for (name, want) in outputs.sorted(by: { $0.key < $1.key }) {
                    guard let value = got[name] else { return "\(run): no output \(name)" }
                    if let problem = Self.difference(value, want, bound: bound) { return "\(run): output \(name): \(problem)" }
                }
            }
            return nil
        } catch {
            return "\(error)"
        }
    }

    /// How `got` differs from `want` beyond `bound · max(1, |want|)` per element, or nil.
    static func difference(_ got: NDArray, _ want: NDArray, bound: Double) -> String? {
        guard got.shape == want.shape else { return "shape \(got.shape), expected \(want.shape)" }
        guard got.scalarType == want.scalarType else { return "dtype \(got.scalarType.rawValue), expected \(want.scalarType.rawValue)" }
        guard let g = got.doubles(), let w = want.doubles() else {
            return got.bytes == want.bytes ? nil : "values differ"
        }
        for i in g.indices where !(g[i].isNaN && w[i].isNaN) && g[i] != w[i] {
            if !want.scalarType.isFloatingPoint || abs(g[i] - w[i]) > bound * max(1, abs(w[i])) {
                return "element \(i): got \(g[i]), expected \(w[i])"
            }
        }
        return nil
    }

    func report(_ failures: [String], of count: Int, _ what: String) {
        XCTAssertEqual(failures, [], "\(failures.count) of \(count) \(what) fail the symbolic-dim sweep:\n" + failures.joined(separator: "\n"))
    }

    func testOperatorFixtures() async throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(repositoryRoot)/Tests/Fixtures/ops/cases.json"))
        let cases = try XCTUnwrap((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["cases"] as? [[String: Any]])
        var failures: [String] = []
        var count = 0
        for c in cases {
            guard c["onnx"] is String, let name = c["name"] as? String, Self.exceptions[name] == nil else { continue }
            var inputs: [String: NDArray] = [:]
            for (i, x) in (c["inputs"] as? [Any] ?? []).enumerated() {
                guard let json = x as? [String: Any] else { continue }
                var array = FixtureJSON.array(json)
                if array.scalarType == .float64 { array = NDArray(shape: array.shape, scalars: array.scalars(as: Double.self).map { Float($0) }) }
                inputs["in\(i)"] = array
            }
            var outputs: [String: NDArray] = [:]
            for (k, json) in (c["outputs"] as? [[String: Any]] ?? []).enumerated() { outputs["out\(k)"] = FixtureJSON.array(json) }
            let bound = (c["tolerance"] as? NSNumber)?.doubleValue ?? 1e-4
            count += 1
            if let problem = await sweep("\(repositoryRoot)/Tests/Fixtures/onnx/ops/\(name).onnx", inputs: inputs, outputs: outputs, bound: bound) {
                failures.append("\(name): \(problem)")
            }
        }
        XCTAssertGreaterThan(count, 300)
        report(failures, of: count, "operator fixtures")
    }

    func testModelFixtures() async throws {
        let dir = "\(repositoryRoot)/Tests/Fixtures/onnx/models"
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(dir)/models.json"))
        let cases = try XCTUnwrap((try JSONSerialization.jsonObject(with: data) as? [String: Any])?["cases"] as? [[String: Any]])
        var failures: [String] = []
        for c in cases {
            guard let name = c["name"] as? String, Self.exceptions[name] == nil else { continue }
            let inputs = (c["inputs"] as? [String: [String: Any]] ?? [:]).mapValues(FixtureJSON.array)
            let outputs = (c["outputs"] as? [String: [String: Any]] ?? [:]).mapValues(FixtureJSON.array)
            if let problem = await sweep("\(dir)/\(name).onnx", inputs: inputs, outputs: outputs, bound: 1e-4) {
                failures.append("\(name): \(problem)")
            }
        }
        XCTAssertGreaterThan(cases.count, 30)
        report(failures, of: cases.count, "model fixtures")
    }

    func testTestModels() async throws {
        var failures: [String] = []
        let names = ["magika_v3_3", "minilm_l3_paraphrase", "mobilenetv3_orientation"]
        for name in names {
            try requireTestModel("\(testModels)/\(name).onnx")
            let golden = "\(testGoldens)/\(name)"
            let manifest = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(golden)/manifest.json"))) as? [String: Any])
            func arrays(_ key: String) throws -> [String: NDArray] {
                var out: [String: NDArray] = [:]
                for entry in manifest[key] as? [[String: Any]] ?? [] {
                    let (n, file) = (entry["name"] as! String, entry["file"] as! String)
                    out[n] = try NDArray(npyBytes: [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(golden)/\(file)"))))
                }
                return out
            }
            if let problem = await sweep("\(testModels)/\(name).onnx", inputs: try arrays("inputs"), outputs: try arrays("outputs"), bound: 1e-4) {
                failures.append("\(name): \(problem)")
            }
        }
        report(failures, of: names.count, "test models")
    }
}
