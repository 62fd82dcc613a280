import Foundation
import KilnCompiler
import KilnFormat

/// How to specialize a portable package for this host.
public struct SpecializationOptions: Sendable {
    /// The defaults.
    public static let `default` = SpecializationOptions()
    /// CPU only (today the same as the default: Kiln runs on CPUs).
    public static let cpuOnly = SpecializationOptions()
    /// Threads each call may use (default: the number of cores). Does not change the artifact.
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// Where the specialized artifact lives in the cache.
    public var policy: SpecializationCache.Policy = .evictable
    /// Input sizes change on most runs: plans derived for new sizes are not cached (see
    /// ``ModelLoadOptions/expectFrequentReshapes``). Does not change the artifact.
    public var expectFrequentReshapes = false
    /// Specialize for the host's best arch at or below this one (see ``ModelLoadOptions/maxArchitecture``).
    public var maxArchitecture: String? = nil
    /// Verify a cached artifact's weights before using it (remembered per unchanged file; default `true`).
    public var verifyChecksums = true

    /// Creates options with the defaults.
    public init() {}
}

/// Why the cache could not give a model.
public struct SpecializationCacheError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable { case notFound, invalidBookmark }
    /// The kind.
    public var kind: Kind
    /// A sentence.
    public var reason: String
    /// The sentence.
    public var description: String { reason }
}

/// Specialized artifacts of portable packages for this host, on disk, keyed by content.
///
/// The key is the SHA-256 of the package's contents, the compile options, the runtime version
/// and the host arch — never a path or a modification time. Entries are written atomically
/// (temp file, fsync, rename) under a per-key file lock, so two processes specializing the same
/// package do the work once. `.evictable` entries are pruned least-recently-used first past
/// `maxBytes`; `.persistent` ones only by `clear(all:)`. An unwritable directory degrades to
/// specializing in memory (the load succeeds, with a warning in its explanation).
public final class SpecializationCache: Sendable {
    /// Where an entry lives.
    public enum Policy: String, Sendable, CaseIterable {
        /// Subject to the size cap (default).
        case evictable
        /// Never evicted automatically.
        case persistent
    }

    /// One cached artifact.
    public struct Entry: Sendable {
        /// Its key (hex).
        public var key: String
        /// Its policy.
        public var policy: Policy
        /// The artifact file.
        public var path: String
        /// Its size.
        public var bytes: Int
        /// Last use (modification time).
        public var lastUsed: Date
        /// The package it came from, as recorded when it was made (informational).
        public var source: String
    }

    /// The cache directory: evictable entries, locks and the verified-file memo.
    public let directory: String
    /// Where persistent entries live (`$XDG_DATA_HOME/kiln` by default: Linux treats
    /// `~/.cache` as disposable; the same as ``directory`` when one is given).
    public let persistentDirectory: String
    /// Size cap of evictable entries.
    public let maxBytes: Int
    /// The runtime version keys and bookmarks are made for (injectable for tests).
    public let runtimeVersion: RuntimeVersion

    /// `$XDG_CACHE_HOME/kiln`, else `~/.cache/kiln`.
    public static var defaultDirectory: String {
        if let x = ProcessInfo.processInfo.environment["XDG_CACHE_HOME"], x.hasPrefix("/") { return "\(x)/kiln" }
        return "\(NSHomeDirectory())/.cache/kiln"
    }

    /// `$XDG_DATA_HOME/kiln`, else `~/.local/share/kiln`: where persistent entries live by default.
    public static var defaultPersistentDirectory: String {
        if let x = ProcessInfo.processInfo.environment["XDG_DATA_HOME"], x.hasPrefix("/") { return "\(x)/kiln" }
        return "\(NSHomeDirectory())/.local/share/kiln"
    }

    /// A cache.
    ///
    /// A directory shared by a group of users works when it is setgid (`chmod g+s`): entries,
    /// locks and memo records made in it are group-writable, so another member reuses them.
    /// - Parameters:
    ///   - directory: Its directory (default ``defaultDirectory``); share one between programs by
    ///     choosing it. When given, persistent entries live in it too.
    ///   - persistentDirectory: Where persistent entries live (default: `directory` when that is
    ///     given, else ``defaultPersistentDirectory``).
    ///   - maxBytes: Size cap of evictable entries (default 2 GiB).
    ///   - runtimeVersion: The runtime version (default: this build's).
    public init(directory: String? = nil, persistentDirectory: String? = nil, maxBytes: Int = 2 << 30,
                runtimeVersion: RuntimeVersion = CompiledFormat.runtimeVersion) {
        self.directory = directory ?? SpecializationCache.defaultDirectory
        self.persistentDirectory = persistentDirectory ?? directory ?? SpecializationCache.defaultPersistentDirectory
        self.maxBytes = maxBytes
        self.runtimeVersion = runtimeVersion
    }

