import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// Built graphs in the shapes of common networks compile with no `reference` step and match
/// the interpreter on every runnable arch (generic run and shape plan).
final class NetworkGraphTests: XCTestCase {
    struct Graph {
        var b: ModelBuilder
        var seed = 0.0

        init(_ name: String) { b = ModelBuilder(name: name) }

        mutating func weight(_ name: String, _ shape: [Int], scale: Float = 0.3) throws -> Weight {
            seed += 1
            let s = seed
            return try b.addWeight(name, shape: shape, values: (0 ..< shape.reduce(1, *)).map { Float(sin(Double($0) * 0.61 + s)) * scale })
        }

        mutating func ints(_ name: String, _ values: [Int64]) throws -> Weight {
            try b.addWeight(name, dtype: .int64, shape: [values.count], bytes: values.flatMap { v in withUnsafeBytes(of: v.littleEndian) { Array($0) } })
        }
    }

    func floats(_ shape: [Int], _ seed: Double) -> NDArray {
        NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { Float(sin(Double($0) * 0.37 + seed)) })
    }

    /// A TensorFlow-style NHWC ResNet block: transposes around every convolution, explicit pads,
    /// an unfolded batch norm after the residual add, max pooling and a mean over space.
    func testNHWCResNetBlock() async throws {
        var g = Graph("resnet")
        let w1 = try g.weight("w1", [8, 8, 3, 3]), w2 = try g.weight("w2", [8, 8, 3, 3]), bias = try g.weight("bias", [8])
        let scale = try g.weight("scale", [8]), shift = try g.weight("shift", [8]), mean = try g.weight("mean", [8])
        let variance = try g.b.addWeight("variance", shape: [8], values: (0 ..< 8).map { 0.5 + Float($0) / 10 })
        let pads = try g.ints("pads", [0, 0, 1, 1, 0, 0, 1, 1]), fc = try g.weight("fc", [4, 8])
        var f = g.b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 12, 12, 8]))
        let nchw = try f.apply1("transpose", [x], ["perm": .ints([0, 3, 1, 2])])
        let padded = try f.apply1("pad", [nchw, f.use(pads)], ["mode": .string("constant")])
        let c1 = try f.apply1("relu", [try f.apply1("conv", [padded, f.use(w1), f.use(bias)], ["kernel_shape": .ints([3, 3])])])
        let c2 = try f.apply1("conv", [c1, f.use(w2)], ["kernel_shape": .ints([3, 3]), "pads": .ints([1, 1, 1, 1])])
        let sum = try f.apply1("add", [c2, nchw])
        let bn = try f.apply1("batch_norm", [sum, f.use(scale), f.use(shift), f.use(mean), f.use(variance)], ["epsilon": .float(1e-3)])
        let pooled = try f.apply1("max_pool", [try f.apply1("relu", [bn])], ["kernel_shape": .ints([3, 3]), "strides": .ints([2, 2]),
                                                                             "pads": .ints([1, 1, 1, 1])])
        let nhwc = try f.apply1("transpose", [pooled], ["perm": .ints([0, 2, 3, 1])])
        let features = try f.apply1("reduce_mean", [nhwc], ["axes": .ints([1, 2]), "keepdims": .int(0)])
        f.output("features", nhwc)
        f.output("logits", try f.apply1("linear", [features, f.use(fc)]))
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["x": floats([2, 12, 12, 8], 1)], "NHWC ResNet")
    }

    /// Dense convolutions through every path of the row-tiled weights: threads over pixels (1×1 in
    /// place, 3×3 packed panel by panel), over channels (many output channels), K longer than one
    /// block, a grouped strided convolution with an activation applied to the stored tile, and the
    /// narrow path on 1×1 maps; two images.
    func testConvolutionPaths() async throws {
        var g = Graph("convs")
        let w1 = try g.weight("w1", [12, 6, 1, 1]), b1 = try g.weight("b1", [12])
        let w2 = try g.weight("w2", [10, 12, 3, 3]), w3 = try g.weight("w3", [600, 10, 1, 1], scale: 0.2)
        let w4 = try g.weight("w4", [16, 600, 1, 1], scale: 0.05), b4 = try g.weight("b4", [16])
        let w5 = try g.weight("w5", [8, 8, 3, 3]), b5 = try g.weight("b5", [8])
        let w6 = try g.weight("w6", [1100, 8, 1, 1]), w7 = try g.weight("w7", [4, 1100, 1, 1], scale: 0.02)
        var f = g.b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 6, 20, 20]))
        let c1 = try f.apply1("hard_swish", [try f.apply1("conv", [x, f.use(w1), f.use(b1)], ["kernel_shape": .ints([1, 1])])])
        let c2 = try f.apply1("relu", [try f.apply1("conv", [c1, f.use(w2)], ["kernel_shape": .ints([3, 3]), "pads": .ints([1, 1, 1, 1])])])
        let c3 = try f.apply1("conv", [c2, f.use(w3)], ["kernel_shape": .ints([1, 1])])
        let c4 = try f.apply1("clip", [try f.apply1("conv", [c3, f.use(w4), f.use(b4)], ["kernel_shape": .ints([1, 1])])],
                              ["min": .float(-1), "max": .float(2)])
        let c5 = try f.apply1("sigmoid", [try f.apply1("conv", [c4, f.use(w5), f.use(b5)], ["kernel_shape": .ints([3, 3]), "group": .int(2),
                                                                                          "strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])])])
        let pooled = try f.apply1("global_average_pool", [c5])
        let c6 = try f.apply1("hard_sigmoid", [try f.apply1("conv", [pooled, f.use(w6)], ["kernel_shape": .ints([1, 1])])])
        f.output("pointwise", c1)
        f.output("window", c2)
        f.output("blocked", c4)
        f.output("features", c5)
        f.output("logits", try f.apply1("conv", [c6, f.use(w7)], ["kernel_shape": .ints([1, 1])]))
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["x": floats([2, 6, 20, 20], 3)], "convolution paths")
    }

    /// 3×3 stride-1 convolutions run as Winograd F(2×2, 3×3) on maps of run-time size (11×13:
    /// partial tiles at the right and bottom): bias and activation, a fused residual, two writing
    /// into a concat's slices, valid padding, channel counts off the panel width; two images.
    func testWinogradConvolutions() async throws {
        var g = Graph("winograd")
        let w1 = try g.weight("w1", [40, 24, 3, 3], scale: 0.1), b1 = try g.weight("b1", [40])
        let w2 = try g.weight("w2", [40, 40, 3, 3], scale: 0.1), w3 = try g.weight("w3", [20, 40, 3, 3], scale: 0.1)
        let w4 = try g.weight("w4", [33, 40, 3, 3], scale: 0.1), b4 = try g.weight("b4", [33]), w5 = try g.weight("w5", [17, 40, 3, 3], scale: 0.1)
        var f = g.b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 24, "h", "w"]))
        let c1 = try f.apply1("relu", [try f.apply1("conv", [x, f.use(w1), f.use(b1)], ["pads": .ints([1, 1, 1, 1])])])
        let c2 = try f.apply1("relu", [try f.apply1("add", [try f.apply1("conv", [c1, f.use(w2)], ["pads": .ints([1, 1, 1, 1])]), c1])])
        let joined = try f.apply1("concat", [try f.apply1("conv", [c2, f.use(w3)], ["pads": .ints([1, 1, 1, 1])]),
                                            try f.apply1("conv", [c2, f.use(w4), f.use(b4)], ["pads": .ints([1, 1, 1, 1])])], ["axis": .int(1)])
        f.output("joined", try f.apply1("hard_swish", [joined]))
        f.output("valid", try f.apply1("sigmoid", [try f.apply1("conv", [c2, f.use(w5)], [:])]))
        try g.b.add(f)
        let model = try g.b.build()
        try await assertCompilesWithoutReference(model, ["x": floats([2, 24, 11, 13], 5)], "Winograd convolutions")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in runnableArchitectures {
            try compileArtifact(model, arch, to: "\(dir)/m.compiled")
            let plan = try CompiledArtifact.read(at: "\(dir)/m.compiled", verifyWeights: true).plan
            let winograd = plan.functions[0].steps.filter { $0.kernel.hasPrefix("f32_conv2d_winograd") }.count
            XCTAssertEqual(winograd, 5, "\(arch.name): convolutions run by Winograd")
        }
    }

    /// MobileNet-style blocks, run channels-last: a strided stem reading the input planes,
    /// depthwise convolutions (3×3 and 5×5, strides 1 and 2, dilated, channel counts that are not a
    /// multiple of a vector, planes narrower than a pixel tile), a squeeze-excitation scale, a
    /// residual add, 1×1 and 3×3 dense convolutions, max and average pools (with and without pads
    /// counted), a global pool and a flatten back to channels-first; two images.
    func testChannelsLastBlocks() async throws {
        var g = Graph("mobile")
        let stem = try g.weight("stem", [20, 3, 3, 3]), stemBias = try g.weight("stem_bias", [20])
        let dw1 = try g.weight("dw1", [20, 1, 3, 3]), dwBias = try g.weight("dw_bias", [20])
        let pw = try g.weight("pw", [36, 20, 1, 1], scale: 0.2), dw2 = try g.weight("dw2", [36, 1, 5, 5], scale: 0.2)
        let se1 = try g.weight("se1", [9, 36, 1, 1]), se2 = try g.weight("se2", [36, 9, 1, 1])
        let proj = try g.weight("proj", [36, 36, 1, 1], scale: 0.1), dw3 = try g.weight("dw3", [36, 1, 3, 3])
        let dense = try g.weight("dense", [17, 36, 3, 3], scale: 0.1)
        var f = g.b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 3, 23, 21]))
        let s0 = try f.apply1("hard_swish", [try f.apply1("conv", [x, f.use(stem), f.use(stemBias)], ["strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])])])
        let d1 = try f.apply1("relu", [try f.apply1("conv", [s0, f.use(dw1), f.use(dwBias)], ["group": .int(20), "pads": .ints([1, 1, 1, 1])])])
        let p1 = try f.apply1("conv", [d1, f.use(pw)], [:])
        let d2 = try f.apply1("hard_swish", [try f.apply1("conv", [p1, f.use(dw2)], ["group": .int(36), "strides": .ints([2, 2]), "pads": .ints([2, 2, 2, 2])])])
        let squeeze = try f.apply1("relu", [try f.apply1("conv", [try f.apply1("global_average_pool", [d2]), f.use(se1)], [:])])
        let gate = try f.apply1("hard_sigmoid", [try f.apply1("conv", [squeeze, f.use(se2)], [:])])
        let excited = try f.apply1("mul", [d2, gate])
        let residual = try f.apply1("add", [try f.apply1("conv", [excited, f.use(proj)], [:]), d2])
        let d3 = try f.apply1("conv", [residual, f.use(dw3)], ["group": .int(36), "dilations": .ints([2, 2]), "pads": .ints([2, 2, 2, 2])])
        let c4 = try f.apply1("conv", [d3, f.use(dense)], ["pads": .ints([1, 0, 1, 0])])
        let mp = try f.apply1("max_pool", [c4], ["kernel_shape": .ints([3, 3]), "strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])])
        let ap = try f.apply1("average_pool", [c4], ["kernel_shape": .ints([3, 2]), "pads": .ints([1, 1, 1, 0]), "count_include_pad": .int(1)])
        let ap2 = try f.apply1("average_pool", [c4], ["kernel_shape": .ints([2, 3]), "pads": .ints([0, 1, 1, 1])])
        // A concat of channels-last convolutions: two write into its output in place (one 3×3 through the
        // indirect kernel, one 1×1), one is read elsewhere too and is copied, the pool output is copied.
        let wa = try g.weight("wa", [7, 36, 3, 3], scale: 0.1), wb = try g.weight("wb", [5, 36, 1, 1], scale: 0.1)
        // Grouped convolutions (4 groups of 9 channels): a strided 3×3 with bias and a 1×1 with an activation.
        let wg = try g.weight("wg", [20, 9, 3, 3], scale: 0.1), bg = try g.weight("bg", [20]), wp = try g.weight("wp", [8, 9, 1, 1])
        let grouped = try f.apply1("conv", [residual, f.use(wg), f.use(bg)], ["group": .int(4), "strides": .ints([2, 2]), "pads": .ints([1, 0, 1, 1])])
        f.output("grouped", grouped)
        f.output("grouped_pointwise", try f.apply1("relu", [try f.apply1("conv", [residual, f.use(wp)], ["group": .int(4)])]))
        let joined = try f.apply1("concat", [try f.apply1("conv", [residual, f.use(wa)], ["pads": .ints([1, 1, 1, 1])]), d3,
                                            try f.apply1("relu", [try f.apply1("conv", [residual, f.use(wb)], [:])]),
                                            try f.apply1("max_pool", [d3], ["kernel_shape": .ints([1, 1])])], ["axis": .int(1)])
        f.output("joined", joined)
        f.output("blocks", residual)
        f.output("max", mp)
        f.output("mean_pad", ap)
        f.output("mean", ap2)
        f.output("flat", try f.apply1("flatten", [try f.apply1("global_max_pool", [c4])], ["axis": .int(1)]))
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["x": floats([2, 3, 23, 21], 9)], "channels-last blocks")
    }

    /// 1-D convolutions exported as 2-D over a column image (W = 1), packed as rows: padded,
    /// strided and dilated windows, many and few output channels.
    func testColumnConvolutions() async throws {
        var g = Graph("columns")
        let w1 = try g.weight("w1", [140, 6, 5, 1]), b1 = try g.weight("b1", [140]), w2 = try g.weight("w2", [12, 140, 3, 1], scale: 0.1)
        var f = g.b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 6, 83, 1]))
        let c1 = try f.apply1("relu", [try f.apply1("conv", [x, f.use(w1), f.use(b1)], ["kernel_shape": .ints([5, 1]), "pads": .ints([2, 0, 2, 0])])])
        let c2 = try f.apply1("conv", [c1, f.use(w2)], ["kernel_shape": .ints([3, 1]), "strides": .ints([2, 1]), "dilations": .ints([2, 1]),
                                                          "pads": .ints([1, 0, 0, 0])])
        f.output("wide", c1)
        f.output("narrow", c2)
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["x": floats([2, 6, 83, 1], 5)], "column convolutions")
    }

    /// A DBNet-style decoder: transposed convolutions, resizes (linear, nearest, cubic) of
    /// feature maps, concatenation, instance norm and a sigmoid head.
    func testDBNetDecoder() async throws {
        var g = Graph("dbnet")
        let up = try g.weight("up", [8, 4, 2, 2]), upBias = try g.weight("up_bias", [4])
        let grouped = try g.weight("grouped", [6, 2, 3, 3]), head = try g.weight("head", [2, 18, 3, 3])
        let scales = try g.b.addWeight("scales", shape: [4], values: [1, 1, 2, 2])
        let inScale = try g.weight("in_scale", [18]), inBias = try g.weight("in_bias", [18])
        var f = g.b.function("main")
        let p4 = f.input("p4", TensorType(.float32, [1, 8, 6, 5]))
        let p3 = f.input("p3", TensorType(.float32, [1, 4, 12, 10]))
        let deconv = try f.apply1("conv_transpose", [p4, f.use(up), f.use(upBias)], ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2])])
        let upsampled = try f.apply("resize", [p4, nil, f.use(scales)], ["mode": .string("linear")],
                                    outputTypes: [TensorType(.float32, [1, 8, 12, 10])])[0]
        let nearest = try f.apply("resize", [p3, nil, f.use(scales)], ["mode": .string("nearest"), "coordinate_transformation_mode": .string("asymmetric")],
                                  outputTypes: [TensorType(.float32, [1, 4, 24, 20])])[0]
        let cubic = try f.apply("resize", [deconv, nil, nil], ["mode": .string("cubic"), "sizes": .ints([1, 4, 9, 13])],
                                outputTypes: [TensorType(.float32, [1, 4, 9, 13])])[0]
        let merged = try f.apply1("concat", [try f.apply1("add", [deconv, p3]), upsampled], ["axis": .int(1)])
        let g2 = try f.apply1("conv", [merged, f.use(grouped)], ["kernel_shape": .ints([3, 3]), "group": .int(6), "pads": .ints([1, 1, 1, 1])])
        let normed = try f.apply1("instance_norm", [try f.apply1("concat", [g2, merged], ["axis": .int(1)]), f.use(inScale), f.use(inBias)])
        let stride2 = try f.apply1("conv_transpose", [p4, f.use(up)], ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2]),
                                                                   "pads": .ints([0, 1, 1, 0]), "output_padding": .ints([1, 1])])
        f.output("prob", try f.apply1("sigmoid", [try f.apply1("conv", [normed, f.use(head)], ["kernel_shape": .ints([3, 3])])]))
        f.output("nearest", nearest)
        f.output("cubic", cubic)
        f.output("stride2", stride2)
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["p4": floats([1, 8, 6, 5], 2), "p3": floats([1, 4, 12, 10], 3)], "DBNet decoder")
    }

    /// A YOLO-style neck: split, SPPF max pools, concatenation, leaky ReLU, depth-to-space and
    /// space-to-depth, top-k over scores.
    func testYOLONeck() async throws {
        var g = Graph("yolo")
        let stem = try g.weight("stem", [8, 3, 3, 3]), mix = try g.weight("mix", [8, 16, 1, 1])
        var f = g.b.function("main")
        let x = f.input("image", TensorType(.float32, [1, 3, 16, 16]))
        let focus = try f.apply1("space_to_depth", [x], ["blocksize": .int(2)])
        let s = try f.apply1("leaky_relu", [try f.apply1("conv", [x, f.use(stem)], ["kernel_shape": .ints([3, 3]), "strides": .ints([2, 2]),
                                                                                 "pads": .ints([1, 1, 1, 1])])], ["alpha": .float(0.1)])
        let halves = try f.apply("split", [s], ["axis": .int(1), "split": .ints([4, 4])], outputNames: ["left", "right"])
        let pool = { (v: ValueRef, name: String) throws -> ValueRef in
            try f.apply1("max_pool", [v], ["kernel_shape": .ints([5, 5]), "pads": .ints([2, 2, 2, 2])], name: name)
        }
        let m1 = try pool(halves[1], "m1"), m2 = try pool(m1, "m2"), m3 = try pool(m2, "m3")
        let spp = try f.apply1("concat", [halves[0], halves[1], m2, m3], ["axis": .int(1)])
        let y = try f.apply1("conv", [spp, f.use(mix)], ["kernel_shape": .ints([1, 1])])
        let d2s = try f.apply1("depth_to_space", [y], ["blocksize": .int(2), "mode": .string("CRD")])
        let d2sDCR = try f.apply1("depth_to_space", [focus], ["blocksize": .int(2)])
        let scores = try f.apply1("reshape", [d2s, try f.use(g.ints("flat", [1, -1]))])
        let best = try f.apply("top_k", [scores], ["k": .int(5), "axis": .int(-1)], outputNames: ["top", "top_index"])
        f.output("features", d2s)
        f.output("restored", d2sDCR)
        f.output("top", best[0])
        f.output("top_index", best[1])
        f.output("argmax", try f.apply1("argmax", [scores], ["axis": .int(1)]))
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["image": floats([1, 3, 16, 16], 4)], "YOLO neck")
    }

    /// Copies large enough to split across threads (split, concat, pad over 64 KiB): each thread
    /// copies the same rows of every input, the parts cover the output exactly once.
    func testLargeCopiesAcrossThreads() async throws {
        var g = Graph("copies")
        let wide = try g.weight("wide", [30, 8, 1, 1])
        var f = g.b.function("main")
        let x = f.input("image", TensorType(.float32, [1, 8, 48, 52]))
        let y = try f.apply1("conv", [x, f.use(wide)], ["kernel_shape": .ints([1, 1])])
        let parts = try f.apply("split", [y], ["axis": .int(1), "split": .ints([13, 17])], outputNames: ["a", "b"])
        let b = try f.apply1("relu", [parts[1]])
        let joined = try f.apply1("concat", [b, x, parts[0]], ["axis": .int(1)])
        let padded = try f.apply1("pad", [joined, try f.use(g.ints("pads", [0, 0, 1, 2, 0, 0, 3, 1]))])
        let rows = try f.apply("split", [padded], ["axis": .int(2), "split": .ints([20, 32])], outputNames: ["top", "bottom"])
        f.output("padded", padded)
        f.output("bottom", rows[1])
        f.output("joined", try f.apply1("concat", [rows[1], rows[0]], ["axis": .int(2)]))
        // Resizes of over 32K elements per pass split their rows across threads too.
        let scales = try g.b.addWeight("scales", shape: [4], values: [1, 1, 2, 1.5])
        f.output("nearest", try f.apply("resize", [padded, nil, f.use(scales)], ["mode": .string("nearest")], outputNames: ["nearest"])[0])
        f.output("linear", try f.apply("resize", [y, nil, f.use(scales)], ["mode": .string("linear")], outputNames: ["linear"])[0])
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["image": floats([1, 8, 48, 52], 7)], "large copies")
    }

    /// A CRNN: convolution features to a sequence, a bidirectional LSTM (biases, peepholes,
    /// initial states), GRUs in both reset forms, a linear head with log-softmax.
    func testCRNN() async throws {
        var g = Graph("crnn")
        let conv = try g.weight("conv", [4, 1, 3, 3])
        let (h, feat) = (6, 16)
        let w = try g.weight("w", [2, 4 * h, feat]), r = try g.weight("r", [2, 4 * h, h]), b = try g.weight("b", [2, 8 * h])
        let p = try g.weight("p", [2, 3 * h]), h0 = try g.weight("h0", [2, 2, h]), c0 = try g.weight("c0", [2, 2, h])
        let gw = try g.weight("gw", [1, 3 * h, 2 * h]), gr = try g.weight("gr", [1, 3 * h, h]), gb = try g.weight("gb", [1, 6 * h])
        let head = try g.weight("head", [5, h])
        var f = g.b.function("main")
        let x = f.input("image", TensorType(.float32, [2, 1, 8, 12]))
        let c = try f.apply1("relu", [try f.apply1("conv", [x, f.use(conv)], ["kernel_shape": .ints([3, 3]), "pads": .ints([1, 1, 1, 1])])])
        let pooled = try f.apply1("max_pool", [c], ["kernel_shape": .ints([2, 2]), "strides": .ints([2, 2])]) // [2, 4, 4, 6]
        let seq = try f.apply1("transpose", [pooled], ["perm": .ints([3, 0, 1, 2])]) // [6, 2, 4, 4]
        let flat = try f.apply1("reshape", [seq, try f.use(g.ints("seq_shape", [6, 2, Int64(feat)]))])
        let lstm = try f.apply("lstm", [flat, f.use(w), f.use(r), f.use(b), nil, f.use(h0), f.use(c0), f.use(p)],
                               ["hidden_size": .int(h), "direction": .string("bidirectional")], outputNames: ["y", "yh", "yc"])
        let both = try f.apply1("reshape", [try f.apply1("transpose", [lstm[0]], ["perm": .ints([0, 2, 1, 3])]), try f.use(g.ints("both", [6, 2, Int64(2 * h)]))])
        let gru0 = try f.apply("gru", [both, f.use(gw), f.use(gr), f.use(gb)], ["hidden_size": .int(h)], outputNames: ["g0", "g0h"])
        let gru1 = try f.apply("gru", [both, f.use(gw), f.use(gr), f.use(gb)], ["hidden_size": .int(h), "linear_before_reset": .int(1),
                                                                                 "direction": .string("reverse")], outputNames: ["g1", "g1h"])
        let summed = try f.apply1("add", [gru0[0], gru1[0]]) // [6, 1, 2, h]
        let logits = try f.apply1("linear", [try f.apply1("squeeze", [summed], ["axes": .ints([1])]), f.use(head)])
        f.output("log_probs", try f.apply1("log_softmax", [logits], ["axis": .int(-1)]))
        f.output("yh", lstm[1])
        f.output("yc", lstm[2])
        f.output("g0h", gru0[1])
        try g.b.add(f)
        try await assertCompilesWithoutReference(try g.b.build(), ["image": floats([2, 1, 8, 12], 5)], "CRNN")
    }

    /// A BERT-style encoder layer exported with its shape subgraphs: Shape/Gather/Unsqueeze/Concat
    /// reshape targets, Range positions, an attention mask through Cast/Sub/Mul, where, expand,
    /// gather_nd of the first token, scatter_nd.
    func testBERTEncoderWithShapeSubgraphs() async throws {
        var g = Graph("bert")
        let (d, headCount) = (16, 2)
        let table = try g.weight("table", [30, d]), positions = try g.weight("positions", [20, d])
        let wq = try g.weight("wq", [d, d]), wk = try g.weight("wk", [d, d]), wv = try g.weight("wv", [d, d]), wo = try g.weight("wo", [d, d])
        let gamma = try g.weight("gamma", [d]), beta = try g.weight("beta", [d]), ff = try g.weight("ff", [d, d])
        let zero = try g.ints("i0", [0]), one = try g.ints("i1", [1]), headDims = try g.ints("head_dims", [Int64(headCount), Int64(d / headCount)])
        let flatDims = try g.ints("flat_dims", [Int64(d)]), firstToken = try g.ints("first", [0, 0, 0, 1])
        let start = try g.ints("start", [0]), delta = try g.ints("delta", [1])
        let scale = try g.b.addWeight("scale", shape: [], values: [Float(d / headCount).squareRoot()])
        let oneF = try g.b.addWeight("one", shape: [], values: [1]), big = try g.b.addWeight("big", shape: [], values: [-10000])
        var f = g.b.function("main")
        let ids = f.input("input_ids", TensorType(.int64, ["batch", "seq"]))
        let mask = f.input("attention_mask", TensorType(.int64, ["batch", "seq"]))
        let shape = try f.apply1("shape", [ids])
        let batch = try f.apply1("gather", [shape, f.use(zero)], ["axis": .int(0)])
        let length = try f.apply1("gather", [shape, f.use(one)], ["axis": .int(0)])
        let startV = f.use(start), deltaV = f.use(delta)
        let range = try f.apply("range", [try f.apply1("squeeze", [startV], ["axes": .ints([0])]), try f.apply1("squeeze", [length], ["axes": .ints([0])]),
                                          try f.apply1("squeeze", [deltaV], ["axes": .ints([0])])], outputTypes: [TensorType(.int64, ["seq"])])[0]
        let embedded = try f.apply1("add", [try f.apply1("gather", [f.use(table), ids]), try f.apply1("gather", [f.use(positions), range])])
        let splitShape = try f.apply1("concat", [batch, length, f.use(headDims)], ["axis": .int(0)])
        func heads(_ v: ValueRef) throws -> ValueRef {
            let r = try f.apply("reshape", [v, splitShape], outputTypes: [TensorType(.float32, ["batch", "seq", .size(headCount), .size(d / headCount)])])[0]
            return try f.apply1("transpose", [r], ["perm": .ints([0, 2, 1, 3])])
        }
        let q = try heads(try f.apply1("matmul", [embedded, f.use(wq)]))
        let k = try heads(try f.apply1("matmul", [embedded, f.use(wk)]))
        let v = try heads(try f.apply1("matmul", [embedded, f.use(wv)]))
        let scores = try f.apply1("div", [try f.apply1("matmul", [q, try f.apply1("transpose", [k], ["perm": .ints([0, 1, 3, 2])])]), f.use(scale)])
        let m = try f.apply1("unsqueeze", [try f.apply1("cast", [mask], ["to": .dtype(.float32)])], ["axes": .ints([1, 2])])
        let additive = try f.apply1("mul", [try f.apply1("sub", [f.use(oneF), m]), f.use(big)])
        let probs = try f.apply1("softmax", [try f.apply1("add", [scores, additive])], ["axis": .int(-1)])
        let context = try f.apply1("transpose", [try f.apply1("matmul", [probs, v])], ["perm": .ints([0, 2, 1, 3])])
        let mergeShape = try f.apply1("concat", [batch, length, f.use(flatDims)], ["axis": .int(0)])
        let merged = try f.apply("reshape", [context, mergeShape], outputTypes: [TensorType(.float32, ["batch", "seq", .size(d)])])[0]
        let attended = try f.apply1("layer_norm", [try f.apply1("add", [try f.apply1("matmul", [merged, f.use(wo)]), embedded]), f.use(gamma), f.use(beta)],
                                    ["axis": .int(-1)])
        let hidden = try f.apply1("gelu", [try f.apply1("matmul", [attended, f.use(ff)])])
        let keep = try f.apply1("equal", [mask, try f.apply1("expand", [f.use(zero), shape])])
        let cleaned = try f.apply1("where", [try f.apply1("unsqueeze", [keep], ["axes": .ints([2])]), try f.apply1("neg", [hidden]), hidden])
        let pairs = try f.apply1("reshape", [f.use(firstToken), try f.use(g.ints("pairs", [2, 2]))])
        let cls = try f.apply("gather_nd", [cleaned, pairs], outputTypes: [TensorType(.float32, [2, .size(d)])])[0]
        f.output("hidden", cleaned)
        f.output("cls", cls)
        // The first sequence written over the last.
        let last = try f.apply1("reshape", [try f.use(g.ints("last", [-1])), try f.use(g.ints("one_pair", [1, 1]))])
        f.output("scattered", try f.apply1("scatter_nd", [cleaned, last, try f.apply1("slice", [cleaned, f.use(zero), f.use(one), f.use(zero)])]))
        try g.b.add(f)
        let model = try g.b.build()
        for (batchSize, length) in [(2, 7), (1, 5)] {
            let ids = NDArray(shape: [batchSize, length], scalars: (0 ..< batchSize * length).map { Int64(($0 * 7) % 30) })
            let mask = NDArray(shape: [batchSize, length], scalars: (0 ..< batchSize * length).map { Int64($0 % length < length - 2 ? 1 : 0) })
            try await assertCompilesWithoutReference(model, ["input_ids": ids, "attention_mask": mask], "BERT encoder \(batchSize)x\(length)")
        }
    }
}
