import Foundation
@testable import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// Attention over operands already split into heads `[B, H, S, D]` (timm, torchvision and SDPA
/// exports): recognized by `attention_fusion`, run by the compiled `f32_attention` kernel on the
/// GEMM microkernels, and compared with the reference interpreter running the unfused graph.
/// Also the kernel on its own through 4-D grouped-query `attention` ops, and `where`'s
/// broadcasting rows.
final class HeadsAttentionTests: XCTestCase {
    enum KeyForm { case swapped, flattened }

    /// `matmul(q·c₁, kᵀ·c₂)`, an optional additive mask, softmax, an optional
    /// `where(isnan(p), 0, p)`, `matmul(p, v)`.
    func model(heads: Int, d: Int, dv: Int, keys: KeyForm, mask: Bool, nanCleanup: Bool) throws -> PortableModel {
        var b = ModelBuilder(name: "heads")
        let c = try b.addWeight("c", shape: [], values: [Float(pow(Double(d), -0.25))])
        let zero = try b.addWeight("zero", shape: [1], values: [0])
        var f = b.function("main")
        // The flattened key form reshapes through [B·H, S, D], so its sizes are fixed.
        let (batch, seq, kv): (KilnFormat.Dimension, KilnFormat.Dimension, KilnFormat.Dimension) = keys == .flattened ? (.size(2), .size(7), .size(11)) : ("batch", "seq", "kv")
        let q = f.input("q", TensorType(.float32, [batch, .size(heads), seq, .size(d)]))
        let k = f.input("k", TensorType(.float32, [batch, .size(heads), kv, .size(d)]))
        let v = f.input("v", TensorType(.float32, [batch, .size(heads), kv, .size(dv)]))
        let m = f.input("mask", TensorType(.float32, [batch, .size(1), seq, kv]))
        var kt: ValueRef
        switch keys {
        case .swapped:
            kt = try f.apply1("transpose", [k], ["perm": .ints([0, 1, 3, 2])])
        case .flattened:
            let (bs, kvs) = (batch.size!, kv.size!)
            let flat = try f.apply("reshape", [k], ["shape": .ints([bs * heads, kvs, d])],
                                   outputTypes: [TensorType(.float32, [.size(bs * heads), .size(kvs), .size(d)])])[0]
            let swapped = try f.apply1("transpose", [flat], ["perm": .ints([0, 2, 1])])
            kt = try f.apply("reshape", [swapped], ["shape": .ints([bs, heads, d, kvs])],
                             outputTypes: [TensorType(.float32, [.size(bs), .size(heads), .size(d), .size(kvs)])])[0]
        }
        kt = try f.apply1("mul", [kt, f.use(c)])
        var s = try f.apply1("matmul", [try f.apply1("mul", [f.use(c), q]), kt])
        if mask { s = try f.apply1("add", [m, s]) }
        var p = try f.apply1("softmax", [s], ["axis": .int(-1)])
        if nanCleanup { p = try f.apply1("where", [try f.apply1("is_nan", [p]), f.use(zero), p]) }
        f.output("y", try f.apply1("matmul", [p, v]))
        if !mask { f.output("mask_unused", m) }
        try b.add(f)
        return try b.build()
    }