    func root(_ p: Policy) -> String { p == .persistent ? persistentDirectory : directory }
    func folder(_ p: Policy) -> String { "\(root(p))/\(p.rawValue)" }
    func artifactPath(_ key: String, _ p: Policy) -> String { "\(folder(p))/\(key).\(CompiledFormat.fileExtension)" }

    /// The cache key of a package for this host and runtime.
    func key(forPackageAt path: String, maxArchitecture: String? = nil) throws -> (key: String, arch: Architecture, digest: [UInt8]) {
        guard Architecture.host != nil else { throw RuntimeError(path: path, reason: "this CPU has no Kiln architecture to specialize for") }
        let arch: Architecture
        do { arch = try Architecture.host(cappedAt: maxArchitecture) } catch { throw RuntimeError(path: path, reason: "--max-arch: \(error)") }
        let digest = try PackageReader.manifestDigest(ofPackageAt: path)
        var h = SHA256()
        let text = "kiln-specialization;runtime=\(runtimeVersion);arch=\(arch.name);options=\(SHA256.hex(Compiler.Options(arch: arch).digest));package=\(SHA256.hex(digest))"
        Array(text.utf8).withUnsafeBytes { h.update($0) }
        return (SHA256.hex(h.finalize()), arch, digest)
    }

    /// The cached specialization of a package, without specializing.
    /// - Parameters:
    ///   - url: The portable package.
    ///   - options: Specialization options.
    /// - Returns: The model, or `nil` when nothing valid is cached.
    /// - Throws: ``PackageError`` when the package cannot be read.
    public func model(for url: URL, options: SpecializationOptions = .default) async throws -> Model? {
        let (key, _, _) = try key(forPackageAt: url.path, maxArchitecture: options.maxArchitecture)
        return try cached(key, package: url.path, options: options)?.0
    }

    func cached(_ key: String, package: String, options: SpecializationOptions, note: String? = nil) throws -> (Model, Policy)? {
        for p in Policy.allCases {
            let path = artifactPath(key, p)
            guard FileManagerShim.exists(path) else { continue }
            do {
                // Cached entries are checked whole (weights once per unchanged file): a corrupt
                // one is removed and rebuilt.
                let artifact = try CompiledArtifact.read(at: path)
                let verification = try ArtifactVerifier(enabled: options.verifyChecksums, cacheDirectory: directory).verify(artifact, path: path)
                utimes(path, nil)
                var explanation = LoadExplanation(host: Architecture.host?.name)
                explanation.package = package
                explanation.chosen = path
                explanation.verification = verification
                explanation.specialization = note ?? "cache hit (\(path))"
                var load = ModelLoadOptions()
                load.threads = options.threads
                load.expectFrequentReshapes = options.expectFrequentReshapes
                return (Model(backend: .compiled(artifact), url: URL(fileURLWithPath: path), options: load,
                              explanation: explanation, bookmark: bookmark(key, p)), p)
            } catch {
                unlink(path)
            }
        }
        return nil
    }

