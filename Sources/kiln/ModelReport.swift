import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime

/// What `kiln inspect` shows, the same for every form of a model: a package, an artifact, a
/// directory of artifacts and an `assets.json`. The model sections (metadata, parameters, size,
/// precisions, operations, signatures, weights) come from the package or from the summary of it
/// each artifact records; artifacts add their own section, directories and manifests a verdict
/// per artifact.
struct ModelReport {
    /// One artifact of a directory or manifest.
    struct Member {
        var file: String
        var arch: String?
        var bytes: Int?
        var sha256: String?
        var verdict: String
        var reason: String?
    }

    var path: String
    var kind: String
    var name: String
    var metadata: Metadata
    var sizeBytes: Int
    var summary: SourceSummary
    /// Set when the summary is not the package's own record.
    var summaryNote: String?
    var functions: [Function]
    var artifact: CompiledArtifact?
    var artifactPath: String?
    var weightsIntact: Bool?
    var members: [Member] = []
    var host: String?

    static func make(_ path: String, model: String?, keys: ArtifactKeyProvider? = nil) throws -> ModelReport {
        let kind = FileManagerShimCLI.kind(path)
        let file = ModelFile(path: path)
        switch kind {
        case _ where file?.isPackage ?? false:
            // The package reader names what is wrong with a missing or malformed package.
            return try package(path, kind: "package", sizePath: path, model: model)
        case .missing:
            throw Failure(message: "\(path): no such file or directory")
        case .package:
            return try package(path, kind: "package", sizePath: path, model: model)
        case .file where path.hasSuffix(".\(CompiledFormat.fileExtension)"):
            if let model, let name = file?.modelName, name != model {
                throw Failure(message: "\(path): is model '\(name)', not '\(model)'")
            }
            return try compiled(path, kind: "compiled", size: fileSize(path), keys: keys)
        case .file where path.hasSuffix(".\(ModelArchive.fileExtension)"):
            return try archive(path, model: model, keys: keys)
        case .file where path.hasSuffix(".json"):
            return try manifest(path, model: model, keys: keys)
        case .file:
            throw Failure(message: "\(path): not a Kiln package, compiled artifact, directory of artifacts or assets.json")
        case .directory:
            return try directory(path, model: model, keys: keys)
        }
    }

