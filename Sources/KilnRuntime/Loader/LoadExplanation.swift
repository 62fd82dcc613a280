import Foundation
import KilnCompiler
import KilnFormat

/// Why a model loaded the way it did: every candidate artifact with its verdict, and
/// whether the portable package had to be specialized.
public struct LoadExplanation: Sendable, CustomStringConvertible {
    /// One artifact the loader looked at.
    public struct Candidate: Sendable {
        /// The artifact's path.
        public var path: String
        /// The arch its name claims (`nil` when the name does not parse).
        public var arch: String?
        /// `nil` when usable; otherwise why it was refused.
        public var refusal: Refusal?
    }

    /// Why the loader refused an artifact: a kind programs switch on, and a sentence for people.
    public struct Refusal: Error, Sendable, Hashable, CustomStringConvertible {
        /// Classes of refusal.
        public enum Kind: String, Sendable, Hashable {
            /// The file name is not `Name.<arch>.compiled`.
            case badName
            /// The arch is unknown, of another CPU family, or needs features this host lacks.
            case wrongArchitecture
            /// The arch is above the cap the caller set.
            case aboveCap
            /// The artifact's format is newer than this runtime reads.
            case newerFormat
            /// The artifact needs a newer runtime.
            case newerRuntime
            /// The artifact is encrypted and no key given opens it.
            case needsKey
            /// A checksum or digest does not match.
            case damaged
            /// The header, the file name and the manifest disagree.
            case mismatch
            /// The file cannot be read as an artifact.
            case unreadable
        }

        /// The class.
        public var kind: Kind
        /// The sentence.
        public var reason: String

        /// Creates a refusal.
        public init(_ kind: Kind, _ reason: String) {
            self.kind = kind
            self.reason = reason
        }

        /// The refusal for an error reading or verifying an artifact.
        /// - Parameter error: What reading threw.
        public init(reading error: any Error) {
            switch error {
            case let e as PackageError:
                let kind: Kind = e.kind == .newerFormat ? .newerFormat : e.kind == .damaged ? .damaged : .unreadable
                self.init(kind, e.field.map { "\($0): \(e.reason)" } ?? e.reason)
            case let e as ArtifactKeyError: self.init(.needsKey, e.reason)
            case let e as Refusal: self = e
            default: self.init(.unreadable, "\(error)")
            }
        }

        public var description: String { reason }

        /// Why an artifact for `archName` cannot load here under the cap `host` (the host's best
        /// arch, or a lower one), or `nil` when it can: the one rule for directories, archives
        /// and manifests.
        /// - Parameters:
        ///   - archName: An arch name, from a file name or a manifest entry.
        ///   - host: The cap (`nil`: this CPU has no Kiln architecture).
        public static func architecture(_ archName: String, host: Architecture?) -> Refusal? {
            guard let arch = Architecture.named(archName) else { return .init(.wrongArchitecture, "unknown architecture '\(archName)'") }
            guard let host else { return .init(.wrongArchitecture, "this CPU has no Kiln architecture") }
            guard arch.family == host.family else { return .init(.wrongArchitecture, "for the \(arch.family) family; this host is \(host.family)") }
            guard arch.isRunnableOnHost else {
                return .init(.wrongArchitecture, "needs \(arch.name) features this CPU or its OS lacks (host: \(Architecture.host?.name ?? host.name))")
            }
            guard arch.level <= host.level else { return .init(.aboveCap, "above the arch cap \(host.name)") }
            return nil
        }
    }

    /// The host's best architecture name.
    public var host: String?
    /// The artifacts considered, best first among usable ones.
    public var candidates: [Candidate] = []
    /// The artifact loaded, if one was.
    public var chosen: String?
    /// The portable package, when specialization was needed.
    public var package: String?
    /// What happened to the package: `cache hit`, `specialized and cached`, `specialized in memory`, ….
    public var specialization: String?
    /// Problems that did not stop the load (for example a read-only cache).
    public var warnings: [String] = []
    /// How the loaded artifact's weights were checked (`nil` for a package run by the interpreter).
    public var verification: String?
    /// The model name the directory was narrowed to (`nil` when it holds one model or none was given).
    public var model: String?
    /// The arch cap in force (`maxArchitecture`, `--max-arch`), if any.
    public var maxArchitecture: String?
    /// Why a model store's installed version was not loaded and its bundled fallback was.
    public var fallback: String?