    func testHeadsAttentionFusesAndMatchesOnEdgeShapes() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 23)
        func random(_ shape: [Int]) -> NDArray { NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { _ in Float(rng.unit() * 4 - 2) }) }
        let cases: [(heads: Int, d: Int, dv: Int, keys: KeyForm, mask: Bool, nan: Bool, sizes: [(Int, Int, Int)])] = [
            (2, 20, 12, .swapped, true, true, [(1, 1, 1), (2, 5, 19), (1, 9, 33)]),
            (3, 1, 17, .swapped, false, false, [(1, 7, 3), (2, 1, 16)]),
            (1, 64, 64, .swapped, true, false, [(1, 13, 40)]),
            (2, 8, 8, .flattened, true, true, [(2, 7, 11)]),
        ]
        for t in cases {
            let model = try self.model(heads: t.heads, d: t.d, dv: t.dv, keys: t.keys, mask: t.mask, nanCleanup: t.nan)
            let label = "heads \(t.heads) d \(t.d) dv \(t.dv) \(t.keys) mask \(t.mask) nan \(t.nan)"
            var unit = CompilationUnit(model: model, arch: runnableArchitectures.last!)
            try AttentionFusion().apply(to: &unit)
            let types = unit.model.functions[0].operations.map(\.opType)
            XCTAssertEqual(types.filter { $0 == "attention" }.count, 1, "\(label): \(types)")
            XCTAssertFalse(types.contains("softmax") || types.contains("matmul") || types.contains("is_nan"), "\(label): \(types)")
            for (batch, seq, kv) in t.sizes {
                // Masks: padded keys at -1e9; with the NaN cleanup, a whole query row at -inf (a row of zeros).
                let m = NDArray(shape: [batch, 1, seq, kv], scalars: (0 ..< batch * seq * kv).map { i in
                    if t.nan && i < kv { return -Float.infinity }
                    return i % kv >= kv - 2 && i % kv > 0 ? -1e9 : 0
                })
                let inputs = ["q": random([batch, t.heads, seq, t.d]), "k": random([batch, t.heads, kv, t.d]),
                              "v": random([batch, t.heads, kv, t.dv]), "mask": m]
                for arch in runnableArchitectures {
                    let path = "\(dir)/h.\(arch.name).compiled"
                    _ = try compileArtifact(model, arch, to: path)
                    let kernels = try CompiledArtifact.read(at: path, verifyWeights: true).plan.functions[0].steps.map(\.kernel)
                    XCTAssertTrue(kernels.contains { $0.hasPrefix("f32_attention") }, "\(label) \(arch.name): \(kernels)")
                    try assertNoReferenceSteps(path, "\(label) \(arch.name)")
                    let out = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs,
                                                                       label: "\(label) \(arch.name) [\(batch), \(seq), \(kv)]")
                    if t.nan, let y = out["y"] {
                        XCTAssertTrue(y.scalars(as: Float.self).prefix(seq == 0 ? 0 : t.dv).allSatisfy { $0 == 0 }, "\(label): a fully masked row gives zeros")
                    }
                }
            }
        }
    }

    /// An older minimum runtime keeps the unfused steps (the 4-D form needs runtime 0.8).
    func testHeadsAttentionWaitsForItsRuntime() throws {
        let model = try self.model(heads: 2, d: 8, dv: 8, keys: .swapped, mask: true, nanCleanup: false)
        var unit = CompilationUnit(model: model, arch: runnableArchitectures.last!)
        unit.minimumRuntime = RuntimeVersion(0, 7)
        try AttentionFusion().apply(to: &unit)
        XCTAssertFalse(unit.model.functions[0].operations.contains { $0.opType == "attention" })
    }

    /// 4-D `attention` with fewer key than query heads (grouped-query) and a broadcast mask,
    /// against the reference kernel of the op.
    func testGroupedQueryAttentionMatchesReference() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 29)
        func random(_ shape: [Int]) -> NDArray { NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { _ in Float(rng.unit() * 2 - 1) }) }
        var b = ModelBuilder(name: "gqa")
        var f = b.function("main")
        let q = f.input("q", TensorType(.float32, ["batch", .size(4), "seq", .size(24)]))
        let k = f.input("k", TensorType(.float32, ["batch", .size(2), "kv", .size(24)]))
        let v = f.input("v", TensorType(.float32, ["batch", .size(2), "kv", .size(40)]))
        let m = f.input("mask", TensorType(.float32, [.size(1), "seq", "kv"]))
        f.output("y", try f.apply1("attention", [q, k, v, m], ["scale": .float(0.3)]))
        try b.add(f)
        let model = try b.build()
        for (batch, seq, kv) in [(1, 1, 5), (2, 6, 21)] {
            let mask = NDArray(shape: [1, seq, kv], scalars: (0 ..< seq * kv).map { $0 % kv == kv - 1 ? -1e9 : Float($0 % 3) * 0.1 })
            let inputs = ["q": random([batch, 4, seq, 24]), "k": random([batch, 2, kv, 24]), "v": random([batch, 2, kv, 40]), "mask": mask]
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: "gqa [\(batch), \(seq), \(kv)]", in: dir)
        }
    }

    /// Grouped-query keys and values repeated over the query heads as decoder exports spell it
    /// (`unsqueeze` → `expand` → `reshape`): fused into one 4-D attention over the unrepeated
    /// operands (no expand left to copy them), matching the unfused graph on every arch.
    func testRepeatedKeyValueHeadsFuseWithoutCopies() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 37)
        func random(_ shape: [Int]) -> NDArray { NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { _ in Float(rng.unit() * 2 - 1) }) }
        var b = ModelBuilder(name: "repeat_kv")
        let c = try b.addWeight("c", shape: [], values: [0.25])
        var f = b.function("main")
        let (batch, seq, kv): (KilnFormat.Dimension, KilnFormat.Dimension, KilnFormat.Dimension) = ("batch", "seq", "kv")
        let q = f.input("q", TensorType(.float32, [batch, .size(6), seq, .size(16)]))
        let k = f.input("k", TensorType(.float32, [batch, .size(2), kv, .size(16)]))
        let v = f.input("v", TensorType(.float32, [batch, .size(2), kv, .size(8)]))
        let m = f.input("mask", TensorType(.float32, [batch, .size(1), seq, kv]))
        func repeated(_ x: ValueRef, _ d: Int) throws -> ValueRef {
            let wide = try f.apply1("expand", [try f.apply1("unsqueeze", [x], ["axes": .ints([2])])], ["shape": .ints([1, 1, 3, 1, 1])])
            return try f.apply("reshape", [wide], ["shape": .ints([0, 6, -1, d])], outputTypes: [TensorType(.float32, [batch, .size(6), kv, .size(d)])])[0]
        }
        let kt = try f.apply1("transpose", [try repeated(k, 16)], ["perm": .ints([0, 1, 3, 2])])
        let s = try f.apply1("add", [try f.apply1("mul", [try f.apply1("matmul", [q, kt]), f.use(c)]), m])
        f.output("y", try f.apply1("matmul", [try f.apply1("softmax", [s], ["axis": .int(-1)]), try repeated(v, 8)]))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: runnableArchitectures.last!)
        try AttentionFusion().apply(to: &unit)
        let ops = unit.model.functions[0].operations
        XCTAssertEqual(ops.map(\.opType), ["attention"])
        XCTAssertEqual(ops.first?.inputs, ["q", "k", "v", "mask"])
        for (batch, seq, kv) in [(1, 1, 1), (2, 5, 19), (1, 3, 70)] {
            let mask = NDArray(shape: [batch, 1, seq, kv], scalars: (0 ..< batch * seq * kv).map { $0 % kv == kv - 1 && kv > 1 ? Float(-1e9) : 0 })
            let inputs = ["q": random([batch, 6, seq, 16]), "k": random([batch, 2, kv, 16]), "v": random([batch, 2, kv, 8]), "mask": mask]
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: "repeated kv [\(batch), \(seq), \(kv)]", in: dir)
        }
    }

    /// `where` on 1-, 4- and 8-byte elements, every operand broadcast in turn, rows split across threads.
    func testWhereBroadcastRowsMatchReference() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var b = ModelBuilder(name: "where")
        var f = b.function("main")
        let c = f.input("c", TensorType(.bool, [.size(3), .size(1), "n"]))
        let x = f.input("x", TensorType(.float32, [.size(1), .size(5), "n"]))
        let z = f.input("z", TensorType(.float32, [.size(3), .size(5), .size(1)]))
        let i = f.input("i", TensorType(.int64, [.size(5), "n"]))
        let j = f.input("j", TensorType(.int64, []))
        let bx = f.input("bx", TensorType(.bool, ["n"]))
        f.output("f", try f.apply1("where", [c, x, z]))
        f.output("g", try f.apply1("where", [c, i, j]))
        f.output("h", try f.apply1("where", [c, bx, try f.apply1("not", [bx])]))
        try b.add(f)
        let model = try b.build()
        var rng = SplitMix64(seed: 31)
        for n in [1, 7, 40_000] {
            let inputs: [String: NDArray] = [
                "c": NDArray(shape: [3, 1, n], scalars: (0 ..< 3 * n).map { _ in rng.unit() < 0.5 }),
                "x": NDArray(shape: [1, 5, n], scalars: (0 ..< 5 * n).map { _ in Float(rng.unit()) }),
                "z": NDArray(shape: [3, 5, 1], scalars: (0 ..< 15).map { Float(-$0) }),
                "i": NDArray(shape: [5, n], scalars: (0 ..< 5 * n).map { Int64($0) }),
                "j": NDArray(scalar: Int64(-7)),
                "bx": NDArray(shape: [n], scalars: (0 ..< n).map { $0 % 3 == 0 }),
            ]
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: "where n \(n)", in: dir)
        }
    }

    /// GPT-2's form: heads split by shape arithmetic that leaves the batch and head dims anonymous,
    /// each of q and kᵀ scaled by √(1/√d) computed from q's shape (a fixed head size: folded at
    /// compile time), the mask made by `where` from a bool. Fused into one attention, no shape
    /// arithmetic left; every arch matches the unfused graph.
    func testAnonymousHeadDimsAndComputedScaleFuse() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var rng = SplitMix64(seed: 41)
        func random(_ shape: [Int]) -> NDArray { NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { _ in Float(rng.unit() * 2 - 1) }) }
        var b = ModelBuilder(name: "gpt2_heads")
        let one = try b.addWeight("one", shape: [1], values: [1])
        let (zero, low) = (try b.addWeight("zero", shape: [1], values: [0]), try b.addWeight("low", shape: [1], values: [-3.4e38]))
        var f = b.function("main")
        let anonymous = KilnFormat.Dimension.symbol("")
        let (seq, kv) = (KilnFormat.Dimension.symbol("seq"), KilnFormat.Dimension.symbol("kv"))
        let q = f.input("q", TensorType(.float32, [anonymous, anonymous, seq, .size(16)]))
        let k = f.input("k", TensorType(.float32, [.symbol("batch"), .size(4), kv, .size(16)]))
        let v = f.input("v", TensorType(.float32, [.symbol("batch"), .size(4), kv, .size(8)]))
        let allowed = f.input("allowed", TensorType(.bool, [anonymous, .size(1), seq, kv]))
        let d = try f.apply1("cast", [try f.apply1("slice", [try f.apply1("shape", [q])], ["starts": .ints([-1]), "ends": .ints([Int(Int64.max)])])], ["to": .dtype(.float32)])
        let c = try f.apply1("sqrt", [try f.apply1("div", [f.use(one), try f.apply1("sqrt", [d])])])
        let kt = try f.apply1("transpose", [k], ["perm": .ints([0, 1, 3, 2])])
        let mask = try f.apply1("where", [allowed, f.use(zero), f.use(low)])
        let s = try f.apply1("add", [try f.apply1("matmul", [try f.apply1("mul", [q, c]), try f.apply1("mul", [kt, c])]), mask])
        f.output("y", try f.apply1("matmul", [try f.apply1("softmax", [s], ["axis": .int(-1)]), v]))
        try b.add(f)
        let model = try b.build()
        var unit = CompilationUnit(model: model, arch: runnableArchitectures.last!)
        for pass in [ConstantFolding.name, AttentionFusion.name, DeadCodeElimination.name] { try Compiler.passes[pass]!.apply(to: &unit) }
        XCTAssertEqual(unit.model.functions[0].operations.map(\.opType), ["where", "attention"])
        for (batch, seq, kv) in [(1, 1, 9), (2, 3, 3)] {
            let allowedValues = NDArray(shape: [batch, 1, seq, kv], scalars: (0 ..< batch * seq * kv).map { $0 % kv <= kv - seq + ($0 / kv) % seq })
            let inputs = ["q": random([batch, 4, seq, 16]), "k": random([batch, 4, kv, 16]), "v": random([batch, 4, kv, 8]), "allowed": allowedValues]
            try await assertEveryArchMatchesReference(model, inputs: inputs, label: "anonymous heads [\(batch), \(seq), \(kv)]", in: dir)
        }
    }
}
