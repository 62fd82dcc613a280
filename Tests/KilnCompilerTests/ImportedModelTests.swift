import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

let importedModels = "\(repositoryRoot)/Tests/Fixtures/onnx/models"

/// An ONNX fixture of tools/make_onnx_fixtures.py, converted, with onnxruntime's inputs and outputs.
func importedFixture(_ name: String) throws -> (PortableModel, inputs: [String: NDArray], outputs: [String: NDArray]) {
    let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(importedModels)/models.json"))) as! [String: Any]
    let c = try XCTUnwrap((json["cases"] as! [[String: Any]]).first { $0["name"] as? String == name }, "no case \(name)")
    let model = try ONNXImporter.convert(contentsOf: "\(importedModels)/\(name).onnx")
    return (model, (c["inputs"] as! [String: [String: Any]]).mapValues(FixtureJSON.array),
            (c["outputs"] as! [String: [String: Any]]).mapValues(FixtureJSON.array))
}

/// The reference interpreter and the host's compiled artifact (first and later runs) against onnxruntime.
func checkImported(_ name: String, file: StaticString = #filePath, line: UInt = #line) async throws -> PortableModel {
    let (model, inputs, outputs) = try importedFixture(name)
    let reference = try ReferenceInterpreter(model: model, function: "main").run(inputs)
    for (k, want) in outputs { assertMatches(reference[k], want, "\(name) \(k) (reference)", file: file, line: line) }
    let tmp = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: tmp) }
    let arch = try XCTUnwrap(Architecture.host)
    let path = "\(tmp)/m.\(arch.name).compiled"
    try compileArtifact(model, arch, to: path)
    let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path))
    let f = try await XCTUnwrapAsync(try await compiled.loadFunction(named: "main"))
    for run in 0 ..< 2 {
        let got = try await f.run(inputs: inputs)
        for (k, want) in outputs { assertMatches(got[k], want, "\(name) \(k) (compiled, run \(run))", file: file, line: line) }
    }
    return model
}

/// Patterns of real exported models (ONNX fixtures with onnxruntime's outputs): model-local
/// functions, a CRNN text recognizer, a YOLO distribution-focal-loss head, a Loop over the
/// sequence length — each through the reference interpreter and a compiled artifact.
final class ImportedModelTests: XCTestCase {
    func testModelLocalFunctionsAreInlined() async throws {
        // Block is called twice (slope 0.1, then its Act's default 0.3) and Act once directly.
        let model = try await checkImported("local_functions")
        let ops = model.functions[0].operations.map(\.opType)
        XCTAssertEqual(ops.filter { $0 == "leaky_relu" }.count, 3, "\(ops)")
        let slopes = model.functions[0].operations.filter { $0.opType == "leaky_relu" }.compactMap { $0.attributes["alpha"] }
        XCTAssertEqual(slopes.count, 3)
        XCTAssertEqual(slopes[0], .float(Double(Float(0.1))))
        XCTAssertEqual(slopes[1], .float(Double(Float(0.3))))
    }

