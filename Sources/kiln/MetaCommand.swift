import KilnFormat

/// `kiln meta PATH …`: reads and edits package metadata, rewriting only the manifest.
enum MetaCommand {
    static let spec = CommandSpec(
        name: "meta",
        abstract: "Read or edit a package's metadata in place (only the manifest is rewritten).",
        usage: "kiln meta PATH [set KEY=VALUE… | remove KEY… | get KEY] [--description TEXT] [--author TEXT] [--license TEXT] [--version TEXT] [--json]",
        arguments: [
            ("PATH", "A Kiln package (Name.kiln)."),
            ("set KEY=VALUE…", "Set user key/value pairs."),
            ("remove KEY…", "Remove user keys."),
            ("get KEY", "Print one user key's value."),
        ],
        options: [
            OptionSpec(names: ["--description"], valueName: "TEXT", help: "Set the description."),
            OptionSpec(names: ["--author"], valueName: "TEXT", help: "Set the author."),
            OptionSpec(names: ["--license"], valueName: "TEXT", help: "Set the license."),
            OptionSpec(names: ["--version"], valueName: "TEXT", help: "Set the model's version string."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print the metadata as JSON (with no action)."),
        ],
        discussion: "With no action and no setter, prints all metadata.")

    static func run(_ args: ParsedArguments) throws {
        guard let path = args.positionals.first else { throw UsageError(message: "missing PATH", command: spec) }
        let rest = Array(args.positionals.dropFirst())
        let setters: [(String, WritableKeyPath<Metadata, String>)] = [
            ("--description", \.description), ("--author", \.author), ("--license", \.license), ("--version", \.version),
        ]
        let model = try PackageReader.read(at: path)
        var meta = model.metadata
        var changed = false
        for (option, key) in setters {
            if let v = args.value(option) {
                meta[keyPath: key] = v
                changed = true
            }
        }
        if let action = rest.first {
            let operands = Array(rest.dropFirst())
            switch action {
            case "set":
                guard !operands.isEmpty else { throw UsageError(message: "'set' needs KEY=VALUE", command: spec) }
                for pair in operands {
                    guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
                        throw UsageError(message: "'\(pair)' is not KEY=VALUE", command: spec)
                    }
                    meta.user[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
                }
                changed = true
            case "remove":
                guard !operands.isEmpty else { throw UsageError(message: "'remove' needs at least one KEY", command: spec) }
                for key in operands {
                    guard meta.user.removeValue(forKey: key) != nil else {
                        throw Failure(message: "\(path): no metadata key '\(key)'")
                    }
                }
                changed = true
            case "get":
                guard operands.count == 1 else { throw UsageError(message: "'get' needs exactly one KEY", command: spec) }
                guard !changed else { throw UsageError(message: "'get' cannot be combined with setters", command: spec) }
                guard let v = meta.user[operands[0]] else {
                    throw Failure(message: "\(path): no metadata key '\(operands[0])'")
                }
                Console.out(v + "\n")
                return
            default:
                var message = "unknown action '\(action)'"
                if let near = nearest(action, in: ["set", "remove", "get"]) { message += "; did you mean '\(near)'?" }
                throw UsageError(message: message, command: spec)
            }
        }
        if changed {
            try PackageWriter.rewriteMetadata(meta, ofPackageAt: path)
            return
        }
        if args.has("--json") {
            Console.out(JSON.object([
                ("name", .string(meta.name)), ("description", .string(meta.description)),
                ("author", .string(meta.author)), ("license", .string(meta.license)),
                ("version", .string(meta.version)),
                ("user", .object(meta.user.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ]).rendered() + "\n")
            return
        }
        var rows: [(String, String)] = [("name", meta.name), ("description", meta.description),
                                        ("author", meta.author), ("license", meta.license), ("version", meta.version)]
        rows += meta.user.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        Console.out(table(rows))
    }
}
