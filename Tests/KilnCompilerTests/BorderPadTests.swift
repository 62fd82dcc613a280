import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `pad` in reflect, edge and wrap modes runs as compiled copies: against a case worked out by
/// hand and the reference interpreter on every arch, borders on several axes at once, wrap wider
/// than its axis, negative amounts (crops) with positive ones.
final class BorderPadTests: XCTestCase {
    func testBorderModesRunCompiled() async throws {
        var b = ModelBuilder(name: "pads")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 3, 4]))
        let v = f.input("v", TensorType(.float32, [4]))
        f.output("reflect", try f.apply1("pad", [x], ["mode": .string("reflect"), "pads": .ints([0, 2, 3, 0, 1, 2])], name: "reflect"))
        f.output("edge", try f.apply1("pad", [x], ["mode": .string("edge"), "pads": .ints([1, 0, 2, 1, 3, 0])], name: "edge"))
        f.output("wrap", try f.apply1("pad", [x], ["mode": .string("wrap"), "pads": .ints([0, 4, 6, 0, 2, 9])], name: "wrap"))
        f.output("v_reflect", try f.apply1("pad", [v], ["mode": .string("reflect"), "pads": .ints([3, 2])], name: "v_reflect"))
        f.output("v_edge", try f.apply1("pad", [v], ["mode": .string("edge"), "pads": .ints([2, 1])], name: "v_edge"))
        f.output("v_wrap", try f.apply1("pad", [v], ["mode": .string("wrap"), "pads": .ints([5, 3])], name: "v_wrap"))
        // Negative amounts crop before the positive ones pad.
        f.output("v_edge_crop", try f.apply1("pad", [v], ["mode": .string("edge"), "pads": .ints([-1, 2])], name: "v_edge_crop"))
        f.output("v_reflect_crop", try f.apply1("pad", [v], ["mode": .string("reflect"), "pads": .ints([2, -1])], name: "v_reflect_crop"))
        f.output("edge_crop", try f.apply1("pad", [x], ["mode": .string("edge"), "pads": .ints([0, -1, 1, 0, 1, -2])], name: "edge_crop"))
        try b.add(f)
        let model = try b.build()
        let inputs = ["x": NDArray(shape: [2, 3, 4], scalars: (0 ..< 24).map { Float($0) }), "v": NDArray(shape: [4], scalars: [Float(1), 2, 3, 4])]
        // Worked out from the definitions of the modes.
        let byHand: [String: [Float]] = [
            "v_reflect": [4, 3, 2, 1, 2, 3, 4, 3, 2],
            "v_edge": [1, 1, 1, 2, 3, 4, 4],
            "v_wrap": [4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3],
            "v_edge_crop": [2, 3, 4, 4, 4],
            "v_reflect_crop": [3, 2, 1, 2, 3],
        ]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all {
            let path = "\(dir)/pads.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            guard arch.isRunnableOnHost else { continue }
            let got = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
            for (name, want) in byHand { XCTAssertEqual(got[name]?.scalars(as: Float.self), want, "\(arch.name) \(name)") }
        }
    }
}
