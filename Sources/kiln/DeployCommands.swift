import Foundation
import KilnFormat
import KilnRuntime
import KilnStore

/// `kiln fetch URL -o DIR [--model NAME | --collection NAME]`: installs the artifact this host
/// runs from an `assets.json` or archive into a model store.
enum FetchCommand {
    static let spec = CommandSpec(
        name: "fetch",
        abstract: "Download and install the artifact this host runs from an assets.json or archive into a model store.",
        usage: "kiln fetch URL -o DIR [--model NAME | --collection NAME] [--keep N] [--max-arch NAME] [--timeout S] [--json]",
        arguments: [("URL", "An assets.json or Name.kilnarchive: http://, https://, file:// or a path.")],
        options: [
            OptionSpec(names: ["-o", "--output"], valueName: "DIR", help: "The store: installs go to DIR/<model>/<version>/, DIR/<model>/current links the newest."),
            OptionSpec(names: ["--model"], valueName: "NAME", help: "The model, when the manifest lists several."),
            OptionSpec(names: ["--collection"], valueName: "NAME", help: "Install every model of this collection, all or none."),
            OptionSpec(names: ["--keep"], valueName: "N", help: "Versions to keep per model, the current one included (default 3)."),
            OptionSpec(names: ["--max-arch"], valueName: "NAME", help: "Never choose an arch above NAME."),
            OptionSpec(names: ["--timeout"], valueName: "S", help: "Seconds without progress before a transfer fails (default 60)."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON."),
        ],
        discussion: "Only the chosen artifact is downloaded; its size and SHA-256 are checked before it is installed. A failed or interrupted fetch leaves the previous install as it was.")

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one URL", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o DIR", command: spec) }
        var options = FetchOptions()
        if let text = args.value("--keep") {
            guard let n = Int(text), n >= 1 else { throw UsageError(message: "--keep '\(text)' is not a count of at least 1", command: spec) }
            options.keep = n
        }
        if let text = args.value("--timeout") {
            guard let s = Double(text), s > 0, s.isFinite else { throw UsageError(message: "--timeout '\(text)' is not a number of seconds", command: spec) }
            options.timeout = s
        }
        options.maxArchitecture = args.value("--max-arch")
        let store = ModelStore(directory: output)
        let source = args.positionals[0]
        let result: InstallResult
        if let collection = args.value("--collection") {
            guard args.value("--model") == nil else { throw UsageError(message: "--model and --collection exclude each other", command: spec) }
            result = try store.installCollection(from: source, named: collection, options: options)
        } else {
            result = try store.install(from: source, model: args.value("--model"), options: options)
        }
        if args.has("--json") {
            Console.out(JSON.object([
                ("name", .string(result.name)), ("version", .string(result.version)), ("directory", .string(result.directory)),
                ("upToDate", .bool(result.upToDate)), ("downloadedBytes", .int(result.downloadedBytes)), ("reusedFiles", .int(result.reusedFiles)),
                ("files", .array(result.files.map { .object([("model", .string($0.model)), ("file", .string($0.file)), ("arch", .string($0.arch))]) })),
                ("candidates", .array(result.verdicts.map { .object([("model", .string($0.model)), ("file", .string($0.file)), ("verdict", .string($0.verdict))]) })),
                ("pruned", .array(result.pruned.map { .string($0) })),
            ]).rendered() + "\n")
            return
        }
        for v in result.verdicts { Console.out("  \(v.file): \(v.verdict)\n") }
        if result.upToDate {
            Console.out("\(result.name) \(result.version) is up to date in \(result.directory); nothing downloaded\n")
        } else {
            let reused = result.reusedFiles > 0 ? ", \(result.reusedFiles) file\(result.reusedFiles == 1 ? "" : "s") reused" : ""
            Console.out("installed \(result.name) \(result.version) in \(result.directory) (\(humanBytes(result.downloadedBytes)) downloaded\(reused))\n")
        }
        for p in result.pruned { Console.out("pruned \(p)\n") }
    }
}

