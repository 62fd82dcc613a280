import Foundation
import KilnRuntime

/// `kiln run PATH …`: runs one function on `.npy` inputs and writes `.npy` outputs.
enum RunCommand {
    static let spec = CommandSpec(
        name: "run",
        abstract: "Run a function of a model on .npy inputs and write its outputs as .npy files.",
        usage: "kiln run PATH [--function NAME] --input NAME=FILE.npy… (--output-dir DIR | --print) [--model NAME] [--cache-dir DIR] [--max-arch NAME] [--no-verify] [--key FILE]",
        arguments: [("PATH", "A package (Name.kiln), an artifact (Name.<arch>.compiled) or a directory of artifacts.")],
        options: [
            OptionSpec(names: ["--function"], valueName: "NAME", help: "The function to run (default: the only one, or 'main')."),
            OptionSpec(names: ["--input"], valueName: "NAME=FILE", help: "An input array from a .npy file; repeat per input."),
            OptionSpec(names: ["--output-dir"], valueName: "DIR", help: "Write one .npy per output and outputs.json here."),
            OptionSpec(names: ["--print"], valueName: nil, help: "Print each output's shape, dtype, min/max/mean and first values."),
            OptionSpec(names: ["--reference"], valueName: nil, help: "Run with the reference interpreter (the default for a package)."),
            OptionSpec(names: ["--explain"], valueName: nil, help: "Print which artifact was chosen and why (stderr)."),
        ] + LoadFlags.options,
        discussion: """
            Output files are named after the outputs, with characters outside [A-Za-z0-9._-]
            replaced by '_'; outputs.json maps each real output name to its file, dtype and shape.
            """)

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else {
            throw UsageError(message: args.positionals.isEmpty ? "missing PATH" : "expected one PATH", command: spec)
        }
        let path = args.positionals[0]
        let outputDir = args.value("--output-dir")
        guard outputDir != nil || args.has("--print") else {
            throw UsageError(message: "give --output-dir DIR, --print, or both", command: spec)
        }
        var files: [String: String] = [:]
        for pair in args.values["--input"] ?? [] {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex, pair.index(after: eq) != pair.endIndex else {
                throw UsageError(message: "'\(pair)' is not NAME=FILE.npy", command: spec)
            }
            let name = String(pair[..<eq])
            guard files.updateValue(String(pair[pair.index(after: eq)...]), forKey: name) == nil else {
                throw UsageError(message: "input '\(name)' is given twice", command: spec)
            }
        }
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: try LoadFlags.loadOptions(args))
        if args.has("--explain") { Console.err(model.explanation.description) }
        let names = model.functionNames
        let functionName = try chooseFunction(args.value("--function"), among: names, path: path, command: spec)
        guard let function = try await model.loadFunction(named: functionName) else {
            var message = "\(path) has no function '\(functionName)'; it has \(names.map { "'\($0)'" }.joined(separator: ", "))"
            if let near = nearest(functionName, in: names) { message += "; did you mean '\(near)'?" }
            throw UsageError(message: message, command: spec)
        }
        let descriptor = function.descriptor
        let inputList = descriptor.inputs.map { "  \($0.name)  \(TensorType($0.scalarType, $0.shape))" }.joined(separator: "\n")
        if let unknown = files.keys.sorted().first(where: { descriptor.inputDescriptor(of: $0) == nil }) {
            throw UsageError(message: "function '\(functionName)' has no input '\(unknown)'; its inputs are:\n\(inputList)", command: spec)
        }
        let missing = descriptor.inputNames.filter { files[$0] == nil }
        guard missing.isEmpty else {
            throw UsageError(message: "missing --input for \(missing.map { "'\($0)'" }.joined(separator: ", ")); function '\(functionName)' takes:\n\(inputList)", command: spec)
        }
        var inputs: [String: NDArray] = [:]
        for (name, file) in files { inputs[name] = try NDArray(npyFile: file) }
        let outputs = try await function.run(inputs: inputs)
        if let dir = outputDir { try write(outputs, to: dir) }
        if args.has("--print") {
            for (name, value) in outputs { Console.out(summary(name, value)) }
        }
    }

    /// An output name as a file name: characters outside `[A-Za-z0-9._-]` become `_`.
    static func fileSafe(_ name: String) -> String {
        let safe = String(name.unicodeScalars.map { u -> Character in
            (u.isASCII && (u.properties.isAlphabetic || ("0" ... "9").contains(u) || u == "." || u == "_" || u == "-")) ? Character(u) : "_"
        })
        return safe.isEmpty || safe == "." || safe == ".." ? "_" + safe : safe
    }

    static func write(_ outputs: InferenceOutputs, to dir: String) throws {
        do {
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        } catch {
            throw Failure(message: "\(dir): cannot create the output directory")
        }
        var used = Set<String>()
        var entries: [JSON] = []
        for (name, value) in outputs {
            var file = fileSafe(name) + ".npy"
            var n = 2
            while used.contains(file) {
                file = fileSafe(name) + "_\(n).npy"
                n += 1
            }
            used.insert(file)
            try value.writeNPY(to: "\(dir)/\(file)")
            entries.append(.object([
                ("name", .string(name)), ("file", .string(file)),
                ("dtype", .string(value.scalarType.rawValue)), ("shape", .array(value.shape.map { .int($0) })),
            ]))
        }
        let json = Array((JSON.object([("outputs", .array(entries))]).rendered() + "\n").utf8)
        let tmp = "\(dir)/outputs.json.tmp-\(ProcessInfo.processInfo.processIdentifier)"
        guard FileManager.default.createFile(atPath: tmp, contents: Data(json)),
              rename(tmp, "\(dir)/outputs.json") == 0 else {
            try? FileManager.default.removeItem(atPath: tmp)
            throw Failure(message: "\(dir)/outputs.json: cannot write")
        }
    }

    static func summary(_ name: String, _ x: NDArray) -> String {
        let values = x.doubles() ?? []
        var s = "\(name)  \(x.scalarType.rawValue)\(x.shape)\n"
        if !values.isEmpty {
            let mean = values.reduce(0, +) / Double(values.count)
            let argmax = values.indices.max { values[$0] < values[$1] }!
            s += "  min \(format(values.min()!))  max \(format(values.max()!)) at \(argmax)  mean \(format(mean))\n"
            s += "  first [" + values.prefix(8).map(format).joined(separator: ", ") + (values.count > 8 ? ", …" : "") + "]\n"
        }
        return s
    }

    static func format(_ v: Double) -> String {
        if v == v.rounded(), abs(v) < 1e15 { return String(Int(v)) }
        return String(format: "%.6g", v)
    }
}
