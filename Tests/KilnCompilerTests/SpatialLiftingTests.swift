import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// 1-D convolutions, transposed convolutions, pools and pads run on the 2-D kernels
/// (`SpatialLifting`): on edge shapes, every arch's artifact against the reference interpreter
/// (which runs the 1-D ops as written), and no step left to the reference kernel.
final class SpatialLiftingTests: XCTestCase {
    func values(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.37 + seed)) * 0.5 } }

    /// A sequence network of every lifted form: kernel 1 with a bias, a causal pad, dilation
    /// larger than the kernel, depthwise, a `[C, 1]` weight broadcast, a residual add, groups 2 at
    /// a stride larger than the kernel, a grouped transposed convolution with output padding,
    /// both pools, and a value read both lifted and not (`r` is returned as well).
    func sequenceModel(length: KilnFormat.Dimension) throws -> PortableModel {
        var b = ModelBuilder(name: "seq")
        let w1 = try b.addWeight("w1", shape: [8, 3, 1], values: values(24, 1))
        let b1 = try b.addWeight("b1", shape: [8], values: values(8, 2))
        let w2 = try b.addWeight("w2", shape: [8, 8, 3], values: values(192, 3))
        let dw = try b.addWeight("dw", shape: [8, 1, 5], values: values(40, 5))
        let shift = try b.addWeight("shift", shape: [8, 1], values: values(8, 6))
        let w3 = try b.addWeight("w3", shape: [8, 4, 2], values: values(64, 4))
        let wt = try b.addWeight("wt", shape: [8, 2, 4], values: values(64, 7))
        let w4 = try b.addWeight("w4", shape: [6, 4, 3], values: values(72, 8))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 3, length]))
        let a = try f.apply1("relu", [try f.apply1("conv", [x, f.use(w1), f.use(b1)], name: "pointwise")], name: "relu1")
        let padded = try f.apply1("pad", [a], ["mode": .string("constant"), "pads": .ints([0, 0, 4, 0, 0, 0])], name: "causal")
        let c = try f.apply1("conv", [padded, f.use(w2)], ["dilations": .ints([2])], name: "dilated")
        let dwc = try f.apply1("conv", [c, f.use(dw)], ["group": .int(8), "pads": .ints([2, 2])], name: "depthwise")
        let d = try f.apply1("add", [dwc, f.use(shift)], name: "shifted")
        let r = try f.apply1("add", [d, a], name: "residual")
        let t = try f.apply1("tanh", [r], name: "tanh")
        let g = try f.apply1("conv", [t, f.use(w3)], ["group": .int(2), "strides": .ints([3]), "pads": .ints([1, 0])], name: "grouped")
        let ct = try f.apply1("conv_transpose", [g, f.use(wt)], ["group": .int(2), "strides": .ints([2]), "output_padding": .ints([1]),
                                                                   "pads": .ints([1, 1])], name: "upsample")
        let mp = try f.apply1("max_pool", [ct], ["kernel_shape": .ints([3]), "strides": .ints([2]), "pads": .ints([1, 1])], name: "maxpool")
        f.output("y", try f.apply1("conv", [mp, f.use(w4)], ["pads": .ints([1, 1])], name: "head"))
        f.output("z", try f.apply1("average_pool", [r], ["kernel_shape": .ints([3]), "pads": .ints([1, 1])], name: "avgpool"))
        f.output("r", r)
        try b.add(f)
        return try b.build()
    }

    func ints(_ ops: [KilnFormat.Operation], _ name: String, _ key: String) -> [Int]? {
        (try? ops.first { $0.name == name }?.attributes.ints(key)) ?? nil
    }

    func testLiftedOpsStayFourDimensionalBetweenLiftedOps() throws {
        let model = try sequenceModel(length: 16)
        var unit = CompilationUnit(model: model, arch: Architecture.named("x86_64_v3")!)
        try SpatialLifting().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        for name in ["pointwise", "relu1", "causal", "dilated", "depthwise", "shifted", "residual", "tanh", "grouped", "upsample", "maxpool", "head", "avgpool"] {
            XCTAssertEqual(ops.first { $0.name == name }?.outputs[0].type.rank, 4, name)
        }
        // One view in (x), and one out for each returned value.
        XCTAssertEqual(ops.filter { $0.opType == "unsqueeze" }.count, 1)
        XCTAssertEqual(ops.filter { $0.opType == "squeeze" }.count, 3)
        XCTAssertEqual(ints(ops, "dilated", "dilations"), [1, 2])
        XCTAssertEqual(ints(ops, "causal", "pads"), [0, 0, 0, 4, 0, 0, 0, 0])
        XCTAssertEqual(ints(ops, "upsample", "output_padding"), [0, 1])
        let shifted = try XCTUnwrap(ops.first { $0.name == "shifted" })
        XCTAssertEqual(unit.model.weights.first { $0.name == shifted.inputs[1] }?.shape, [8, 1, 1])
        let inputs = ["x": NDArray(shape: [2, 3, 16], scalars: values(96, 9))]
        let want = try ReferenceInterpreter(model: model, function: "main").run(inputs)
        let got = try LoweredReference.interpreter(of: unit, function: "main").run(inputs)
        for (name, w) in want {
            let g = try XCTUnwrap(got[name], name)
            XCTAssertEqual(g.shape, w.shape, name)
            for (p, q) in zip(g.scalars(as: Float.self), w.scalars(as: Float.self)) { XCTAssertEqual(p, q, accuracy: 1e-5, name) }
        }
    }

    func testEveryArchRunsTheSequenceNetworkCompiled() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A fixed length, and a run-time length run at 1 (every window reaches past the input), odd and long.
        for (length, runs) in [(KilnFormat.Dimension.size(7), [7]), (KilnFormat.Dimension.symbol("n"), [1, 13, 64])] {
            let model = try sequenceModel(length: length)
            for arch in Architecture.all {
                let path = "\(dir)/seq.\(arch.name).compiled"
                try compileArtifact(model, arch, to: path)
                try assertNoReferenceSteps(path, "\(arch.name) length \(length)")
                guard arch.isRunnableOnHost else { continue }
                for n in runs {
                    let inputs = ["x": NDArray(shape: [2, 3, n], scalars: values(6 * n, Double(n)))]
                    _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "\(arch.name) length \(n)")
                }
            }
        }
    }
}
