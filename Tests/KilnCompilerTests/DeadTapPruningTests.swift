import Foundation
@testable import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `dead_tap_pruning`: dilated windows on maps smaller than their reach keep only the taps that
/// read inside the map, and the compiled result equals the reference interpreter's on the
/// uncut model.
final class DeadTapPruningTests: XCTestCase {
    func testLiveTapRanges() {
        // ASPP on a 33×33 map: dilation 36 leaves the centre; with 24 and 12 every tap reads inside for some pixel.
        XCTAssertEqual(DeadTapPruning.liveRange(size: 33, window: 3, stride: 1, dilation: 36, before: 36, output: 33), 1 ... 1)
        XCTAssertNil(DeadTapPruning.liveRange(size: 33, window: 3, stride: 1, dilation: 24, before: 24, output: 33))
        XCTAssertNil(DeadTapPruning.liveRange(size: 33, window: 3, stride: 1, dilation: 12, before: 12, output: 33))
        // Length 1: only the centre of any dilated window.
        XCTAssertEqual(DeadTapPruning.liveRange(size: 1, window: 5, stride: 1, dilation: 2, before: 4, output: 1), 2 ... 2)
        // Stride larger than the window, pads only on one side: the last tap reads past the end.
        XCTAssertEqual(DeadTapPruning.liveRange(size: 4, window: 3, stride: 5, dilation: 4, before: 0, output: 1), 0 ... 0)
        XCTAssertNil(DeadTapPruning.liveRange(size: 8, window: 1, stride: 1, dilation: 1, before: 0, output: 8))
    }

    func testDilatedHeadsRunAsTheirLiveTaps() async throws {
        var b = ModelBuilder(name: "aspp")
        let values: [Float] = (0 ..< 216).map { (i: Int) -> Float in Float((i * 37) % 23) / 23 - 0.5 }
        let w = try b.addWeight("w", shape: [6, 4, 3, 3], values: values)
        let grouped = try b.addWeight("g", shape: [4, 1, 3, 3], values: Array(values.prefix(36)))
        let bias = try b.addWeight("b", shape: [6], values: [0.1, -0.2, 0.3, 0, 0.5, -0.6])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 4, 5, 7]))
        for (name, d, pads) in [("d8", [8, 8], [8, 8, 8, 8]), ("rows", [6, 2], [6, 2, 6, 2]), ("one_side", [4, 4], [0, 0, 8, 8])] {
            f.output(name, try f.apply1("conv", [x, f.use(w), f.use(bias)], ["dilations": .ints(d), "pads": .ints(pads)], name: name))
        }
        f.output("depthwise", try f.apply1("conv", [x, f.use(grouped)], ["dilations": .ints([9, 9]), "pads": .ints([9, 9, 9, 9]), "group": .int(4)],
                                           name: "depthwise"))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: try XCTUnwrap(Architecture.host))
        try DeadTapPruning().apply(to: &unit)
        let shapes = Dictionary(uniqueKeysWithValues: unit.model.functions[0].operations.map { ($0.name, unit.weight($0.inputs[1])?.shape ?? []) })
        XCTAssertEqual(shapes["d8"], [6, 4, 1, 1])
        XCTAssertEqual(shapes["rows"], [6, 4, 1, 3], "rows dilated by 6 on a 5-row map: the centre row only")
        XCTAssertEqual(shapes["one_side"], [6, 4, 2, 2], "no pads before: the last row and column of taps read past the end")
        XCTAssertEqual(shapes["depthwise"], [4, 1, 1, 1])
        let pixels: [Float] = (0 ..< 140).map { (i: Int) -> Float in Float((i * 11) % 17) - 8 }
        let inputs = ["x": NDArray(shape: [1, 4, 5, 7], scalars: pixels)]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try await assertEveryArchMatchesReference(model, inputs: inputs, label: "aspp", in: dir)
    }

    /// Dilated convs whose taps each read inside the map for some pixels but mostly read padding
    /// (the channels-last step then multiplies only the taps that land inside), with a fused
    /// activation, a stride, batch 2, and rows where no tap lands inside (bias and activation of
    /// zero), against the reference interpreter.
    func testMostlyPaddingWindowsMatchReference() async throws {
        var b = ModelBuilder(name: "sparse")
        let values: [Float] = (0 ..< 40 * 20 * 9).map { (i: Int) -> Float in Float((i * 37) % 29) / 29 - 0.5 }
        let w = try b.addWeight("w", shape: [40, 20, 3, 3], values: values)
        let w2 = try b.addWeight("w2", shape: [40, 20, 2, 2], values: Array(values.prefix(40 * 20 * 4)))
        let bias = try b.addWeight("b", shape: [40], values: (0 ..< 40).map { Float($0 % 7) * 0.1 - 0.3 })
        var f = b.function("main")
        // Channels-last in and out, as TensorFlow exports are, so the convs run channels-last.
        let input = f.input("x", TensorType(.float32, [2, 6, 6, 20]))
        let x = try f.apply1("transpose", [input], ["perm": .ints([0, 3, 1, 2])])
        let variants: [(String, Weight, [String: AttributeValue])] = [
            ("d4", w, ["dilations": .ints([4, 4]), "pads": .ints([4, 4, 4, 4])]),
            ("stride", w, ["dilations": .ints([5, 3]), "pads": .ints([5, 3, 5, 3]), "strides": .ints([2, 1])]),
            ("empty_rows", w2, ["dilations": .ints([3, 5]), "pads": .ints([12, 5, 0, 5])]),
        ]
        for (name, weight, attributes) in variants {
            let y = try f.apply1("conv", [x, f.use(weight), f.use(bias)], attributes, name: name)
            f.output(name, try f.apply1("transpose", [try f.apply1("relu", [y])], ["perm": .ints([0, 2, 3, 1])]))
        }
        try b.add(f)
        let model = try b.build()
        let pixels: [Float] = (0 ..< 2 * 20 * 36).map { (i: Int) -> Float in Float((i * 11) % 17) / 4 - 2 }
        let inputs = ["x": NDArray(shape: [2, 6, 6, 20], scalars: pixels)]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all where arch.isRunnableOnHost {
            let path = "\(dir)/sparse.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            let kernels = try CompiledArtifact.read(at: path, verifyWeights: true).plan.functions[0].steps.map(\.kernel)
            XCTAssertEqual(kernels.filter { $0.hasPrefix("f32_conv2d_nhwc") }.count, 3, "\(arch.name): \(kernels)")
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
        }
        // Tap ranges per output position: dilation 4 with pad 4 on 6 pixels.
        let taps = ConvNHWCStep.validTaps(out: 6, size: 6, kernel: 3, stride: 1, dilation: 4, pad: 4)
        XCTAssertEqual(taps.map { [$0.0, $0.1] }, [[1, 3], [1, 3], [1, 2], [1, 2], [0, 2], [0, 2]])
    }
}