    /// A few lines for people.
    public var description: String {
        var s = "host: \(host ?? "unsupported CPU")\(maxArchitecture.map { " (capped at \($0))" } ?? "")\n"
        if let model { s += "model: \(model)\n" }
        for c in candidates {
            let verdict = c.path == chosen ? "chosen" : (c.refusal.map { "refused: \($0)" } ?? "usable, not best")
            s += "  \(c.path): \(verdict)\n"
        }
        if candidates.isEmpty { s += "  no compiled artifacts\n" }
        if let package { s += "package: \(package) — \(specialization ?? "not needed")\n" }
        if let verification { s += "verification: \(verification)\n" }
        if let fallback { s += "fallback: \(fallback)\n" }
        for w in warnings { s += "warning: \(w)\n" }
        return s
    }
}


/// Picks the best artifact of a directory for this host: narrows to one model, judges every
/// artifact cheaply (name, arch, header, plan), then verifies the usable ones best first until
/// one passes (weights CRC-32, and `assets.json`'s size and SHA-256 when it lists the file).
enum ArtifactSelection {
    /// `Name.<arch>.compiled` → (`Name`, `arch`); nil for another name.
    static func parse(_ file: String) -> (name: String, arch: String)? {
        guard case .artifact(let name, let arch) = ModelFile(fileName: file) else { return nil }
        return (name, arch)
    }

    /// The directory's entries that belong to the model to load.
    /// - Throws: ``RuntimeError`` when no model is named and the directory holds several, or
    ///   the named one is not there.
    static func files(in directory: String, model: String?) throws -> (files: [String], model: String?) {
        let listing = ModelDirectory(path: directory, files: (try? FileManagerShim.contents(of: directory)) ?? [])
        let all = listing.files, names = listing.modelNames
        if let model {
            guard names.contains(model) else {
                throw RuntimeError(path: directory, reason: names.isEmpty
                    ? "holds no model '\(model)' (no compiled artifact or package at all)"
                    : "holds no model '\(model)'; it holds \(names.map { "'\($0)'" }.joined(separator: ", "))")
            }
            return (listing.files(of: model), model)
        }
        guard names.count <= 1 else {
            throw RuntimeError(path: directory, reason: "holds \(names.count) models (\(names.map { "'\($0)'" }.joined(separator: ", "))); choose one with --model NAME (ModelLoadOptions.model)")
        }
        // Files whose name does not parse are still judged (and refused) for the report.
        return (all, nil)
    }

    /// `assets.json`'s entries by file name, when the directory has a readable one.
    static func manifest(in directory: String, warnings: inout [String]) -> [String: (sha256: String?, bytes: Int?)] {
        let path = ModelDirectory(path: directory, files: []).manifestPath
        guard FileManagerShim.exists(path) else { return [:] }
        guard let bytes = try? FileSystem.readFile(path), let listed = AssetsManifest.listedDigests(bytes) else {
            warnings.append("\(path): not a Kiln assets manifest (no 'artifacts' or 'models' list); its digests were not checked")
            return [:]
        }
        return listed
    }

