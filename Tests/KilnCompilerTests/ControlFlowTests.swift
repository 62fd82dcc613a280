import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// `if`, `loop` and `scan` from ONNX (tools/make_onnx_fixtures.py, onnxruntime's outputs in
/// models.json): converted, run by the reference interpreter and by compiled artifacts (bodies
/// compiled for the artifact's arch), written and read back, and refused when malformed.
final class ControlFlowTests: XCTestCase {
    let dir = "\(repositoryRoot)/Tests/Fixtures/onnx/models"

    func fixture(_ name: String) throws -> (PortableModel, inputs: [String: NDArray], outputs: [String: NDArray]) {
        try importedFixture(name)
    }

    func check(_ name: String) async throws -> PortableModel {
        try await checkImported(name)
    }

    func testIfRunsTheBranchTheFlagPicksWithCapturesThroughTwoLevels() async throws {
        for name in ["if_nested_then", "if_nested_else_then", "if_nested_else_else"] {
            let model = try await check(name)
            let main = model.functions[0]
            XCTAssertEqual(main.operations.map(\.opType), ["relu", "if"])
            let op = main.operations[1]
            // The weight W and the outer values a branch reads are the op's inputs after the condition.
            XCTAssertEqual(op.inputs.first, "flag")
            XCTAssertTrue(op.inputs.contains("W"), "\(op.inputs)")
            guard case .graph(let then)? = op.attributes["then_branch"], case .graph(let otherwise)? = op.attributes["else_branch"] else {
                return XCTFail("branches are not graphs")
            }
            XCTAssertEqual(then.inputs.count, op.inputs.count - 1)
            XCTAssertEqual(otherwise.inputs.count, op.inputs.count - 1)
            XCTAssertTrue(otherwise.operations.contains { $0.opType == "if" }, "the nested If stays in the else branch")
            XCTAssertEqual(model.weights.map(\.name).sorted(), ["W", "one"], "each weight once")
        }
    }

    func testAConstantConditionInlinesItsBranch() async throws {
        let model = try await check("if_constant_condition")
        XCTAssertEqual(model.functions[0].operations.map(\.opType), ["sigmoid"])
        XCTAssertEqual(model.writtenFormatVersion, 1, "no subgraph left: the package stays version 1")
    }

    func testLoopStopsWhenItsBodySaysSoAndStacksScanOutputs() async throws {
        let model = try await check("loop_early_exit")
        let op = try XCTUnwrap(model.functions[0].operations.first { $0.opType == "loop" })
        XCTAssertEqual(op.attributes["captures"], .int(1), "x is read by the body")
    }

    func testScanWalksAxesAndDirections() async throws {
        let model = try await check("scan_reverse_axes")
        let op = try XCTUnwrap(model.functions[0].operations.first { $0.opType == "scan" })
        XCTAssertEqual(op.outputs[1].type.description, "float32[3, 4]")
    }

    func testSubgraphsRoundTripAsFormatVersion2AndStayDeterministic() throws {
        let (model, inputs, outputs) = try fixture("if_nested_else_then")
        let tmp = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        try PackageWriter.write(model, to: "\(tmp)/a.kiln")
        try PackageWriter.write(model, to: "\(tmp)/b.kiln")
        let read = try PackageReader.read(at: "\(tmp)/a.kiln")
        XCTAssertEqual(read.formatVersion, 2)
        XCTAssertEqual(read.functions, model.functions)
        let manifest = { (p: String) in try Data(contentsOf: URL(fileURLWithPath: "\(tmp)/\(p)/manifest.pb")) }
        XCTAssertEqual(try manifest("a.kiln"), try manifest("b.kiln"))
        let out = try ReferenceInterpreter(model: read, function: "main").run(inputs)
        for (k, want) in outputs { assertMatches(out[k], want, "read back \(k)") }
        let arch = try XCTUnwrap(Architecture.host)
        XCTAssertEqual(try compileArtifact(read, arch, to: "\(tmp)/1.compiled"), try compileArtifact(read, arch, to: "\(tmp)/2.compiled"))
        // A package without subgraphs is still written as version 1.
        let plain = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        XCTAssertEqual(plain.writtenFormatVersion, 1)
    }

