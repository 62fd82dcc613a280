import KilnFormat

/// `kiln inspect PATH [--json]`: what a package holds, without running it.
enum InspectCommand {
    static let spec = CommandSpec(
        name: "inspect",
        abstract: "Show a package's or compiled artifact's metadata, size, ops and function signatures.",
        usage: "kiln inspect PATH [--json]",
        arguments: [("PATH", "A Kiln package (Name.kiln) or compiled artifact (Name.<arch>.compiled).")],
        options: [OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON (schema in specs/cli.md).")])

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.count == 1 else {
            throw UsageError(message: args.positionals.isEmpty ? "missing PATH" : "expected one PATH, got \(args.positionals.count)", command: spec)
        }
        let path = args.positionals[0]
        if path.hasSuffix(".\(CompiledFormat.fileExtension)") {
            let artifact = try CompiledArtifact.read(at: path)
            Console.out(args.has("--json") ? ArtifactInspection.json(artifact, path: path).rendered() + "\n"
                : ArtifactInspection.text(artifact, path: path))
            return
        }
        let model = try PackageReader.read(at: path)
        let size = PackageReader.diskSize(ofPackageAt: path)
        if args.has("--json") {
            Console.out(json(model, path: path, size: size).rendered() + "\n")
        } else {
            Console.out(text(model, path: path, size: size))
        }
    }

    static func name(_ model: PortableModel, path: String) -> String {
        if !model.metadata.name.isEmpty { return model.metadata.name }
        var base = Substring(path)
        while base.hasSuffix("/") { base = base.dropLast() }
        if let slash = base.lastIndex(of: "/") { base = base[base.index(after: slash)...] }
        return String(base.hasSuffix(".kiln") ? base.dropLast(5) : base)
    }

    static func text(_ model: PortableModel, path: String, size: Int) -> String {
        let m = model.metadata
        var rows: [(String, String)] = [("path", path)]
        for (label, value) in [("description", m.description), ("author", m.author),
                               ("license", m.license), ("version", m.version)] where !value.isEmpty {
            rows.append((label, escaped(value)))
        }
        rows.append(("format", "Kiln package, format version \(model.formatVersion)"))
        rows.append(("parameters", "\(grouped(model.parameterCount)) (\(humanCount(model.parameterCount)))"))
        rows.append(("size on disk", "\(grouped(size)) bytes (\(humanBytes(size)))"))
        let storage = model.storagePrecisions
        if storage.isEmpty { rows.append(("storage", "no weights")) }
        for (i, s) in storage.enumerated() {
            rows.append((i == 0 ? "storage" : "", "\(s.storage): \(s.weights) weight\(s.weights == 1 ? "" : "s"), \(grouped(s.parameters)) parameters, \(humanBytes(s.bytes))"))
        }
        rows.append(("compute", model.computePrecision.rawValue))
        for (i, kv) in m.user.sorted(by: { $0.key < $1.key }).enumerated() {
            rows.append((i == 0 ? "user metadata" : "", "\(kv.key) = \(escaped(kv.value))"))
        }
        var s = name(model, path: path) + "\n" + table(rows)

        let histogram = model.operationHistogram
        let total = histogram.reduce(0) { $0 + $1.count }
        s += "\nOperations (\(total))\n" + table(histogram.map { ($0.opType, String($0.count)) })

        s += "\nFunctions (\(model.functions.count))\n"
        for f in model.functions {
            s += "  \(f.name)\n"
            s += "    inputs\n" + indent(table(f.inputs.map { ($0.name, $0.type.description) }), by: 4)
            s += "    outputs\n" + indent(table(f.outputs.map { ($0.name, $0.type.description) }), by: 4)
        }
        return s
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

    static func json(_ model: PortableModel, path: String, size: Int) -> JSON {
        let m = model.metadata
        func argument(_ a: Argument) -> JSON {
            guard case .object(let t) = json(a.type) else { return .null }
            return .object([("name", .string(a.name))] + t)
        }
        return .object([
            ("path", .string(path)),
            ("kind", .string("package")),
            ("name", .string(name(model, path: path))),
            ("formatVersion", .int(model.formatVersion)),
            ("metadata", .object([
                ("description", .string(m.description)),
                ("author", .string(m.author)),
                ("license", .string(m.license)),
                ("version", .string(m.version)),
                ("user", .object(m.user.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })),
            ])),
            ("parameterCount", .int(model.parameterCount)),
            ("sizeBytes", .int(size)),
            ("computePrecision", .string(model.computePrecision.rawValue)),
            ("storagePrecisions", .array(model.storagePrecisions.map {
                .object([("storage", .string($0.storage)), ("weights", .int($0.weights)),
                         ("parameters", .int($0.parameters)), ("bytes", .int($0.bytes))])
            })),
            ("operations", .array(model.operationHistogram.map {
                .object([("opType", .string($0.opType)), ("count", .int($0.count))])
            })),
            ("functions", .array(model.functions.map { f in
                .object([
                    ("name", .string(f.name)),
                    ("inputs", .array(f.inputs.map(argument))),
                    ("outputs", .array(f.outputs.map(argument))),
                    ("operationCount", .int(f.operations.count)),
                ])
            })),
            ("weights", .array(model.weights.map { w in
                .object([
                    ("name", .string(w.name)),
                    ("dtype", .string(w.dtype.rawValue)),
                    ("shape", .array(w.shape.map { .int($0) })),
                    ("encoding", .string(w.encoding.kindName)),
                    ("storage", .string(w.storageDescription)),
                    ("parameters", .int(w.elementCount)),
                    ("bytes", .int(w.storedBytes)),
                ])
            })),
        ])
    }
}
