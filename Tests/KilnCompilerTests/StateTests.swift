import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// Stateful runs (``InferenceState``): a decoder's key/value cache kept in place between runs,
/// checked against the reference interpreter run with the cache passed explicitly.
final class StateTests: XCTestCase {
    /// Grouped-query attention over a cache that grows, as decoder exports write it: the new
    /// keys and values concatenated after the past ones (`present_k`, `present_v`, also
    /// returned), repeated over the query heads (`unsqueeze` → `expand` → `reshape`, whose shape
    /// a `shape` op reads too), scores scaled and masked, softmax, weighted sum; plus a counter
    /// (`count` → `count + 1`), a state that is not a concat.
    static func decoder() throws -> PortableModel {
        var b = ModelBuilder(name: "stateful")
        let c = try b.addWeight("c", shape: [], values: [0.25])
        let one = try b.addWeight("one", shape: [1], values: [1])
        var f = b.function("main")
        let (p, s) = (KilnFormat.Dimension.symbol("past"), KilnFormat.Dimension.symbol("seq"))
        let total = KilnFormat.Dimension.symbol("past + seq")
        let q = f.input("q", TensorType(.float32, [.size(1), .size(6), s, .size(16)]))
        let k = f.input("k", TensorType(.float32, [.size(1), .size(2), s, .size(16)]))
        let v = f.input("v", TensorType(.float32, [.size(1), .size(2), s, .size(8)]))
        let m = f.input("mask", TensorType(.float32, [.size(1), .size(1), s, total]))
        let pastK = f.input("past_k", TensorType(.float32, [.size(1), .size(2), p, .size(16)]))
        let pastV = f.input("past_v", TensorType(.float32, [.size(1), .size(2), p, .size(8)]))
        let count = f.input("count", TensorType(.float32, [.size(1)]))
        let presentK = try f.apply1("concat", [pastK, k], ["axis": .int(2)])
        let presentV = try f.apply1("concat", [pastV, v], ["axis": .int(-2)])
        func repeated(_ x: ValueRef, _ d: Int) throws -> ValueRef {
            let wide = try f.apply1("expand", [try f.apply1("unsqueeze", [x], ["axes": .ints([2])])], ["shape": .ints([1, 1, 3, 1, 1])])
            return try f.apply("reshape", [wide], ["shape": .ints([0, 6, -1, d])], outputTypes: [TensorType(.float32, [.size(1), .size(6), total, .size(d)])])[0]
        }
        let rk = try repeated(presentK, 16)
        let kt = try f.apply1("transpose", [rk], ["perm": .ints([0, 1, 3, 2])])
        let scores = try f.apply1("add", [try f.apply1("mul", [try f.apply1("matmul", [q, kt]), f.use(c)]), m])
        let y = try f.apply1("matmul", [try f.apply1("softmax", [scores], ["axis": .int(-1)]), try repeated(presentV, 8)])
        // The key length read off the repeated keys' and the past's shapes, as exports do.
        let lengths = try f.apply1("concat", [try f.apply1("shape", [rk]), try f.apply1("shape", [pastK])], ["axis": .int(0)])
        f.output("y", y)
        f.output("lengths", lengths)
        f.output("present_k", presentK)
        f.output("present_v", presentV)
        f.output("count_next", try f.apply1("add", [count, f.use(one)]))
        try b.add(f)
        var model = try b.build()
        model.functions[0].states = try StatePair.pairs(rule: "past_*=present_*,count=count_next", in: model.functions[0])
        try model.validate()
        return model
    }

    static func random(_ shape: [Int], _ rng: inout SplitMix64) -> NDArray {
        NDArray(shape: shape, scalars: (0 ..< shape.reduce(1, *)).map { _ in Float(rng.unit() * 2 - 1) })
    }

    /// The inputs of step `step`: a prefill of 3 rows first, then one row a step; a causal mask
    /// over the `past` rows before and the new ones.
    static func inputs(step: Int, past: Int, _ rng: inout SplitMix64) -> [String: NDArray] {
        let rows = step == 0 ? 3 : 1
        let mask = (0 ..< rows * (past + rows)).map { i -> Float in i % (past + rows) > past + i / (past + rows) ? -1e9 : 0 }
        return ["q": Self.random([1, 6, rows, 16], &rng), "k": Self.random([1, 2, rows, 16], &rng), "v": Self.random([1, 2, rows, 8], &rng),
                "mask": NDArray(shape: [1, 1, rows, past + rows], scalars: mask)]
    }

