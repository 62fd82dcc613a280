import Foundation
import KilnFormat
import KilnRuntime

/// Options of ``ModelStore/install(from:model:options:)``.
public struct FetchOptions: Sendable {
    /// Seconds without progress before a transfer fails (default 60).
    public var timeout: Double = 60
    /// Never choose an arch above this one.
    public var maxArchitecture: String? = nil
    /// Versions to keep per model after an install, the current one included (default 3).
    public var keep = 3

    public init() {}
}

/// What an install did.
public struct InstallResult: Sendable {
    /// The model or collection name.
    public var name: String
    /// The version now current.
    public var version: String
    /// Its directory.
    public var directory: String
    /// The files of the version: (model, file, arch).
    public var files: [(model: String, file: String, arch: String)]
    /// Bytes downloaded (0 when nothing changed).
    public var downloadedBytes: Int
    /// Files reused from an installed version instead of downloaded.
    public var reusedFiles: Int
    /// `true` when the current version already matched the manifest: nothing was downloaded.
    public var upToDate: Bool
    /// Each model's artifact verdicts, for the report.
    public var verdicts: [(model: String, file: String, verdict: String)]
    /// Versions removed by pruning.
    public var pruned: [String]
}

/// One installed model or collection.
public struct InstalledItem: Sendable {
    /// One installed version.
    public struct Version: Sendable {
        /// The version name.
        public var version: String
        /// Its directory.
        public var directory: String
        /// Install order (higher is newer).
        public var sequence: Int
        /// Its artifact files.
        public var files: [String]
        /// Their bytes.
        public var bytes: Int
        /// Where it was fetched from.
        public var source: String?
    }

    /// The model or collection name.
    public var name: String
    /// `true` for a collection.
    public var isCollection: Bool
    /// The models it holds.
    public var models: [String]
    /// The current version's directory name, if the link is set.
    public var current: String?
    /// Every version, newest first.
    public var versions: [Version]
}

/// A directory of installed models: `DIR/<name>/<version>/` with the version's artifacts and an
/// `assets.json`, and `DIR/<name>/current`, a link switched atomically (`specs/deployment.md`).
///
/// An install downloads only the artifact this host runs, into a staging directory inside
/// `DIR`; checks size and SHA-256; fsyncs; renames the version into place; then switches
/// `current`. A failure at any step removes the staging directory and leaves the previous
/// install as it was. Installs into one store are serialized by a lock file.
public struct ModelStore: Sendable {
    /// The store's directory.
    public let directory: String

    /// A store at `directory` (created on first install).
    public init(directory: String) {
        self.directory = directory
    }

    static let manifestName = ModelFile.manifestFileName
    static let manifestLimit = 16 << 20

    /// Installs the best artifact of one model of a manifest or archive.
    /// - Parameters:
    ///   - source: An `assets.json` or `.kilnarchive`: `http://`, `https://`, `file://` or a path.
    ///   - model: The model, when the manifest lists several.
    ///   - options: Timeout, arch cap, versions to keep.
    /// - Returns: What was installed or found up to date.
    /// - Throws: ``StoreError`` naming the source and what is wrong; nothing changed on disk.
    public func install(from source: String, model: String? = nil, options: FetchOptions = FetchOptions()) throws -> InstallResult {
        try withLock {
            try withSource(source, options) { manifest, fetchFile, origin in
                let m = try manifest.model(model, source: origin)
                let entry = try choose(m, options, origin: origin)
                let version = m.version ?? String(entry.0.sha256.prefix(12))
                let record: [String: Any] = ["model": m.name, "version": version, "artifacts": [entry.0.parsedJSON]]
                return try installSet(slot: m.name, version: version, members: [(m.name, entry.0)], record: record,
                                      verdicts: entry.1.map { (m.name, $0.file, $0.verdict) }, origin: origin, options: options, fetchFile: fetchFile)
            }
        }
    }

