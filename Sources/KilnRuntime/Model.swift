import Foundation
import KilnCompiler
import KilnFormat
import KilnReference

/// How to load a model.
public struct ModelLoadOptions: Sendable {
    /// The defaults.
    public static let `default` = ModelLoadOptions()
    /// Verify weights before the first run (default `true`): every blob's CRC-32 of a package,
    /// the weight section's CRC-32 of a compiled artifact on every load path (file, directory,
    /// specialization cache, bookmark), and `assets.json`'s size and SHA-256 where it lists the
    /// artifact. An artifact's header and plan are always checked. `false` is the explicit
    /// opt-out (`--no-verify`).
    public var verifyChecksums = true
    /// Remember verified artifacts in the cache directory (`verified/`), keyed by the file's
    /// device, inode, size, mtime, ctime and stored checksums, so a warm load of the same
    /// unchanged file does not hash it again (default `true`).
    public var rememberVerifiedFiles = true
    /// Load only this model from a directory: `NAME.<arch>.compiled` and `NAME.kiln` are the
    /// candidates. A directory holding several models needs it; a file of another model is refused.
    public var model: String? = nil
    /// Never choose or specialize for an arch above this one (for example `x86_64_v3`, to keep
    /// a `x86_64_v4` host off AVX-512).
    public var maxArchitecture: String? = nil
    /// Threads a compiled function may use per call (default: the number of cores).
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// Input sizes change on most calls (a language model's growing cache): a plan derived
    /// for new sizes serves as the base of the next one and is not cached, so it does not push
    /// out plans of signatures that recur. New sizes are derived from the previous plan either way.
    public var expectFrequentReshapes = false
    /// The cache a directory's portable package is specialized into when no artifact fits
    /// (default: ``SpecializationCache/defaultDirectory``).
    public var cache: SpecializationCache? = nil
    /// Where a specialized model is kept in the cache.
    public var policy: SpecializationCache.Policy = .evictable
    /// Gives the key of an encrypted artifact by its key id (`nil`: no key for that id). The
    /// artifact is decrypted into process memory only, never to disk or the cache. Without a
    /// key an encrypted artifact is refused with an ``ArtifactKeyError`` ("needs key …").
    public var keyProvider: ArtifactKeyProvider? = nil

    /// Uses these keys for encrypted artifacts (see ``keyProvider``).
    /// - Parameter keys: Keys read with ``ArtifactKey/read(at:)`` or made by ``ArtifactKey/generate()``.
    public mutating func useKeys(_ keys: [ArtifactKey]) {
        // Another key is returned when none matches, so the error names both ids.
        keyProvider = { id in keys.first { $0.id == id } ?? keys.first }
    }

    /// Creates options with the defaults.
    public init() {}
}

/// Something that runs one function.
protocol FunctionRunner: Sendable {
    var function: Function { get }
    func run(_ inputs: [String: NDArray]) throws -> [String: NDArray]
}

extension ReferenceInterpreter: FunctionRunner {}

/// A loaded model: its metadata and its named functions.
///
/// ```swift
/// let model = try await Model.load(contentsOf: URL(fileURLWithPath: "TinyEncoder.kiln"))
/// guard let encode = try await model.loadFunction(named: "encode") else { … }
/// let outputs = try await encode.run(inputs: ["tokens": tokens])
/// ```
public final class Model: Sendable {
    enum Backend: Sendable {
        case portable(PortableModel)
        case compiled(CompiledArtifact)
    }

    /// The model's metadata.
    public let metadata: Metadata
    /// Where it was loaded from.
    public let url: URL
    /// The architecture of the compiled artifact running it, or `nil` for the reference interpreter.
    public let architecture: String?
    let backend: Backend
    let options: ModelLoadOptions
    /// How the loader chose what runs: candidates, verdicts, specialization.
    public let explanation: LoadExplanation
    /// For a model specialized through a ``SpecializationCache``: data that reopens it with
    /// ``Model/load(resolvingBookmark:options:)`` even after its package is deleted.
    public let bookmarkData: Data?

    init(backend: Backend, url: URL, options: ModelLoadOptions, explanation: LoadExplanation? = nil, bookmark: Data? = nil) {
        self.backend = backend
        bookmarkData = bookmark
        var e = explanation ?? LoadExplanation(host: Architecture.host?.name)
        if explanation == nil, case .compiled = backend { e.chosen = url.path }
        if explanation == nil, case .portable = backend { e.package = url.path; e.specialization = "run by the reference interpreter" }
        self.explanation = e
        switch backend {
        case .portable(let p):
            metadata = p.metadata
            architecture = nil
        case .compiled(let a):
            metadata = a.plan.model.metadata
            architecture = a.header.arch
        }
        self.url = url
        self.options = options
    }

