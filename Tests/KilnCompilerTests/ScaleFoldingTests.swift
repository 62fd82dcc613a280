import Foundation
@testable import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `scale_folding`: a scalar `mul` and `add` after a convolution or a linear layer (Paddle's
/// learnable affine blocks) become part of its weight and bias; results match the reference
/// interpreter on the unfolded model.
final class ScaleFoldingTests: XCTestCase {
    func testScalarScalesAndShiftsFoldIntoTheirProducers() async throws {
        var b = ModelBuilder(name: "scales")
        let w = try b.addWeight("w", shape: [6, 3, 3, 3], values: (0 ..< 162).map { (i: Int) -> Float in Float((i * 7) % 13) / 13 - 0.5 })
        let bias = try b.addWeight("bias", shape: [6], values: [0.5, -1, 0.25, 0, 2, -0.75])
        let lw = try b.addWeight("lw", shape: [4, 5], values: (0 ..< 20).map { (i: Int) -> Float in Float(i % 5) - 2 })
        let s = try b.addWeight("s", shape: [1], values: [1.75])
        let t = try b.addWeight("t", shape: [], values: [-0.5])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 3, 5, 5]))
        let v = f.input("v", TensorType(.float32, [2, 5]))
        let c1 = try f.apply1("conv", [x, f.use(w), f.use(bias)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")
        let affine = try f.apply1("add", [try f.apply1("mul", [f.use(s), c1], name: "scale1"), f.use(t)], name: "shift1")
        f.output("affine", affine)
        let c2 = try f.apply1("conv", [x, f.use(w)], name: "conv2")
        let scaled = try f.apply1("mul", [c2, f.use(s)], name: "scale2")
        f.output("scaled", scaled)
        // Read twice: left alone.
        let c3 = try f.apply1("conv", [x, f.use(w)], name: "conv3")
        let shared = try f.apply1("mul", [c3, f.use(s)], name: "scale3")
        f.output("shared", shared)
        f.output("raw", c3)
        let linear = try f.apply1("add", [try f.apply1("linear", [v, f.use(lw)], name: "fc"), f.use(t)], name: "shift_fc")
        f.output("linear", linear)
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: try XCTUnwrap(Architecture.host))
        try ScaleFolding().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["conv", "conv", "conv", "mul", "linear"], "\(ops.map(\.name))")
        XCTAssertEqual(ops.map { $0.outputs[0].name }, [affine.name, scaled.name, c3.name, shared.name, linear.name])
        let inputs = ["x": NDArray(shape: [1, 3, 5, 5], scalars: (0 ..< 75).map { (i: Int) -> Float in Float((i * 5) % 11) - 5 }),
                      "v": NDArray(shape: [2, 5], scalars: (0 ..< 10).map { (i: Int) -> Float in Float(i) / 3 })]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await assertEveryArchMatchesReference(model, inputs: inputs, label: "scale folding", in: dir)
    }

    /// Per-channel layer scales (`[C, 1, 1]` and `[1, C, 1, 1]`) and shifts fold into a conv; a
    /// per-channel constant after a `linear`, a constant varying along the spatial dims and one
    /// that broadcasts the output larger stay as they are.
    func testPerChannelScalesFoldIntoConvs() async throws {
        var b = ModelBuilder(name: "layer_scale")
        let w = try b.addWeight("w", shape: [4, 2, 3, 3], values: (0 ..< 72).map { (i: Int) -> Float in Float((i * 7) % 13) / 13 - 0.5 })
        let gamma = try b.addWeight("gamma", shape: [4, 1, 1], values: [0.5, -2, 1e-3, 3])
        let beta = try b.addWeight("beta", shape: [1, 4, 1, 1], values: [0.25, 0, -1, 2])
        let spatial = try b.addWeight("spatial", shape: [1, 1, 3], values: [1, 2, 3])
        let wide = try b.addWeight("wide", shape: [2, 4, 1, 1], values: (0 ..< 8).map { Float($0) })
        let lw = try b.addWeight("lw", shape: [4, 5], values: (0 ..< 20).map { (i: Int) -> Float in Float(i % 5) - 2 })
        let lscale = try b.addWeight("lscale", shape: [4], values: [1, 2, 3, 4])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 2, 3, 3]))
        let v = f.input("v", TensorType(.float32, [2, 5]))
        let c1 = try f.apply1("conv", [x, f.use(w)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")
        let scaled = try f.apply1("add", [try f.apply1("mul", [c1, f.use(gamma)], name: "layer_scale"), f.use(beta)], name: "shift")
        f.output("scaled", scaled)
        let c2 = try f.apply1("conv", [x, f.use(w)], ["pads": .ints([1, 1, 1, 1])], name: "conv2")
        f.output("spatial", try f.apply1("mul", [c2, f.use(spatial)], name: "by_column"))
        let c3 = try f.apply1("conv", [x, f.use(w)], ["pads": .ints([1, 1, 1, 1])], name: "conv3")
        f.output("wide", try f.apply1("mul", [c3, f.use(wide)], name: "broadcast"))
        f.output("linear", try f.apply1("mul", [try f.apply1("linear", [v, f.use(lw)], name: "fc"), f.use(lscale)], name: "fc_scale"))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: try XCTUnwrap(Architecture.host))
        try ScaleFolding().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["conv", "conv", "mul", "conv", "mul", "linear", "mul"], "\(ops.map(\.name))")
        XCTAssertEqual(ops[0].outputs[0].name, scaled.name)
        let inputs = ["x": NDArray(shape: [1, 2, 3, 3], scalars: (0 ..< 18).map { (i: Int) -> Float in Float((i * 5) % 11) - 5 }),
                      "v": NDArray(shape: [2, 5], scalars: (0 ..< 10).map { (i: Int) -> Float in Float(i) / 3 })]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await assertEveryArchMatchesReference(model, inputs: inputs, label: "per-channel scale folding", in: dir)
    }
}
