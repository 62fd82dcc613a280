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

/// The name rule of model versions, which name install directories.
public enum ModelVersion {
    /// What a version may be.
    public static let rule = "a version is 1–64 letters, digits, '.', '_' or '-', not starting with '.'"

    /// Whether `v` follows ``rule``.
    public static func isValid(_ v: String) -> Bool {
        guard !v.isEmpty, v.utf8.count <= 64, !v.hasPrefix(".") else { return false }
        return v.unicodeScalars.allSatisfy { ($0.isASCII && ($0.properties.isAlphabetic || ("0" ... "9").contains($0))) || "._-".unicodeScalars.contains($0) }
    }
}

/// `assets.json`: the artifacts of one or more models, and collections of models that update
/// together (`specs/deployment.md`).
public struct AssetsManifest: Sendable {
    /// One artifact file.
    public struct Entry: Sendable, Equatable {
        /// Its architecture name.
        public var arch: String
        /// Its file name, relative to the manifest.
        public var file: String
        /// Its size.
        public var bytes: Int
        /// Its SHA-256, 64 lowercase hex digits.
        public var sha256: String
        /// The oldest runtime that loads it.
        public var minimumRuntime: RuntimeVersion?
        /// Where to download it, when not beside the manifest: an absolute URL or a reference
        /// relative to the manifest (for example a mirror, or a presigned URL).
        public var url: String?
        /// The key id when it is encrypted.
        public var encryptionKeyID: String?
        /// Targeting rules a host must meet (beyond running `arch`).
        public var requires = Requirements()
        /// Chosen when no other entry's rules hold.
        public var isDefault = false
        /// The entry as the manifest wrote it (copied into an install's manifest).
        var jsonData = Data()
        var json: Any { (try? JSONSerialization.jsonObject(with: jsonData)) ?? [String: Any]() }

        public static func == (a: Entry, b: Entry) -> Bool {
            (a.arch, a.file, a.bytes, a.sha256, a.isDefault) == (b.arch, b.file, b.bytes, b.sha256, b.isDefault)
        }
    }

    /// Targeting rules, as Core ML deployment targets device classes.
    public struct Requirements: Sendable, Equatable {
        /// CPU feature names (as `kiln host` lists them) the host must have.
        public var cpuFeatures: [String] = []
        /// Physical memory the host must have.
        public var memoryBytes: Int?
        /// The oldest runtime allowed.
        public var runtimeVersion: RuntimeVersion?

        var isEmpty: Bool { cpuFeatures.isEmpty && memoryBytes == nil && runtimeVersion == nil }
    }

    /// One model's artifacts.
    public struct Model: Sendable {
        /// The model name.
        public var name: String
        /// Its version, when the manifest names one.
        public var version: String?
        /// Its artifacts.
        public var artifacts: [Entry]
    }

    /// Models that install together, all or none.
    public struct Collection: Sendable {
        /// The collection's name.
        public var name: String
        /// Its version, when the manifest names one.
        public var version: String?
        /// Its members' model names.
        public var models: [String]
    }

    /// The models.
    public var models: [Model]
    /// The collections.
    public var collections: [Collection]

    /// The model named `name`, else the only one.
    /// - Throws: ``StoreError`` when the manifest holds several and none is named, or not `name`.
    public func model(_ name: String?, source: String) throws -> Model {
        if let name {
            guard let m = models.first(where: { $0.name == name }) else {
                throw StoreError(path: source, reason: "lists no model '\(name)'; it lists \(models.map { "'\($0.name)'" }.joined(separator: ", "))")
            }
            return m
        }
        guard models.count == 1 else {
            throw StoreError(path: source, reason: "lists \(models.count) models (\(models.map { "'\($0.name)'" }.joined(separator: ", "))); choose one with --model NAME")
        }
        return models[0]
    }

