import Foundation
import KilnRuntime
import XCTest

final class ModelAPITests: XCTestCase {
    let classifier = URL(fileURLWithPath: "\(repositoryRoot)/examples/TinyClassifier.kiln")
    let encoder = URL(fileURLWithPath: "\(repositoryRoot)/examples/TinyEncoder.kiln")

    func features(_ batch: Int) -> NDArray {
        NDArray(shape: [batch, 64], scalars: (0 ..< batch * 64).map { Float(($0 * 37) % 101) / 50 - 1 })
    }

    func tokens(_ values: [[Int64]]) -> NDArray {
        NDArray(shape: [values.count, values[0].count], scalars: values.flatMap { $0 })
    }

    func testClassifierGivesProbabilities() async throws {
        let model = try await Model.load(contentsOf: classifier)
        XCTAssertEqual(model.functionNames, ["main"])
        XCTAssertEqual(model.metadata.name, "TinyClassifier")
        let main = try await XCTUnwrapAsync(try await model.loadFunction(named: "main"))
        let input = try XCTUnwrap(main.descriptor.inputDescriptor(of: "features"))
        XCTAssertEqual(input.scalarType, .float32)
        XCTAssertEqual(input.shape, ["batch", 64])
        XCTAssertTrue(input.isDynamic)
        XCTAssertEqual(main.descriptor.outputDescriptor(of: "probabilities")?.shape, ["batch", 10])
        XCTAssertNil(main.descriptor.inputDescriptor(of: "nope"))
        var outputs = try await main.run(inputs: ["features": features(3)])
        XCTAssertEqual(outputs.names, ["probabilities"])
        let p = try XCTUnwrap(outputs.remove("probabilities"))
        XCTAssertNil(outputs["probabilities"])
        XCTAssertEqual(outputs.count, 0)
        XCTAssertEqual(p.shape, [3, 10])
        let values = p.scalars(as: Float.self)
        for row in 0 ..< 3 {
            let sum = values[row * 10 ..< row * 10 + 10].reduce(0, +)
            XCTAssertEqual(sum, 1, accuracy: 1e-5)
        }
        XCTAssertTrue(values.allSatisfy { $0 > 0 && $0 < 1 })
    }

    func testClassifierMatchesAHandWrittenForwardPass() async throws {
        // An independent forward pass straight from the package's weights.
        let portable = try PackageReader.read(at: classifier.path)
        func weight(_ name: String) -> [Float] {
            guard case .dense(let b)? = portable.weight(named: name)?.encoding else { return [] }
            return Array(b.data.bytes.bindMemory(to: Float.self))
        }
        let x = features(2)
        var h = x.scalars(as: Float.self)
        var width = 64
        for (layer, outWidth) in [(1, 128), (2, 64), (3, 10)] {
            let (w, b) = (weight("fc\(layer).weight"), weight("fc\(layer).bias"))
            var next = [Float](repeating: 0, count: 2 * outWidth)
            for r in 0 ..< 2 {
                for o in 0 ..< outWidth {
                    var s = b[o]
                    for i in 0 ..< width { s += h[r * width + i] * w[o * width + i] }
                    next[r * outWidth + o] = layer < 3 ? max(0, s) : s
                }
            }
            h = next
            width = outWidth
        }
        for r in 0 ..< 2 {
            let row = h[r * 10 ..< r * 10 + 10]
            let m = row.max()!
            let e = row.map { exp($0 - m) }
            let s = e.reduce(0, +)
            for i in 0 ..< 10 { h[r * 10 + i] = e[i] / s }
        }
        let model = try await Model.load(contentsOf: classifier)
        let main = try await XCTUnwrapAsync(try await model.loadFunction(named: "main"))
        let got = try await main.run(inputs: ["features": x])["probabilities"]!.scalars(as: Float.self)
        for i in 0 ..< 20 { XCTAssertEqual(got[i], h[i], accuracy: 1e-6) }
    }

    func testEncoderFunctionsShareTheEmbedding() async throws {
        let model = try await Model.load(contentsOf: encoder)
        XCTAssertEqual(model.functionNames, ["embed", "encode"])
        let embed = try await XCTUnwrapAsync(try await model.loadFunction(named: "embed"))
        let encode = try await XCTUnwrapAsync(try await model.loadFunction(named: "encode"))
        let t = tokens([[1, 2, 3, 4, 5, 6, 7], [9, 8, 7, 6, 5, 4, 3]])
        let e = try await embed.run(inputs: ["tokens": t])["embeddings"]!
        XCTAssertEqual(e.shape, [2, 7, 64])
        // Row for token 7 appears at [0, 6] and [1, 2].
        let v = e.scalars(as: Float.self)
        XCTAssertEqual(Array(v[6 * 64 ..< 7 * 64]), Array(v[(7 + 2) * 64 ..< (7 + 3) * 64]))
        let h = try await encode.run(inputs: ["tokens": t])["hidden"]!
        XCTAssertEqual(h.shape, [2, 7, 64])
        XCTAssertTrue(h.scalars(as: Float.self).allSatisfy { $0.isFinite })
        // Any sequence length works.
        for seq in [1, 3, 16] {
            let out = try await encode.run(inputs: ["tokens": tokens([Array(repeating: 5, count: seq)])])["hidden"]!
            XCTAssertEqual(out.shape, [1, seq, 64])
        }
    }

