import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// The kernels of ops real exporters emit around indexing and detection — `gather_elements`,
/// `scatter_elements`, `cumsum`, `assume`, integer reductions, `non_zero`,
/// `non_max_suppression` — compiled for every arch and checked against values worked out by
/// hand and against the reference interpreter; and shape plans for functions whose shapes
/// their data decides (counts, branches): planned, checked on every run, planned again or run
/// generically when a run's data gives other shapes.
final class IndexKernelTests: XCTestCase {
    static func bytes<T>(_ values: [T]) -> [UInt8] { values.withUnsafeBytes { Array($0) } }

    func testIndexingKernelsRunCompiled() async throws {
        var b = ModelBuilder(name: "indexing")
        let axis = try b.addWeight("axis", dtype: .int64, shape: [], bytes: Self.bytes([Int64(1)]))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [3, 4]))
        let idx = f.input("idx", TensorType(.int64, [3, 2]))
        let u = f.input("u", TensorType(.float32, [3, 2]))
        let n = f.input("n", TensorType(.int64, [2, 3]))
        let m = f.input("m", TensorType(.int32, [2, 3]))
        let ok = f.input("ok", TensorType(.bool, [2]))
        f.output("gathered", try f.apply1("gather_elements", [x, idx], ["axis": .int(1)], name: "gathered"))
        f.output("written", try f.apply1("scatter_elements", [x, idx, u], ["axis": .int(1)], name: "written"))
        f.output("added", try f.apply1("scatter_elements", [x, idx, u], ["axis": .int(1), "reduction": .string("add")], name: "added"))
        f.output("sums", try f.apply1("cumsum", [x, f.use(axis)], name: "sums"))
        f.output("back", try f.apply1("cumsum", [x, f.use(axis)], ["exclusive": .int(1), "reverse": .int(1)], name: "back"))
        f.output("int_sums", try f.apply1("cumsum", [n, f.use(axis)], name: "int_sums"))
        f.output("mins", try f.apply1("reduce_min", [n], ["axes": .ints([1]), "keepdims": .int(0)], name: "mins"))
        f.output("prods", try f.apply1("reduce_prod", [m], ["axes": .ints([0]), "keepdims": .int(0)], name: "prods"))
        f.output("checked", try f.apply1("assume", [x, ok], ["message": .string("x must be checked")], name: "checked"))
        f.output("where", try f.apply1("non_zero", [n], name: "where"))
        try b.add(f)
        let model = try b.build()
        let xs = (0 ..< 12).map { Float($0) }
        let inputs = [
            "x": NDArray(shape: [3, 4], scalars: xs),
            "idx": NDArray(shape: [3, 2], scalars: [Int64(3), 0, -1, -1, 1, 2]),
            "u": NDArray(shape: [3, 2], scalars: [Float(100), 200, 300, 400, 500, 600]),
            "n": NDArray(shape: [2, 3], scalars: [Int64(5), 0, -7, 0, 0, 1 << 40]),
            "m": NDArray(shape: [2, 3], scalars: [Int32(2), -3, 0, 5, 7, 9]),
            "ok": NDArray(shape: [2], scalars: [true, true]),
        ]
        // Worked out from the definitions.
        let floats: [String: [Float]] = [
            "gathered": [3, 0, 7, 7, 9, 10],
            "written": [200, 1, 2, 100, 4, 5, 6, 400, 8, 500, 600, 11],
            "added": [200, 1, 2, 103, 4, 5, 6, 707, 8, 509, 610, 11],
            "sums": [0, 1, 3, 6, 4, 9, 15, 22, 8, 17, 27, 38],
            "back": [6, 5, 3, 0, 18, 13, 7, 0, 30, 21, 11, 0],
            "checked": xs,
        ]
        let ints: [String: [Int64]] = [
            "int_sums": [5, 5, -2, 0, 0, 1 << 40], "mins": [-7, 0],
            "where": [0, 0, 1, 0, 2, 2],
        ]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all {
            let path = "\(dir)/indexing.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            guard arch.isRunnableOnHost else { continue }
            let got = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
            for (name, want) in floats { XCTAssertEqual(got[name]?.scalars(as: Float.self), want, "\(arch.name) \(name)") }
            for (name, want) in ints { XCTAssertEqual(got[name]?.scalars(as: Int64.self), want, "\(arch.name) \(name)") }
            XCTAssertEqual(got["prods"]?.scalars(as: Int32.self), [10, -21, 0], arch.name)
            // A false condition is the run's error, with the op's message.
            let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path))
            let fn = try await compiled.loadFunction(named: "main")!
            var bad = inputs
            bad["ok"] = NDArray(shape: [2], scalars: [true, false])
            for _ in 0 ..< 2 {
                do {
                    _ = try await fn.run(inputs: bad)
                    XCTFail("\(arch.name): a false assumption ran")
                } catch {
                    XCTAssertTrue("\(error)".contains("x must be checked"), "\(error)")
                }
            }
        }
    }

    /// Boxes of two classes kept apart by an offset (as exporters batch per-class NMS), scores
    /// with ties, a score threshold and a per-class limit, corners given either way round and as
    /// centers.
    func testNonMaxSuppressionRunsCompiled() async throws {
        var b = ModelBuilder(name: "nms")
        let limit = try b.addWeight("limit", dtype: .int64, shape: [1], bytes: Self.bytes([Int64(3)]))
        let iou = try b.addWeight("iou", shape: [1], values: [0.5])
        let threshold = try b.addWeight("threshold", shape: [1], values: [0.1])
        var f = b.function("main")
        let boxes = f.input("boxes", TensorType(.float32, [1, 6, 4]))
        let scores = f.input("scores", TensorType(.float32, [1, 2, 6]))
        let inputs3 = [f.use(limit), f.use(iou), f.use(threshold)]
        f.output("corners", try f.apply1("non_max_suppression", [boxes, scores] + inputs3, name: "corners"))
        f.output("centers", try f.apply1("non_max_suppression", [boxes, scores] + inputs3, ["center_point_box": .int(1)], name: "centers"))
        f.output("all", try f.apply1("non_max_suppression", [boxes, scores], name: "all"))
        try b.add(f)
        let model = try b.build()
        // Box 1 overlaps box 0 with IoU 0.81 (suppressed), box 2 is box 0 with its corners swapped
        // (IoU 1), box 3 is far away, box 4 overlaps box 3 with IoU 1/3 (kept), box 5 is tiny.
        let corners: [Float] = [0, 0, 10, 10, 1, 1, 10, 10, 10, 10, 0, 0, 100, 100, 110, 110, 100, 105, 110, 115, 50, 50, 51, 51]
        let scoreValues: [Float] = [0.9, 0.8, 0.7, 0.9, 0.6, 0.05,
                                    0.2, 0.3, 0.3, 0.5, 0.5, 0.4]
        let inputs = ["boxes": NDArray(shape: [1, 6, 4], scalars: corners), "scores": NDArray(shape: [1, 2, 6], scalars: scoreValues)]
        // Class 0: 0 and 3 tie at 0.9 (lower index first), 1 and 2 suppressed by 0, then 4; 5 is
        // under the threshold. Class 1: 3 and 4 tie at 0.5, then 5 (0.4); the limit of 3 stops it.
        let want: [Int64] = [0, 0, 0, 0, 0, 3, 0, 0, 4, 0, 1, 3, 0, 1, 4, 0, 1, 5]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for arch in Architecture.all {
            let path = "\(dir)/nms.\(arch.name).compiled"
            try compileArtifact(model, arch, to: path)
            try assertNoReferenceSteps(path, arch.name)
            guard arch.isRunnableOnHost else { continue }
            let got = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: arch.name)
            XCTAssertEqual(got["corners"]?.scalars(as: Int64.self), want, arch.name)
            XCTAssertEqual(got["all"]?.shape, [0, 3], "no limit input: no boxes")
        }
    }

    /// Kernels newer than the oldest runtime allowed to load the artifact are not chosen: with
    /// minimum runtime 0.6 the ops of the 0.7 families get the reference kernel and still run.
    func testKernelsFollowTheMinimumRuntime() async throws {
        var b = ModelBuilder(name: "old")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 3]))
        f.output("sums", try f.apply1("cumsum", [x], ["axis": .int(1)], name: "sums"))
        f.output("hits", try f.apply1("non_zero", [x], name: "hits"))
        try b.add(f)
        let model = try b.build()
        let arch = try XCTUnwrap(Architecture.host)
        var options = Compiler.Options(arch: arch)
        XCTAssertEqual(try Compiler.compile(model, options: options, sourceDigest: []).1.functions[0].steps.map(\.kernel), ["cumsum__scalar", "non_zero__scalar"])
        options.minimumRuntime = RuntimeVersion(0, 6)
        let (header, plan) = try Compiler.compile(model, options: options, sourceDigest: [])
        XCTAssertEqual(header.minimumRuntime, RuntimeVersion(0, 6))
        XCTAssertEqual(plan.functions[0].steps.map(\.kernel), ["reference", "reference"])
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        _ = try CompiledArtifact.write(header: header, plan: plan, to: "\(dir)/old.compiled")
        let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: "\(dir)/old.compiled"))
        let got = try await compiled.loadFunction(named: "main")!.run(inputs: ["x": NDArray(shape: [2, 3], scalars: [Float(1), 0, 2, 0, 3, 0])])
        XCTAssertEqual(got["sums"]?.scalars(as: Float.self), [1, 1, 3, 0, 3, 3])
        XCTAssertEqual(got["hits"]?.scalars(as: Int64.self), [0, 0, 1, 0, 2, 1])
    }

    /// A plan is built for the counts of the first run; runs whose data selects other counts are
    /// right (done again generically), and a signature whose counts keep changing stops being
    /// planned.
    func testCountsFromDataAreCheckedOnEveryPlannedRun() async throws {
        var b = ModelBuilder(name: "counts")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 3]))
        let hits = try f.apply1("non_zero", [x], name: "hits")
        f.output("hits", hits)
        f.output("twice", try f.apply1("add", [hits, hits], name: "twice"))
        try b.add(f)
        let model = try b.build()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arch = try XCTUnwrap(Architecture.host)
        try compileArtifact(model, arch, to: "\(dir)/c.compiled")
        let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: "\(dir)/c.compiled"))
        let fn = try await compiled.loadFunction(named: "main")!
        let executor = try XCTUnwrap(fn.runner as? FunctionExecutor)
        let cases: [([Float], [Int64])] = [
            ([1, 0, 0, 0, 0, 2], [0, 1, 0, 2]),
            ([1, 0, 0, 0, 0, 2], [0, 1, 0, 2]),
            ([0, 3, 4, 0, 0, 0], [0, 0, 1, 2]),
            ([0, 0, 0, 0, 0, 0], []),
            ([-0.0, 5, 0, 6, 0, 7], [0, 1, 1, 1, 0, 2]),
            ([1, 1, 1, 1, 1, 1], [0, 0, 0, 1, 1, 1, 0, 1, 2, 0, 1, 2]),
        ]
        for (run, (values, want)) in cases.enumerated() {
            let got = try await fn.run(inputs: ["x": NDArray(shape: [2, 3], scalars: values)])
            XCTAssertEqual(got["hits"]?.shape, [2, want.count / 2], "run \(run)")
            XCTAssertEqual(got["hits"]?.scalars(as: Int64.self), want, "run \(run)")
            XCTAssertEqual(got["twice"]?.scalars(as: Int64.self), want.map { $0 * 2 }, "run \(run)")
            if run == 1 { XCTAssertNil(executor.planReports.first?.generic, "the second run with the same counts is planned") }
        }
        let report = try XCTUnwrap(executor.planReports.first)
        XCTAssertTrue(report.generic?.contains("changed between runs") ?? false, "\(String(describing: report.generic))")
    }

    /// `resize` to the input's own size is a copy (a detector's transform resizing a 320×320
    /// image to 320×320 crashed the run).
    func testResizeToTheSameSizeIsACopy() async throws {
        var b = ModelBuilder(name: "same")
        let sizes = try b.addWeight("sizes", dtype: .int64, shape: [4], bytes: Self.bytes([Int64(1), 3, 8, 8]))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 3, 8, 8]))
        f.output("y", try f.apply1("resize", [x, nil, nil, f.use(sizes)], ["mode": .string("linear")], name: "y"))
        try b.add(f)
        let model = try b.build()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let arch = try XCTUnwrap(Architecture.host)
        try compileArtifact(model, arch, to: "\(dir)/r.compiled")
        let values = (0 ..< 192).map { Float($0) / 7 }
        let got = try await assertCompiledMatchesReference(model, artifact: "\(dir)/r.compiled", function: "main",
                                                           inputs: ["x": NDArray(shape: [1, 3, 8, 8], scalars: values)], label: "same size")
        XCTAssertEqual(got["y"]?.scalars(as: Float.self), values)
    }
}
