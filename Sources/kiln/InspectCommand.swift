import KilnFormat

/// `kiln inspect PATH [--json]`: what a package holds, without running it.
enum InspectCommand {
    static let spec = CommandSpec(
        name: "inspect",
        abstract: "Show a model's metadata, size, precisions, ops and function signatures, in any of its forms.",
        usage: "kiln inspect PATH [--model NAME] [--key FILE] [--json | --dot | --svg FILE] [--function NAME] [--depth N] [--no-collapse]",
        arguments: [("PATH", "A package (Name.kiln), a compiled artifact (Name.<arch>.compiled), a directory of them, an assets.json or a .kilnarchive.")],
        options: [
            OptionSpec(names: ["--model"], valueName: "NAME", help: "The model of a directory or manifest that holds several."),
            OptionSpec(names: ["--key"], valueName: "FILE", help: "Key file of encrypted artifacts (kiln keygen)."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON (schema in specs/cli.md)."),
            OptionSpec(names: ["--dot"], valueName: nil, help: "Print the function's graph as Graphviz DOT (ops with their kernels, tensors, weights)."),
            OptionSpec(names: ["--svg"], valueName: "FILE", help: "Render the graph to FILE with Graphviz's dot."),
            OptionSpec(names: ["--function"], valueName: "NAME", help: "The function to draw (default: the first)."),
            OptionSpec(names: ["--depth"], valueName: "N", help: "Nest module clusters N levels deep (default 8; 0: no clusters)."),
            OptionSpec(names: ["--no-collapse"], valueName: nil, help: "Draw every repeated block instead of one node per run of them."),
        ],
        discussion: "Every form shows the same sections; artifacts add their header, kernels per step, arena and digests, directories and manifests their artifacts with a verdict each.")

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.count == 1 else {
            throw UsageError(message: args.positionals.isEmpty ? "missing PATH" : "expected one PATH, got \(args.positionals.count)", command: spec)
        }
        let path = args.positionals[0]
        var keys: ArtifactKeyProvider?
        if let file = args.value("--key") {
            let key = try ArtifactKey.read(at: file)
            keys = { _ in key }
        }
        if args.has("--dot") || args.value("--svg") != nil {
            guard !args.has("--json") else { throw UsageError(message: "--json and --dot/--svg exclude each other", command: spec) }
            return try graph(path, args, keys: keys)
        }
        let report = try ModelReport.make(path, model: args.value("--model"), keys: keys)
        Console.out(args.has("--json") ? report.json.rendered() + "\n" : report.text)
    }

    static func name(_ model: PortableModel, path: String) -> String {
        if !model.metadata.name.isEmpty { return model.metadata.name }
        if case .package(let name) = ModelFile(path: path) { return name }
        var base = Substring(path)
        while base.hasSuffix("/") { base = base.dropLast() }
        return String(base.split(separator: "/").last ?? base)
    }

    /// Control characters shown as escapes, so one value stays on one line.
    static func escaped(_ s: String) -> String {
        var out = ""
        for u in s.unicodeScalars {
            switch u {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where u.value < 0x20: out += "\\u{\(String(u.value, radix: 16))}"
            default: out.unicodeScalars.append(u)
            }
        }
        return out
    }

    static func indent(_ text: String, by n: Int) -> String {
        let pad = String(repeating: " ", count: n)
        return text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.isEmpty ? "" : pad + $0 }.joined(separator: "\n")
    }

    static func json(_ type: TensorType) -> JSON {
        .object([
            ("dtype", .string(type.dtype.rawValue)),
            ("shape", .array(type.shape.map { d in
                switch d {
                case .size(let n): return .int(n)
                case .symbol(let s): return .string(s.isEmpty ? "?" : s)
                }
            })),
        ])
    }
}
