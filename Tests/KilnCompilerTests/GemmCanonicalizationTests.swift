import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `gemm` in every form runs compiled kernels (`GemmCanonicalization`): all four transposes,
/// `alpha` and `beta`, `C` as a vector, a scalar, a matrix or a run-time value, `B` stored or
/// run-time; every arch's artifact against the reference interpreter, no reference step.
final class GemmCanonicalizationTests: XCTestCase {
    func values(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.61 + seed)) * 0.5 } }

    func model(rows: KilnFormat.Dimension) throws -> PortableModel {
        var b = ModelBuilder(name: "gemms")
        let (k, n) = (12, 20)
        let wKN = try b.addWeight("w_kn", shape: [k, n], values: values(k * n, 1))
        let wNK = try b.addWeight("w_nk", shape: [n, k], values: values(k * n, 2))
        let c = try b.addWeight("c", shape: [n], values: values(n, 3))
        let c1 = try b.addWeight("c1", shape: [1], values: [0.25])
        let cRow = try b.addWeight("c_row", shape: [1, n], values: values(n, 4))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [rows, .size(k)]))
        let xt = f.input("xt", TensorType(.float32, [.size(k), rows]))
        let bRun = f.input("b", TensorType(.float32, [.size(k), .size(n)]))
        let cRun = f.input("c_run", TensorType(.float32, [rows, .size(n)]))
        func gemm(_ name: String, _ inputs: [ValueRef], _ a: [String: AttributeValue]) throws {
            f.output(name, try f.apply1("gemm", inputs, a, name: name))
        }
        // GPT-2's Conv1D: trans_b = 0 with a bias vector.
        try gemm("conv1d", [x, f.use(wKN), f.use(c)], [:])
        try gemm("linear", [x, f.use(wNK), f.use(c)], ["trans_b": .int(1)])
        try gemm("scaled", [x, f.use(wKN), f.use(c1)], ["alpha": .float(0.5), "beta": .float(2)])
        try gemm("row_bias", [x, f.use(wNK), f.use(cRow)], ["trans_b": .int(1), "beta": .float(-1)])
        try gemm("trans_a", [xt, f.use(wKN)], ["trans_a": .int(1)])
        try gemm("both", [xt, f.use(wNK), cRun], ["trans_a": .int(1), "trans_b": .int(1), "alpha": .float(1.5), "beta": .float(0.5)])
        try gemm("run_time_b", [x, bRun, f.use(c)], ["alpha": .float(2)])
        try gemm("run_time_c", [x, bRun, cRun], [:])
        try b.add(f)
        return try b.build()
    }

    func testNoGemmIsLeft() throws {
        var unit = CompilationUnit(model: try model(rows: 5), arch: Architecture.named("x86_64_v3")!)
        try GemmCanonicalization().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertFalse(ops.contains { $0.opType == "gemm" })
        // Stored B: one linear each, its name kept.
        for name in ["conv1d", "linear", "scaled", "row_bias", "trans_a"] {
            XCTAssertEqual(ops.first { $0.outputs[0].name == name }?.opType, "linear", name)
        }
        XCTAssertEqual(ops.first { $0.name == "linear" }?.inputs[1], "w_nk", "trans_b = 1 and alpha 1 keep the stored weight")
    }

    func testEveryArchRunsEveryGemmCompiled() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (rows, runs) in [(KilnFormat.Dimension.size(5), [5]), (KilnFormat.Dimension.symbol("m"), [1, 7, 33])] {
            let model = try model(rows: rows)
            for arch in Architecture.all {
                let path = "\(dir)/g.\(arch.name).compiled"
                try compileArtifact(model, arch, to: path)
                try assertNoReferenceSteps(path, "\(arch.name) rows \(rows)")
                guard arch.isRunnableOnHost else { continue }
                for m in runs {
                    let inputs = ["x": NDArray(shape: [m, 12], scalars: values(12 * m, 5)), "xt": NDArray(shape: [12, m], scalars: values(12 * m, 6)),
                                  "b": NDArray(shape: [12, 20], scalars: values(240, 7)), "c_run": NDArray(shape: [m, 20], scalars: values(20 * m, 8))]
                    _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "\(arch.name) rows \(m)")
                }
            }
        }
    }

    /// A compressed weight with `trans_b = 0` (GPT-2's Conv1D after `kiln optimize`) is not
    /// decoded to be transposed: it stays the matmul's right operand, packed compressed, with the
    /// bias in the epilogue.
    func testCompressedWeightStaysCompressed() async throws {
        let (k, n, block) = (32, 20, 8)
        var b = ModelBuilder(name: "compressed_gemm")
        let ints = (0 ..< k * n).map { UInt8(bitPattern: Int8(truncatingIfNeeded: ($0 * 29 + 3) % 255 - 127)) }
        let scales = (0 ..< k / block * n).map { Float(1 + $0 % 5) / 512 }
        let w = Weight(name: "wq", dtype: .float32, shape: [k, n], encoding: .quantized(QuantizedWeight(
            data: WeightBlob(dtype: .int8, shape: [k, n], data: ByteStorage(ints)),
            scale: WeightBlob(dtype: .float32, shape: [k / block, n], data: ByteStorage(scales.withUnsafeBytes { Array($0) })), zeroPoint: nil)))
        try b.add(w)
        let c = try b.addWeight("c", shape: [n], values: values(n, 3))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [.symbol("m"), .size(k)]))
        f.output("y", try f.apply1("gemm", [x, f.use(w), f.use(c)], [:], name: "conv1d"))
        try b.add(f)
        let model = try b.build()
        guard let arch = Architecture.host else { throw XCTSkip("no runnable architecture") }
        var unit = CompilationUnit(model: model, arch: arch)
        try GemmCanonicalization().apply(to: &unit)
        let mm = try XCTUnwrap(unit.model.functions[0].operations.first { $0.opType == "matmul" })
        XCTAssertEqual(mm.inputs[1], "wq", "the stored weight itself")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let (_, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 7, count: 32))
        let packed = try XCTUnwrap(plan.model.weights.first { $0.name.hasPrefix("wq@") })
        XCTAssertEqual(packed.encoding.kindName, "quantized", "packed as int8, not decoded")
        for m in [1, 5] {
            let inputs = ["x": NDArray(shape: [m, k], scalars: values(k * m, 5))]
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "rows \(m)")
        }
    }
}
