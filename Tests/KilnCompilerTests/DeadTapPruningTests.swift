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
        for arch in Architecture.all where arch.isRunnableOnHost {
            let path = "\(dir)/aspp.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
        }
    }
}