    /// Specializes a package for this host ahead of time (or returns the cached result).
    /// - Parameters:
    ///   - url: The portable package.
    ///   - options: Specialization options.
    /// - Returns: The ready model; its ``Model/bookmarkData`` reopens it later.
    /// - Throws: ``PackageError`` for a malformed package, ``CompileError`` when it cannot be compiled.
    public func specialize(contentsOf url: URL, options: SpecializationOptions = .default) async throws -> Model {
        let path = url.path
        let (key, arch, _) = try key(forPackageAt: path, maxArchitecture: options.maxArchitecture)
        if let (model, _) = try cached(key, package: path, options: options) { return model }
        var warnings: [String] = []
        var lockFD: Int32 = -1
        if SharedDirectory.make(folder(options.policy)), SharedDirectory.make("\(directory)/locks") {
            lockFD = open("\(directory)/locks/\(key).lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o664)
            if lockFD >= 0 { SharedDirectory.share(fd: lockFD, in: "\(directory)/locks") }
        } else {
            warnings.append("cache directory \(root(options.policy)) is not writable; specializing in memory")
        }
        defer { if lockFD >= 0 { flock(lockFD, LOCK_UN); close(lockFD) } }
        if lockFD >= 0 {
            flock(lockFD, LOCK_EX)
            // Another process may have finished while this one waited.
            if let (model, _) = try cached(key, package: path, options: options) { return model }
        } else if warnings.isEmpty {
            warnings.append("cannot lock in \(directory); specializing in memory")
        }
        let portable = try PackageReader.read(at: path)
        let digest = try PackageReader.digest(ofPackageAt: path)
        let (header, plan) = try Compiler.compile(portable, options: Compiler.Options(arch: arch), sourceDigest: digest)
        let chunks = CompiledArtifact.serialize(header: header, plan: plan)
        var load = ModelLoadOptions()
        load.threads = options.threads
        load.expectFrequentReshapes = options.expectFrequentReshapes
        if lockFD >= 0 {
            let target = artifactPath(key, options.policy)
            do {
                try AtomicFile.write(chunks, to: target)
                SharedDirectory.share(path: target, in: folder(options.policy))
                let record: [String: String] = ["source": path, "arch": arch.name, "runtime": runtimeVersion.description]
                let json = try JSONSerialization.data(withJSONObject: record, options: [.sortedKeys])
                try AtomicFile.write([Array(json)], to: "\(folder(options.policy))/\(key).json")
                SharedDirectory.share(path: "\(folder(options.policy))/\(key).json", in: folder(options.policy))
                if options.policy == .evictable { prune(maxBytes: maxBytes, keeping: key) }
                if let (model, _) = try cached(key, package: path, options: options,
                                               note: "specialized for \(arch.name) and cached (\(target))") {
                    return model
                }
                warnings.append("the cached artifact could not be read back; using the in-memory one")
            } catch {
                warnings.append("cannot write to the cache (\(error)); specializing in memory")
            }
        }
        let artifact = try chunks.flatMap { $0 }.withUnsafeBytes { raw in
            try CompiledArtifact.read(raw, verifyWeights: false) { ByteStorage(copying: UnsafeRawBufferPointer(rebasing: raw[$0])) }
        }
        var explanation = LoadExplanation(host: arch.name)
        explanation.package = path
        explanation.specialization = "specialized for \(arch.name) in memory"
        explanation.warnings = warnings
        return Model(backend: .compiled(artifact), url: url, options: load, explanation: explanation)
    }

    func bookmark(_ key: String, _ p: Policy) -> Data {
        let record: [String: String] = ["kiln-bookmark": "1", "key": key, "policy": p.rawValue, "directory": root(p),
                                        "runtime": runtimeVersion.description]
        return (try? JSONSerialization.data(withJSONObject: record, options: [.sortedKeys])) ?? Data()
    }

    /// Reopens a specialized model from its bookmark, even after its package was deleted.
    /// - Parameters:
    ///   - data: ``Model/bookmarkData``.
    ///   - options: Load options.
    /// - Returns: The model.
    /// - Throws: ``SpecializationCacheError`` `.notFound` when the entry was evicted or made by
    ///   another runtime version; `.invalidBookmark` for bytes that are not a bookmark.
    public func model(resolvingBookmark data: Data, options: ModelLoadOptions = .default) throws -> Model {
        guard let record = (try? JSONSerialization.jsonObject(with: data)) as? [String: String], record["kiln-bookmark"] == "1",
              let key = record["key"], key.count == 64, key.allSatisfy(\.isHexDigit),
              let policy = record["policy"].flatMap(Policy.init(rawValue:)), let version = record["runtime"] else {
            throw SpecializationCacheError(kind: .invalidBookmark, reason: "not a Kiln specialization bookmark")
        }
        guard version == runtimeVersion.description else {
            throw SpecializationCacheError(kind: .notFound, reason: "bookmark was made by runtime \(version); this is \(runtimeVersion) — specialize again")
        }
        let dir = record["directory"] ?? directory
        let path = "\(dir)/\(policy.rawValue)/\(key).\(CompiledFormat.fileExtension)"
        guard FileManagerShim.exists(path) else {
            throw SpecializationCacheError(kind: .notFound, reason: "the specialized model was evicted or removed (\(path))")
        }
        let artifact: CompiledArtifact
        let verification: String
        do {
            artifact = try CompiledArtifact.read(at: path)
            verification = try ArtifactVerifier(enabled: options.verifyChecksums, cacheDirectory: options.rememberVerifiedFiles ? directory : nil).verify(artifact, path: path)
        } catch {
            throw SpecializationCacheError(kind: .notFound, reason: "the specialized model is damaged (\(error)); specialize again")
        }
        utimes(path, nil)
        var explanation = LoadExplanation(host: Architecture.host?.name)
        explanation.chosen = path
        explanation.verification = verification
        explanation.specialization = "reopened from a bookmark"
        return Model(backend: .compiled(artifact), url: URL(fileURLWithPath: path), options: options, explanation: explanation, bookmark: data)
    }

    /// The cached entries, most recently used first.
    public func entries() -> [Entry] {
        var out: [Entry] = []
        for p in Policy.allCases {
            for file in (try? FileManagerShim.contents(of: folder(p))) ?? [] where file.hasSuffix(".\(CompiledFormat.fileExtension)") {
                let path = "\(folder(p))/\(file)"
                guard let attributes = try? FileManager.default.attributesOfItem(atPath: path) else { continue }
                let key = String(file.dropLast(CompiledFormat.fileExtension.count + 1))
                let json = (try? Data(contentsOf: URL(fileURLWithPath: "\(folder(p))/\(key).json")))
                    .flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: String] }
                out.append(Entry(key: key, policy: p, path: path, bytes: (attributes[.size] as? Int) ?? 0,
                                 lastUsed: (attributes[.modificationDate] as? Date) ?? .distantPast, source: json?["source"] ?? ""))
            }
        }
        return out.sorted { $0.lastUsed > $1.lastUsed }
    }

    /// Removes least-recently-used evictable entries until they total at most `maxBytes`,
    /// and leftover temporary files.
    /// - Parameters:
    ///   - maxBytes: The cap.
    ///   - keeping: A key never removed (the one just made).
    /// - Returns: The entries removed.
    @discardableResult
    public func prune(maxBytes: Int, keeping: String? = nil) -> [Entry] {
        for p in Policy.allCases {
            for file in (try? FileManagerShim.contents(of: folder(p))) ?? [] where file.contains(".tmp-") {
                unlink("\(folder(p))/\(file)")
            }
        }
        let evictable = entries().filter { $0.policy == .evictable }
        var total = evictable.reduce(0) { $0 + $1.bytes }
        var removed: [Entry] = []
        for e in evictable.reversed() where total > maxBytes && e.key != keeping {
            remove(e)
            total -= e.bytes
            removed.append(e)
        }
        pruneVerifiedMemo(keeping: SpecializationCache.verifiedRecordLimit)
        return removed
    }

    /// The verified-file memo keeps at most this many records (about 4 KiB of directory each).
    static let verifiedRecordLimit = 4096

    /// Removes the oldest verified-file records past `keeping`, and leftover temporary ones.
    func pruneVerifiedMemo(keeping limit: Int) {
        let memo = "\(directory)/verified"
        var records: [(String, Int)] = []
        for file in (try? FileManagerShim.contents(of: memo)) ?? [] {
            let path = "\(memo)/\(file)"
            if file.contains(".tmp-") { unlink(path); continue }
            var st = stat()
            if stat(path, &st) == 0 { records.append((path, Int(st.st_mtim.tv_sec))) }
        }
        guard records.count > limit else { return }
        for (path, _) in records.sorted(by: { $0.1 < $1.1 }).prefix(records.count - limit) { unlink(path) }
    }

    /// Removes every evictable entry, and persistent ones too with `all`.
    /// - Parameter all: Also remove persistent entries.
    /// - Returns: The entries removed.
    @discardableResult
    public func clear(all: Bool = false) -> [Entry] {
        let gone = entries().filter { all || $0.policy == .evictable }
        gone.forEach(remove)
        pruneVerifiedMemo(keeping: 0)
        return gone
    }

    func remove(_ e: Entry) {
        unlink(e.path)
        unlink("\(folder(e.policy))/\(e.key).json")
    }
}