    func testMalformedSubgraphsGetClearErrors() throws {
        XCTAssertThrowsError(try ONNXImporter.convert(contentsOf: "\(dir)/if_undefined_outer.onnx")) { error in
            XCTAssertTrue("\(error)".contains("node 'branchy' (If) reads 'missing', which no node, input or initializer defines"), "\(error)")
        }
        let (model, _, _) = try fixture("if_nested_then")
        func refused(_ edit: (inout KilnFormat.Operation) -> Void, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
            var m = model
            edit(&m.functions[0].operations[1])
            XCTAssertThrowsError(try m.validate(), file: file, line: line) { error in
                XCTAssertTrue("\(error)".contains(message), "\(error)", file: file, line: line)
            }
        }
        // A branch that reads the enclosing function's value instead of its own input: not closed.
        refused({ op in
            guard case .graph(var g)? = op.attributes["then_branch"] else { return }
            g.operations[0].inputs[0] = "x"
            op.attributes["then_branch"] = .graph(g)
        }, "input 'x' is not defined")
        // One capture too few for the branches' inputs.
        refused({ op in op.inputs.removeLast() }, "takes")
        // Branches that return another number of values than the op has outputs.
        refused({ op in
            guard case .graph(var g)? = op.attributes["else_branch"] else { return }
            g.outputs.append(Argument(name: "extra", type: g.outputs[0].type, value: g.outputs[0].value))
            op.attributes["else_branch"] = .graph(g)
        }, "else_branch returns 2 values, the op has 1 outputs")
        // A branch that is not a graph.
        refused({ op in op.attributes["then_branch"] = .int(1) }, "attribute 'then_branch' must be graph, got int")
    }

    func testSubgraphsNeedFormatVersion2AndBoundedNesting() throws {
        let (model, _, _) = try fixture("if_nested_then")
        let tmp = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        var old = model
        old.formatVersion = 1
        try PackageWriter.write(old, to: "\(tmp)/v.kiln")
        // The writer raises the version itself; a file that claims version 1 is refused.
        XCTAssertEqual(try PackageReader.read(at: "\(tmp)/v.kiln").formatVersion, 2)
        var contents = try PackageWriter.layout(old).0
        contents.formatVersion = 1
        let bytes = PackageWriter.manifestFile(contents)
        try Data(bytes).write(to: URL(fileURLWithPath: "\(tmp)/v.kiln/manifest.pb"))
        XCTAssertThrowsError(try PackageReader.read(at: "\(tmp)/v.kiln")) { error in
            XCTAssertTrue("\(error)".contains("has control-flow subgraphs, which need format version 2"), "\(error)")
        }
        // Subgraphs 40 levels deep: refused before the protobuf parser recurses into them.
        var body = Function(name: "b", inputs: [], outputs: [Argument(name: "o", type: TensorType(.bool, []), value: "c")],
                            operations: [KilnFormat.Operation(opType: "constant", name: "k", inputs: [], outputs: [Value(name: "c", type: TensorType(.bool, []))],
                                                   attributes: ["value": .tensor(TensorLiteral(dtype: .bool, shape: [], bytes: [1]))])])
        let leaf = body
        for level in 0 ..< 40 {
            let op = KilnFormat.Operation(opType: "if", name: "if\(level)", inputs: ["c"], outputs: [Value(name: "r", type: TensorType(.bool, []))],
                               attributes: ["then_branch": .graph(body), "else_branch": .graph(leaf)])
            body = Function(name: "b", inputs: [], outputs: [Argument(name: "o", type: TensorType(.bool, []), value: "r")],
                            operations: [body.operations[0], op].filter { $0.opType == "constant" || $0.name == op.name })
        }
        let deep = PortableModel(metadata: Metadata(name: "deep"), weights: [], functions: [body])
        let payload = ManifestCodec.encode(PackageWriter.layout(deep).0)
        XCTAssertThrowsError(try payload.withUnsafeBytes { try ManifestCodec.decode($0) }) { error in
            XCTAssertTrue("\(error)".contains("nests subgraphs deeper than 16 levels"), "\(error)")
        }
    }
}

func XCTUnwrapAsync<T>(_ value: T?, file: StaticString = #filePath, line: UInt = #line) async throws -> T {
    try XCTUnwrap(value, file: file, line: line)
}
