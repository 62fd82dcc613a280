import Foundation
import FuzzSupport
import KilnCompiler
import KilnONNX
import KilnRuntime

/// The compiler on imported models, mutated where the importer would not go.
///
/// Input: a header byte `h`, then `h & 7` mutations of four bytes each (``Mutation``), then an
/// ONNX file. Bit 3 of `h` keeps the declared types as the mutations leave them (stale static
/// dims reach the compiler, as a hand-edited package's may); otherwise each op's output types
/// are inferred again from its mutated inputs. The high four bits seed the sizes symbolic dims
/// take at run time (1–4 each) and the input values.
///
/// Each input: `ONNXImporter.convert`, the mutations on the main function, `validate` (the
/// compiler takes validated models), `Compiler.compile` for every architecture, then the host's
/// artifact written, loaded, and every function run once on generated inputs.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input, size >= 1 else { return 0 }
    let bytes = UnsafeBufferPointer(start: data, count: size)
    let header = bytes[0], count = Int(header & 7)
    guard size >= 1 + 4 * count else { return 0 }
    let mutations: [Mutation] = (0 ..< count).map { (k: Int) -> Mutation in
        let at = 1 + 4 * k
        return Mutation(kind: bytes[at], a: bytes[at + 1], b: bytes[at + 2], c: bytes[at + 3])
    }
    let onnx = UnsafeRawBufferPointer(rebasing: UnsafeRawBufferPointer(bytes)[(1 + 4 * count)...])
    let path = Scratch.write(onnx, "m.onnx")
    guard var model = try? ONNXImporter.convert(contentsOf: path), !model.functions.isEmpty,
          model.functions.reduce(0, { $0 + $1.operations.count }) <= 256 else { return 0 }
    if !mutations.isEmpty {
        var f = model.functions[0]
        for m in mutations { m.apply(to: &f, weights: model.weights.map(\.name)) }
        if header & 8 == 0 {
            f.reinfer(weights: Dictionary(model.weights.map { ($0.name, $0.type) }, uniquingKeysWith: { a, _ in a }))
        }
        model.functions[0] = f
    }
    guard (try? model.validate()) != nil else { return 0 }
    // A reproduction aid: KILN_FUZZ_DUMP=DIR.kiln writes the mutated model as a package.
    if let dump = ProcessInfo.processInfo.environment["KILN_FUZZ_DUMP"] { try? PackageWriter.write(model, to: dump) }
    var host: (ArtifactHeader, CompiledPlan)?
    for arch in Architecture.all {
        let compiled = try? Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 0, count: 32))
        if arch == Architecture.host { host = compiled }
    }
    guard let (artifactHeader, plan) = host, Sizes.runnable(model) else { return 0 }
    let artifact = "\(Scratch.directory)/m.\(artifactHeader.arch).compiled"
    guard (try? CompiledArtifact.write(header: artifactHeader, plan: plan, to: artifact)) != nil else { return 0 }
    run(artifact, seed: header >> 4)
    return 0
}

/// Loads the artifact at `path` and runs each function once on ``Sizes/inputs(_:seed:)``.
func run(_ path: String, seed: UInt8) {
    var options = ModelLoadOptions()
    options.threads = 1
    options.rememberVerifiedFiles = false
    blocking { [options] in
        guard let model = try? await Model.load(contentsOf: URL(fileURLWithPath: path), options: options) else { return }
        for name in model.functionNames {
            guard let f = try? await model.loadFunction(named: name),
                  let inputs = Sizes.inputs(f.descriptor.inputs.map { ($0.name, $0.shape, $0.scalarType) }, seed: seed)
            else { continue }
            _ = try? await f.run(inputs: inputs)
        }
    }
}
