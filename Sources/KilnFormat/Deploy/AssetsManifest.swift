import Foundation

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
        /// The artifact's compiled-format version, as the compiler recorded it.
        public var formatVersion: Int?
        /// The SHA-256 of the package it was compiled from, 64 hex digits.
        public var sourceDigest: String?
        /// The entry as the manifest wrote it (copied into an install's manifest).
        package var jsonData = Data()
        package var parsedJSON: Any { (try? JSONSerialization.jsonObject(with: jsonData)) ?? [String: Any]() }

        /// An entry; `jsonData` is the entry as a manifest wrote it, when it was read from one.
        public init(arch: String, file: String, bytes: Int, sha256: String, minimumRuntime: RuntimeVersion? = nil,
                    encryptionKeyID: String? = nil, formatVersion: Int? = nil, sourceDigest: String? = nil, jsonData: Data = Data()) {
            self.arch = arch
            self.file = file
            self.bytes = bytes
            self.sha256 = sha256
            self.minimumRuntime = minimumRuntime
            self.encryptionKeyID = encryptionKeyID
            self.formatVersion = formatVersion
            self.sourceDigest = sourceDigest
            self.jsonData = jsonData
        }

        /// The entry as `kiln compile` writes it.
        public var json: JSON {
            var fields: [(String, JSON)] = [("arch", .string(arch)), ("file", .string(file)), ("bytes", .int(bytes)), ("sha256", .string(sha256))]
            if let formatVersion { fields.append(("formatVersion", .int(formatVersion))) }
            if let minimumRuntime { fields.append(("minimumRuntimeVersion", .string(minimumRuntime.description))) }
            if let sourceDigest { fields.append(("sourceDigest", .string(sourceDigest))) }
            if let url { fields.append(("url", .string(url))) }
            if let encryptionKeyID { fields.append(("encryptionKeyID", .string(encryptionKeyID))) }
            if isDefault { fields.append(("default", .bool(true))) }
            return .object(fields)
        }

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

        package var isEmpty: Bool { cpuFeatures.isEmpty && memoryBytes == nil && runtimeVersion == nil }
    }

    /// One model's artifacts.
    public struct Model: Sendable {
        /// The model name.
        public var name: String
        /// Its version, when the manifest names one.
        public var version: String?
        /// Its artifacts.
        public var artifacts: [Entry]

        /// A model's artifacts.
        public init(name: String, version: String?, artifacts: [Entry]) {
            self.name = name
            self.version = version
            self.artifacts = artifacts
        }

        /// The one-model manifest `kiln compile` writes, as JSON.
        public var json: JSON {
            .object([("model", .string(name))] + (version.map { [("version", JSON.string($0))] } ?? []) + [("artifacts", .array(artifacts.map(\.json)))])
        }
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

    /// A manifest.
    public init(models: [Model], collections: [Collection] = []) {
        self.models = models
        self.collections = collections
    }

    /// The models.
    public var models: [Model]
    /// The collections.
    public var collections: [Collection]

    /// The model named `name`, else the only one.
    /// - Throws: ``PackageError`` when the manifest holds several and none is named, or not `name`.
    public func model(_ name: String?, source: String) throws -> Model {
        if let name {
            guard let m = models.first(where: { $0.name == name }) else {
                throw PackageError(path: source, reason: "lists no model '\(name)'; it lists \(models.map { "'\($0.name)'" }.joined(separator: ", "))")
            }
            return m
        }
        guard models.count == 1 else {
            throw PackageError(path: source, reason: "lists \(models.count) models (\(models.map { "'\($0.name)'" }.joined(separator: ", "))); choose one with --model NAME")
        }
        return models[0]
    }

    /// Parses a manifest.
    /// - Parameters:
    ///   - bytes: The JSON.
    ///   - source: Its URL or path, for errors.
    /// - Throws: ``PackageError`` naming the source and the field that is wrong.
    public static func parse(_ bytes: [UInt8], source: String) throws -> AssetsManifest {
        guard let root = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any] else {
            throw PackageError(path: source, reason: "not a JSON object")
        }
        var models: [Model] = []
        if root["artifacts"] != nil {
            models.append(try model(root, at: "", source: source))
        }
        if let list = root["models"] {
            guard let list = list as? [[String: Any]] else { throw PackageError(path: source, field: "models", reason: "is not a list of objects") }
            for (i, m) in list.enumerated() { models.append(try model(m, at: "models[\(i)].", source: source)) }
        }
        guard !models.isEmpty else { throw PackageError(path: source, reason: "not a Kiln assets manifest (no 'artifacts' or 'models')") }
        var seen = Set<String>()
        for m in models where !seen.insert(m.name).inserted {
            throw PackageError(path: source, reason: "lists model '\(m.name)' twice")
        }
        var collections: [Collection] = []
        if let list = root["collections"] {
            guard let list = list as? [[String: Any]] else { throw PackageError(path: source, field: "collections", reason: "is not a list of objects") }
            for (i, c) in list.enumerated() {
                guard let name = c["name"] as? String, isName(name) else {
                    throw PackageError(path: source, field: "collections[\(i)].name", reason: "is missing or not a plain name")
                }
                let version = try self.version(c["version"], at: "collections[\(i)].version", source: source)
                guard let members = c["models"] as? [String], !members.isEmpty else {
                    throw PackageError(path: source, field: "collections[\(i)].models", reason: "is missing or empty")
                }
                for m in members where !seen.contains(m) {
                    throw PackageError(path: source, reason: "collection '\(name)' names model '\(m)', which the manifest does not list")
                }
                guard Set(members).count == members.count else { throw PackageError(path: source, reason: "collection '\(name)' names a model twice") }
                collections.append(Collection(name: name, version: version, models: members))
            }
        }
        return AssetsManifest(models: models, collections: collections)
    }

    /// What a manifest lists to verify, read leniently: each artifact's file with its SHA-256
    /// and size where given, from a manifest that ``parse(_:source:)`` may refuse as incomplete
    /// (a hand-written one without sizes, say). The loader checks what is listed rather than
    /// nothing. Nil when the bytes hold no `artifacts` or `models` list at all.
    public static func listedDigests(_ bytes: [UInt8]) -> [String: (sha256: String?, bytes: Int?)]? {
        guard let root = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any],
              let artifacts = (root["artifacts"] as? [[String: Any]])
                ?? (root["models"] as? [[String: Any]])?.flatMap({ ($0["artifacts"] as? [[String: Any]]) ?? [] }) else { return nil }
        var out: [String: (sha256: String?, bytes: Int?)] = [:]
        for a in artifacts {
            guard let file = a["file"] as? String else { continue }
            let digest = (a["sha256"] as? String).flatMap { $0.count == 64 && $0.allSatisfy(\.isHexDigit) ? $0.lowercased() : nil }
            out[file] = (digest, a["bytes"] as? Int)
        }
        return out
    }

    static func isName(_ s: String) -> Bool {
        ModelArchive.isPlainFileName(s) && !s.hasPrefix(".") && !s.contains(" ")
    }

    static func version(_ value: Any?, at field: String, source: String) throws -> String? {
        guard let value else { return nil }
        guard let v = value as? String, ModelVersion.isValid(v) else {
            throw PackageError(path: source, field: field, reason: ModelVersion.rule)
        }
        return v
    }

    static func model(_ m: [String: Any], at prefix: String, source: String) throws -> Model {
        guard let name = m["model"] as? String, isName(name) else {
            throw PackageError(path: source, field: "\(prefix)model", reason: "is missing or not a plain name")
        }
        let version = try self.version(m["version"], at: "\(prefix)version", source: source)
        guard let list = m["artifacts"] as? [[String: Any]], !list.isEmpty else {
            throw PackageError(path: source, field: "\(prefix)artifacts", reason: "is missing, empty or not a list of objects")
        }
        var entries: [Entry] = []
        for (i, a) in list.enumerated() {
            let at = "\(prefix)artifacts[\(i)]"
            guard let arch = a["arch"] as? String, !arch.isEmpty else { throw PackageError(path: source, field: "\(at).arch", reason: "is missing") }
            guard let file = a["file"] as? String, isName(file) else {
                throw PackageError(path: source, field: "\(at).file", reason: "is missing or not a plain file name")
            }
            guard ModelFile(fileName: file) == .artifact(name: name, arch: arch) else {
                throw PackageError(path: source, field: "\(at).file", reason: "'\(file)' is not \(name).\(arch).compiled")
            }
            guard let bytes = a["bytes"] as? Int, bytes > 0, bytes < 1 << 50 else {
                throw PackageError(path: source, field: "\(at).bytes", reason: "is missing or not a positive integer below 2^50")
            }
            guard let sha = a["sha256"] as? String, sha.count == 64, sha.allSatisfy({ $0.isHexDigit }) else {
                throw PackageError(path: source, field: "\(at).sha256", reason: "is missing or not 64 hex digits")
            }
            var e = Entry(arch: arch, file: file, bytes: bytes, sha256: sha.lowercased(),
                          jsonData: (try? JSONSerialization.data(withJSONObject: a, options: [.sortedKeys])) ?? Data())
            if let v = a["minimumRuntimeVersion"] {
                guard let text = v as? String, let r = RuntimeVersion(text) else { throw PackageError(path: source, field: "\(at).minimumRuntimeVersion", reason: "is not X.Y") }
                e.minimumRuntime = r
            }
            e.encryptionKeyID = a["encryptionKeyID"] as? String
            e.formatVersion = a["formatVersion"] as? Int
            e.sourceDigest = a["sourceDigest"] as? String
            if let u = a["url"] {
                guard let text = u as? String, !text.isEmpty, text.utf8.count <= 8192 else {
                    throw PackageError(path: source, field: "\(at).url", reason: "is not a non-empty URL string")
                }
                e.url = text
            }
            if let d = a["default"] {
                guard let flag = d as? Bool else { throw PackageError(path: source, field: "\(at).default", reason: "is not true or false") }
                e.isDefault = flag
            }
            if let r = a["requires"] {
                guard let r = r as? [String: Any] else { throw PackageError(path: source, field: "\(at).requires", reason: "is not an object") }
                for key in r.keys where !["cpuFeatures", "memoryBytes", "runtimeVersion"].contains(key) {
                    // An unknown rule cannot be checked: the entry must not be chosen by mistake.
                    throw PackageError(path: source, field: "\(at).requires.\(key)", reason: "is not a rule this runtime knows (cpuFeatures, memoryBytes, runtimeVersion)")
                }
                if let f = r["cpuFeatures"] {
                    guard let list = f as? [String] else { throw PackageError(path: source, field: "\(at).requires.cpuFeatures", reason: "is not a list of names") }
                    e.requires.cpuFeatures = list
                }
                if let mem = r["memoryBytes"] {
                    guard let n = mem as? Int, n >= 0 else { throw PackageError(path: source, field: "\(at).requires.memoryBytes", reason: "is not a byte count") }
                    e.requires.memoryBytes = n
                }
                if let v = r["runtimeVersion"] {
                    guard let text = v as? String, let rv = RuntimeVersion(text) else { throw PackageError(path: source, field: "\(at).requires.runtimeVersion", reason: "is not X.Y") }
                    e.requires.runtimeVersion = rv
                }
            }
            guard !entries.contains(where: { $0.file == file }) else { throw PackageError(path: source, field: "\(at).file", reason: "'\(file)' is listed twice") }
            entries.append(e)
        }
        return Model(name: name, version: version, artifacts: entries)
    }
}