    /// Loads a model.
    ///
    /// Accepts a portable `Name.kiln` package (run by the reference interpreter), a compiled
    /// `Name.<arch>.compiled` artifact (mapped, not copied; its header, plan, arch and weights are
    /// checked), or a directory of them (the best artifact that passes every check, else the
    /// package specialized through the cache).
    /// - Parameters:
    ///   - url: The package, artifact or directory.
    ///   - model: Load only this model of a directory (see ``ModelLoadOptions/model``).
    ///   - options: Load options.
    /// - Returns: The model.
    /// - Throws: ``PackageError`` for a malformed package or artifact, ``RuntimeError`` for anything else.
    public static func load(contentsOf url: URL, model: String? = nil, options: ModelLoadOptions = .default) async throws -> Model {
        var options = options
        if let model { options.model = model }
        let path = url.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw RuntimeError(path: path, reason: "no such file or directory")
        }
        if !isDirectory.boolValue, path.hasSuffix(".\(ModelArchive.fileExtension)") {
            return try loadArchive(path, options)
        }
        if !isDirectory.boolValue, path.hasSuffix(".\(CompiledFormat.fileExtension)") {
            let (artifact, explanation) = try loadArtifact(path, options)
            return Model(backend: .compiled(artifact), url: url, options: options, explanation: explanation)
        }
        if isDirectory.boolValue, !FileManager.default.fileExists(atPath: "\(path)/\(PackageFormat.manifestFileName)") {
            return try await loadDirectory(path, options)
        }
        guard isDirectory.boolValue else {
            throw RuntimeError(path: path, reason: "not a Kiln package, compiled artifact, archive or directory of artifacts")
        }
        try checkName(path, options)
        return Model(backend: .portable(try PackageReader.read(at: path, verifyChecksums: options.verifyChecksums)), url: url, options: options)
    }

    /// `Name` of `…/Name.kiln` or `…/Name.<arch>.compiled`.
    static func fileModelName(_ path: String) -> String? {
        guard let file = ModelFile(path: path), file.isArtifact || file.isPackage else { return nil }
        return file.modelName
    }

    static func checkName(_ path: String, _ options: ModelLoadOptions) throws {
        if let wanted = options.model, let name = fileModelName(path), name != wanted {
            throw RuntimeError(path: path, reason: "is model '\(name)', not '\(wanted)'")
        }
    }

    /// The arch to choose and specialize for: the host's best, capped by ``ModelLoadOptions/maxArchitecture``.
    static func targetArchitecture(_ options: ModelLoadOptions, path: String) throws -> Architecture? {
        guard Architecture.host != nil else { return nil }
        do {
            return try Architecture.host(cappedAt: options.maxArchitecture)
        } catch let e as ArchitectureCapError {
            throw RuntimeError(path: path, reason: "--max-arch: \(e.reason)")
        }
    }

    static func verifier(_ options: ModelLoadOptions) -> ArtifactVerifier {
        ArtifactVerifier(enabled: options.verifyChecksums,
                         cacheDirectory: options.rememberVerifiedFiles ? (options.cache?.directory ?? SpecializationCache.defaultDirectory) : nil)
    }

    /// A directory of `Name.<arch>.compiled` files (and maybe `Name.kiln`): the best artifact the
    /// host runs, else the package specialized through the cache.
    static func loadDirectory(_ path: String, _ options: ModelLoadOptions) async throws -> Model {
        let cache = options.cache ?? SpecializationCache()
        let target = try targetArchitecture(options, path: path)
        var (explanation, artifact) = try ArtifactSelection.select(in: path, runtimeVersion: cache.runtimeVersion, model: options.model,
                                                                   host: target, verifier: verifier(options), keys: options.keyProvider)
        if let artifact, let chosen = explanation.chosen {
            return Model(backend: .compiled(artifact), url: URL(fileURLWithPath: chosen), options: options, explanation: explanation)
        }
        let (files, _) = try ArtifactSelection.files(in: path, model: options.model)
        let packages = files.filter { ModelFile(fileName: $0)?.isPackage ?? false }.sorted()
        guard let package = packages.first.map({ "\(path)/\($0)" }) else {
            let keyRefusals = explanation.candidates.compactMap(\.refusal).filter { $0.kind == .needsKey }.map(\.reason)
            if !keyRefusals.isEmpty {
                throw ArtifactKeyError(path: path, reason: "no artifact runs without a key: " + keyRefusals.joined(separator: "; "))
            }
            let reasons = explanation.candidates.map { "\($0.path): \($0.refusal?.reason ?? "usable")" }
            throw RuntimeError(path: path, reason: reasons.isEmpty
                ? "holds no compiled artifact and no package"
                : "no artifact runs on this host (\(target?.name ?? "unsupported CPU")) and there is no package to specialize: " + reasons.joined(separator: "; "))
        }
        var specialization = SpecializationOptions()
        specialization.threads = options.threads
        specialization.expectFrequentReshapes = options.expectFrequentReshapes
        specialization.policy = options.policy
        specialization.maxArchitecture = options.maxArchitecture
        specialization.verifyChecksums = options.verifyChecksums
        let model = try await cache.specialize(contentsOf: URL(fileURLWithPath: package), options: specialization)
        explanation.package = package
        explanation.chosen = nil
        explanation.specialization = model.explanation.specialization
        explanation.verification = model.explanation.verification
        explanation.warnings += model.explanation.warnings
        return Model(backend: model.backend, url: model.url, options: options, explanation: explanation, bookmark: model.bookmarkData)
    }

    /// Which artifact of a directory this host would load, and why, without loading it
    /// (the chosen artifact's weights are verified, as a load would).
    /// - Parameters:
    ///   - directory: A directory of `Name.<arch>.compiled` files.
    ///   - options: Load options (`model`, `maxArchitecture`, `verifyChecksums`, `cache`).
    /// - Returns: Every candidate's verdict and the chosen one.
    /// - Throws: ``RuntimeError`` when the directory holds several models and none is named.
    public static func explainSelection(inDirectory directory: String, options: ModelLoadOptions = .default) throws -> LoadExplanation {
        let target = try targetArchitecture(options, path: directory)
        return try ArtifactSelection.select(in: directory, runtimeVersion: (options.cache ?? SpecializationCache()).runtimeVersion,
                                            model: options.model, host: target, verifier: verifier(options), keys: options.keyProvider).0
    }

    /// Reopens a model specialized through a cache from its ``bookmarkData``.
    /// - Parameters:
    ///   - data: The bookmark.
    ///   - options: Load options (their `cache` resolves the bookmark; default cache otherwise).
    /// - Returns: The model.
    /// - Throws: ``SpecializationCacheError`` (`.notFound` after eviction or a runtime upgrade).
    public static func load(resolvingBookmark data: Data, options: ModelLoadOptions = .default) async throws -> Model {
        try (options.cache ?? SpecializationCache()).model(resolvingBookmark: data, options: options)
    }

    static func loadArtifact(_ path: String, _ options: ModelLoadOptions) throws -> (CompiledArtifact, LoadExplanation) {
        try checkName(path, options)
        let artifact = try CompiledArtifact.read(at: path, keys: options.keyProvider)
        let header = artifact.header
        guard header.minimumRuntime <= CompiledFormat.runtimeVersion else {
            throw RuntimeError(path: path, reason: "needs Kiln runtime \(header.minimumRuntime) or newer; this is \(CompiledFormat.runtimeVersion)")
        }
        guard let arch = Architecture.named(header.arch) else {
            throw RuntimeError(path: path, reason: "unknown architecture '\(header.arch)'")
        }
        guard arch.isRunnableOnHost else {
            throw RuntimeError(path: path, reason: "is compiled for \(arch.name), which this host cannot run (host: \(Architecture.host?.name ?? "unsupported"))")
        }
        var explanation = LoadExplanation(host: Architecture.host?.name)
        if let target = try targetArchitecture(options, path: path), target != Architecture.host {
            explanation.maxArchitecture = target.name
            guard arch.level <= target.level else {
                throw RuntimeError(path: path, reason: "is compiled for \(arch.name), above the arch cap \(target.name)")
            }
        }
        explanation.chosen = path
        explanation.verification = try verifier(options).verify(artifact, path: path)
        if let id = artifact.encryptionKeyID { explanation.verification! += "; decrypted in memory with key \(id)" }
        return (artifact, explanation)
    }

    /// Bytes of the compiled artifact's weight section (0 for a package run by the interpreter).
    public var weightSectionBytes: Int {
        if case .compiled(let a) = backend { return a.weightBytes }
        return 0
    }

    /// The names of the model's functions, in package order.
    public var functionNames: [String] {
        switch backend {
        case .portable(let p): return p.functions.map(\.name)
        case .compiled(let a): return a.plan.model.functions.map(\.name)
        }
    }

    /// Prepares a function for running.
    /// - Parameter name: The function's name.
    /// - Returns: The function, or `nil` when the model has none of that name.
    /// - Throws: ``InferenceError`` when the function exists but cannot be prepared.
    public func loadFunction(named name: String) async throws -> InferenceFunction? {
        switch backend {
        case .portable(let p):
            guard p.function(named: name) != nil else { return nil }
            return InferenceFunction(try ReferenceInterpreter(model: p, function: name))
        case .compiled(let a):
            guard let i = a.plan.model.functions.firstIndex(where: { $0.name == name }) else { return nil }
            return InferenceFunction(try FunctionExecutor(plan: a.plan, function: i, threads: options.threads,
                                                                     frequentReshapes: options.expectFrequentReshapes))
        }
    }
}

