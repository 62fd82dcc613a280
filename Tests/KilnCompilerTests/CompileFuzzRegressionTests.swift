import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
import KilnReference
import KilnRuntime
import KilnTestSupport
import XCTest

/// Inputs `make fuzz` found trapping the compiler or the runtime (target `FuzzCompile`), kept in
/// `Tests/Fixtures/fuzz/compile` as ONNX files.
final class CompileFuzzRegressionTests: XCTestCase {
    let fuzz = "\(repositoryRoot)/Tests/Fixtures/fuzz/compile"

    /// Each regression converts and compiles for every architecture; on the host it then runs
    /// twice (the generic run, then the shape plan) on ramp inputs. An entry's message is the
    /// error that must be thrown; `nil` means the model is valid and its outputs must equal the
    /// reference interpreter's.
    func testFuzzRegressionsGetClearErrors() async throws {
        let expected: [String: String?] = [
            // A diagonal offset of Int.max was added to a row index, which overflowed.
            "eye_like_diagonal_past_the_edge": nil,
            // Steps past their dim (one element taken) were multiplied by strides, which overflowed.
            "slice_step_past_the_dim": nil,
        ]
        let files = try FileManager.default.contentsOfDirectory(atPath: fuzz).filter { $0.hasSuffix(".onnx") }.sorted()
        XCTAssertEqual(files.map { String($0.dropLast(5)) }, expected.keys.sorted())
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for file in files {
            let name = String(file.dropLast(5))
            do {
                try await check("\(fuzz)/\(file)", in: dir)
                if let message = expected[name]! { XCTFail("\(name): no error, expected \(message)") }
            } catch {
                XCTAssertEqual("\(error)", expected[name]! ?? "no error", name)
            }
        }
    }

    /// The huge step takes one element of axis 1; the step −1 reverses axis 2 from its end.
    func testSliceStepPastTheDimTakesOneElement() async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(fuzz)/slice_step_past_the_dim.onnx")
        let x = ramp(TensorType(.float32, [3, 4, 5]))
        var values: [Float] = []
        for i in 0 ..< 3 { for j in 0 ..< 4 { values.append(Float(i * 20 + 5 + 4 - j)) } }
        let want = NDArray(shape: [3, 1, 4], scalars: values)
        assertMatches(try ReferenceInterpreter(model: model, function: "main").run(["in0": x])["out0"], want, "reference")
    }

    /// A diagonal past the last column leaves every element zero.
    func testEyeLikeDiagonalPastTheEdgeIsZeros() throws {
        let model = try ONNXImporter.convert(contentsOf: "\(fuzz)/eye_like_diagonal_past_the_edge.onnx")
        let got = try ReferenceInterpreter(model: model, function: "main").run(["in0": ramp(TensorType(.float32, [4, 3]))])["out0"]
        assertMatches(got, NDArray(shape: [4, 3], scalars: [Int64](repeating: 0, count: 12)), "reference")
    }

    /// Converts `path`, compiles it for every architecture and runs the host's artifact twice,
    /// comparing with the reference interpreter.
    func check(_ path: String, in dir: String) async throws {
        let model = try ONNXImporter.convert(contentsOf: path)
        for arch in Architecture.all {
            let artifact = "\(dir)/m.\(arch.name).compiled"
            try compileArtifact(model, arch, to: artifact)
            guard arch == Architecture.host, let main = model.function(named: "main") else { continue }
            var inputs: [String: NDArray] = [:]
            for a in main.inputs { inputs[a.name] = ramp(a.type) }
            let want = try ReferenceInterpreter(model: model, function: "main").run(inputs)
            let loaded = try await Model.load(contentsOf: URL(fileURLWithPath: artifact))
            let f = try await XCTUnwrapAsync(try await loaded.loadFunction(named: "main"))
            for run in 0 ..< 2 {
                let got = try await f.run(inputs: inputs)
                for (k, w) in want { assertMatches(got[k], w, "\(path) \(arch.name) \(k) (run \(run))") }
            }
        }
    }

    /// 0, 1, 2, … in `type`'s shape (symbolic dims 2), float32 or int64.
    func ramp(_ type: TensorType) -> NDArray {
        let shape = type.shape.map { $0.size ?? 2 }
        let n = shape.reduce(1, *)
        if type.dtype == .int64 { return NDArray(shape: shape, scalars: (0 ..< n).map { Int64($0) }) }
        return NDArray(shape: shape, scalars: (0 ..< n).map { Float($0) })
    }
}
