import Dispatch
import Foundation
import KilnCompiler
import KilnCompression
import KilnFormat
import KilnStore

/// `kiln compile PKG --arch all|host|A,B,… [--min-runtime-version X.Y] [--config CFG.json] -o DIR`.
enum CompileCommand {
    static let spec = CommandSpec(
        name: "compile",
        abstract: "Compile a package into one artifact per CPU architecture.",
        usage: "kiln compile PKG.kiln --arch all|host|A,B,... [--min-runtime-version X.Y] [--config CFG.json] [--encrypt KEY] [--version V] [--strict] -o DIR [--json]",
        arguments: [("PKG.kiln", "The portable package to compile.")],
        options: [
            OptionSpec(names: ["--arch"], valueName: "ARCHS", help: "all, host, or a comma-separated list of: \(Architecture.all.map(\.name).joined(separator: ", "))."),
            OptionSpec(names: ["--min-runtime-version"], valueName: "X.Y", help: "Oldest Kiln runtime allowed to load the artifacts (default \(CompiledFormat.runtimeVersion))."),
            OptionSpec(names: ["--config"], valueName: "CFG.json", help: "Compress weights with this config first (specs/compression.md)."),
            OptionSpec(names: ["--encrypt"], valueName: "KEY", help: "Encrypt each artifact's plan and weights with AES-256-GCM under this key file (kiln keygen)."),
            OptionSpec(names: ["--version"], valueName: "V", help: "The model version assets.json names (kiln fetch installs under it; default: a digest of the artifacts)."),
            OptionSpec(names: ["-o", "--output"], valueName: "DIR", help: "Directory for Name.<arch>.compiled files and assets.json."),
            OptionSpec(names: ["--strict"], valueName: nil, help: "Fail, writing nothing, when any step (control-flow bodies included) would run the reference interpreter."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print assets.json's contents instead of a summary."),
        ])

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one PKG.kiln", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o DIR", command: spec) }
        guard let archText = args.value("--arch") else { throw UsageError(message: "missing --arch", command: spec) }
        let archs = try architectures(archText)
        var minimum = CompiledFormat.runtimeVersion
        if let text = args.value("--min-runtime-version") {
            guard let v = RuntimeVersion(text) else { throw UsageError(message: "--min-runtime-version '\(text)' is not X.Y", command: spec) }
            minimum = v
        }
        let key = try args.value("--encrypt").map { try ArtifactKey.read(at: $0) }
        if let v = args.value("--version"), !ModelVersion.isValid(v) {
            throw UsageError(message: "--version '\(v)': \(ModelVersion.rule)", command: spec)
        }
        let path = args.positionals[0]
        var model = try PackageReader.read(at: path)
        var digest = try PackageReader.digest(ofPackageAt: path)
        var configText = ""
        if let configPath = args.value("--config") {
            let config = try CompressionConfig(contentsOf: configPath)
            model = try Compressor.apply(config, to: model, progress: nil).0
            configText = (try? String(contentsOfFile: configPath, encoding: .utf8)) ?? ""
            var h = SHA256()
            digest.withUnsafeBytes { h.update($0) }
            Array(configText.utf8).withUnsafeBytes { h.update($0) }
            digest = h.finalize()
        }
        let name = packageName(path)
        let tty = isatty(2) != 0
        let results = Locked([String: Result<(String, ArtifactHeader, [[UInt8]], [(what: String, count: Int)]), Error>]())
        let frozen = model, sourceDigest = digest, minimumRuntime = minimum
        DispatchQueue.concurrentPerform(iterations: archs.count) { i in
            let arch = archs[i]
            if tty { Console.err("compiling \(name) for \(arch.name)…\n") }
            var options = Compiler.Options(arch: arch)
            options.minimumRuntime = minimumRuntime
            let result = Result { () throws -> (String, ArtifactHeader, [[UInt8]], [(what: String, count: Int)]) in
                let (header, plan) = try Compiler.compile(frozen, options: options, sourceDigest: sourceDigest)
                let file = ModelFile.artifact(name: name, arch: arch.name).fileName
                let chunks = CompiledArtifact.serialize(header: header, plan: plan)
                // The steps the reference interpreter would run, bodies compiled as the runtime compiles them.
                let reference = ControlFlowBodies.referenceSummary(ControlFlowBodies.steps(plan, arch: arch).flatMap { $0 })
                return (file, header, try key.map { try ArtifactEncryption.encrypt(chunks, key: $0) } ?? chunks, reference)
            }
            results.update { $0[arch.name] = result }
        }
        var assets: [AssetsManifest.Entry] = []
        var written: [(String, ArtifactHeader, [[UInt8]])] = []
        for arch in archs {
            switch results.value[arch.name]! {
            case .failure(let e as CompileError): throw Failure(message: "\(path): cannot compile for \(arch.name): \(e.reason)")
            case .failure(let e as PackageError): throw Failure(message: "\(path): cannot encrypt for \(arch.name): \(e.reason)")
            case .failure(let e): throw e
            case .success(let r):
                written.append((r.0, r.1, r.2))
                guard !r.3.isEmpty else { continue }
                let count = r.3.reduce(0) { $0 + $1.count }
                let list = r.3.map { "\($0.what) ×\($0.count)" }.joined(separator: ", ")
                if args.has("--strict") {
                    throw Failure(message: "\(path): --strict: for \(arch.name), \(count) step\(count == 1 ? "" : "s") would run the reference interpreter: \(list)")
                }
                Console.err("note: \(arch.name): \(count) step\(count == 1 ? "" : "s") run\(count == 1 ? "s" : "") the reference interpreter: \(list)\n")
            }
        }
        do {
            try FileManager.default.createDirectory(atPath: output, withIntermediateDirectories: true)
        } catch {
            throw Failure(message: "\(output): cannot create the directory")
        }
        for (file, header, chunks) in written {
            try AtomicFile.write(chunks, to: "\(output)/\(file)")
            var digest = SHA256()
            for c in chunks { c.withUnsafeBytes { digest.update($0) } }
            assets.append(AssetsManifest.Entry(arch: header.arch, file: file, bytes: chunks.reduce(0) { $0 + $1.count },
                                               sha256: SHA256.hex(digest.finalize()), minimumRuntime: header.minimumRuntime,
                                               encryptionKeyID: key?.id, formatVersion: header.formatVersion,
                                               sourceDigest: SHA256.hex(header.sourceDigest)))
        }
        // The version: given, else the first 12 hex digits of a digest over the artifacts' digests.
        var versionHash = SHA256()
        for (_, _, chunks) in written { for c in chunks { c.withUnsafeBytes { versionHash.update($0) } } }
        let version = args.value("--version") ?? String(SHA256.hex(versionHash.finalize()).prefix(12))
        let manifest = AssetsManifest.Model(name: name, version: version, artifacts: assets).json
        try AtomicFile.write([Array((manifest.rendered() + "\n").utf8)], to: ModelDirectory(path: output, files: []).manifestPath)
        if args.has("--json") {
            Console.out(manifest.rendered() + "\n")
        } else {
            for (file, _, chunks) in written { Console.out("\(output)/\(file)  \(humanBytes(chunks.reduce(0) { $0 + $1.count }))\n") }
            Console.out("\(output)/assets.json\n")
        }
    }

    /// The architectures `--arch` names.
    static func architectures(_ text: String) throws -> [Architecture] {
        switch text {
        case "all": return Architecture.all
        case "host":
            guard let h = Architecture.host else { throw Failure(message: "this host's CPU has no Kiln architecture") }
            return [h]
        default:
            var out: [Architecture] = []
            for part in text.split(separator: ",", omittingEmptySubsequences: false).map(String.init) {
                guard let a = Architecture.named(part) else {
                    throw UsageError(message: "unknown architecture '\(part)'; known: \(Architecture.all.map(\.name).joined(separator: ", "))", command: spec)
                }
                if !out.contains(a) { out.append(a) }
            }
            return out
        }
    }

    /// `Name` of `…/Name.kiln`.
    static func packageName(_ path: String) -> String {
        if case .package(let name) = ModelFile(path: path) { return name }
        let base = URL(fileURLWithPath: path).lastPathComponent
        return base.isEmpty ? "Model" : base
    }
}

/// A value guarded by a lock.
final class Locked<T>: @unchecked Sendable {
    private var stored: T
    private let lock = NSLock()
    init(_ value: T) { stored = value }
    var value: T { lock.lock(); defer { lock.unlock() }; return stored }
    func update(_ body: (inout T) -> Void) { lock.lock(); body(&stored); lock.unlock() }
}