/// The host's best architecture name (CPUID and OS-enabled register state on x86-64,
/// HWCAP on arm64; detected once), or `nil` on a CPU family Kiln has no kernels for.
public var hostArchitectureName: String? { Architecture.host?.name }

/// A function ready to run. Calls from many tasks at once are safe.
public final class InferenceFunction: Sendable {
    /// The function's name.
    public let name: String
    /// Its inputs and outputs.
    public let descriptor: FunctionDescriptor
    let runner: any FunctionRunner

    init(_ runner: any FunctionRunner) {
        self.runner = runner
        name = runner.function.name
        descriptor = FunctionDescriptor(runner.function)
    }

    /// Runs the function.
    /// - Parameter inputs: Arrays by input name; every input must be given, with the
    ///   declared dtype and rank, fixed dims equal and each symbol one size throughout.
    /// - Returns: The outputs by name.
    /// - Throws: ``InferenceError`` naming the function and what is wrong.
    public func run(inputs: [String: NDArray]) async throws -> InferenceOutputs {
        let values = try runner.run(inputs)
        return InferenceOutputs(names: descriptor.outputNames, values: values)
    }

    /// A fresh state for stateful runs (``run(inputs:state:)``).
    /// - Parameters:
    ///   - pairs: The state pairs (default: those the function declares, ``FunctionDescriptor/states``).
    ///   - dims: Sizes of symbolic dims of the state inputs for a fresh state (default: the sizes
    ///     the run's other inputs give them, else 0).
    /// - Throws: ``InferenceError`` when there are no pairs or one does not fit the function.
    public func makeState(pairs: [StatePair]? = nil, dims: [String: Int] = [:]) throws -> InferenceState {
        let pairs = pairs ?? runner.function.states
        var axes: [Int: Int] = [:]
        if let executor = runner as? FunctionExecutor {
            let f = runner.function
            for p in pairs {
                guard let i = f.inputs.firstIndex(where: { $0.name == p.input }), let t = executor.appendTargets[i],
                      f.outputs[t.output].name == p.output else { continue }
                axes[i] = t.axis
            }
        }
        return try InferenceState(function: runner.function, pairs: pairs, dims: dims, axes: axes)
    }