    /// 100 steps with the cache kept in place agree with the interpreter given the cache; the
    /// cache is never copied whole per step (only grown, doubling); a reset starts again.
    func testCacheKeptInPlaceMatchesReference() async throws {
        let model = try Self.decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        for threads in [1, 2] {
            var options = ModelLoadOptions()
            options.threads = threads
            let function = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
            let executor = try XCTUnwrap(function.runner as? FunctionExecutor)
            let state = try function.makeState()
            XCTAssertEqual(state.inPlaceInputs, ["past_k", "past_v"])
            var rng = SplitMix64(seed: 5)
            var past = ["past_k": NDArray(shape: [1, 2, 0, 16], scalars: [Float]()), "past_v": NDArray(shape: [1, 2, 0, 8], scalars: [Float]()),
                        "count": NDArray(shape: [1], scalars: [Float(0)])]
            var first: NDArray?
            for step in 0 ..< 101 {
                let given = Self.inputs(step: step, past: past["past_k"]!.shape[2], &rng)
                let got = try await function.run(inputs: given, state: state)
                let want = try reference.run(given.merging(past) { a, _ in a })
                XCTAssertEqual(got.names, ["y", "lengths"])
                assertMatches(got["y"], want["y"]!, "step \(step) threads \(threads)")
                XCTAssertEqual(got["lengths"]?.scalars(as: Int64.self), want["lengths"]?.scalars(as: Int64.self))
                if step == 0 { first = got["y"] }
                past = ["past_k": want["present_k"]!, "past_v": want["present_v"]!, "count": want["count_next"]!]
            }
            // The appended entries are the inputs' bits.
            XCTAssertEqual(state.value(forInput: "past_k")?.scalars(as: Float.self), past["past_k"]!.scalars(as: Float.self))
            XCTAssertEqual(state.value(forInput: "past_v")?.scalars(as: Float.self), past["past_v"]!.scalars(as: Float.self))
            XCTAssertEqual(state.value(forInput: "count")?.scalars(as: Float.self), [101])
            // Grown twice (64, 128 entries), the first run's values taken whole: far less than a
            // copy of the cache per step (103 entries of 2·(16 + 8) floats at the end).
            let cache = 103 * 2 * (16 + 8) * 4
            XCTAssertLessThanOrEqual(state.copiedBytes, 2 * cache)
            XCTAssertEqual(state.appendedBytes, 100 * 2 * (16 + 8) * 4)
            XCTAssertEqual(executor.genericRuns.value, 1)
            for r in executor.planReports { XCTAssertEqual(r.fallbacks, []) }
            // Per room of the cache (64, then 128 entries), three sizes derived and the rest bound
            // to one symbolic plan.
            XCTAssertEqual(executor.symbolic.made, 2, "threads \(threads)")
            XCTAssertGreaterThanOrEqual(executor.symbolic.runs.value, 90, "threads \(threads)")
            state.reset()
            var again = SplitMix64(seed: 5)
            let restarted = try await function.run(inputs: Self.inputs(step: 0, past: 0, &again), state: state)
            XCTAssertEqual(restarted["y"]?.scalars(as: Float.self), first?.scalars(as: Float.self))
            XCTAssertEqual(state.value(forInput: "count")?.scalars(as: Float.self), [1])
        }
    }

