import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// Artifacts for arches this host cannot run, checked as far as it allows: every step of an arm64
/// plan runs here with its kernel's scalar variant of the same tile — the same weight layouts
/// and panel widths, only the instructions differ — and the outputs match the reference
/// interpreter. (`make kernels-check` runs the NEON microkernels themselves under qemu.)
final class ForeignPlanTests: XCTestCase {
    /// The plan with every kernel the host cannot run replaced by the scalar kernel of the same
    /// family and tile.
    func scalarized(_ plan: CompiledPlan) throws -> (CompiledPlan, replaced: Int) {
        var plan = plan
        var replaced = 0
        for f in plan.functions.indices {
            for s in plan.functions[f].steps.indices {
                guard let id = KernelID(wireName: plan.functions[f].steps[s].kernel), !id.isa.isRunnableOnHost else { continue }
                let name = plan.functions[f].steps[s].kernel.replacingOccurrences(of: "__\(id.isa.rawValue)", with: "__scalar")
                let scalar = try XCTUnwrap(KernelID(wireName: name), "no scalar variant \(name) of \(id)")
                XCTAssertEqual(scalar.tile, id.tile)
                plan.functions[f].steps[s].kernel = name
                replaced += 1
            }
        }
        return (plan, replaced)
    }

    func check(_ model: PortableModel, _ function: String, _ inputs: [String: NDArray], label: String, tolerance: Float) throws {
        let reference = try ReferenceInterpreter(model: model, function: function).run(inputs)
        // arm64 tiles (4×8) have scalar twins; x86-64's 6×16 and 8×32 panels run only on their ISAs.
        let foreign = Architecture.all.filter { $0.family == .arm64 && !$0.isRunnableOnHost }
        if foreign.isEmpty { throw XCTSkip("this host runs the arm64 arches natively") }
        for arch in foreign {
            let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 0, count: 32))
            let bytes = CompiledArtifact.serialize(header: header, plan: plan).flatMap { $0 }
            let artifact = try bytes.withUnsafeBytes { raw in
                try CompiledArtifact.read(raw, verifyWeights: true) { ByteStorage(copying: UnsafeRawBufferPointer(rebasing: raw[$0])) }
            }
            let (portable, replaced) = try scalarized(artifact.plan)
            XCTAssertGreaterThan(replaced, 0, "\(label) \(arch.name): no NEON step to replace")
            let index = try XCTUnwrap(portable.model.functions.firstIndex { $0.name == function })
            let outputs = try FunctionExecutor(plan: portable, function: index, threads: 2, frequentReshapes: false).run(inputs)
            for (name, want) in reference {
                let got = try XCTUnwrap(outputs[name], "\(label) \(arch.name): no output \(name)")
                XCTAssertEqual(got.shape, want.shape, "\(label) \(arch.name) \(name)")
                let (g, w) = (got.scalars(as: Float.self), want.scalars(as: Float.self))
                let worst = zip(g, w).map { abs($0 - $1) / (1 + abs($1)) }.max() ?? 0
                XCTAssertLessThanOrEqual(worst, tolerance, "\(label) \(arch.name) \(name)")
            }
        }
    }

    func testForeignPlansOfTheExamplesRunThroughTheirScalarKernels() throws {
        let classifier = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        let features = NDArray(shape: [2, 64], scalars: (0 ..< 128).map { Float(sin(Double($0) * 0.7)) })
        try check(classifier, "main", ["features": features], label: "TinyClassifier", tolerance: 1e-5)
        let encoder = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        let tokens = NDArray(shape: [1, 5], scalars: [Int64(3), 1, 4, 1, 5])
        try check(encoder, "encode", ["tokens": tokens], label: "TinyEncoder", tolerance: 1e-4)
    }

    func testAForeignConvolutionPlanRunsThroughItsScalarKernels() throws {
        let path = "\(sharedModels)/mobilenetv3_orientation.onnx"
        try requireTestModel(path)
        let model = try ONNXImporter.convert(contentsOf: path)
        let input = try XCTUnwrap(model.functions[0].inputs.first)
        var shape: [Int] = []
        for d in input.type.shape { if case .size(let n) = d { shape.append(n) } else { shape.append(1) } }
        let count = shape.reduce(1, *)
        let x = NDArray(shape: shape, scalars: (0 ..< count).map { Float(sin(Double($0) * 0.013)) })
        try check(model, model.functions[0].name, [input.name: x], label: "MobileNetV3", tolerance: 1e-3)
    }
}