    /// Installs every model of a collection, all or none, as one version of the collection.
    /// - Throws: ``StoreError``; when any member fails nothing is installed.
    public func installCollection(from source: String, named name: String, options: FetchOptions = FetchOptions()) throws -> InstallResult {
        try withLock {
            try withSource(source, options) { manifest, fetchFile, origin in
                guard let c = manifest.collections.first(where: { $0.name == name }) else {
                    throw StoreError(path: origin, reason: manifest.collections.isEmpty ? "lists no collections"
                        : "lists no collection '\(name)'; it lists \(manifest.collections.map { "'\($0.name)'" }.joined(separator: ", "))")
                }
                var members: [(String, AssetsManifest.Entry)] = []
                var verdicts: [(String, String, String)] = []
                var models: [[String: Any]] = []
                var versionHash = SHA256()
                for modelName in c.models {
                    let m = try manifest.model(modelName, source: origin)
                    let (entry, v) = try choose(m, options, origin: origin)
                    members.append((m.name, entry))
                    verdicts += v.map { (m.name, $0.file, $0.verdict) }
                    var record: [String: Any] = ["model": m.name, "artifacts": [entry.parsedJSON]]
                    if let mv = m.version { record["version"] = mv }
                    models.append(record)
                    Array("\(m.name)\0\(entry.sha256)\0".utf8).withUnsafeBytes { versionHash.update($0) }
                }
                let version = c.version ?? String(SHA256.hex(versionHash.finalize()).prefix(12))
                let record: [String: Any] = ["collection": c.name, "version": version, "models": models]
                return try installSet(slot: c.name, version: version, members: members, record: record, verdicts: verdicts,
                                      origin: origin, options: options, fetchFile: fetchFile)
            }
        }
    }

    func choose(_ m: AssetsManifest.Model, _ options: FetchOptions, origin: String) throws
        -> (AssetsManifest.Entry, [(file: String, verdict: String)]) {
        let host = try HostTarget.current(maxArchitecture: options.maxArchitecture)
        let (entry, verdicts) = host.choose(m)
        guard let entry else {
            throw StoreError(path: origin, reason: "no artifact of '\(m.name)' suits this host (\(host.architecture?.name ?? "unsupported CPU")): "
                + verdicts.map { "\($0.file): \($0.verdict)" }.joined(separator: "; "))
        }
        return (entry, verdicts)
    }

    /// Opens a manifest or archive source and runs `body` with it and a way to fetch a listed
    /// file into a path. A remote archive is downloaded to a temporary file first.
    func withSource(_ text: String, _ options: FetchOptions,
                    _ body: (AssetsManifest, _ fetch: (AssetsManifest.Entry, String) throws -> Int, _ origin: String) throws -> InstallResult) throws -> InstallResult {
        let source = try Source(text)
        let transfer = Transfer(timeout: options.timeout)
        if source.fileName.hasSuffix(".\(ModelArchive.fileExtension)") {
            var archivePath = source.path ?? ""
            var temporary: String?
            var archiveBytes = 0
            defer { if let temporary { unlink(temporary) } }
            if source.url != nil {
                try FileSystem.makeDirectories(directory)
                let t = "\(directory)/.download-\(getpid())-\(UInt32.random(in: 0 ... .max)).\(ModelArchive.fileExtension)"
                temporary = t
                archiveBytes = try transfer.download(source, to: t, bytes: nil, sha256: nil)
                archivePath = t
            }
            let archive: ModelArchive
            do { archive = try ModelArchive(at: archivePath) } catch let e as PackageError {
                throw StoreError(path: text, reason: [e.field, e.reason].compactMap { $0 }.joined(separator: ": "))
            }
            let manifest = try Self.manifest(of: archive, origin: text)
            var result = try body(manifest, { entry, destination in
                guard let member = archive.member(named: entry.file) else {
                    throw StoreError(path: text, reason: "the archive has no member '\(entry.file)'")
                }
                do { try archive.verify(member) } catch let e as PackageError {
                    throw StoreError(path: text, reason: [e.field, e.reason].compactMap { $0 }.joined(separator: ": "))
                }
                guard member.sha256 == entry.sha256, member.range.count == entry.bytes else {
                    throw StoreError(path: text, reason: "member '\(entry.file)' differs from the archive's assets.json")
                }
                try FileSystem.writeAtomically(destination, [archive.bytes(of: member)])
                return 0
            }, text)
            // The whole archive was downloaded (even when the install was found up to date).
            result.downloadedBytes += archiveBytes
            return result
        }
        let manifestBytes = try transfer.read(source, limit: Self.manifestLimit)
        let manifest = try AssetsManifest.parse(manifestBytes, source: text)
        return try body(manifest, { entry, destination in
            try transfer.download(try entry.url.map { try source.resolve($0) } ?? source.sibling(entry.file), to: destination,
                                  bytes: entry.bytes, sha256: entry.sha256)
        }, text)
    }