    /// Two states of one function are independent; the reference interpreter runs states too
    /// (passed back as arrays); wrong uses are refused with the function's name.
    func testStatesAreIndependentAndChecked() async throws {
        let model = try Self.decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
        let interpreted = InferenceFunction(try ReferenceInterpreter(model: model, function: "main"))
        let (a, b, r) = (try compiled.makeState(), try compiled.makeState(), try interpreted.makeState())
        XCTAssertEqual(r.inPlaceInputs, [])
        var (ra, rb) = (SplitMix64(seed: 1), SplitMix64(seed: 2))
        for step in 0 ..< 12 {
            let length = step == 0 ? 0 : step + 2
            let (ia, ib) = (Self.inputs(step: step, past: length, &ra), Self.inputs(step: step, past: length, &rb))
            let ya = try await compiled.run(inputs: ia, state: a)
            let yb = try await compiled.run(inputs: ib, state: b)
            let yr = try await interpreted.run(inputs: ia, state: r)
            assertMatches(ya["y"], yr["y"]!, "step \(step)")
            XCTAssertNotEqual(ya["y"]?.scalars(as: Float.self), yb["y"]?.scalars(as: Float.self))
        }
        XCTAssertEqual(a.value(forInput: "past_k")?.scalars(as: Float.self), r.value(forInput: "past_k")?.scalars(as: Float.self))
        var rng = SplitMix64(seed: 3)
        var given = Self.inputs(step: 0, past: 0, &rng)
        given["count"] = NDArray(shape: [1], scalars: [Float(0)])
        let state = try compiled.makeState()
        await assertThrowsInference(try await compiled.run(inputs: given, state: state), "input 'count' is a state")
        await assertThrowsInference(try await compiled.run(inputs: Self.inputs(step: 1, past: 5, &rng), state: state), "mask")
        XCTAssertThrowsError(try compiled.makeState(pairs: [StatePair(input: "count", output: "present_v")])) { e in
            XCTAssertTrue("\(e)".contains("present_v"), "\(e)")
        }
        XCTAssertThrowsError(try compiled.makeState(pairs: [])) { e in XCTAssertTrue("\(e)".contains("no state"), "\(e)") }
    }

    func assertThrowsInference(_ body: @autoclosure () async throws -> InferenceOutputs, _ text: String, line: UInt = #line) async {
        do {
            _ = try await body()
            XCTFail("no error", line: line)
        } catch {
            XCTAssertTrue(error is InferenceError && "\(error)".contains(text), "\(error)", line: line)
        }
    }

    /// State rules: one `*` on both sides or none; every rule must match.
    func testStateRules() throws {
        let f = try Self.decoder().functions[0]
        XCTAssertEqual(try StatePair.pairs(rule: "past_*=present_*", in: f), [StatePair(input: "past_k", output: "present_k"), StatePair(input: "past_v", output: "present_v")])
        XCTAssertThrowsError(try StatePair.pairs(rule: "past_*=present", in: f))
        XCTAssertThrowsError(try StatePair.pairs(rule: "cache.*=present_*", in: f))
        XCTAssertThrowsError(try StatePair.pairs(rule: "past_*=gone_*", in: f))
        XCTAssertThrowsError(try f.checkStates([StatePair(input: "count", output: "lengths")])) { e in XCTAssertTrue("\(e)".contains("int64"), "\(e)") }
        XCTAssertThrowsError(try f.checkStates([StatePair(input: "past_k", output: "present_k"), StatePair(input: "past_v", output: "present_k")]))
    }

    /// ONNX `Attention` with a past cache (opset 23, imported as one `attention` op returning the
    /// presents): compiled as two appends and the attention kernel, its presents kept in place as
    /// state; 40 steps agree with the interpreter given the cache, with nothing on the reference path.
    func testOnnxAttentionWithPastKeepsStateInPlace() async throws {
        var b = ModelBuilder(name: "onnx_attention")
        var f = b.function("main")
        let (p, s) = (KilnFormat.Dimension.symbol("past"), KilnFormat.Dimension.symbol("seq"))
        let total = KilnFormat.Dimension.symbol("past + seq")
        let q = f.input("q", TensorType(.float32, [.size(1), .size(4), s, .size(16)]))
        let k = f.input("k", TensorType(.float32, [.size(1), .size(2), s, .size(16)]))
        let v = f.input("v", TensorType(.float32, [.size(1), .size(2), s, .size(8)]))
        let m = f.input("mask", TensorType(.float32, [.size(1), .size(1), s, total]))
        let pastK = f.input("past_k", TensorType(.float32, [.size(1), .size(2), p, .size(16)]))
        let pastV = f.input("past_v", TensorType(.float32, [.size(1), .size(2), p, .size(8)]))
        let out = try f.apply("attention", [q, k, v, m, pastK, pastV], ["q_num_heads": .int(4), "kv_num_heads": .int(2)],
                              outputTypes: [TensorType(.float32, [.size(1), .size(4), s, .size(8)]),
                                            TensorType(.float32, [.size(1), .size(2), total, .size(16)]),
                                            TensorType(.float32, [.size(1), .size(2), total, .size(8)])])
        let (state, past) = try await decodeWithState(b, f, out, "onnx attention with past", seed: 9, steps: 40) { step, old, rng in
            var given = Self.inputs(step: step, past: old, &rng)
            given["q"] = Self.random([1, 4, given["k"]!.shape[2], 16], &rng)
            return given
        }
        XCTAssertEqual(state.value(forInput: "past_v")?.scalars(as: Float.self), past["past_v"]!.scalars(as: Float.self))
    }

