import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

let repositoryRoot = FixtureJSON.repositoryRoot
let sharedModels = testModels

/// The x86-64 architectures this host can run (the tests compare their outputs).
let runnableArchitectures = Architecture.all.filter(\.isRunnableOnHost)

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> String {
    let dir = NSTemporaryDirectory() + "kiln-compiler-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}

/// Compiles `model` for `arch` and writes the artifact; returns its path and bytes.
@discardableResult
func compileArtifact(_ model: PortableModel, _ arch: Architecture, to path: String,
                     digest: [UInt8] = [UInt8](repeating: 7, count: 32)) throws -> [UInt8] {
    let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: digest)
    return try CompiledArtifact.write(header: header, plan: plan, to: path).flatMap { $0 }
}

/// Compiles `model` for the host's arch into `dir`; returns the artifact's path (skips the test
/// when no arch runs here).
func compiledForHost(_ model: PortableModel, in dir: String) throws -> String {
    guard let arch = Architecture.host else { throw XCTSkip("no runnable architecture") }
    let path = "\(dir)/m.\(arch.name).compiled"
    try compileArtifact(model, arch, to: path)
    return path
}

/// Runs `function` of the artifact at `path` and of `model` under the reference interpreter,
/// and checks every output agrees within `1e-4 · max(1, max |reference|)`.
func assertCompiledMatchesReference(_ model: PortableModel, artifact path: String, function: String,
                                    inputs: [String: NDArray], label: String,
                                    file: StaticString = #filePath, line: UInt = #line) async throws -> [String: NDArray] {
    let compiled = try await Model.load(contentsOf: URL(fileURLWithPath: path))
    guard let f = try await compiled.loadFunction(named: function) else {
        XCTFail("\(label): no function \(function)", file: file, line: line)
        return [:]
    }
    // The first run works shapes out step by step; the second runs the shape-specialized plan.
    let first = try await f.run(inputs: inputs)
    let got = try await f.run(inputs: inputs)
    let want = try ReferenceInterpreter(model: model, function: function).run(inputs)
    if let executor = f.runner as? FunctionExecutor {
        for report in executor.planReports {
            XCTAssertNil(report.generic, "\(label): no shape plan", file: file, line: line)
            XCTAssertEqual(report.fallbacks, [], "\(label): steps fell back", file: file, line: line)
        }
    }
    var out: [String: NDArray] = [:]
    for (name, w) in want {
        assertMatches(first[name], w, "\(label) \(name) vs reference (first run)", file: file, line: line)
        assertMatches(got[name], w, "\(label) \(name) vs reference (planned run)", file: file, line: line)
        out[name] = got[name]
    }
    return out
}

/// Fails for every step of the artifact at `path` that the plan gives to the reference kernel.
func assertNoReferenceSteps(_ path: String, _ label: String, file: StaticString = #filePath, line: UInt = #line) throws {
    let artifact = try CompiledArtifact.read(at: path, verifyWeights: true)
    for (f, plan) in zip(artifact.plan.model.functions, artifact.plan.functions) {
        for (op, step) in zip(f.operations, plan.steps) where step.kernel == KernelID.reference.description {
            XCTFail("\(label): \(f.name) \(op.opType) '\(op.name)' runs the reference kernel", file: file, line: line)
        }
    }
}

/// Compiles `model` for every runnable arch, checks no step runs the reference kernel, and
/// compares each artifact with the interpreter (generic run, then the shape plan).
func assertCompilesWithoutReference(_ model: PortableModel, _ inputs: [String: NDArray], _ label: String,
                                    file: StaticString = #filePath, line: UInt = #line) async throws {
    let dir = try temporaryDirectory()
    defer { try? FileManager.default.removeItem(atPath: dir) }
    for arch in runnableArchitectures {
        let path = "\(dir)/m.\(arch.name).compiled"
        try compileArtifact(model, arch, to: path)
        try assertNoReferenceSteps(path, "\(label) \(arch.name)", file: file, line: line)
        _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "\(label) \(arch.name)",
                                                     file: file, line: line)
    }
}

/// Compiles `model` for every architecture this host runs, checks no step runs the reference
/// kernel, and compares `main` on `inputs` with the reference interpreter.
func assertEveryArchMatchesReference(_ model: PortableModel, inputs: [String: NDArray], label: String, in dir: String,
                                     file: StaticString = #filePath, line: UInt = #line) async throws {
    for arch in runnableArchitectures {
        let path = "\(dir)/m.\(arch.name).compiled"
        _ = try compileArtifact(model, arch, to: path)
        try assertNoReferenceSteps(path, "\(label) \(arch.name)", file: file, line: line)
        _ = try await assertCompiledMatchesReference(model, artifact: path, function: "main", inputs: inputs, label: "\(label) \(arch.name)",
                                                     file: file, line: line)
    }
}