/// `kiln store list|prune|remove DIR`.
enum StoreCommand {
    static let spec = CommandSpec(
        name: "store",
        abstract: "List, prune or remove models installed by kiln fetch.",
        usage: "kiln store list|prune|remove DIR [NAME] [--keep N] [--version V] [--json]",
        arguments: [("ACTION", "list, prune (keep the newest N versions of each model) or remove NAME."), ("DIR", "The store directory.")],
        options: [
            OptionSpec(names: ["--keep"], valueName: "N", help: "prune: versions to keep per model, the current one included (default 3)."),
            OptionSpec(names: ["--version"], valueName: "V", help: "remove: only this version (not the current one)."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON."),
        ])

    static func run(_ args: ParsedArguments) throws {
        guard let action = args.positionals.first, ["list", "prune", "remove"].contains(action) else {
            throw UsageError(message: "expected one of list, prune, remove", command: spec)
        }
        guard args.positionals.count >= 2 else { throw UsageError(message: "expected the store DIR", command: spec) }
        let store = ModelStore(directory: args.positionals[1])
        let name = args.positionals.count > 2 ? args.positionals[2] : nil
        guard args.positionals.count <= 3 else { throw UsageError(message: "too many arguments", command: spec) }
        switch action {
        case "list":
            let items = try store.list(name)
            if args.has("--json") {
                Console.out(JSON.array(items.map { item in
                    .object([("name", .string(item.name)), ("collection", .bool(item.isCollection)), ("models", .array(item.models.map { .string($0) })),
                             ("current", item.current.map { .string($0) } ?? .null),
                             ("versions", .array(item.versions.map { v in
                                 .object([("version", .string(v.version)), ("directory", .string(v.directory)), ("bytes", .int(v.bytes)),
                                          ("files", .array(v.files.map { .string($0) })), ("source", v.source.map { .string($0) } ?? .null)])
                             }))])
                }).rendered() + "\n")
                return
            }
            if items.isEmpty { Console.out("\(store.directory): nothing installed\n") }
            for item in items {
                Console.out("\(item.name)\(item.isCollection ? " (collection: \(item.models.joined(separator: ", ")))" : "")\n")
                for v in item.versions {
                    let mark = URL(fileURLWithPath: v.directory).lastPathComponent == item.current ? "*" : " "
                    Console.out("  \(mark) \(v.version)  \(humanBytes(v.bytes))  \(v.files.joined(separator: ", "))\n")
                }
            }
        case "prune":
            var keep = 3
            if let text = args.value("--keep") {
                guard let n = Int(text), n >= 1 else { throw UsageError(message: "--keep '\(text)' is not a count of at least 1", command: spec) }
                keep = n
            }
            let removed = try store.prune(keep: keep, name: name)
            for p in removed { Console.out("removed \(p)\n") }
            if removed.isEmpty { Console.out("nothing to prune\n") }
        default:
            guard let name else { throw UsageError(message: "remove needs the model NAME", command: spec) }
            for p in try store.remove(name, version: args.value("--version")) { Console.out("removed \(p)\n") }
        }
    }
}

/// `kiln archive DIR -o Name.kilnarchive`: one file holding a directory's artifacts and assets.json.
enum ArchiveCommand {
    static let spec = CommandSpec(
        name: "archive",
        abstract: "Pack a directory of compiled artifacts and its assets.json into one .kilnarchive file.",
        usage: "kiln archive DIR -o Name.kilnarchive [--model NAME]",
        arguments: [("DIR", "A directory written by kiln compile.")],
        options: [
            OptionSpec(names: ["-o", "--output"], valueName: "FILE", help: "The archive to write (.kilnarchive)."),
            OptionSpec(names: ["--model"], valueName: "NAME", help: "Only this model's artifacts."),
        ],
        discussion: "kiln fetch, kiln run and Model.load accept the archive; artifacts are read in place from it.")

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one DIR", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o FILE", command: spec) }
        guard output.hasSuffix(".\(ModelArchive.fileExtension)") else {
            throw UsageError(message: "the archive's name must end in .\(ModelArchive.fileExtension)", command: spec)
        }
        let dir = args.positionals[0]
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw Failure(message: "\(dir): not a directory")
        }
        let wanted = args.value("--model")
        let directory = ModelDirectory(path: dir)
        let names = directory.artifacts(of: wanted)
        guard !names.isEmpty else { throw Failure(message: "\(dir): holds no compiled artifact\(wanted.map { " of model '\($0)'" } ?? "")") }
        var files: [(name: String, bytes: [UInt8])] = []
        for f in names { files.append((f, try FileSystem.readFile(directory.path(of: f)))) }
        let manifestPath = directory.manifestPath
        if FileManager.default.fileExists(atPath: manifestPath) {
            let bytes = try FileSystem.readFile(manifestPath)
            let manifest = try AssetsManifest.parse(bytes, source: manifestPath)
            // The manifest must describe the files packed, or fetch would refuse the archive.
            for m in manifest.models where wanted == nil || m.name == wanted {
                for e in m.artifacts {
                    guard let f = files.first(where: { $0.name == e.file }) else { throw Failure(message: "\(manifestPath): lists \(e.file), which is not in \(dir)") }
                    let sha = f.bytes.withUnsafeBytes { SHA256.hex(SHA256.hash($0)) }
                    guard sha == e.sha256, f.bytes.count == e.bytes else { throw Failure(message: "\(dir)/\(e.file): differs from assets.json (size or SHA-256)") }
                }
            }
            if wanted == nil { files.append((ModelFile.manifestFileName, bytes)) }
        }
        try AtomicFile.write(ModelArchive.serialize(files), to: output)
        Console.out("\(output)  \(files.count) files, \(humanBytes(files.reduce(0) { $0 + $1.bytes.count }))\n")
    }
}
