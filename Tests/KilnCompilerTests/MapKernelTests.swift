import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// The `map` kernels (kiln_map.inc): predicates on floats and integer and boolean maps, compiled
/// for every arch, against values worked out here and against the reference interpreter.
final class MapKernelTests: XCTestCase {
    func testPredicatesAndIntegerMapsRunCompiled() async throws {
        var b = ModelBuilder(name: "maps")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [8]))
        let i = f.input("i", TensorType(.int64, [5]))
        let j = f.input("j", TensorType(.int32, [5]))
        f.output("nan", try f.apply1("is_nan", [x], name: "nan"))
        f.output("inf", try f.apply1("is_inf", [x], name: "inf"))
        f.output("pos_inf", try f.apply1("is_inf", [x], ["detect_negative": .int(0)], name: "pos_inf"))
        f.output("neg_inf", try f.apply1("is_inf", [x], ["detect_positive": .int(0)], name: "neg_inf"))
        f.output("not_nan", try f.apply1("not", [try f.apply1("is_nan", [x], name: "nan2")], name: "not_nan"))
        for (name, v) in [("i", i), ("j", j)] {
            f.output("abs_\(name)", try f.apply1("abs", [v], name: "abs_\(name)"))
            f.output("neg_\(name)", try f.apply1("neg", [v], name: "neg_\(name)"))
            f.output("sign_\(name)", try f.apply1("sign", [v], name: "sign_\(name)"))
        }
        try b.add(f)
        let model = try b.build()
        let xs: [Float] = [0, -1.5, .nan, .infinity, -.infinity, 3, -0.0, .greatestFiniteMagnitude]
        let ints: [Int64] = [-7, 0, 5, -1, 1 << 40]
        let small: [Int32] = [-7, 0, 5, -1, 1 << 30]
        let inputs = ["x": NDArray(shape: [8], scalars: xs), "i": NDArray(shape: [5], scalars: ints), "j": NDArray(shape: [5], scalars: small)]
        // Worked out from the definitions, not from either implementation.
        let wantBool: [String: [Bool]] = [
            "nan": [false, false, true, false, false, false, false, false],
            "inf": [false, false, false, true, true, false, false, false],
            "pos_inf": [false, false, false, true, false, false, false, false],
            "neg_inf": [false, false, false, false, true, false, false, false],
            "not_nan": [true, true, false, true, true, true, true, true],
        ]
        let wantI64: [String: [Int64]] = ["abs_i": [7, 0, 5, 1, 1 << 40], "neg_i": [7, 0, -5, 1, -(1 << 40)], "sign_i": [-1, 0, 1, -1, 1]]
        let wantI32: [String: [Int32]] = ["abs_j": [7, 0, 5, 1, 1 << 30], "neg_j": [7, 0, -5, 1, -(1 << 30)], "sign_j": [-1, 0, 1, -1, 1]]

        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all {
            let path = "\(dir)/maps.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            guard arch.isRunnableOnHost else { continue }
            let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path))
            let got = try await compiled.loadFunction(named: "main")!.run(inputs: inputs)
            for (name, want) in wantBool { XCTAssertEqual(got[name]?.scalars(as: Bool.self), want, "\(arch.name) \(name)") }
            for (name, want) in wantI64 { XCTAssertEqual(got[name]?.scalars(as: Int64.self), want, "\(arch.name) \(name)") }
            for (name, want) in wantI32 { XCTAssertEqual(got[name]?.scalars(as: Int32.self), want, "\(arch.name) \(name)") }
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
        }
    }
}