    /// Attention as onnxruntime's GroupQueryAttention imports it: 3-D `[B, S, H·D]` q, k, v with
    /// grouped heads and a boolean mask over 4-D pasts whose head sizes are named dims (as
    /// onnxruntime-genai's builder writes them). Compiled, it runs the attention kernel on heads
    /// split from the tokens; a fresh state takes the head sizes from the keys and values it is
    /// concatenated with, and 30 steps agree with the interpreter given the cache.
    func testGroupedTokensAttentionStateTakesNamedHeadSizes() async throws {
        var b = ModelBuilder(name: "grouped_tokens")
        var f = b.function("main")
        let (p, s) = (KilnFormat.Dimension.symbol("past"), KilnFormat.Dimension.symbol("seq"))
        let total = KilnFormat.Dimension.symbol("past + seq")
        let q = f.input("q", TensorType(.float32, [.size(1), s, .size(4 * 16)]))
        let k = f.input("k", TensorType(.float32, [.size(1), s, .size(2 * 16)]))
        let v = f.input("v", TensorType(.float32, [.size(1), s, .size(2 * 8)]))
        let m = f.input("mask", TensorType(.bool, [.size(1), .size(1), s, total]))
        let pastK = f.input("past_k", TensorType(.float32, [.size(1), .size(2), p, .symbol("head_k")]))
        let pastV = f.input("past_v", TensorType(.float32, [.size(1), .size(2), p, .symbol("head_v")]))
        let out = try f.apply("attention", [q, k, v, m, pastK, pastV], ["q_num_heads": .int(4), "kv_num_heads": .int(2)],
                              outputTypes: [TensorType(.float32, [.size(1), s, .size(4 * 8)]),
                                            TensorType(.float32, [.size(1), .size(2), total, .symbol("head_k")]),
                                            TensorType(.float32, [.size(1), .size(2), total, .symbol("head_v")])])
        let (state, _) = try await decodeWithState(b, f, out, "grouped 3-D attention with past", seed: 11, steps: 30) { step, old, rng in
            let rows = step == 0 ? 3 : 1
            let allowed = (0 ..< rows * (old + rows)).map { i in i % (old + rows) <= old + i / (old + rows) }
            return ["q": Self.random([1, rows, 64], &rng), "k": Self.random([1, rows, 32], &rng), "v": Self.random([1, rows, 16], &rng),
                    "mask": NDArray(shape: [1, 1, rows, old + rows], scalars: allowed)]
        }
        XCTAssertEqual(state.value(forInput: "past_k")?.shape, [1, 2, 32, 16])
    }

    /// Finishes an attention function (`y` and the presents as outputs, `past_*=present_*` as
    /// state), compiles it for the host (no reference step), and runs `steps` decode steps of
    /// `given(step, past length, rng)` with the cache kept in place, each against the interpreter
    /// given the cache. Returns the state and the last presents as the interpreter computed them.
    func decodeWithState(_ builder: ModelBuilder, _ function: FunctionBuilder, _ out: [ValueRef], _ label: String, seed: UInt64, steps: Int,
                         given: (Int, Int, inout SplitMix64) -> [String: NDArray]) async throws -> (InferenceState, [String: NDArray]) {
        var (b, f) = (builder, function)
        f.output("y", out[0])
        f.output("present_k", out[1])
        f.output("present_v", out[2])
        try b.add(f)
        var model = try b.build()
        model.functions[0].states = try StatePair.pairs(rule: "past_*=present_*", in: model.functions[0])
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        try assertNoReferenceSteps(path, label)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
        let state = try compiled.makeState()
        XCTAssertEqual(state.inPlaceInputs, ["past_k", "past_v"])
        var rng = SplitMix64(seed: seed)
        var past = ["past_k": NDArray(shape: [1, 2, 0, 16], scalars: [Float]()), "past_v": NDArray(shape: [1, 2, 0, 8], scalars: [Float]())]
        for step in 0 ..< steps {
            let inputs = given(step, past["past_k"]!.shape[2], &rng)
            let got = try await compiled.run(inputs: inputs, state: state)
            let want = try reference.run(inputs.merging(past) { a, _ in a })
            assertMatches(got["y"], want["y"]!, "\(label) step \(step)")
            past = ["past_k": want["present_k"]!, "past_v": want["present_v"]!]
        }
        return (state, past)
    }
}
