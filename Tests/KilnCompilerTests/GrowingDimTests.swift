import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// A function whose input grows one row per run (a decoder's past) gets plans derived from the
/// previous size instead of a generic run per size, and once three sizes have grown alike, one
/// symbolic plan bound to each later size: every size agrees with the interpreter, and bit for
/// bit with a plan recorded from a generic run of the same size.
final class GrowingDimTests: XCTestCase {
    func floats(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.61 + seed) * 2) } }

    /// Attention over a cache that grows: concat of past and new rows, scores, softmax, the
    /// weighted sum; a reshape whose target is shape arithmetic on the grown length, a `range`
    /// over it (folded per size), and the grown cache returned as an output.
    func decoder() throws -> PortableModel {
        var b = ModelBuilder(name: "decoder")
        let zero = try b.addWeight("zero", dtype: .int64, shape: [1], bytes: withUnsafeBytes(of: Int64(0).littleEndian) { Array($0) })
        let one = try b.addWeight("one", dtype: .int64, shape: [1], bytes: withUnsafeBytes(of: Int64(1).littleEndian) { Array($0) })
        let minusOne = try b.addWeight("minus_one", dtype: .int64, shape: [1], bytes: withUnsafeBytes(of: Int64(-1).littleEndian) { Array($0) })
        let w = try b.addWeight("w", dtype: .float32, shape: [8, 8], bytes: floats(64, 0.3).flatMap { v in withUnsafeBytes(of: v.bitPattern.littleEndian) { Array($0) } })
        let w2 = try b.addWeight("w2", dtype: .float32, shape: [8, 3], bytes: floats(24, 0.7).flatMap { v in withUnsafeBytes(of: v.bitPattern.littleEndian) { Array($0) } })
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, "s", 8]))
        let past = f.input("past", TensorType(.float32, [1, "p", 8]))
        let q = try f.apply1("matmul", [x, f.use(w)])
        let kv = try f.apply1("concat", [past, q], ["axis": .int(1)])
        let scores = try f.apply1("matmul", [q, try f.apply1("transpose", [kv], ["perm": .ints([0, 2, 1])])])
        // Positions 0 ..< p + s, from the grown cache's shape, scaled into the scores.
        let length = try f.apply1("gather", [try f.apply1("shape", [kv]), f.use(one)], ["axis": .int(0)])
        let positions = try f.apply1("cast", [try f.apply1("range", [try f.apply1("squeeze", [f.use(zero)], ["axes": .ints([0])]),
                                                                      try f.apply1("squeeze", [length], ["axes": .ints([0])]),
                                                                      try f.apply1("squeeze", [f.use(one)], ["axes": .ints([0])])])], ["to": .dtype(.float32)])
        let biased = try f.apply1("add", [scores, try f.apply1("mul", [positions, try f.apply1("cast", [length], ["to": .dtype(.float32)])])])
        let attention = try f.apply1("matmul", [try f.apply1("softmax", [biased], ["axis": .int(-1)]), kv])
        // Flattened to [p + s, 8] through a shape built from the length, then back.
        let flat = try f.apply1("reshape", [kv, try f.apply1("concat", [length, f.use(minusOne)], ["axis": .int(0)])])
        f.output("y", try f.apply1("add", [attention, try f.apply1("reduce_mean", [flat], ["axes": .ints([0]), "keepdims": .int(1)])]))
        f.output("present", kv)
        // A second projection of the same kind with another weight: planned apart from the first.
        f.output("z", try f.apply1("matmul", [attention, f.use(w2)]))
        try b.add(f)
        return try b.build()
    }

    func testGrowingPastDerivesPlans() async throws {
        let model = try decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        var runs: [Bool: [InferenceOutputs]] = [:]
        for frequent in [false, true] {
            var options = ModelLoadOptions()
            options.expectFrequentReshapes = frequent
            let function = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
            let executor = try XCTUnwrap(function.runner as? FunctionExecutor)
            // A prefill of 4 rows on an empty past, then 100 single-row steps on the growing cache.
            var past = NDArray(shape: [1, 0, 8], scalars: [Float]())
            for step in 0 ..< 101 {
                let rows = step == 0 ? 4 : 1
                let inputs = ["x": NDArray(shape: [1, rows, 8], scalars: floats(rows * 8, Double(step))), "past": past]
                let got = try await function.run(inputs: inputs)
                let want = try reference.run(inputs)
                assertMatches(got["y"], want["y"]!, "step \(step) frequent \(frequent)")
                assertMatches(got["present"], want["present"]!, "present, step \(step)")
                assertMatches(got["z"], want["z"]!, "z, step \(step)")
                runs[frequent, default: []].append(got)
                past = got["present"]!
            }
            // Only the first size was recorded; the next three were derived (none fell back), and
            // then a symbolic plan covered 64 steps, and another the rest from three more derived.
            let reports = executor.planReports
            XCTAssertFalse(reports.isEmpty)
            for r in reports {
                XCTAssertNil(r.generic)
                XCTAssertEqual(r.fallbacks, [])
            }
            XCTAssertEqual(executor.genericRuns.value, 1, "frequent \(frequent)")
            XCTAssertEqual(executor.symbolic.made, 2, "frequent \(frequent)")
            XCTAssertEqual(executor.symbolic.refused, 0)
            XCTAssertGreaterThanOrEqual(executor.symbolic.runs.value, 92, "frequent \(frequent)")
        }
        // The same bits with either policy, and as a plan recorded for that size alone.
        for (a, b) in zip(runs[false]!, runs[true]!) { XCTAssertEqual(a["y"]?.contiguous().scalars(as: Float.self), b["y"]?.contiguous().scalars(as: Float.self)) }
        for step in [1, 2, 37, 100] {
            let fresh = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
            let inputs = ["x": NDArray(shape: [1, 1, 8], scalars: floats(8, Double(step))), "past": runs[false]![step - 1]["present"]!]
            _ = try await fresh.run(inputs: inputs)
            let recorded = try await fresh.run(inputs: inputs)
            XCTAssertEqual(recorded["y"]?.contiguous().scalars(as: Float.self), runs[false]![step]["y"]?.contiguous().scalars(as: Float.self), "step \(step)")
        }
    }

    /// With a core the runs leave free (one thread), the plan for the next size is derived on
    /// another thread while a run goes on once two steps have grown alike, and the symbolic plan
    /// that follows is bound to the next size there too; each run gives the bits of a plan
    /// recorded for its size alone.
    func testGrowingPastPlansAhead() async throws {
        guard ProcessInfo.processInfo.activeProcessorCount > 1 else {
            throw XCTSkip("plans are derived ahead only with a core the runs leave free; this machine has one")
        }
        let model = try decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        var options = ModelLoadOptions()
        options.threads = 1
        let function = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
        let executor = try XCTUnwrap(function.runner as? FunctionExecutor)
        XCTAssertTrue(executor.speculation.enabled)
        var past = NDArray(shape: [1, 0, 8], scalars: [Float]())
        var runs: [InferenceOutputs] = []
        for step in 0 ..< 101 {
            let rows = step == 0 ? 4 : 1
            let inputs = ["x": NDArray(shape: [1, rows, 8], scalars: floats(rows * 8, Double(step))), "past": past]
            let got = try await function.run(inputs: inputs)
            assertMatches(got["y"], try reference.run(inputs)["y"]!, "step \(step)")
            runs.append(got)
            past = got["present"]!
        }
        // Run 3 grew as the two before it did: the plan for run 4 is derived ahead (run 4 takes it
        // if it is ready before the symbolic plan made from runs 1-3 serves), and that symbolic
        // plan covers the next 64 sizes (nothing derived ahead); past them, the same once more.
        executor.speculation.settle()
        XCTAssertEqual(executor.speculation.derivedAhead, 2)
        XCTAssertLessThanOrEqual(executor.speculation.used, 2)
        XCTAssertEqual(executor.symbolic.made, 2)
        XCTAssertEqual(executor.genericRuns.value, 1)
        XCTAssertGreaterThanOrEqual(executor.symbolic.runs.value, 92)
        for step in [3, 50, 100] {
            let fresh = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
            let inputs = ["x": NDArray(shape: [1, 1, 8], scalars: floats(8, Double(step))), "past": runs[step - 1]["present"]!]
            let recorded = try await fresh.run(inputs: inputs)
            XCTAssertEqual(recorded["y"]?.contiguous().scalars(as: Float.self), runs[step]["y"]?.contiguous().scalars(as: Float.self), "step \(step)")
            XCTAssertEqual(recorded["z"]?.contiguous().scalars(as: Float.self), runs[step]["z"]?.contiguous().scalars(as: Float.self), "step \(step)")
        }
    }

    /// Sizes that go up and down (and to zero) run plans derived from whichever plan came last,
    /// buffers kept where they fit: each agrees with the interpreter. With one thread, plans are
    /// also derived ahead for sizes grown as the last two runs grew them, and some of those
    /// guesses are wrong.
    func testSizesUpAndDown() async throws {
        let model = try decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        for threads in [0, 1] {
            var options = ModelLoadOptions()
            if threads > 0 { options.threads = threads }
            let function = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
            for (k, (rows, past)) in [(2, 5), (1, 9), (1, 13), (1, 17), (3, 0), (1, 40), (5, 2), (1, 9), (2, 17), (1, 1), (4, 33)].enumerated() {
                let inputs = ["x": NDArray(shape: [1, rows, 8], scalars: floats(rows * 8, Double(k))),
                              "past": NDArray(shape: [1, past, 8], scalars: floats(past * 8, Double(k) + 0.5))]
                let got = try await function.run(inputs: inputs)
                let want = try reference.run(inputs)
                assertMatches(got["y"], want["y"]!, "rows \(rows) past \(past) threads \(threads)")
                assertMatches(got["present"], want["present"]!, "present, rows \(rows) past \(past)")
            }
        }
    }

    /// Shapes decided by data (`non_zero`) are not derived: each new signature is recorded, and
    /// a run whose data changes the count is planned again; results stay right.
    func testDataDecidedShapesAreRecorded() async throws {
        var b = ModelBuilder(name: "hits")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n"]))
        f.output("hits", try f.apply1("non_zero", [try f.apply1("relu", [x])]))
        try b.add(f)
        let model = try b.build()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        let function = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
        for (n, seed) in [(5, 0.0), (6, 1.0), (7, 2.0), (6, 3.0), (9, 4.0)] {
            let inputs = ["x": NDArray(shape: [n], scalars: floats(n, seed))]
            let got = try await function.run(inputs: inputs)
            XCTAssertEqual(got["hits"]?.scalars(as: Int64.self), try reference.run(inputs)["hits"]?.scalars(as: Int64.self), "n \(n)")
        }
    }
}
