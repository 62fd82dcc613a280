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
        public var refusal: String?
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

    /// A few lines for people.
    public var description: String {
        var s = "host: \(host ?? "unsupported CPU")\n"
        for c in candidates {
            let verdict = c.path == chosen ? "chosen" : (c.refusal.map { "refused: \($0)" } ?? "usable, not best")
            s += "  \(c.path): \(verdict)\n"
        }
        if candidates.isEmpty { s += "  no compiled artifacts\n" }
        if let package { s += "package: \(package) — \(specialization ?? "not needed")\n" }
        for w in warnings { s += "warning: \(w)\n" }
        return s
    }
}

/// Picks the best artifact of a directory for this host.
enum ArtifactSelection {
    /// `Name.<arch>.compiled` → (`Name`, `arch`), parsing from the right (arch names have no dot).
    static func parse(_ file: String) -> (name: String, arch: String)? {
        guard file.hasSuffix(".\(CompiledFormat.fileExtension)") else { return nil }
        let stem = file.dropLast(CompiledFormat.fileExtension.count + 1)
        guard let dot = stem.lastIndex(of: "."), dot != stem.startIndex else { return nil }
        return (String(stem[..<dot]), String(stem[stem.index(after: dot)...]))
    }

    /// Judges every artifact in `directory`; returns the explanation and the chosen artifact.
    static func select(in directory: String, runtimeVersion: RuntimeVersion) -> (LoadExplanation, CompiledArtifact?) {
        var explanation = LoadExplanation(host: Architecture.host?.name)
        let files = ((try? FileManagerShim.contents(of: directory)) ?? []).sorted()
        var usable: [(Architecture, String, CompiledArtifact)] = []
        for file in files where file.hasSuffix(".\(CompiledFormat.fileExtension)") {
            let path = "\(directory)/\(file)"
            guard let (_, archName) = parse(file) else {
                explanation.candidates.append(.init(path: path, arch: nil, refusal: "name is not Name.<arch>.compiled"))
                continue
            }
            var candidate = LoadExplanation.Candidate(path: path, arch: archName, refusal: nil)
            if let refusal = judge(path, archName, runtimeVersion: runtimeVersion, into: &usable) { candidate.refusal = refusal }
            explanation.candidates.append(candidate)
        }
        guard let best = usable.max(by: { $0.0.level < $1.0.level }) else { return (explanation, nil) }
        explanation.chosen = best.1
        // Usable ones first, best first; then refused ones in name order.
        let rank = Dictionary(usable.map { ($0.1, $0.0.level) }, uniquingKeysWith: max)
        explanation.candidates.sort { a, b in
            switch (rank[a.path], rank[b.path]) {
            case let (x?, y?): return x > y
            case (_?, nil): return true
            case (nil, _?): return false
            default: return a.path < b.path
            }
        }
        return (explanation, best.2)
    }

    static func judge(_ path: String, _ archName: String, runtimeVersion: RuntimeVersion,
                      into usable: inout [(Architecture, String, CompiledArtifact)]) -> String? {
        guard let arch = Architecture.named(archName) else { return "unknown architecture '\(archName)'" }
        guard let host = Architecture.host else { return "this CPU has no Kiln architecture" }
        guard arch.family == host.family else { return "for the \(arch.family) family; this host is \(host.family)" }
        guard arch.isRunnableOnHost else { return "needs \(arch.name) features this CPU or its OS lacks (host: \(host.name))" }
        let artifact: CompiledArtifact
        do {
            artifact = try CompiledArtifact.read(at: path)
        } catch let e as PackageError {
            return e.field.map { "\($0): \(e.reason)" } ?? e.reason
        } catch {
            return "\(error)"
        }
        guard artifact.header.arch == arch.name else { return "header says '\(artifact.header.arch)', the name says '\(arch.name)'" }
        guard artifact.header.minimumRuntime <= runtimeVersion else {
            return "needs runtime \(artifact.header.minimumRuntime) or newer; this is \(runtimeVersion)"
        }
        usable.append((arch, path, artifact))
        return nil
    }
}
