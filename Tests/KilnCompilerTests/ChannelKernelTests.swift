import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
import KilnRuntime
import XCTest

/// Per-channel kernels against the reference interpreter on shapes that split across threads.
final class ChannelKernelTests: XCTestCase {
    /// `instance_norm` with planes split across threads mid batch entry (3 × 5 planes), long
    /// planes whose sums run in lanes, an odd plane length and a plane of one element.
    func testInstanceNormPlanesSplitAcrossThreads() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var b = ModelBuilder(name: "instance")
        let scale = try b.addWeight("scale", shape: [5], values: [1, -0.5, 2, 0.25, 1.5])
        let bias = try b.addWeight("bias", shape: [5], values: [0, 0.1, -0.2, 0.3, -0.4])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", .size(5), "t"]))
        f.output("y", try f.apply1("instance_norm", [x, f.use(scale), f.use(bias)], ["epsilon": .float(1e-5)]))
        try b.add(f)
        let model = try b.build()
        var rng = SplitMix64(seed: 41)
        for (batch, length) in [(3, 3001), (1, 1), (2, 17)] {
            // An offset per plane, so the mean is far from zero as in unnormalized audio features.
            let values = (0 ..< batch * 5 * length).map { i in Float(rng.unit() * 2 - 1) + Float(i / length % 5) * 3 }
            let inputs = ["x": NDArray(shape: [batch, 5, length], scalars: values)]
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: "instance_norm [\(batch), 5, \(length)]", in: dir)
        }
    }
}