    func testARecursiveLocalFunctionIsRefusedByName() throws {
        let path = "\(importedModels)/local_function_recursive.onnx"
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: path)) { error in
            XCTAssertEqual("\(error)", "\(path): node 'outer' (through its model-local functions): model-local function 'Again' calls itself (Again → Again)")
        }
    }

    func testCRNNRecognizerWithAnyLineWidth() async throws {
        let model = try await checkImported("crnn_recognizer")
        // The width stays symbolic through the Shape arithmetic, the Reshape and the LSTM.
        XCTAssertEqual(model.functions[0].inputs[0].type.description, "float32[n, 1, 16, W]")
        XCTAssertTrue(model.functions[0].operations.contains { $0.opType == "lstm" })
        // Another width runs through the same package.
        let x = NDArray(shape: [1, 1, 16, 21], scalars: (0 ..< 336).map { Float($0 % 17) / 17 })
        let out = try ReferenceInterpreter(model: model, function: "main").run(["img": x])["logp"]!
        XCTAssertEqual(out.shape, [10, 1, 11])
    }

    func testYOLODistributionFocalLossHead() async throws {
        let model = try await checkImported("yolo_dfl_head")
        XCTAssertTrue(model.functions[0].operations.contains { $0.opType == "softmax" })
    }

    func testFourBitWeightsStayFourBit() async throws {
        // int4 blocked with int4 zero points, and uint4 per column: stored packed, run by the
        // compressed kernels, equal to onnxruntime's own dequantize-then-matmul.
        let model = try await checkImported("int4_weights")
        let kinds = model.weights.compactMap { w -> DataType? in
            if case .quantized(let q) = w.encoding { return q.data.dtype }
            return nil
        }
        XCTAssertEqual(kinds.sorted { $0.rawValue < $1.rawValue }, [.int4, .uint4])
        for w in model.weights {
            guard case .quantized(let q) = w.encoding else { continue }
            XCTAssertEqual(q.data.data.count, (w.elementCount + 1) / 2, w.name)
            if let z = q.zeroPoint { XCTAssertEqual(z.dtype, .int4) }
        }
    }

    func testASqueezeOfARunTimeDimTakesItsSqueezedBranchChecked() async throws {
        // If(shape[-1] == 1, Squeeze, Identity): the branches differ in rank, so the squeezed
        // branch is taken (the dim is expected to be 1) with a run-time check of the condition.
        let model = try await checkImported("if_squeeze_runtime_dim")
        let ops = model.functions[0].operations.map(\.opType)
        XCTAssertFalse(ops.contains("if"), "\(ops)")
        XCTAssertTrue(ops.contains("assume"), "\(ops)")
        // A time dim other than 1 breaks the assumption: a clear error, not a wrong result.
        let x = NDArray(shape: [1, 3, 6], scalars: (0 ..< 18).map { Float($0) / 18 })
        XCTAssertThrowsError(try ReferenceInterpreter(model: model, function: "main").run(["x": x])) { error in
            XCTAssertTrue("\(error)".contains("was converted taking its then branch"), "\(error)")
        }
    }

    func testOnnxRuntimeContribOperators() async throws {
        // MatMulNBits (4-bit, with and without zero points) becomes linear ops over packed 4-bit
        // weights; the GELU family, skip and simplified layer norms and FusedMatMul their parts.
        let model = try await checkImported("contrib_ops")
        let fourBit = model.weights.filter { if case .quantized(let q) = $0.encoding { return q.data.dtype == .uint4 } else { return false } }
        XCTAssertEqual(fourBit.count, 2)
        XCTAssertEqual(model.functions[0].operations.filter { $0.opType == "linear" }.count, 2)
    }

    func testOnnxRuntimeRotaryEmbedding() async throws {
        // com.microsoft RotaryEmbedding: 3-D with [batch, seq] position ids, 4-D interleaved from
        // one start position, and a rotary dim below the head size; onnxruntime's values.
        let model = try await checkImported("contrib_rotary")
        XCTAssertEqual(model.functions[0].operations.filter { $0.opType == "rotary_embedding" }.count, 3)
        // Every form runs the compiled rotary kernel on every arch, equal to the reference.
        let (_, inputs, _) = try importedFixture("contrib_rotary")
        try await assertCompilesWithoutReference(model, inputs, "contrib_rotary")
    }

    func testRotaryPositionOutsideTheCacheIsARunError() async throws {
        // A position id past the cache's rows is the run's error, not a read outside it.
        let (model, inputs, _) = try importedFixture("contrib_rotary")
        let ids = try XCTUnwrap(inputs.first { $0.value.scalarType == .int64 && $0.value.rank == 2 })
        var bad = inputs
        bad[ids.key] = NDArray(shape: ids.value.shape, scalars: [Int64](repeating: 1 << 20, count: ids.value.shape.reduce(1, *)))
        let tmp = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        let path = try await assertHostRunFails(model, bad, containing: "outside the cache", in: tmp)
        try assertNoReferenceSteps(path, "contrib_rotary")
    }

    /// Compiles `model` for the host into `dir`, loads it and runs `inputs`, which must fail with
    /// an error containing `message`; returns the artifact's path.
    @discardableResult
    func assertHostRunFails(_ model: PortableModel, _ inputs: [String: NDArray], containing message: String, in dir: String,
                            file: StaticString = #filePath, line: UInt = #line) async throws -> String {
        let arch = try XCTUnwrap(Architecture.host)
        let path = "\(dir)/m.\(arch.name).compiled"
        try compileArtifact(model, arch, to: path)
        let f = try await XCTUnwrapAsync(try await Model.load(contentsOf: URL(fileURLWithPath: path)).loadFunction(named: "main"))
        do {
            _ = try await f.run(inputs: inputs)
            XCTFail("ran without the error '\(message)'", file: file, line: line)
        } catch {
            XCTAssertTrue("\(error)".contains(message), "\(error)", file: file, line: line)
        }
        return path
    }

    func testTrainingModeDropoutIsRefused() async throws {
        // A true constant training switch with a ratio of 0.3 is refused at convert, by name.
        let path = "\(importedModels)/dropout_training_constant.onnx"
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: path)) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(path): node 'drop' (Dropout): training_mode is true with a ratio that is not 0"), "\(error)")
        }
        // A switch fed at run time: false is the identity (as onnxruntime computes it), true a
        // run error on both paths.
        let model = try await checkImported("dropout_training_input")
        let (_, inputs, _) = try importedFixture("dropout_training_input")
        var training = inputs
        training["training"] = NDArray(shape: [], scalars: [true])
        XCTAssertThrowsError(try ReferenceInterpreter(model: model, function: "main").run(training)) { error in
            XCTAssertTrue("\(error)".contains("training_mode is true"), "\(error)")
        }
        let tmp = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try await assertHostRunFails(model, training, containing: "training_mode is true", in: tmp)
    }

    func testOnnxRuntimeGroupQueryAttention() async throws {
        // com.microsoft GroupQueryAttention: a decode step over a past cache (grouped heads, keys
        // and queries rotated at the cache positions; a window, soft cap and scale), and the first
        // prompt of a right-padded batch with packed QKV; outputs and presents as onnxruntime's.
        for name in ["contrib_gqa_decode", "contrib_gqa_prompt"] {
            let model = try await checkImported(name)
            XCTAssertFalse(model.functions[0].operations.filter { $0.opType == "attention" }.isEmpty, name)
            let (_, inputs, _) = try importedFixture(name)
            if name == "contrib_gqa_prompt" {
                // Grouped 3-D heads with a boolean mask and no past: split into heads for the kernel.
                try await assertCompilesWithoutReference(model, inputs, name)
                continue
            }
            // Over a past: the attention kernel after the appends, except the soft-capped node's.
            let tmp = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: tmp) }
            let path = try compiledForHost(model, in: tmp)
            let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
            let f = artifact.plan.model.functions[0]
            let reference = zip(f.operations, artifact.plan.functions[0].steps).filter { $0.1.kernel == KernelID.reference.description }
            XCTAssertEqual(reference.map { "\($0.0.opType) \($0.0.name)" }, ["attention attention_1"])
            XCTAssertEqual(f.operations.filter { $0.opType == "rotary_embedding" }.count, 2)
        }
        // As onnxruntime-genai's builder writes it (packed QKV, a past whose head size is a named
        // dim, rotation in the node): the rotary and attention kernels on every arch, no reference step.
        for name in ["contrib_gqa_genai_decode", "contrib_gqa_genai_prompt"] {
            let model = try await checkImported(name)
            let (_, inputs, _) = try importedFixture(name)
            try await assertCompilesWithoutReference(model, inputs, name)
        }
        // Without its presents onnxruntime computes another attention: refused, naming the node.
        let path = "\(importedModels)/contrib_gqa_unnamed_presents.onnx"
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: path)) { error in
            XCTAssertEqual("\(error)", "\(path): node 'gqa' (com.microsoft.GroupQueryAttention): an output, present_key or present_value is unnamed; "
                           + "Kiln converts GroupQueryAttention with all three")
        }
    }

    func testOnnxRuntimeMultiHeadAttention() async throws {
        // com.microsoft MultiHeadAttention: causal self-attention over a past cache with a key
        // padding mask and the projection bias, and cross-attention with an attention bias and a
        // scale; outputs and presents as onnxruntime's.
        let model = try await checkImported("contrib_mha")
        XCTAssertEqual(model.functions[0].operations.filter { $0.opType == "attention" }.count, 2)
        let (_, inputs, _) = try importedFixture("contrib_mha")
        try await assertCompilesWithoutReference(model, inputs, "contrib_mha")
    }

    func testDynamicallyQuantizedLSTMs() async throws {
        // onnxruntime's DynamicQuantizeLSTM (uint8 per-tensor, then int8 per-column bidirectional
        // with biases, peepholes and initial states): its inputs and hidden states quantized per
        // product as onnxruntime does; the compiled plan runs both on the recurrent kernel.
        let model = try await checkImported("dynamic_quantize_lstm")
        XCTAssertEqual(model.functions[0].operations.filter { $0.opType == "dynamic_quantize_lstm" }.count, 2)
        let (_, inputs, _) = try importedFixture("dynamic_quantize_lstm")
        try await assertCompilesWithoutReference(model, inputs, "dynamic_quantize_lstm")
    }

    func testDynamicallyQuantizedConvolutionAndMatmul() async throws {
        // DynamicQuantizeLinear, ConvInteger (uint8 weight, zero point, an int32 bias added before
        // the cast) and MatMulInteger (per-column zero points): the compiled plan runs the float32
        // convolution kernels on centered integers and the 8-bit GEMM kernel, exactly, with no
        // reference step; for a runtime before 0.8 the matmul runs the float32 GEMM kernel too.
        let model = try await checkImported("integer_conv_matmul")
        let (_, inputs, _) = try importedFixture("integer_conv_matmul")
        try await assertCompilesWithoutReference(model, inputs, "integer_conv_matmul")
        for runtime in [CompiledFormat.runtimeVersion, RuntimeVersion(0, 7)] {
            var options = Compiler.Options(arch: try XCTUnwrap(Architecture.host))
            options.minimumRuntime = runtime
            let (_, plan) = try Compiler.compile(model, options: options, sourceDigest: [UInt8](repeating: 0, count: 32))
            let f = plan.model.functions[0]
            XCTAssertFalse(f.operations.contains { $0.opType == "conv_integer" }, "\(runtime)")
            let matmul = f.operations.firstIndex { $0.opType == "matmul_integer" }
            if runtime == RuntimeVersion(0, 7) {
                XCTAssertNil(matmul, "a runtime before 0.8 has no 8-bit GEMM kernel")
            } else {
                let kernel = try XCTUnwrap(plan.functions[0].steps[try XCTUnwrap(matmul)].kernel)
                XCTAssertTrue(kernel.hasPrefix("u8s8_gemm__"), kernel)
            }
        }
    }

    func testSqueezeWithoutAxesKeepsRunTimeDimsChecked() async throws {
        let model = try await checkImported("squeeze_no_axes_runtime_dim")
        XCTAssertEqual(model.functions[0].outputs[0].type.description, "float32[n, 3]")
        let x = NDArray(shape: [1, 1, 4], scalars: [Float(1), 2, 3, 4])
        XCTAssertThrowsError(try ReferenceInterpreter(model: model, function: "main").run(["x": x])) { error in
            XCTAssertTrue("\(error)".contains("assumed not to be 1"), "\(error)")
        }
    }

    func testLoopOverTheSequenceLength() async throws {
        let model = try await checkImported("loop_sequence_length")
        XCTAssertTrue(model.functions[0].operations.contains { $0.opType == "loop" })
    }
}
