import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime

/// A deployment or store problem: the manifest, source, download or install directory named,
/// and what is wrong.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    /// The URL, file or directory involved.
    public var path: String
    /// What is wrong.
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

extension StoreError: KilnError {
    public var errorKind: KilnErrorKind { .io }
    public var errorPath: String? { path }
    public var errorField: String? { nil }
}

/// What a host is, for choosing an artifact from a manifest without downloading the others:
/// the loader's arch rules plus the manifest's targeting rules.
public struct HostTarget: Sendable {
    /// The best arch to choose (the host's, or under a cap).
    public var architecture: Architecture?
    /// This runtime's version.
    public var runtimeVersion = CompiledFormat.runtimeVersion
    /// The CPU features present (names as `kiln host` lists them).
    public var cpuFeatures: Set<String>
    /// Physical memory.
    public var memoryBytes: Int

    /// This host, capped at `maxArchitecture` when given.
    /// - Throws: ``StoreError`` for a cap that names no usable arch.
    public static func current(maxArchitecture: String? = nil) throws -> HostTarget {
        var arch: Architecture?
        if Architecture.host != nil {
            do { arch = try Architecture.host(cappedAt: maxArchitecture) } catch {
                throw StoreError(path: "--max-arch", reason: "\(error)")
            }
        }
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), size = sysconf(Int32(_SC_PAGESIZE))
        return HostTarget(architecture: arch, cpuFeatures: Set(Architecture.hostFeatures.filter(\.present).map(\.name)),
                          memoryBytes: pages > 0 && size > 0 ? pages * size : 0)
    }

    /// Why `entry` does not suit this host, or `nil` when it does.
    /// - Parameter rules: Check the entry's targeting rules too (not for a default entry).
    public func refusal(_ entry: AssetsManifest.Entry, rules: Bool = true) -> String? {
        if let r = LoadExplanation.Refusal.architecture(entry.arch, host: architecture) { return r.reason }
        if let r = entry.minimumRuntime, runtimeVersion < r { return "needs runtime \(r) or newer; this is \(runtimeVersion)" }
        guard rules else { return nil }
        if let r = entry.requires.runtimeVersion, runtimeVersion < r { return "targets runtime \(r) or newer; this is \(runtimeVersion)" }
        let missing = entry.requires.cpuFeatures.filter { !cpuFeatures.contains($0) }
        if !missing.isEmpty { return "targets CPUs with \(missing.joined(separator: ", ")), which this host lacks" }
        if let m = entry.requires.memoryBytes, memoryBytes < m { return "targets hosts with at least \(m) bytes of memory; this one has \(memoryBytes)" }
        return nil
    }

    /// The entry of `model` to install here: the best arch whose rules all hold, else the best
    /// default entry the host runs.
    /// - Returns: The entry, and every entry's verdict for the report.
    public func choose(_ model: AssetsManifest.Model) -> (AssetsManifest.Entry?, [(file: String, verdict: String)]) {
        func level(_ e: AssetsManifest.Entry) -> Int { Architecture.named(e.arch)?.level ?? -1 }
        let ordered = model.artifacts.sorted { (level($0), $1.file) > (level($1), $0.file) }
        var verdicts: [(file: String, verdict: Verdict)] = []
        var chosen: AssetsManifest.Entry?
        for e in ordered {
            if let r = refusal(e) {
                verdicts.append((e.file, .refused(r)))
            } else if chosen == nil {
                chosen = e
                verdicts.append((e.file, .chosen))
            } else {
                verdicts.append((e.file, .usable))
            }
        }
        if chosen == nil, let d = ordered.first(where: { $0.isDefault && refusal($0, rules: false) == nil }),
           let i = verdicts.firstIndex(where: { $0.file == d.file }) {
            chosen = d
            verdicts[i].verdict = .chosenAsDefault(verdicts[i].verdict)
        }
        // Chosen first, then usable, then refused; each group best arch first.
        let order = Dictionary(uniqueKeysWithValues: ordered.enumerated().map { ($1.file, $0) })
        verdicts.sort { ($0.verdict.rank, order[$0.file] ?? 0) < ($1.verdict.rank, order[$1.file] ?? 0) }
        return (chosen, verdicts.map { ($0.file, $0.verdict.description) })
    }

    /// What `choose` decided of one entry.
    indirect enum Verdict: CustomStringConvertible {
        case chosen, usable, refused(String), chosenAsDefault(Verdict)

        var rank: Int {
            switch self {
            case .chosen, .chosenAsDefault: return 0
            case .usable: return 1
            case .refused: return 2
            }
        }

        var description: String {
            switch self {
            case .chosen: return "chosen"
            case .usable: return "usable, not best"
            case .refused(let r): return "refused: \(r)"
            case .chosenAsDefault(let v): return "chosen as the default entry (\(v))"
            }
        }
    }
}
