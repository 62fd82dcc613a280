import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// Attention and GELU written as their parts, as PyTorch and Hugging Face exports spell them:
/// recognized by `attention_fusion` and `gelu_fusion` (the q, k, v projections merged by
/// `projection_fusion`), compiled, and compared with the reference interpreter running the
/// unfused graph.
final class TransformerFusionTests: XCTestCase {
    enum KeyForm { case direct, swapped }

    /// One encoder attention block: projections, heads split by reshape/transpose, scores scaled
    /// by `div` (or `mul`), an additive [B, 1, 1, S] mask (or none), softmax, values, heads merged,
    /// then GELU of an output projection written as erf parts.
    /// `inferred`: reshape targets with -1 for the heads and the merged width, and a reshape to
    /// the same shape after the values (as Whisper exports write them).
    func model(heads: Int, d: Int, key: KeyForm, mulScale: Bool, mask: Bool, inferred: Bool = false) throws -> PortableModel {
        var rng = SplitMix64(seed: 11)
        func values(_ n: Int) -> [Float] { (0 ..< n).map { _ in Float(rng.unit() - 0.5) } }
        let width = heads * d
        var b = ModelBuilder(name: "attn")
        let wq = try b.addWeight("wq", shape: [width, width], values: values(width * width))
        let wk = try b.addWeight("wk", shape: [width, width], values: values(width * width))
        let wv = try b.addWeight("wv", shape: [width, width], values: values(width * width))
        let wo = try b.addWeight("wo", shape: [width, width], values: values(width * width))
        let biases = try ["bq", "bk", "bv"].map { try b.addWeight($0, shape: [width], values: values(width)) }
        let c = try b.addWeight("c", shape: [], values: [mulScale ? 1 / Float(d).squareRoot() : Float(d).squareRoot()])
        let root2 = try b.addWeight("root2", shape: [], values: [Float(2).squareRoot()])
        let one = try b.addWeight("one", shape: [], values: [1])
        let half = try b.addWeight("half", shape: [], values: [0.5])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["batch", "seq", .size(width)]))
        let m = f.input("mask", TensorType(.float32, ["batch", .size(1), .size(1), "seq"]))
        func split(_ v: ValueRef, _ perm: [Int]) throws -> ValueRef {
            let r = try f.apply("reshape", [v], ["shape": .ints([0, 0, inferred ? -1 : heads, d])],
                                outputTypes: [TensorType(.float32, ["batch", "seq", .size(heads), .size(d)])])[0]
            return try f.apply1("transpose", [r], ["perm": .ints(perm)])
        }
        // Projections with biases (added as exported: bias first), merged into one GEMM by projection_fusion.
        func project(_ w: Weight, _ bias: Weight) throws -> ValueRef { try f.apply1("add", [f.use(bias), try f.apply1("matmul", [x, f.use(w)])]) }
        let q = try split(try project(wq, biases[0]), [0, 2, 1, 3])
        let kProj = try project(wk, biases[1])
        let kt = key == .direct ? try split(kProj, [0, 2, 3, 1])
                                : try f.apply1("transpose", [try split(kProj, [0, 2, 1, 3])], ["perm": .ints([0, 1, 3, 2])])
        let v = try split(try project(wv, biases[2]), [0, 2, 1, 3])
        var s = try f.apply1("matmul", [q, kt])
        s = try f.apply1(mulScale ? "mul" : "div", [s, f.use(c)])
        if mask { s = try f.apply1("add", [s, m]) }
        let p = try f.apply1("softmax", [s], ["axis": .int(-1)])
        var values = try f.apply1("matmul", [p, v])
        if inferred { values = try f.apply1("reshape", [values], ["shape": .ints([0, 0, 0, 0])]) }
        let ctx = try f.apply1("transpose", [values], ["perm": .ints([0, 2, 1, 3])])
        let merged = try f.apply("reshape", [ctx], ["shape": .ints([0, 0, inferred ? -1 : width])],
                                 outputTypes: [TensorType(.float32, ["batch", "seq", .size(width)])])[0]
        let o = try f.apply1("matmul", [merged, f.use(wo)])
        // GELU as exported: 0.5 · o · (1 + erf(o / √2)).
        let e = try f.apply1("erf", [try f.apply1("div", [o, f.use(root2)])])
        // (With `inferred`, as dynamo exports write it: o · (0.5 · (1 + erf(o / √2))).)
        let g = inferred ? try f.apply1("mul", [o, try f.apply1("mul", [f.use(half), try f.apply1("add", [e, f.use(one)])])])
            : try f.apply1("mul", [try f.apply1("mul", [o, try f.apply1("add", [e, f.use(one)])]), f.use(half)])
        f.output("y", g)
        if !mask { f.output("mask_unused", m) }
        try b.add(f)
        return try b.build()
    }

    func testAttentionAndGELUPartsFuseAndMatch() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 5)
        for (heads, d, key, mulScale, mask, inferred) in [(4, 8, KeyForm.direct, false, true, false), (3, 20, .swapped, true, true, false),
                                                          (2, 16, .direct, false, false, false), (2, 8, .direct, true, true, true)] {
            let model = try self.model(heads: heads, d: d, key: key, mulScale: mulScale, mask: mask, inferred: inferred)
            let label = "heads \(heads) d \(d) \(key) \(mulScale ? "mul" : "div") mask \(mask) inferred \(inferred)"
            var unit = CompilationUnit(model: model, arch: runnableArchitectures.last!)
            try GeluFusion().apply(to: &unit)
            try AttentionFusion().apply(to: &unit)
            let types = unit.model.functions[0].operations.map(\.opType)
            XCTAssertEqual(types.filter { $0 == "attention" }.count, 1, "\(label): \(types)")
            XCTAssertEqual(types.filter { $0 == "gelu" }.count, 1, "\(label): \(types)")
            XCTAssertFalse(types.contains("softmax") || types.contains("transpose") || types.contains("erf"), "\(label): \(types)")
            for (batch, seq) in [(1, 5), (2, 19)] {
                let x = NDArray(shape: [batch, seq, heads * d], scalars: (0 ..< batch * seq * heads * d).map { _ in Float(rng.unit() * 2 - 1) })
                // Padded keys masked with a large negative value, as encoders do.
                let m = NDArray(shape: [batch, 1, 1, seq], scalars: (0 ..< batch * seq).map { $0 % seq >= seq - 2 && $0 >= seq ? Float(-1e9) : 0 })
                for arch in runnableArchitectures {
                    let path = "\(dir)/a.\(arch.name).compiled"
                    try compileArtifact(model, arch, to: path)
                    let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
                    let kernels = artifact.plan.functions[0].steps.map(\.kernel)
                    XCTAssertTrue(kernels.contains { $0.hasPrefix("f32_attention") }, "\(label) \(arch.name): \(kernels)")
                    // One GEMM for q, k and v, one for the output projection.
                    XCTAssertEqual(kernels.filter { $0.hasPrefix("f32_gemm") }.count, 2, "\(label) \(arch.name): \(kernels)")
                    try assertNoReferenceSteps(path, "\(label) \(arch.name)")
                    _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: ["x": x, "mask": m],
                                                                 label: "\(label) \(arch.name) [\(batch), \(seq)]")
                }
            }
        }
    }
}
