import Foundation
@testable import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `hard_swish_fusion`: hard swish and hard sigmoid spelled as add, clip, mul and div (Paddle's
/// exports) become one op that folds into the convolution before it; the compiled model matches
/// the reference interpreter on the unfused one.
final class HardSwishFusionTests: XCTestCase {
    func testSpelledOutActivationsFuseIntoTheirConvolutions() async throws {
        var b = ModelBuilder(name: "hswish")
        let three = try b.addWeight("three", shape: [1], values: [3])
        let six = try b.addWeight("six", shape: [1], values: [6])
        let zero = try b.addWeight("zero", shape: [], values: [0])
        let sixth = try b.addWeight("sixth", shape: [1], values: [1.0 / 6])
        let w = try b.addWeight("w", shape: [8, 4, 1, 1], values: (0 ..< 32).map { (i: Int) -> Float in Float(i % 7) / 7 - 0.4 })
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 4, 6, 6]))
        /// clip(v + 3, 0, 6) of the conv of `v`.
        func clipped(_ v: ValueRef, _ tag: String) throws -> (ValueRef, ValueRef) {
            let y = try f.apply1("conv", [v, f.use(w)], name: "conv_\(tag)")
            let a = try f.apply1("add", [y, f.use(three)], name: "add_\(tag)")
            return (y, try f.apply1("clip", [a, f.use(zero), f.use(six)], name: "clip_\(tag)"))
        }
        let (y1, c1) = try clipped(x, "a")
        f.output("div_form", try f.apply1("div", [try f.apply1("mul", [y1, c1], name: "mul_a"), f.use(six)], name: "div_a"))
        let (y2, c2) = try clipped(x, "b")
        f.output("mul_form", try f.apply1("mul", [try f.apply1("mul", [c2, y2], name: "mul_b"), f.use(sixth)], name: "scale_b"))
        let (y3, c3) = try clipped(x, "c")
        f.output("gate_form", try f.apply1("mul", [y3, try f.apply1("div", [c3, f.use(six)], name: "div_c")], name: "mul_c"))
        let (_, c4) = try clipped(x, "d")
        f.output("sigmoid_form", try f.apply1("div", [c4, f.use(six)], name: "div_d"))
        // Clipped to 0…5: not hard swish, left alone.
        let y5 = try f.apply1("conv", [x, f.use(w)], name: "conv_e")
        let five = try b.addWeight("five", shape: [1], values: [5])
        let c5 = try f.apply1("clip", [try f.apply1("add", [y5, f.use(three)], name: "add_e"), f.use(zero), f.use(five)], name: "clip_e")
        f.output("other", try f.apply1("div", [try f.apply1("mul", [y5, c5], name: "mul_e"), f.use(six)], name: "div_e"))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: try XCTUnwrap(Architecture.host))
        try HardSwishFusion().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.filter { $0.opType == "hard_swish" }.map(\.name), ["div_a", "scale_b", "mul_c"])
        XCTAssertEqual(ops.filter { $0.opType == "hard_sigmoid" }.map(\.name), ["div_d"])
        XCTAssertEqual(ops.filter { $0.opType == "clip" }.map(\.name), ["clip_e"])
        let pixels: [Float] = (0 ..< 144).map { (i: Int) -> Float in Float((i * 13) % 29) / 2 - 7 }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arch = try XCTUnwrap(Architecture.host)
        let path = "\(dir)/h.compiled"
        try compileArtifact(model, arch, to: path)
        _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: ["x": NDArray(shape: [1, 4, 6, 6], scalars: pixels)],
                                                     label: "hard swish")
        // Each fused activation rides its convolution's epilogue: five convolutions, no other steps but clip_e's pattern.
        let plan = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: []).1
        let types = plan.model.functions[0].operations.map(\.opType)
        XCTAssertFalse(types.contains("hard_swish") || types.contains("hard_sigmoid"), "\(types)")
    }
}