    static func fileSize(_ path: String) -> Int {
        ((try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int) ?? 0
    }

    static func package(_ path: String, kind: String, sizePath: String, model: String?) throws -> ModelReport {
        let p = try PackageReader.read(at: path)
        return ModelReport(path: path, kind: kind, name: InspectCommand.name(p, path: path), metadata: p.metadata,
                           sizeBytes: PackageReader.diskSize(ofPackageAt: path), summary: SourceSummary(p), summaryNote: nil,
                           functions: p.functions, artifact: nil, artifactPath: nil, weightsIntact: nil, host: Architecture.host?.name)
    }

    static func compiled(_ path: String, kind: String, size: Int, keys: ArtifactKeyProvider? = nil) throws -> ModelReport {
        report(try CompiledArtifact.read(at: path, keys: keys), path: path, kind: kind, size: size)
    }

    /// A `.kilnarchive`: the artifact this host would load from it (else any intact one), and
    /// every member's verdict.
    static func archive(_ path: String, model: String?, keys: ArtifactKeyProvider?) throws -> ModelReport {
        let archive: ModelArchive
        do { archive = try ModelArchive(at: path) } catch let e as PackageError { throw Failure(message: e.description) }
        let names = Set(archive.members.compactMap { ModelFile(fileName: $0.name).flatMap { $0.isArtifact ? $0.modelName : nil } }).sorted()
        if let model, !names.contains(model) {
            throw Failure(message: "\(path): holds no model '\(model)'; it holds \(names.map { "'\($0)'" }.joined(separator: ", "))")
        }
        if model == nil, names.count > 1 {
            throw Failure(message: "\(path): holds \(names.count) models (\(names.map { "'\($0)'" }.joined(separator: ", "))); choose one with --model NAME")
        }
        var members: [Member] = []
        var best: (level: Int, file: String, artifact: CompiledArtifact)?
        for m in archive.members {
            guard case .artifact(let name, let arch) = ModelFile(fileName: m.name), model == nil || name == model else { continue }
            var member = Member(file: m.name, arch: arch, bytes: m.range.count, sha256: m.sha256, verdict: "present")
            do {
                try archive.verify(m)
                let a = try CompiledArtifact.read(in: archive, member: m, verifyWeights: true, keys: keys)
                let level = Architecture.named(arch).map { $0.isRunnableOnHost ? $0.level : 0 } ?? 0
                if best == nil || level > best!.level { best = (level, m.name, a) }
            } catch let e as PackageError {
                member.verdict = "refused"
                member.reason = [e.field, e.reason].compactMap { $0 }.joined(separator: ": ")
            } catch {
                member.verdict = "refused"
                member.reason = "\(error)"
            }
            members.append(member)
        }
        guard let chosen = best else {
            throw Failure(message: "\(path): holds no readable artifact" + (members.isEmpty ? "" : ": " + members.map { "\($0.file): \($0.reason ?? $0.verdict)" }.joined(separator: "; ")))
        }
        var report = report(chosen.artifact, path: path, kind: "archive", size: archive.bytes.count)
        report.artifactPath = "\(path)#\(chosen.file)"
        for k in members.indices where members[k].file == chosen.file { members[k].verdict = "shown" }
        report.members = members
        return report
    }

    static func report(_ a: CompiledArtifact, path: String, kind: String, size: Int) -> ModelReport {
        var intact = true
        do { try a.verifyWeights() } catch { intact = false }
        var note: String?
        let summary: SourceSummary
        if let s = a.plan.source {
            summary = s
        } else {
            summary = SourceSummary(a.plan.model)
            note = "compiler \(a.header.compilerVersion) recorded no summary of the package; parameters, precisions and operations are the plan's"
        }
        let file = URL(fileURLWithPath: path).lastPathComponent
        let name = a.plan.model.metadata.name.isEmpty ? (ModelFile(fileName: file)?.modelName ?? file) : a.plan.model.metadata.name
        return ModelReport(path: path, kind: kind, name: name, metadata: a.plan.model.metadata, sizeBytes: size, summary: summary,
                           summaryNote: note, functions: a.plan.model.functions, artifact: a, artifactPath: path,
                           weightsIntact: intact, host: Architecture.host?.name)
    }

    static func directory(_ path: String, model: String?, keys: ArtifactKeyProvider? = nil) throws -> ModelReport {
        var options = ModelLoadOptions()
        options.keyProvider = keys
        options.model = model
        options.rememberVerifiedFiles = false
        let e: LoadExplanation
        do {
            e = try Model.explainSelection(inDirectory: path, options: options)
        } catch let error as RuntimeError {
            throw Failure(message: error.description)
        }
        let name = e.model ?? model
        let directory = ModelDirectory(path: path)
        let packages = directory.files(of: name).filter { ModelFile(fileName: $0)?.isPackage ?? false }
        var listed: [String: String] = [:]
        if let bytes = try? FileSystem.readFile(directory.manifestPath), let digests = AssetsManifest.listedDigests(bytes) {
            for (file, d) in digests { listed[file] = d.sha256 }
        }
        let members = e.candidates.map { c -> Member in
            let file = URL(fileURLWithPath: c.path).lastPathComponent
            return Member(file: file, arch: c.arch, bytes: fileSize(c.path), sha256: listed[file],
                          verdict: c.path == e.chosen ? "chosen" : c.refusal == nil ? "usable" : "refused", reason: c.refusal?.reason)
        }
        let total = members.reduce(0) { $0 + ($1.bytes ?? 0) } + packages.reduce(0) { $0 + PackageReader.diskSize(ofPackageAt: "\(path)/\($1)") }
        var report: ModelReport
        if let chosen = e.chosen {
            report = try compiled(chosen, kind: "directory", size: total, keys: keys)
        } else if let p = packages.first {
            report = try package("\(path)/\(p)", kind: "directory", sizePath: path, model: name)
            report.sizeBytes = total
        } else if let readable = e.candidates.first(where: { (try? CompiledArtifact.read(at: $0.path, keys: keys)) != nil }) {
            report = try compiled(readable.path, kind: "directory", size: total, keys: keys)
        } else {
            throw Failure(message: "\(path): holds no readable artifact or package" + (members.isEmpty ? "" : ": " + members.map { "\($0.file): \($0.reason ?? $0.verdict)" }.joined(separator: "; ")))
        }
        report.path = path
        report.members = members
        return report
    }

    static func manifest(_ path: String, model: String?, keys: ArtifactKeyProvider? = nil) throws -> ModelReport {
        guard let bytes = try? FileSystem.readFile(path) else { throw Failure(message: "\(path): cannot read the file") }
        let listed = try AssetsManifest.parse(bytes, source: path).model(model, source: path)
        let dir = (path as NSString).deletingLastPathComponent
        var members: [Member] = []
        var readable: [(level: Int, runnable: Bool, path: String)] = []
        for a in listed.artifacts {
            let file = a.file
            let full = dir.isEmpty ? file : "\(dir)/\(file)"
            var m = Member(file: file, arch: a.arch, bytes: a.bytes, sha256: a.sha256, verdict: "present")
            if !FileManager.default.fileExists(atPath: full) {
                m.verdict = "missing"
                m.reason = "not beside the manifest"
            } else if let bytes = m.bytes, bytes != fileSize(full) {
                m.verdict = "refused"
                m.reason = "is \(fileSize(full)) bytes, the manifest lists \(bytes)"
            } else if let sha = m.sha256, let digest = try? SHA256.hex(FileSystem.sha256(ofFileAt: full)), digest != sha.lowercased() {
                m.verdict = "refused"
                m.reason = "SHA-256 \(digest) differs from the manifest's"
            } else {
                do {
                    let artifact = try CompiledArtifact.read(at: full, keys: keys)
                    try artifact.verifyWeights()
                    let arch = Architecture.named(artifact.header.arch)
                    readable.append((arch?.level ?? 0, arch?.isRunnableOnHost ?? false, full))
                } catch let e as PackageError {
                    m.verdict = "refused"
                    m.reason = e.field.map { "\($0): \(e.reason)" } ?? e.reason
                } catch let e as ArtifactKeyError {
                    m.verdict = "refused"
                    m.reason = e.reason
                }
            }
            members.append(m)
        }
        // The artifact this host would run, else any intact one.
        guard let source = readable.filter(\.runnable).max(by: { $0.level < $1.level }) ?? readable.first else {
            throw Failure(message: "\(path): none of the artifacts it lists is intact: " + members.map { "\($0.file): \($0.reason ?? $0.verdict)" }.joined(separator: "; "))
        }
        var report = try compiled(source.path, kind: "assets", size: members.reduce(0) { $0 + ($1.bytes ?? 0) }, keys: keys)
        for k in members.indices where "\(dir.isEmpty ? "" : dir + "/")\(members[k].file)" == source.path { members[k].verdict = "shown" }
        report.path = path
        report.name = listed.name
        report.members = members
        return report
    }

    // MARK: text

    var text: String {
        let m = metadata
        var rows: [(String, String)] = [("path", path)]
        for (label, value) in [("description", m.description), ("author", m.author),
                               ("license", m.license), ("version", m.version)] where !value.isEmpty {
            rows.append((label, InspectCommand.escaped(value)))
        }
        switch kind {
        case "package": rows.append(("format", "Kiln package, format version \(summary.formatVersion)"))
        case "compiled": rows.append(("format", "Kiln compiled artifact, format version \(artifact!.header.formatVersion) (package format \(summary.formatVersion))"))
        case "directory": rows.append(("format", "directory of Kiln artifacts (package format \(summary.formatVersion))"))
        case "archive": rows.append(("format", "Kiln archive of \(members.count) artifact\(members.count == 1 ? "" : "s") (package format \(summary.formatVersion))"))
        default: rows.append(("format", "Kiln assets manifest (package format \(summary.formatVersion))"))
        }
        rows.append(("parameters", "\(grouped(summary.parameterCount)) (\(humanCount(summary.parameterCount)))"))
        rows.append(("size on disk", "\(grouped(sizeBytes)) bytes (\(humanBytes(sizeBytes)))"))
        if summary.storage.isEmpty { rows.append(("storage", "no weights")) }
        for (i, s) in summary.storage.enumerated() {
            rows.append((i == 0 ? "storage" : "", "\(s.storage): \(s.weights) weight\(s.weights == 1 ? "" : "s"), \(grouped(s.parameters)) parameters, \(humanBytes(s.bytes))"))
        }
        rows.append(("compute", summary.computePrecision))
        for (i, kv) in m.user.sorted(by: { $0.key < $1.key }).enumerated() {
            rows.append((i == 0 ? "user metadata" : "", "\(kv.key) = \(InspectCommand.escaped(kv.value))"))
        }
        if let summaryNote { rows.append(("note", summaryNote)) }
        var s = name + "\n" + table(rows)
        let total = summary.operations.reduce(0) { $0 + $1.count }
        s += "\nOperations (\(total))\n" + table(summary.operations.map { ($0.opType, String($0.count)) })
        s += "\nFunctions (\(functions.count))\n"
        for f in functions {
            s += "  \(f.name)\n"
            s += "    inputs\n" + InspectCommand.indent(table(f.inputs.map { ($0.name, $0.type.description) }), by: 4)
            s += "    outputs\n" + InspectCommand.indent(table(f.outputs.map { ($0.name, $0.type.description) }), by: 4)
            if !f.states.isEmpty {
                s += "    state (input ← the output it takes after a run)\n" + InspectCommand.indent(table(f.states.map { ($0.input, "← \($0.output)") }), by: 4)
            }
        }
        if let a = artifact, let artifactPath {
            s += "\nArtifact\n" + ArtifactInspection.text(a, path: artifactPath, weightsIntact: weightsIntact)
        }
        if !members.isEmpty {
            s += "\nArtifacts (\(members.count))\n" + table(members.map { m in
                (m.file, m.verdict + (m.reason.map { ": \($0)" } ?? "") + (m.arch.map { "  [\($0)]" } ?? ""))
            })
        }
        return s
    }

    // MARK: JSON

    var json: JSON {
        let m = metadata
        func argument(_ a: Argument) -> JSON {
            guard case .object(let t) = InspectCommand.json(a.type) else { return .null }
            return .object([("name", .string(a.name))] + t)
        }
        let counts = Dictionary(summary.functions.map { ($0.name, $0.operationCount) }, uniquingKeysWith: { a, _ in a })
        return .object([
            ("path", .string(path)),
            ("kind", .string(kind)),
            ("name", .string(name)),
            ("formatVersion", .int(summary.formatVersion)),
            ("metadata", .object([
                ("description", .string(m.description)),
                ("author", .string(m.author)),
                ("license", .string(m.license)),
                ("version", .string(m.version)),
                ("user", .object(m.user.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ])),
            ("parameterCount", .int(summary.parameterCount)),
            ("sizeBytes", .int(sizeBytes)),
            ("computePrecision", .string(summary.computePrecision)),
            ("storagePrecisions", .array(summary.storage.map {
                .object([("storage", .string($0.storage)), ("weights", .int($0.weights)),
                         ("parameters", .int($0.parameters)), ("bytes", .int($0.bytes))])
            })),
            ("operations", .array(summary.operations.map {
                .object([("opType", .string($0.opType)), ("count", .int($0.count))])
            })),
            ("functions", .array(functions.map { f in
                .object([
                    ("name", .string(f.name)),
                    ("inputs", .array(f.inputs.map(argument))),
                    ("outputs", .array(f.outputs.map(argument))),
                    ("states", .array(f.states.map { .object([("input", .string($0.input)), ("output", .string($0.output))]) })),
                    ("operationCount", .int(counts[f.name] ?? f.operations.count)),
                ])
            })),
            ("weights", .array(summary.weights.map { w in
                .object([
                    ("name", .string(w.name)), ("dtype", .string(w.dtype)), ("shape", .array(w.shape.map { .int($0) })),
                    ("encoding", .string(w.encoding)), ("storage", .string(w.storage)),
                    ("parameters", .int(w.parameters)), ("bytes", .int(w.bytes)),
                ])
            })),
            ("summaryNote", summaryNote.map { .string($0) } ?? .null),
            ("artifact", artifact.map { ArtifactInspection.json($0, path: artifactPath ?? path, weightsIntact: weightsIntact) } ?? .null),
            ("artifacts", .array(members.map { m in
                .object([
                    ("file", .string(m.file)), ("arch", m.arch.map { .string($0) } ?? .null),
                    ("bytes", m.bytes.map { .int($0) } ?? .null), ("sha256", m.sha256.map { .string($0) } ?? .null),
                    ("verdict", .string(m.verdict)), ("reason", m.reason.map { .string($0) } ?? .null),
                ])
            })),
        ])
    }
}

/// What a path names, for `inspect`.
enum FileManagerShimCLI {
    enum Kind { case missing, package, file, directory }

    static func kind(_ path: String) -> Kind {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return .missing }
        guard isDirectory.boolValue else { return .file }
        return (ModelFile(path: path)?.isPackage ?? false) || FileManager.default.fileExists(atPath: "\(path)/\(PackageFormat.manifestFileName)")
            ? .package : .directory
    }
}