    func testAbsentFunctionIsNilNotAnError() async throws {
        let model = try await Model.load(contentsOf: encoder)
        let missing = try await model.loadFunction(named: "decode")
        XCTAssertNil(missing)
    }

    func testInputErrorsSayWhatIsWrong() async throws {
        let model = try await Model.load(contentsOf: encoder)
        let encode = try await XCTUnwrapAsync(try await model.loadFunction(named: "encode"))
        let good = tokens([[1, 2, 3]])
        let cases: [([String: NDArray], String)] = [
            ([:], "function 'encode': missing input 'tokens' (int64[batch, seq])"),
            (["tokens": good, "extra": good], "function 'encode': unknown input 'extra'; inputs are 'tokens' int64[batch, seq]"),
            (["tokens": NDArray(shape: [1, 3], scalarType: .float32)], "function 'encode': input 'tokens' must be int64, got float32"),
            (["tokens": NDArray(shape: [3], scalarType: .int64)], "function 'encode': input 'tokens' must have rank 2 int64[batch, seq], got shape [3]"),
            (["tokens": NDArray(shape: [1, 3], scalars: [Int64(1), 999, 2])], "function 'encode' op 'token_embedding': index 999 is out of range for a dim of 256"),
        ]
        for (inputs, message) in cases {
            do {
                _ = try await encode.run(inputs: inputs)
                XCTFail("expected: \(message)")
            } catch {
                XCTAssertEqual("\(error)", message)
            }
        }
    }

    func testSymbolsMustAgreeAcrossInputs() throws {
        var b = ModelBuilder(name: "Pair")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 4]))
        let y = f.input("y", TensorType(.float32, ["n", 4]))
        f.output("sum", try f.apply1("add", [x, y]))
        try b.add(f)
        let model = try b.build()
        XCTAssertThrowsError(try model.functions[0].bind(["x": NDArray(shape: [2, 4], scalarType: .float32),
                                                          "y": NDArray(shape: [3, 4], scalarType: .float32)])) { error in
            XCTAssertEqual("\(error)", "function 'main': input 'y' dim 0 (n) is 3, but n is 2 from input 'x'")
        }
        XCTAssertThrowsError(try model.functions[0].bind(["x": NDArray(shape: [2, 5], scalarType: .float32),
                                                          "y": NDArray(shape: [2, 5], scalarType: .float32)])) { error in
            XCTAssertEqual("\(error)", "function 'main': input 'x' dim 1 must be 4, got 5 (shape [2, 5])")
        }
    }

    func testConcurrentRunsAgree() async throws {
        let model = try await Model.load(contentsOf: encoder)
        let encode = try await XCTUnwrapAsync(try await model.loadFunction(named: "encode"))
        let inputs = (0 ..< 8).map { i in tokens([(0 ..< 5).map { Int64(($0 * 31 + i * 7) % 256) }]) }
        var serial: [[Float]] = []
        for x in inputs { serial.append(try await encode.run(inputs: ["tokens": x])["hidden"]!.scalars(as: Float.self)) }
        let parallel = try await withThrowingTaskGroup(of: (Int, [Float]).self) { group in
            for (i, x) in inputs.enumerated() {
                group.addTask { (i, try await encode.run(inputs: ["tokens": x])["hidden"]!.scalars(as: Float.self)) }
            }
            var out = [[Float]](repeating: [], count: inputs.count)
            for try await (i, v) in group { out[i] = v }
            return out
        }
        XCTAssertEqual(parallel, serial)
    }

    func testLoadErrors() async throws {
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: "/nonexistent/M.kiln"))
            XCTFail("expected an error")
        } catch {
            XCTAssertEqual("\(error)", "/nonexistent/M.kiln: no such file or directory")
        }
        let broken = URL(fileURLWithPath: "\(repositoryRoot)/Tests/Fixtures/malformed/cycle.kiln")
        do {
            _ = try await Model.load(contentsOf: broken)
            XCTFail("expected an error")
        } catch {
            XCTAssertTrue("\(error)".contains("cycle: relu1 → fc2 → relu2 → relu1"), "\(error)")
        }
    }
}

func XCTUnwrapAsync<T>(_ value: T?, file: StaticString = #filePath, line: UInt = #line) async throws -> T {
    try XCTUnwrap(value, file: file, line: line)
}