    /// Judges every artifact in `directory`; returns the explanation and the chosen artifact.
    static func select(in directory: String, runtimeVersion: RuntimeVersion, model: String?, host: Architecture?,
                       verifier: ArtifactVerifier, keys: ArtifactKeyProvider? = nil) throws -> (LoadExplanation, CompiledArtifact?) {
        var explanation = LoadExplanation(host: Architecture.host?.name)
        let (files, name) = try self.files(in: directory, model: model)
        explanation.model = name
        if let host, host != Architecture.host { explanation.maxArchitecture = host.name }
        let listed = manifest(in: directory, warnings: &explanation.warnings)
        var usable: [(Architecture, String, CompiledArtifact, String)] = []
        for file in files where file.hasSuffix(".\(CompiledFormat.fileExtension)") {
            let path = "\(directory)/\(file)"
            guard let (_, archName) = parse(file) else {
                explanation.candidates.append(.init(path: path, arch: nil, refusal: .init(.badName, "name is not Name.<arch>.compiled")))
                continue
            }
            var candidate = LoadExplanation.Candidate(path: path, arch: archName, refusal: nil)
            switch judge(path, archName, runtimeVersion: runtimeVersion, host: host, keys: keys) {
            case .failure(let refusal): candidate.refusal = refusal
            case .success(let (arch, artifact)): usable.append((arch, path, artifact, file))
            }
            explanation.candidates.append(candidate)
        }
        // Verify best first; a damaged artifact is refused and the next one tried.
        usable.sort { ($0.0.level, $1.1) > ($1.0.level, $0.1) }
        var chosen: CompiledArtifact?
        var rank: [String: Int] = [:]
        for (i, (_, path, artifact, file)) in usable.enumerated() {
            if chosen != nil {
                // Not verified: it runs only if the chosen one is removed.
                rank[path] = usable.count - i
                continue
            }
            var refusal: LoadExplanation.Refusal?
            do {
                if let entry = listed[file], let digest = entry.sha256 {
                    explanation.verification = try verifier.verifyListed(artifact, path: path, sha256: digest, bytes: entry.bytes)
                } else {
                    explanation.verification = try verifier.verify(artifact, path: path)
                }
            } catch {
                refusal = LoadExplanation.Refusal(reading: error)
            }
            if let refusal, let k = explanation.candidates.firstIndex(where: { $0.path == path }) {
                explanation.candidates[k].refusal = refusal
                continue
            }
            rank[path] = usable.count - i
            chosen = artifact
            explanation.chosen = path
            if let id = artifact.encryptionKeyID { explanation.verification = (explanation.verification ?? "") + "; decrypted in memory with key \(id)" }
        }
        // Usable ones first, best first; then refused ones in name order.
        explanation.candidates.sort { a, b in
            switch (rank[a.path], rank[b.path]) {
            case let (x?, y?): return x > y
            case (_?, nil): return true
            case (nil, _?): return false
            default: return a.path < b.path
            }
        }
        return (explanation, chosen)
    }

    typealias Refusal = LoadExplanation.Refusal

    /// Whether an arch named in a file name runs here under the cap `host`.
    static func judgeArch(_ archName: String, host: Architecture?) -> Result<Architecture, Refusal> {
        if let refusal = Refusal.architecture(archName, host: host) { return .failure(refusal) }
        return .success(Architecture.named(archName)!)
    }

    /// Everything but the weights: name, arch, host, header, plan.
    static func judge(_ path: String, _ archName: String, runtimeVersion: RuntimeVersion,
                      host: Architecture?, keys: ArtifactKeyProvider? = nil) -> Result<(Architecture, CompiledArtifact), Refusal> {
        let arch: Architecture
        switch judgeArch(archName, host: host) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let a): arch = a
        }
        let artifact: CompiledArtifact
        do {
            artifact = try CompiledArtifact.read(at: path, keys: keys)
        } catch {
            return .failure(Refusal(reading: error))
        }
        guard artifact.header.arch == arch.name else {
            return .failure(.init(.mismatch, "header says '\(artifact.header.arch)', the name says '\(arch.name)'"))
        }
        guard artifact.header.minimumRuntime <= runtimeVersion else {
            return .failure(.init(.newerRuntime, "needs runtime \(artifact.header.minimumRuntime) or newer; this is \(runtimeVersion)"))
        }
        return .success((arch, artifact))
    }
}