    /// A fresh state of the pairs `rule` names (`INPUT=OUTPUT` rules as `kiln convert --state`
    /// takes them, such as `past_key_values.*=present.*`).
    /// - Throws: ``InferenceError`` when the rule does not fit the function.
    public func makeState(rule: String, dims: [String: Int] = [:]) throws -> InferenceState {
        let pairs: [StatePair]
        do {
            pairs = try StatePair.pairs(rule: rule, in: runner.function)
        } catch let e as OpError {
            throw InferenceError(function: name, reason: e.reason)
        }
        return try makeState(pairs: pairs, dims: dims)
    }

    /// Runs the function with `state` supplying the state inputs; each state's output becomes
    /// its value for the next run (see ``InferenceState``).
    /// - Parameters:
    ///   - inputs: Every input but the states'.
    ///   - state: A state made by this function's ``makeState(pairs:dims:)``.
    /// - Returns: Every output but the states'.
    /// - Throws: ``InferenceError`` naming the function and what is wrong.
    public func run(inputs: [String: NDArray], state: InferenceState) async throws -> InferenceOutputs {
        guard state.functionName == name else {
            throw InferenceError(function: name, reason: "the state was made by function '\(state.functionName)'")
        }
        let values: [String: NDArray]
        if let executor = runner as? FunctionExecutor {
            values = try executor.run(inputs, state: state)
        } else {
            values = try state.runPassingBack(runner, inputs)
        }
        let stateOutputs = Set(state.pairs.map(\.output))
        return InferenceOutputs(names: descriptor.outputNames.filter { !stateOutputs.contains($0) }, values: values)
    }
}

extension Model {
    /// The same loaded model, with the reason a preferred source was not used in its
    /// explanation (``LoadExplanation/fallback``). For loaders with a bundled fallback.
    /// - Parameter reason: Why the preferred source did not load.
    /// - Returns: The model.
    public func loadedAsFallback(because reason: String) -> Model {
        var e = explanation
        e.fallback = reason
        return Model(backend: backend, url: url, options: options, explanation: e, bookmark: bookmarkData)
    }
}
