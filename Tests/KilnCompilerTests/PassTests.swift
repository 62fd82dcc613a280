import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// Each pass on a tiny graph, run alone: op counts, names, shapes, and the result still
/// computes what the original did.
final class PassTests: XCTestCase {
    let x86 = Architecture.named("x86_64_v3")!

    func values(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.7 + seed)) * 0.5 } }

    func run(_ model: PortableModel, _ inputs: [String: NDArray]) throws -> [String: NDArray] {
        try ReferenceInterpreter(model: model, function: "main").run(inputs)
    }

    /// Runs a unit after passes that chose step configs: each op as its config says, every
    /// result checked against the type the passes declared (the lowered model is not portable:
    /// a channels-last conv declares `[N, H, W, C]` types).
    func run(_ unit: CompilationUnit, _ inputs: [String: NDArray]) throws -> [String: NDArray] {
        try LoweredReference.interpreter(of: unit, function: "main").run(inputs)
    }

    /// The configuration the passes chose for the op named `name` of `main`.
    func config(_ unit: CompilationUnit, _ name: String) -> StepConfig {
        guard let op = unit.model.functions[0].operations.first(where: { $0.name == name }) else { return .portable }
        return unit.config(of: op, in: "main")
    }

    func testDeadCodeElimination() throws {
        var b = ModelBuilder(name: "dce")
        let w = try b.addWeight("unused", shape: [4, 4], values: values(16, 0))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 4]))
        let a = try f.apply1("relu", [x], name: "kept")
        _ = try f.apply1("exp", [x], name: "dead")
        _ = try f.apply1("linear", [x, f.use(w)], name: "dead_linear")
        f.output("y", a)
        try b.add(f)
        var unit = CompilationUnit(model: try b.build(), arch: x86)
        try DeadCodeElimination().apply(to: &unit)
        XCTAssertEqual(unit.model.functions[0].operations.map(\.name), ["kept"])
        XCTAssertTrue(unit.model.weights.isEmpty)
        XCTAssertNoThrow(try unit.model.validate())
    }

    func testConstantFolding() throws {
        var b = ModelBuilder(name: "fold")
        let w = try b.addWeight("w", shape: [3, 4], values: values(12, 5))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 4]))
        let t = try f.apply1("transpose", [f.use(w)], ["perm": .ints([1, 0])], name: "wt")
        let y = try f.apply1("matmul", [x, t], name: "mm")
        f.output("y", y)
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        try ConstantFolding().apply(to: &unit)
        XCTAssertEqual(unit.model.functions[0].operations.map(\.name), ["mm"])
        let folded = unit.model.weight(named: "wt")!
        XCTAssertEqual(folded.shape, [4, 3])
        try DeadCodeElimination().apply(to: &unit)
        XCTAssertEqual(unit.model.weights.map(\.name), ["wt"])
        XCTAssertNoThrow(try unit.model.validate())
        let input = NDArray(shape: [2, 4], scalars: values(8, 1))
        XCTAssertEqual(try run(unit.model, ["x": input])["y"]!.scalars(as: Float.self), try run(model, ["x": input])["y"]!.scalars(as: Float.self))
    }

    func testBatchNormFolding() throws {
        var b = ModelBuilder(name: "bn")
        let w = try b.addWeight("w", shape: [3, 2, 3, 3], values: values(54, 1))
        let bias = try b.addWeight("b", shape: [3], values: [0.1, -0.2, 0.3])
        let params = try ["scale", "shift", "mean", "var"].enumerated().map { i, n in
            try b.addWeight(n, shape: [3], values: i == 3 ? [0.5, 1.5, 2.0] : values(3, Double(i)))
        }
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 2, 5, 5]))
        let c = try f.apply1("conv", [x, f.use(w), f.use(bias)], ["pads": .ints([1, 1, 1, 1])], name: "conv")
        let n = try f.apply1("batch_norm", [c] + params.map { f.use($0) }, ["epsilon": .float(1e-3)], name: "bn")
        f.output("y", n)
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        try BatchNormFolding().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["conv"])
        XCTAssertEqual(ops[0].outputs.map(\.name), ["bn"])
        XCTAssertEqual(ops[0].outputs[0].type.description, "float32[1, 3, 5, 5]")
        try DeadCodeElimination().apply(to: &unit)
        XCTAssertNoThrow(try unit.model.validate())
        let input = NDArray(shape: [1, 2, 5, 5], scalars: values(50, 3))
        let want = try run(model, ["x": input])["y"]!.scalars(as: Float.self)
        let got = try run(unit.model, ["x": input])["y"]!.scalars(as: Float.self)
        for (g, w) in zip(got, want) { XCTAssertEqual(g, w, accuracy: 1e-5) }
    }

    func testEpilogueFusion() throws {
        var b = ModelBuilder(name: "fuse")
        let w = try b.addWeight("w", shape: [4, 3], values: values(12, 2))
        let bias = try b.addWeight("b", shape: [3], values: [0.1, 0.2, 0.3])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 4]))
        let m = try f.apply1("matmul", [x, f.use(w)], name: "mm")
        let a = try f.apply1("add", [m, f.use(bias)], name: "bias")
        let g = try f.apply1("gelu", [a], name: "act")
        let r = try f.apply1("relu", [g], name: "second_act")
        f.output("y", r)
        try b.add(f)
        var unit = CompilationUnit(model: try b.build(), arch: x86)
        try EpilogueFusion().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        // Bias and the first activation fuse; a second activation stays separate.
        XCTAssertEqual(ops.map(\.opType), ["matmul", "relu"])
        XCTAssertEqual(ops[0].inputs, ["x", "w", "b"])
        XCTAssertEqual(ops[0].outputs.map(\.name), ["act"])
        XCTAssertEqual(config(unit, "mm").activation?.function, "gelu")
        XCTAssertNil(ops[0].attributes.keys.first { $0.hasPrefix("kiln.") })
    }

    /// `mul(y, sigmoid(y))` after a convolution fuses as a SiLU epilogue, in either operand order.
    func testSiLUFusion() throws {
        var b = ModelBuilder(name: "silu")
        let w = try b.addWeight("w", shape: [3, 2, 1, 1], values: values(6, 1))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 2, 4, 4]))
        let c = try f.apply1("conv", [x, f.use(w)], name: "conv")
        let s = try f.apply1("sigmoid", [c], name: "gate")
        f.output("y", try f.apply1("mul", [s, c], name: "silu"))
        try b.add(f)
        var unit = CompilationUnit(model: try b.build(), arch: x86)
        try EpilogueFusion().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["conv"])
        XCTAssertEqual(ops[0].outputs.map(\.name), ["silu"])
        XCTAssertEqual(config(unit, "conv").activation?.function, "silu")
    }

    /// Three matmuls of one input through weights of one depth (with biases) become one GEMM over
    /// the weights side by side and one split; a matmul of another depth and one with a fused
    /// activation stay; every value is what the unfused graph computed.
    func testProjectionFusion() throws {
        var b = ModelBuilder(name: "qkv")
        let wq = try b.addWeight("wq", shape: [6, 4], values: values(24, 1))
        let wk = try b.addWeight("wk", shape: [6, 5], values: values(30, 2))
        let wv = try b.addWeight("wv", shape: [6, 3], values: values(18, 3))
        let other = try b.addWeight("other", shape: [4, 2], values: values(8, 4))
        let gated = try b.addWeight("gated", shape: [6, 2], values: values(12, 5))
        let biases = try [("bq", 4), ("bk", 5), ("bv", 3)].enumerated().map { i, p in try b.addWeight(p.0, shape: [p.1], values: values(p.1, Double(6 + i))) }
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 6]))
        // As exported: matmul, then the bias added (epilogue fusion makes it the matmul's third input).
        func projection(_ w: ValueRef, _ bias: ValueRef, _ name: String) throws -> ValueRef {
            try f.apply1("add", [try f.apply1("matmul", [x, w], name: name), bias], name: "\(name).bias")
        }
        let q = try projection(f.use(wq), f.use(biases[0]), "q")
        let k = try projection(f.use(wk), f.use(biases[1]), "k")
        let v = try projection(f.use(wv), f.use(biases[2]), "v")
        let g = try f.apply1("relu", [try f.apply1("matmul", [x, f.use(gated)], name: "g")], name: "g.relu")
        f.output("q", q)
        f.output("k", k)
        f.output("v", v)
        f.output("o", try f.apply1("matmul", [q, f.use(other)], name: "o"))
        f.output("g", g)
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        try EpilogueFusion().apply(to: &unit)
        XCTAssertEqual(unit.model.functions[0].operations.map(\.opType), ["matmul", "matmul", "matmul", "matmul", "matmul"])
        try ProjectionFusion().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["matmul", "split", "matmul", "matmul"])
        XCTAssertEqual(ops[1].outputs.map(\.name), ["q.bias", "k.bias", "v.bias"])
        XCTAssertEqual(unit.model.weight(named: ops[0].inputs[1])?.shape, [6, 12], "the weights side by side")
        XCTAssertEqual(unit.model.weight(named: ops[0].inputs[2])?.shape, [12], "and their biases")
        XCTAssertEqual(ops[2].name, "g", "a matmul with a fused activation stays")
        XCTAssertEqual(ops[3].name, "o", "a matmul of another input stays")
        let input = NDArray(shape: [2, 6], scalars: values(12, 9))
        let want = try run(model, ["x": input])
        let got = try run(unit, ["x": input])
        for name in ["q", "k", "v", "o", "g"] {
            for (a, w) in zip(try got[name]!.scalars(as: Float.self), try want[name]!.scalars(as: Float.self)) {
                XCTAssertEqual(a, w, accuracy: 1e-5, name)
            }
        }
    }

    func testFusionKeepsValuesOtherOpsRead() throws {
        var b = ModelBuilder(name: "keep")
        let w = try b.addWeight("w", shape: [3, 4], values: values(12, 2))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 4]))
        let l = try f.apply1("linear", [x, f.use(w)], name: "fc")
        let r = try f.apply1("relu", [l], name: "act")
        f.output("y", r)
        f.output("pre", l)
        try b.add(f)
        var unit = CompilationUnit(model: try b.build(), arch: x86)
        try EpilogueFusion().apply(to: &unit)
        XCTAssertEqual(unit.model.functions[0].operations.map(\.opType), ["linear", "relu"])
    }

    func testLoweringPacksWeightsAndChoosesKernels() throws {
        var b = ModelBuilder(name: "lower")
        let w = try b.addWeight("w", shape: [20, 8], values: values(160, 4))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 8]))
        let l = try f.apply1("linear", [x, f.use(w)], name: "fc")
        let s = try f.apply1("softmax", [l], ["axis": .int(-1)], name: "sm")
        let t = try f.apply1("transpose", [s], ["perm": .ints([1, 0])], name: "tr")
        f.output("y", t)
        try b.add(f)
        for (arch, nr, kernel, vector) in [("x86_64", 8, "f32_gemm_4x8__scalar", "scalar"), ("x86_64_v3", 16, "f32_gemm_6x16__avx2", "avx2"),
                                           ("x86_64_v4", 32, "f32_gemm_8x32__avx512", "avx2"), ("arm64", 8, "f32_gemm_4x8__neon", "scalar")] {
            var unit = CompilationUnit(model: try b.build(), arch: Architecture.named(arch)!)
            try Lowering().apply(to: &unit)
            XCTAssertEqual(unit.kernels["main"]?.map(\.description), [kernel, "f32_softmax__\(vector)", "copy__scalar"], arch)
            for id in unit.kernels["main"] ?? [] { XCTAssertEqual(KernelID(wireName: id.description), id, "wire name round trip") }
            let op = unit.model.functions[0].operations[0]
            XCTAssertEqual(op.inputs[1], "w@packed")
            XCTAssertEqual(unit.config(of: op, in: "main").weightLayout, .transposedPanels, arch)
            let packed = unit.model.weight(named: "w@packed")!
            XCTAssertEqual(packed.shape, [8, 20])
            guard case .dense(let blob) = packed.encoding else { return XCTFail("\(arch): not dense") }
            XCTAssertEqual(blob.shape, [(20 + nr - 1) / nr, 8, nr])
        }
    }

    /// A TensorFlow-style NHWC graph (transposes around each convolution, a residual add, a
    /// squeeze-excitation scale and pools) ends with no transpose at all; a channels-first graph
    /// gets one at its input and output; both still compute what they did.
    func testChannelsLastLayout() throws {
        var b = ModelBuilder(name: "layout")
        let w1 = try b.addWeight("w1", shape: [8, 8, 3, 3], values: values(576, 1))
        let w2 = try b.addWeight("w2", shape: [8, 1, 3, 3], values: values(72, 2))
        let w3 = try b.addWeight("w3", shape: [8, 8, 1, 1], values: values(64, 3))
        let shift = try b.addWeight("shift", shape: [1, 8, 1, 1], values: values(8, 4))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 6, 6, 8]))
        let t1 = try f.apply1("transpose", [x], ["perm": .ints([0, 3, 1, 2])], name: "to_nchw")
        let c1 = try f.apply1("conv", [t1, f.use(w1)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")
        let r1 = try f.apply1("relu", [c1], name: "relu1")
        let t2 = try f.apply1("transpose", [r1], ["perm": .ints([0, 2, 3, 1])], name: "back1")
        let t3 = try f.apply1("transpose", [t2], ["perm": .ints([0, 3, 1, 2])], name: "again")
        let d = try f.apply1("conv", [t3, f.use(w2)], ["group": .int(8), "pads": .ints([1, 1, 1, 1])], name: "dw")
        let se = try f.apply1("sigmoid", [try f.apply1("conv", [try f.apply1("global_average_pool", [d], name: "gap"), f.use(w3)], name: "se")], name: "gate")
        let scaled = try f.apply1("mul", [d, se], name: "scale")
        let sum = try f.apply1("add", [try f.apply1("add", [scaled, t1], name: "residual"), f.use(shift)], name: "shifted")
        let pooled = try f.apply1("max_pool", [sum], ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2])], name: "pool")
        f.output("y", try f.apply1("transpose", [pooled], ["perm": .ints([0, 2, 3, 1])], name: "to_nhwc"))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        try ChannelsLastLayout().apply(to: &unit)
        try DeadCodeElimination().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.filter { $0.opType == "transpose" }.map(\.name), [])
        XCTAssertEqual(ops.filter { unit.config(of: $0, in: "main").layout == .channelsLast }.map(\.name), ["conv1", "dw", "se", "pool"])
        XCTAssertEqual(ops.first { $0.name == "gap" }?.opType, "reduce_mean")
        XCTAssertEqual(ops.first { $0.name == "conv1" }?.outputs[0].type.description, "float32[1, 6, 6, 8]")
        // The lowered model is checked by running it: every result against its declared type.
        let input = NDArray(shape: [1, 6, 6, 8], scalars: values(288, 5))
        let want = try run(model, ["x": input])["y"]!.scalars(as: Float.self)
        let got = try run(unit, ["x": input])["y"]!.scalars(as: Float.self)
        XCTAssertEqual(got.count, want.count)
        for (g, w) in zip(got, want) { XCTAssertEqual(g, w, accuracy: 1e-5) }

        // Channels-first in and out: the first convolution reads the planes (layout planes-to-channels-last), one transpose back at the end.
        var b2 = ModelBuilder(name: "planes")
        let w4 = try b2.addWeight("w4", shape: [8, 3, 3, 3], values: values(216, 6))
        var g = b2.function("main")
        let image = g.input("image", TensorType(.float32, [1, 3, 9, 9]))
        let c = try g.apply1("conv", [image, g.use(w4)], ["strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])], name: "stem")
        g.output("features", try g.apply1("hard_swish", [c], name: "act"))
        try b2.add(g)
        let planes = try b2.build()
        var unit2 = CompilationUnit(model: planes, arch: x86)
        try ChannelsLastLayout().apply(to: &unit2)
        XCTAssertEqual(unit2.model.functions[0].operations.map(\.opType), ["conv", "hard_swish", "transpose"])
        XCTAssertEqual(config(unit2, "stem").layout, .planesToChannelsLast)
        // The lowered model is checked by running it: every result against its declared type.
        let pixels = NDArray(shape: [1, 3, 9, 9], scalars: values(243, 7))
        let a = try run(planes, ["image": pixels])["features"]!.scalars(as: Float.self)
        let z = try run(unit2, ["image": pixels])["features"]!.scalars(as: Float.self)
        for (g, w) in zip(z, a) { XCTAssertEqual(g, w, accuracy: 1e-5) }

        // A lone convolution that would need a transpose in and one out stays channels-first.
        var b3 = ModelBuilder(name: "lone")
        let w5 = try b3.addWeight("w5", shape: [8, 16, 1, 1], values: values(128, 8))
        var h = b3.function("main")
        let seq = h.input("seq", TensorType(.float32, [1, 16, 8, 4]))
        let mixed = try h.apply1("conv", [seq, h.use(w5)], name: "mix")
        h.output("flat", try h.apply1("flatten", [mixed], ["axis": .int(1)], name: "flat"))
        try b3.add(h)
        var unit3 = CompilationUnit(model: try b3.build(), arch: x86)
        try ChannelsLastLayout().apply(to: &unit3)
        XCTAssertEqual(unit3.model.functions[0].operations.map(\.opType), ["conv", "flatten"])
        XCTAssertEqual(config(unit3, "mix"), .portable)
    }

    /// A binary op between a channels-last activation and a tensor of run-time dims (a
    /// streaming cache, an image of dynamic size) once trapped on dim arithmetic that stood in
    /// `Int.max` for the unknown size. The layout pass leaves such an op channels-first, and the
    /// whole compile and both runs agree with the interpreter, for sizes that broadcast and not.
    func testBinaryWithRunTimeDimsBesideChannelsLast() async throws {
        var b = ModelBuilder(name: "streaming")
        let w1 = try b.addWeight("w1", shape: [8, 3, 3, 3], values: values(216, 1))
        let w2 = try b.addWeight("w2", shape: [8, 8, 3, 3], values: values(576, 2))
        let w3 = try b.addWeight("w3", shape: [8, 8, 1, 1], values: values(64, 3))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 3, 8, 8]))
        let cache = f.input("cache", TensorType(.float32, [1, 8, "h", "w"]))
        let gate = f.input("gate", TensorType(.float32, ["n", "c", 1, 1]))
        let c1 = try f.apply1("relu", [try f.apply1("conv", [x, f.use(w1)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")], name: "relu1")
        let c2 = try f.apply1("conv", [c1, f.use(w2)], ["pads": .ints([1, 1, 1, 1])], name: "conv2")
        let mixed = try f.apply1("add", [c2, cache], name: "mix")
        let gated = try f.apply1("mul", [mixed, gate], name: "gated")
        f.output("y", try f.apply1("conv", [gated, f.use(w3)], name: "conv3"))
        try b.add(f)
        let model = try b.build()

        var unit = CompilationUnit(model: model, arch: x86)
        try ChannelsLastLayout().apply(to: &unit)
        try DeadCodeElimination().apply(to: &unit)
        // The lowered model is checked by running it: every result against its declared type.
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.first { $0.name == "mix" }?.outputs[0].type.rank, 4)

        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for (h, w) in [(8, 8), (1, 8), (1, 1)] {
            let inputs = ["x": NDArray(shape: [1, 3, 8, 8], scalars: values(192, 4)),
                          "cache": NDArray(shape: [1, 8, h, w], scalars: values(8 * h * w, 5)),
                          "gate": NDArray(shape: [1, 8, 1, 1], scalars: values(8, 6))]
            let want = try run(model, inputs)["y"]!.scalars(as: Float.self)
            let got = try run(unit, inputs)["y"]!.scalars(as: Float.self)
            XCTAssertEqual(got.count, want.count)
            for (g, e) in zip(got, want) { XCTAssertEqual(g, e, accuracy: 1e-5) }
            for arch in Architecture.all {
                let path = "\(dir)/m.\(arch.name).compiled"
                try compileArtifact(model, arch, to: path)
                guard arch.isRunnableOnHost else { continue }
                _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "\(arch.name) cache \(h)x\(w)")
            }
        }
    }

    /// A convolution's output quantized at run time (`dynamic_quantize_linear`, then cast back and
    /// centered, as onnxruntime's dynamically quantized convolutions are) stays channels-last:
    /// the quantization and casts follow their input's order, so the second convolution is
    /// channels-last too and no transpose stands between them; every arch agrees with the interpreter.
    func testRunTimeQuantizationKeepsChannelsLast() async throws {
        var b = ModelBuilder(name: "quantized")
        let w1 = try b.addWeight("w1", shape: [8, 3, 3, 3], values: values(216, 1))
        let w2 = try b.addWeight("w2", shape: [8, 8, 3, 3], values: values(576, 2))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 3, 8, 8]))
        let c1 = try f.apply1("conv", [x, f.use(w1)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")
        let q = try f.apply("dynamic_quantize_linear", [c1], name: "quantize")
        let back = try f.apply1("cast", [q[0]], ["to": .dtype(.float32)], name: "back")
        let zero = try f.apply1("cast", [q[2]], ["to": .dtype(.float32)], name: "zero")
        let centered = try f.apply1("sub", [back, zero], name: "center")
        f.output("y", try f.apply1("conv", [centered, f.use(w2)], ["pads": .ints([1, 1, 1, 1])], name: "conv2"))
        try b.add(f)
        let model = try b.build()

        var unit = CompilationUnit(model: model, arch: x86)
        try ChannelsLastLayout().apply(to: &unit)
        try DeadCodeElimination().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        // The first convolution reads the input's planes: the output's transpose is the only one.
        XCTAssertEqual(ops.filter { $0.opType == "transpose" }.count, 1, "\(ops.map(\.opType))")
        for name in ["quantize", "back", "center", "conv2"] {
            XCTAssertEqual(ops.first { $0.name == name }?.outputs[0].type.shape.last, .size(8), name)
        }
        let inputs = ["x": NDArray(shape: [1, 3, 8, 8], scalars: values(192, 4))]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in runnableArchitectures {
            let path = "\(dir)/m.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
        }
    }

    /// A vision transformer's convolutional feed-forward (PVT-v2, SegFormer): tokens `[B, H·W, C]`
    /// transposed and reshaped to an image for a depthwise convolution, then back, then GELU.
    /// Tokens are the channels-last image already: the compiled plan has no transpose, the
    /// convolution runs channels-last with the GELU in its epilogue (moved before the view back
    /// to tokens), and every arch agrees with the interpreter.
    func testTokensReadAsImageStayChannelsLast() async throws {
        var b = ModelBuilder(name: "mixffn")
        let w1 = try b.addWeight("w1", shape: [8, 16], values: values(128, 1))
        let dw = try b.addWeight("dw", shape: [16, 1, 3, 3], values: values(144, 2))
        let w2 = try b.addWeight("w2", shape: [16, 8], values: values(128, 3))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 20, 8]))
        let h = try f.apply1("matmul", [x, f.use(w1)], name: "fc1")
        let t = try f.apply1("transpose", [h], ["perm": .ints([0, 2, 1])], name: "to_channels")
        let image = try f.apply1("reshape", [t], ["shape": .ints([2, 16, 4, 5])], name: "to_image")
        let c = try f.apply1("conv", [image, f.use(dw)], ["group": .int(16), "pads": .ints([1, 1, 1, 1])], name: "dwconv")
        let flat = try f.apply1("reshape", [c], ["shape": .ints([2, 16, 20])], name: "to_planes")
        let tokens = try f.apply1("transpose", [flat], ["perm": .ints([0, 2, 1])], name: "to_tokens")
        let g = try f.apply1("gelu", [tokens], name: "act")
        f.output("y", try f.apply1("matmul", [g, f.use(w2)], name: "fc2"))
        try b.add(f)
        let model = try b.build()
        let inputs = ["x": NDArray(shape: [2, 20, 8], scalars: values(320, 4))]
        try await assertCompilesWithoutReference(model, inputs, "mixffn")
        for arch in runnableArchitectures {
            let (_, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 0, count: 32))
            let ops = plan.model.functions[0].operations
            XCTAssertFalse(ops.contains { $0.opType == "transpose" || $0.opType == "gelu" }, "\(arch.name): \(ops.map(\.opType))")
            let conv = try XCTUnwrap(ops.firstIndex { $0.opType == "conv" })
            XCTAssertEqual(plan.functions[0].steps[conv].config.layout, .channelsLast, arch.name)
            XCTAssertEqual(plan.functions[0].steps[conv].config.activation?.function, "gelu", arch.name)
        }
    }

    /// A TensorFlow-style `pad → transpose → conv` after the layout pass: the pad folds into the
    /// convolution's pads; a reflect pad and a pad of the channel dim stay.
    func testPadFolding() throws {
        var b = ModelBuilder(name: "pads")
        let w = try b.addWeight("w", shape: [4, 3, 3, 3], values: values(108, 1))
        let pads = try b.addWeight("pads", dtype: .int64, shape: [8], bytes: [0, 1, 2, 0, 0, 2, 1, 0].flatMap { (v: Int64) in withUnsafeBytes(of: v.littleEndian) { Array($0) } })
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 6, 7, 3]))
        let padded = try f.apply1("pad", [x, f.use(pads)], ["mode": .string("constant")], name: "pad")
        let t = try f.apply1("transpose", [padded], ["perm": .ints([0, 3, 1, 2])], name: "t")
        let c = try f.apply1("conv", [t, f.use(w)], ["pads": .ints([1, 0, 0, 1])], name: "conv")
        f.output("y", try f.apply1("transpose", [c], ["perm": .ints([0, 2, 3, 1])], name: "back"))
        let reflect = try f.apply1("pad", [x], ["mode": .string("reflect"), "pads": .ints([0, 1, 1, 0, 0, 1, 1, 0])], name: "reflect")
        let t2 = try f.apply1("transpose", [reflect], ["perm": .ints([0, 3, 1, 2])], name: "t2")
        let c2 = try f.apply1("conv", [t2, f.use(w)], name: "conv2")
        f.output("z", try f.apply1("transpose", [c2], ["perm": .ints([0, 2, 3, 1])], name: "back2"))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        try ChannelsLastLayout().apply(to: &unit)
        try PadFolding().apply(to: &unit)
        try DeadCodeElimination().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.filter { $0.opType == "pad" }.map(\.name), ["reflect"])
        XCTAssertEqual(try ops.first { $0.name == "conv" }?.attributes.ints("pads"), [2, 2, 2, 2])
        XCTAssertEqual(ops.first { $0.name == "conv" }?.inputs[0], "x")
        // The lowered model is checked by running it: every result against its declared type.
        let input = NDArray(shape: [1, 6, 7, 3], scalars: values(126, 2))
        let want = try run(model, ["x": input]), got = try run(unit, ["x": input])
        for name in ["y", "z"] {
            for (g, w) in zip(got[name]!.scalars(as: Float.self), want[name]!.scalars(as: Float.self)) { XCTAssertEqual(g, w, accuracy: 1e-5, name) }
        }
    }

    /// A residual add after a channels-last convolution becomes the conv's fourth input, and the
    /// relu after it then fuses into the conv's epilogue; a residual whose conv output has another
    /// reader stays an add.
    func testResidualFusion() throws {
        var b = ModelBuilder(name: "residual")
        let w1 = try b.addWeight("w1", shape: [4, 4, 3, 3], values: values(144, 1))
        let w2 = try b.addWeight("w2", shape: [4, 4, 1, 1], values: values(16, 2))
        let w0 = try b.addWeight("w0", shape: [4, 3, 3, 3], values: values(108, 3))
        var f = b.function("main")
        let image = f.input("x", TensorType(.float32, [1, 3, 5, 5]))
        let x = try f.apply1("conv", [image, f.use(w0)], ["pads": .ints([1, 1, 1, 1])], name: "stem")
        let c1 = try f.apply1("conv", [x, f.use(w1)], ["pads": .ints([1, 1, 1, 1])], name: "conv1")
        let sum = try f.apply1("relu", [try f.apply1("add", [c1, x], name: "add1")], name: "relu")
        let c2 = try f.apply1("conv", [sum, f.use(w2)], name: "conv2")
        f.output("y", try f.apply1("add", [c2, sum], name: "add2"))
        f.output("c2", c2)
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: x86)
        for pass in [ChannelsLastLayout.name, ResidualFusion.name, EpilogueFusion.name, DeadCodeElimination.name] { try Compiler.passes[pass]!.apply(to: &unit) }
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.filter { $0.opType == "add" }.map(\.name), ["add2"])
        let conv1 = ops.first { $0.name == "conv1" }
        XCTAssertEqual(conv1?.inputs.count, 4)
        XCTAssertEqual(config(unit, "conv1").activation?.function, "relu")
        // The lowered reference runs the fused residual and activation; every result is checked against its declared type.
        let input = NDArray(shape: [1, 3, 5, 5], scalars: values(75, 4))
        let want = try run(model, ["x": input])["y"]!.scalars(as: Float.self)
        let got = try run(unit, ["x": input])["y"]!.scalars(as: Float.self)
        XCTAssertEqual(got.count, want.count)
        for (g, w) in zip(got, want) { XCTAssertEqual(g, w, accuracy: 1e-4) }
    }

    func testUnknownPassIsRejectedBeforeWork() throws {
        let model = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        var options = Compiler.Options(arch: x86)
        options.pipeline = ["dead_code_elimination", "constant_magic", "lowering"]
        XCTAssertThrowsError(try Compiler.compile(model, options: options, sourceDigest: [])) { e in
            XCTAssertTrue("\(e)".contains("unknown pass 'constant_magic'"), "\(e)")
        }
    }
}