    /// Parses a manifest.
    /// - Parameters:
    ///   - bytes: The JSON.
    ///   - source: Its URL or path, for errors.
    /// - Throws: ``StoreError`` naming the source and the field that is wrong.
    public static func parse(_ bytes: [UInt8], source: String) throws -> AssetsManifest {
        guard let root = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw StoreError(path: source, reason: "not a JSON object")
        }
        var models: [Model] = []
        if root["artifacts"] != nil {
            models.append(try model(root, at: "", source: source))
        }
        if let list = root["models"] {
            guard let list = list as? [[String: Any]] else { throw StoreError(path: source, reason: "'models' is not a list of objects") }
            for (i, m) in list.enumerated() { models.append(try model(m, at: "models[\(i)].", source: source)) }
        }
        guard !models.isEmpty else { throw StoreError(path: source, reason: "not a Kiln assets manifest (no 'artifacts' or 'models')") }
        var seen = Set<String>()
        for m in models where !seen.insert(m.name).inserted {
            throw StoreError(path: source, reason: "lists model '\(m.name)' twice")
        }
        var collections: [Collection] = []
        if let list = root["collections"] {
            guard let list = list as? [[String: Any]] else { throw StoreError(path: source, reason: "'collections' is not a list of objects") }
            for (i, c) in list.enumerated() {
                guard let name = c["name"] as? String, isName(name) else {
                    throw StoreError(path: source, reason: "collections[\(i)].name is missing or not a plain name")
                }
                let version = try self.version(c["version"], at: "collections[\(i)].version", source: source)
                guard let members = c["models"] as? [String], !members.isEmpty else {
                    throw StoreError(path: source, reason: "collections[\(i)].models is missing or empty")
                }
                for m in members where !seen.contains(m) {
                    throw StoreError(path: source, reason: "collection '\(name)' names model '\(m)', which the manifest does not list")
                }
                guard Set(members).count == members.count else { throw StoreError(path: source, reason: "collection '\(name)' names a model twice") }
                collections.append(Collection(name: name, version: version, models: members))
            }
        }
        return AssetsManifest(models: models, collections: collections)
    }

    static func isName(_ s: String) -> Bool {
        ModelArchive.isPlainFileName(s) && !s.hasPrefix(".") && !s.contains(" ")
    }

    static func version(_ value: Any?, at field: String, source: String) throws -> String? {
        guard let value else { return nil }
        guard let v = value as? String, ModelVersion.isValid(v) else {
            throw StoreError(path: source, reason: "\(field): \(ModelVersion.rule)")
        }
        return v
    }

    static func model(_ m: [String: Any], at prefix: String, source: String) throws -> Model {
        guard let name = m["model"] as? String, isName(name) else {
            throw StoreError(path: source, reason: "\(prefix)model is missing or not a plain name")
        }
        let version = try self.version(m["version"], at: "\(prefix)version", source: source)
        guard let list = m["artifacts"] as? [[String: Any]], !list.isEmpty else {
            throw StoreError(path: source, reason: "\(prefix)artifacts is missing, empty or not a list of objects")
        }
        var entries: [Entry] = []
        for (i, a) in list.enumerated() {
            let at = "\(prefix)artifacts[\(i)]"
            guard let arch = a["arch"] as? String, !arch.isEmpty else { throw StoreError(path: source, reason: "\(at).arch is missing") }
            guard let file = a["file"] as? String, isName(file) else {
                throw StoreError(path: source, reason: "\(at).file is missing or not a plain file name")
            }
            guard let parsed = parseArtifactFileName(file), parsed.name == name, parsed.arch == arch else {
                throw StoreError(path: source, reason: "\(at).file '\(file)' is not \(name).\(arch).compiled")
            }
            guard let bytes = a["bytes"] as? Int, bytes > 0, bytes < 1 << 50 else {
                throw StoreError(path: source, reason: "\(at).bytes is missing or not a positive integer below 2^50")
            }
            guard let sha = a["sha256"] as? String, sha.count == 64, sha.allSatisfy({ $0.isHexDigit }) else {
                throw StoreError(path: source, reason: "\(at).sha256 is missing or not 64 hex digits")
            }
            var e = Entry(arch: arch, file: file, bytes: bytes, sha256: sha.lowercased(),
                          jsonData: (try? JSONSerialization.data(withJSONObject: a, options: [.sortedKeys])) ?? Data())
            if let v = a["minimumRuntimeVersion"] {
                guard let text = v as? String, let r = RuntimeVersion(text) else { throw StoreError(path: source, reason: "\(at).minimumRuntimeVersion is not X.Y") }
                e.minimumRuntime = r
            }
            e.encryptionKeyID = a["encryptionKeyID"] as? String
            if let u = a["url"] {
                guard let text = u as? String, !text.isEmpty, text.utf8.count <= 8192 else {
                    throw StoreError(path: source, reason: "\(at).url is not a non-empty URL string")
                }
                e.url = text
            }
            if let d = a["default"] {
                guard let flag = d as? Bool else { throw StoreError(path: source, reason: "\(at).default is not true or false") }
                e.isDefault = flag
            }
            if let r = a["requires"] {
                guard let r = r as? [String: Any] else { throw StoreError(path: source, reason: "\(at).requires is not an object") }
                for key in r.keys where !["cpuFeatures", "memoryBytes", "runtimeVersion"].contains(key) {
                    // An unknown rule cannot be checked: the entry must not be chosen by mistake.
                    throw StoreError(path: source, reason: "\(at).requires.\(key) is not a rule this runtime knows (cpuFeatures, memoryBytes, runtimeVersion)")
                }
                if let f = r["cpuFeatures"] {
                    guard let list = f as? [String] else { throw StoreError(path: source, reason: "\(at).requires.cpuFeatures is not a list of names") }
                    e.requires.cpuFeatures = list
                }
                if let mem = r["memoryBytes"] {
                    guard let n = mem as? Int, n >= 0 else { throw StoreError(path: source, reason: "\(at).requires.memoryBytes is not a byte count") }
                    e.requires.memoryBytes = n
                }
                if let v = r["runtimeVersion"] {
                    guard let text = v as? String, let rv = RuntimeVersion(text) else { throw StoreError(path: source, reason: "\(at).requires.runtimeVersion is not X.Y") }
                    e.requires.runtimeVersion = rv
                }
            }
            guard !entries.contains(where: { $0.file == file }) else { throw StoreError(path: source, reason: "\(at).file '\(file)' is listed twice") }
            entries.append(e)
        }
        return Model(name: name, version: version, artifacts: entries)
    }
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
