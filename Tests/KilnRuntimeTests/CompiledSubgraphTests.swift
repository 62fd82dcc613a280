import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// Control-flow bodies run compiled: a stored weight the body captures is compiled into it
/// (packed like the function's own), so its convolution runs a compiled kernel, not the
/// reference kernel, and its results are the reference interpreter's.
final class CompiledSubgraphTests: XCTestCase {
    func testCapturedWeightsAreCompiledIntoTheBody() throws {
        guard let arch = Architecture.host else { throw XCTSkip("this CPU has no Kiln architecture") }
        let values = (0 ..< 36).map { Float(sin(Double($0) * 0.9)) * 0.5 }
        let w = Weight(name: "w", dtype: .float32, shape: [4, 3, 3],
                       encoding: .dense(WeightBlob(dtype: .float32, shape: [4, 3, 3], data: ByteStorage(values.withUnsafeBytes { Array($0) }))))
        // Body inputs: a run-time value, then the two captures (a run-time gate and the weight).
        let body = Function(
            name: "then_branch",
            inputs: [Argument(name: "x", type: TensorType(.float32, [1, 3, 10])), Argument(name: "gate", type: TensorType(.float32, [1])),
                     Argument(name: "kernel", type: TensorType(.float32, [4, 3, 3]))],
            outputs: [Argument(name: "out", type: TensorType(.float32, [1, 4, 8]), value: "y")],
            operations: [
                Operation(opType: "conv", name: "conv", inputs: ["x", "kernel"], outputs: [Value(name: "c", type: TensorType(.float32, [1, 4, 8]))]),
                Operation(opType: "mul", name: "gated", inputs: ["c", "gate"], outputs: [Value(name: "y", type: TensorType(.float32, [1, 4, 8]))]),
            ])
        let sub = try CompiledSubgraph(body, arch: arch, threads: 1, captured: [nil, nil, w])
        XCTAssertEqual(sub.constantInputs, [2])
        XCTAssertFalse(sub.executor.steps.contains { $0.kernel.id.family == .reference }, "\(sub.executor.steps.map { "\($0.kernel.id)" })")
        let x = NDArray(shape: [1, 3, 10], scalars: (0 ..< 30).map { Float($0 % 7) - 3 })
        let gate = NDArray(shape: [1], scalars: [Float(0.5)])
        let got = try sub.run([x, gate, try WeightDecoding.dense(w)])[0].scalars(as: Float.self)
        let want = try ReferenceInterpreter.planSubgraph(body).run([x, gate, try WeightDecoding.dense(w)])[0].scalars(as: Float.self)
        XCTAssertEqual(got.count, 32)
        for (g, e) in zip(got, want) { XCTAssertEqual(g, e, accuracy: 1e-5) }
        // A run-time value in the weight's place (no stored weight captured) still runs.
        let plain = try CompiledSubgraph(body, arch: arch, threads: 1)
        XCTAssertEqual(plain.constantInputs, [])
        let again = try plain.run([x, gate, try WeightDecoding.dense(w)])[0].scalars(as: Float.self)
        for (g, e) in zip(again, want) { XCTAssertEqual(g, e, accuracy: 1e-5) }
    }
}
