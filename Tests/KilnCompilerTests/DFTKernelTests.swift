import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `dft` and `stft` as a GEMM with twiddles (the `f32_dft` family): real and complex input,
/// one-sided, a transform longer and shorter than the signal, the inverse, a window, a hop that
/// overlaps frames; every arch against the reference interpreter and a sum worked out here.
final class DFTKernelTests: XCTestCase {
    func values(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.83 + seed)) } }

    func testTransformsRunCompiled() async throws {
        var b = ModelBuilder(name: "dft")
        let frameStep = try b.addWeight("step", dtype: .int64, shape: [], bytes: withUnsafeBytes(of: Int64(3).littleEndian) { Array($0) })
        let window = try b.addWeight("window", shape: [8], values: (0 ..< 8).map { Float(0.5 - 0.5 * cos(2 * Double.pi * Double($0) / 8)) })
        var f = b.function("main")
        let real = f.input("real", TensorType(.float32, [2, 5, 12, 1]))
        let complex = f.input("complex", TensorType(.float32, [3, 10, 2]))
        let audio = f.input("audio", TensorType(.float32, [2, 40]))
        f.output("rfft", try f.apply1("dft", [real], ["onesided": .int(1)], name: "rfft"))
        f.output("padded", try f.apply1("dft", [real], ["dft_length": .int(16), "onesided": .int(1)], name: "padded"))
        f.output("cut", try f.apply1("dft", [real], ["dft_length": .int(7)], name: "cut"))
        f.output("cfft", try f.apply1("dft", [complex], [:], name: "cfft"))
        f.output("ifft", try f.apply1("dft", [complex], ["inverse": .int(1)], name: "ifft"))
        f.output("spectrogram", try f.apply1("stft", [audio, f.use(frameStep), f.use(window)], name: "spectrogram"))
        try b.add(f)
        let model = try b.build()
        let inputs = ["real": NDArray(shape: [2, 5, 12, 1], scalars: values(120, 1)), "complex": NDArray(shape: [3, 10, 2], scalars: values(60, 2)),
                      "audio": NDArray(shape: [2, 40], scalars: values(80, 3))]
        // Bin 1 of the first complex row, summed here from the definition: Σ x[t]·e^{−2πi·t/10}.
        let c = values(60, 2)
        var (re, im) = (0.0, 0.0)
        for t in 0 ..< 10 {
            let (xr, xi, theta) = (Double(c[2 * t]), Double(c[2 * t + 1]), -2 * Double.pi * Double(t) / 10)
            re += xr * cos(theta) - xi * sin(theta)
            im += xr * sin(theta) + xi * cos(theta)
        }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all {
            let path = "\(dir)/dft.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            guard arch.isRunnableOnHost else { continue }
            let got = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
            XCTAssertEqual(got["spectrogram"]?.shape, [2, 11, 5, 2])
            XCTAssertEqual(got["padded"]?.shape, [2, 5, 9, 2])
            let bin = try XCTUnwrap(got["cfft"]).scalars(as: Float.self)
            XCTAssertEqual(Double(bin[2]), re, accuracy: 1e-4)
            XCTAssertEqual(Double(bin[3]), im, accuracy: 1e-4)
        }
    }
}
