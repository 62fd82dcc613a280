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

    /// Depthwise convs with a channel multiplier (groups = input channels, 2 or 3 filters each,
    /// as FastViT's and MobileOne's downsampling layers are) run on the channels-last depthwise
    /// kernel: stride 2 with a 7×7 window, dilation 2, a bias and relu, 24 channels (AVX-512's
    /// remainder path) and a map large enough to split the channel repeat across threads.
    func testDepthwiseWithChannelMultiplier() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 7)
        func values(_ n: Int) -> [Float] { (0 ..< n).map { _ in Float(rng.unit() * 2 - 1) } }
        for (channels, m, size, kernel, stride, dilation) in [(8, 2, 48, 7, 2, 1), (6, 3, 13, 3, 1, 2), (12, 2, 9, 1, 1, 1)] {
            var b = ModelBuilder(name: "multiplier")
            let w = try b.addWeight("w", shape: [channels * m, 1, kernel, kernel], values: values(channels * m * kernel * kernel))
            let bias = try b.addWeight("b", shape: [channels * m], values: values(channels * m))
            var f = b.function("main")
            // Channels-last in and out, so the conv runs channels-last.
            let input = f.input("x", TensorType(.float32, [1, .size(size), .size(size), .size(channels)]))
            let x = try f.apply1("transpose", [input], ["perm": .ints([0, 3, 1, 2])])
            let pad = (kernel - 1) * dilation / 2
            let y = try f.apply1("conv", [x, f.use(w), f.use(bias)], ["group": .int(channels), "strides": .ints([stride, stride]),
                                                                      "dilations": .ints([dilation, dilation]), "pads": .ints([pad, pad, pad, pad])])
            f.output("y", try f.apply1("transpose", [try f.apply1("relu", [y])], ["perm": .ints([0, 2, 3, 1])]))
            try b.add(f)
            let model = try b.build()
            let inputs = ["x": NDArray(shape: [1, size, size, channels], scalars: values(size * size * channels))]
            let label = "\(channels)×\(m) channels, \(kernel)×\(kernel) stride \(stride) dilation \(dilation)"
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: label, in: dir)
            for arch in runnableArchitectures {
                let path = "\(dir)/m.\(arch.name).compiled"
                _ = try compileArtifact(model, arch, to: path)
                let kernels = try CompiledArtifact.read(at: path, verifyWeights: true).plan.functions[0].steps.map(\.kernel)
                XCTAssertTrue(kernels.contains { $0.hasPrefix("f32_dwconv2d_nhwc") }, "\(label) \(arch.name): \(kernels)")
            }
        }
    }
}