    /// An archive's `assets.json`, or one made from its members' names and index digests.
    static func manifest(of archive: ModelArchive, origin: String) throws -> AssetsManifest {
        if let m = archive.member(named: manifestName) {
            do { try archive.verify(m) } catch let e as PackageError {
                throw StoreError(path: origin, reason: [e.field, e.reason].compactMap { $0 }.joined(separator: ": "))
            }
            return try AssetsManifest.parse(Array(archive.bytes(of: m)), source: "\(origin) (assets.json)")
        }
        var models: [String: [AssetsManifest.Entry]] = [:]
        for member in archive.members {
            guard case .artifact(let name, let arch) = ModelFile(fileName: member.name) else { continue }
            let json: [String: Any] = ["arch": arch, "file": member.name, "bytes": member.range.count, "sha256": member.sha256]
            models[name, default: []].append(AssetsManifest.Entry(arch: arch, file: member.name, bytes: member.range.count,
                                                                   sha256: member.sha256,
                                                                   jsonData: (try? JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])) ?? Data()))
        }
        guard !models.isEmpty else { throw StoreError(path: origin, reason: "the archive holds no compiled artifact") }
        return AssetsManifest(models: models.keys.sorted().map { AssetsManifest.Model(name: $0, version: nil, artifacts: models[$0]!) },
                              collections: [])
    }

    /// Stages, verifies and switches one version of a slot (a model or a collection).
    func installSet(slot: String, version: String, members: [(String, AssetsManifest.Entry)], record: [String: Any],
                    verdicts: [(String, String, String)], origin: String, options: FetchOptions,
                    fetchFile: (AssetsManifest.Entry, String) throws -> Int) throws -> InstallResult {
        let slotDir = "\(directory)/\(slot)"
        let files = members.map { ($0.0, $0.1.file, $0.1.arch) }
        var result = InstallResult(name: slot, version: version, directory: "", files: files, downloadedBytes: 0, reusedFiles: 0,
                                   upToDate: false, verdicts: verdicts, pruned: [])
        let installed = (try? list(slot).first) ?? nil
        if let current = installed?.current, let v = installed?.versions.first(where: { URL(fileURLWithPath: $0.directory).lastPathComponent == current }),
           v.version == version, Self.holds("\(slotDir)/\(current)", members.map(\.1)) {
            result.directory = "\(slotDir)/\(current)"
            result.upToDate = true
            return result
        }
        let staging = try makeStaging()
        defer { Self.removeTree(staging) }
        let stagedVersion = "\(staging)/v"
        guard mkdir(stagedVersion, 0o755) == 0 else { throw StoreError(path: stagedVersion, reason: "cannot create the staging directory") }
        for (_, entry) in members {
            let destination = "\(stagedVersion)/\(entry.file)"
            if let existing = installed?.versions.first(where: { Self.holds($0.directory, [entry]) }),
               link("\(existing.directory)/\(entry.file)", destination) == 0 {
                result.reusedFiles += 1
                continue
            }
            result.downloadedBytes += try fetchFile(entry, destination)
        }
        var full = record
        full["installed"] = ["source": origin, "sequence": min(installed?.versions.map(\.sequence).max() ?? 0, Int.max - 1) + 1] as [String: Any]
        let json = try JSONSerialization.data(withJSONObject: full, options: [.prettyPrinted, .sortedKeys])
        try AtomicFile.write([Array(json) + [10]], to: "\(stagedVersion)/\(Self.manifestName)")
        Self.sync(stagedVersion)
        do { try FileSystem.makeDirectories(slotDir) } catch { throw StoreError(path: slotDir, reason: "cannot create the directory") }
        // The version's directory: its name, or a free variant when another install of that
        // name (different content) exists.
        var dirName = version
        var n = 2
        while FileManager.default.fileExists(atPath: "\(slotDir)/\(dirName)") {
            dirName = "\(version)-r\(n)"
            n += 1
        }
        let final = "\(slotDir)/\(dirName)"
        guard rename(stagedVersion, final) == 0 else { throw StoreError(path: final, reason: "cannot move the new version into place (\(String(cString: strerror(errno))))") }
        let link = "\(slotDir)/.current-\(getpid())"
        unlink(link)
        guard symlink(dirName, link) == 0, rename(link, "\(slotDir)/current") == 0 else {
            unlink(link)
            Self.removeTree(final)
            throw StoreError(path: "\(slotDir)/current", reason: "cannot switch the link (\(String(cString: strerror(errno))))")
        }
        Self.sync(slotDir)
        result.directory = final
        result.pruned = (try? prune(keep: options.keep, name: slot, locked: true)) ?? []
        return result
    }

    /// Whether `dir` holds each entry's file with its size, and its manifest lists the digest.
    static func holds(_ dir: String, _ entries: [AssetsManifest.Entry]) -> Bool {
        guard let recorded = try? recordedEntries(dir) else { return false }
        for e in entries {
            guard recorded.contains(where: { $0.file == e.file && $0.sha256 == e.sha256 && $0.bytes == e.bytes }) else { return false }
            var st = stat()
            guard stat("\(dir)/\(e.file)", &st) == 0, Int(st.st_size) == e.bytes else { return false }
        }
        return true
    }

    /// The artifact entries an installed version's manifest lists.
    static func recordedEntries(_ dir: String) throws -> [AssetsManifest.Entry] {
        let bytes = try FileSystem.readFile("\(dir)/\(manifestName)")
        return try AssetsManifest.parse(bytes, source: "\(dir)/\(manifestName)").models.flatMap(\.artifacts)
    }

    func makeStaging() throws -> String {
        var template = Array("\(directory)/.staging-XXXXXX".utf8CString)
        guard let p = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw StoreError(path: directory, reason: "cannot create a staging directory (\(String(cString: strerror(errno))))")
        }
        return String(cString: p)
    }

    /// Runs `body` holding the store's lock; removes staging left by an interrupted install.
    func withLock<T>(_ body: () throws -> T) throws -> T {
        var isDir: ObjCBool = false
        let existed = FileManager.default.fileExists(atPath: directory, isDirectory: &isDir)
        guard !existed || isDir.boolValue else { throw StoreError(path: directory, reason: "not a directory") }
        do { try FileSystem.makeDirectories(directory) } catch {
            throw StoreError(path: directory, reason: "cannot create the store directory")
        }
        let fd = open("\(directory)/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError(path: directory, reason: "cannot open the store's lock file (\(String(cString: strerror(errno))))") }
        var succeeded = false
        defer {
            close(fd)
            // A first install that failed leaves no store behind.
            if !succeeded, !existed, ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []) == [".lock"] {
                unlink("\(directory)/.lock")
                rmdir(directory)
            }
        }
        guard flock(fd, LOCK_EX) == 0 else { throw StoreError(path: directory, reason: "cannot lock the store") }
        // Under the lock no other install runs: any staging or download left is from a killed one.
        for name in (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            where name.hasPrefix(".staging-") || name.hasPrefix(".download-") {
            Self.removeTree("\(directory)/\(name)")
        }
        let result = try body()
        succeeded = true
        return result
    }

    static func removeTree(_ path: String) { try? FileManager.default.removeItem(atPath: path) }

    static func sync(_ dir: String) {
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }

    // MARK: Listing and pruning

    /// The installed models and collections (or only `name`).
    /// - Throws: ``StoreError`` when the store cannot be read.
    public func list(_ name: String? = nil) throws -> [InstalledItem] {
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory, isDirectory: &isDir), isDir.boolValue else {
            throw StoreError(path: directory, reason: "no such store directory")
        }
        let names = try name.map { [$0] } ?? FileManager.default.contentsOfDirectory(atPath: directory).filter { !$0.hasPrefix(".") }.sorted()
        var out: [InstalledItem] = []
        for slot in names {
            let slotDir = "\(directory)/\(slot)"
            guard FileManager.default.fileExists(atPath: slotDir, isDirectory: &isDir), isDir.boolValue else { continue }
            let current = try? FileManager.default.destinationOfSymbolicLink(atPath: "\(slotDir)/current")
            var item = InstalledItem(name: slot, isCollection: false, models: [], current: current, versions: [])
            for v in ((try? FileManager.default.contentsOfDirectory(atPath: slotDir)) ?? []) where !v.hasPrefix(".") && v != "current" {
                let dir = "\(slotDir)/\(v)"
                guard let data = try? FileSystem.readFile("\(dir)/\(Self.manifestName)"),
                      let root = (try? JSONSerialization.jsonObject(with: Data(data))) as? [String: Any] else { continue }
                let installed = root["installed"] as? [String: Any]
                let entries = (try? Self.recordedEntries(dir)) ?? []
                if root["collection"] != nil { item.isCollection = true }
                let models = (try? AssetsManifest.parse(data, source: dir).models.map(\.name)) ?? []
                if v == current || item.models.isEmpty { item.models = models }
                item.versions.append(.init(version: root["version"] as? String ?? v, directory: dir,
                                           sequence: installed?["sequence"] as? Int ?? 0, files: entries.map(\.file),
                                           bytes: entries.reduce(0) { $0 + $1.bytes }, source: installed?["source"] as? String))
            }
            guard !item.versions.isEmpty || current != nil else { continue }
            item.versions.sort { $0.sequence > $1.sequence }
            out.append(item)
        }
        return out
    }

    /// Removes all but the `keep` newest versions of each slot (or of `name`); the current one stays.
    /// - Returns: The directories removed.
    public func prune(keep: Int, name: String? = nil) throws -> [String] {
        try withLock { try prune(keep: keep, name: name, locked: true) }
    }

    func prune(keep: Int, name: String?, locked: Bool) throws -> [String] {
        var removed: [String] = []
        for item in try list(name) {
            // The current version counts toward `keep`.
            let others = max(keep, 1) - (item.current == nil ? 0 : 1)
            var kept = 0
            for v in item.versions {
                if URL(fileURLWithPath: v.directory).lastPathComponent == item.current { continue }
                if kept < others {
                    kept += 1
                    continue
                }
                Self.removeTree(v.directory)
                removed.append(v.directory)
            }
        }
        return removed
    }

    /// Removes a model or collection (or one version of it; the current one only with the rest).
    /// - Returns: The directories removed.
    /// - Throws: ``StoreError`` when it is not installed, or `version` is current.
    public func remove(_ name: String, version: String? = nil) throws -> [String] {
        try withLock {
            guard let item = try list(name).first else { throw StoreError(path: directory, reason: "'\(name)' is not installed") }
            guard let version else {
                Self.removeTree("\(directory)/\(name)")
                return ["\(directory)/\(name)"]
            }
            guard let v = item.versions.first(where: { $0.version == version || URL(fileURLWithPath: $0.directory).lastPathComponent == version }) else {
                throw StoreError(path: "\(directory)/\(name)", reason: "has no version '\(version)'; it has \(item.versions.map(\.version).joined(separator: ", "))")
            }
            guard URL(fileURLWithPath: v.directory).lastPathComponent != item.current else {
                throw StoreError(path: v.directory, reason: "is the current version; remove the whole model, or install another version first")
            }
            Self.removeTree(v.directory)
            return [v.directory]
        }
    }

    /// The current version's directory holding `model` (its own slot, else a collection's), resolved.
    public func currentDirectory(of model: String) -> String? {
        func resolved(_ slot: String) -> String? {
            let link = "\(directory)/\(slot)/current"
            guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: link) else { return nil }
            let dir = target.hasPrefix("/") ? target : "\(directory)/\(slot)/\(target)"
            return FileManager.default.fileExists(atPath: dir) ? dir : nil
        }
        if let dir = resolved(model) { return dir }
        for item in (try? list()) ?? [] where item.isCollection && item.models.contains(model) {
            if let dir = resolved(item.name) { return dir }
        }
        return nil
    }
}
