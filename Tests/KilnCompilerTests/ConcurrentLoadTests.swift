import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// One function under load: many callers at once, each with input shapes of its own, and decode
/// sessions with state side by side. Every result equals the one a single caller gets, the plan
/// cache and the arenas stay within their bounds (specs/loading.md). `make sanitize` runs these
/// under ThreadSanitizer with fewer runs (`KILN_LOAD_RUNS`).
final class ConcurrentLoadTests: XCTestCase {
    /// Runs per caller: 10,000, or `KILN_LOAD_RUNS`.
    static let runs = ProcessInfo.processInfo.environment["KILN_LOAD_RUNS"].flatMap(Int.init) ?? 10_000

    /// The inputs of caller `caller`'s `k`-th shape (a CRNN text recognizer: convolutions, pooling,
    /// a bidirectional LSTM over the image's width): two shapes per caller, sixteen in all (twice
    /// the plan cache's capacity, so plans are evicted and rebuilt while other callers run).
    func input(caller: Int, shape k: Int) -> [String: NDArray] {
        let (batch, width) = (1 + caller % 2, 8 + caller + 9 * k)
        let values = (0 ..< batch * 16 * width).map { Float(($0 * 7 + caller * 13 + k * 5) % 23) / 11 - 1 }
        return ["img": NDArray(shape: [batch, 1, 16, width], scalars: values)]
    }

    static func bytes(_ outputs: InferenceOutputs) -> [String: [UInt8]] {
        Dictionary(uniqueKeysWithValues: outputs.map { ($0.name, $0.value.bytes) })
    }

    func testConcurrentCallersWithDistinctShapes() async throws {
        let model = try ONNXImporter.convert(contentsOf: "\(repositoryRoot)/Tests/Fixtures/onnx/models/crnn_recognizer.onnx")
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let (callers, runs) = (8, Self.runs)
        // What one caller alone gets from a planned run, per shape (a function of its own; a
        // shape's first run works shapes out step by step, and its LSTM may round differently).
        var options = ModelLoadOptions()
        options.threads = 1
        let alone = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
        var expected: [[[String: [UInt8]]]] = []
        for caller in 0 ..< callers {
            var shapes: [[String: [UInt8]]] = []
            for k in 0 ..< 2 {
                _ = try await alone.run(inputs: input(caller: caller, shape: k))
                shapes.append(Self.bytes(try await alone.run(inputs: input(caller: caller, shape: k))))
            }
            expected.append(shapes)
        }
        let function = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options).loadFunction(named: "main")!
        let executor = try XCTUnwrap(function.runner as? FunctionExecutor)
        let inputs = (0 ..< callers).map { c in (0 ..< 2).map { input(caller: c, shape: $0) } }
        let wanted = expected
        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for caller in 0 ..< callers {
                group.addTask {
                    var wrong = 0
                    for r in 0 ..< runs {
                        let got = try await function.run(inputs: inputs[caller][r % 2])
                        if Self.bytes(got) != wanted[caller][r % 2] { wrong += 1 }
                    }
                    return wrong
                }
            }
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(mismatches, 0, "runs whose outputs differ from a single caller's")
        // At most the plan cache's eight plans and the current one are kept.
        XCTAssertLessThanOrEqual(executor.planReports.count, 9)
        let (peak, bound) = (executor.arenas.ledger.peakBytes, executor.arenas.bound(overlappingRuns: callers))
        XCTAssertGreaterThan(peak, 0)
        XCTAssertLessThanOrEqual(peak, bound, "arena bytes alive at once")
    }

    /// Four decode sessions of one function, each with its own state and inputs, run side by side
    /// for 60 steps: each gets what it gets run alone.
    func testConcurrentDecodeSessionsWithState() async throws {
        let model = try StateTests.decoder()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let (sessions, steps) = (4, 60)
        func inputs(_ session: Int) -> [[String: NDArray]] {
            var rng = SplitMix64(seed: UInt64(100 + session))
            return (0 ..< steps).map { StateTests.inputs(step: $0, past: $0 == 0 ? 0 : 2 + $0, &rng) }
        }
        let given = (0 ..< sessions).map(inputs)
        @Sendable func decode(_ function: InferenceFunction, _ session: Int) async throws -> [[UInt8]] {
            let state = try function.makeState()
            var out: [[UInt8]] = []
            for step in given[session] { out.append(try await function.run(inputs: step, state: state)["y"]!.bytes) }
            return out
        }
        let alone = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
        var expected: [[[UInt8]]] = []
        for s in 0 ..< sessions { expected.append(try await decode(alone, s)) }
        let shared = try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main")!
        let got = try await withThrowingTaskGroup(of: (Int, [[UInt8]]).self) { group in
            for s in 0 ..< sessions { group.addTask { (s, try await decode(shared, s)) } }
            var out = [[[UInt8]]](repeating: [], count: sessions)
            for try await (s, y) in group { out[s] = y }
            return out
        }
        for s in 0 ..< sessions { XCTAssertEqual(got[s], expected[s], "session \(s)") }
    }
}
