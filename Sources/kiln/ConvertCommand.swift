import Foundation
import KilnFormat
import KilnONNX

/// `kiln convert MODEL.onnx -o Name.kiln`: ONNX to a portable package; several graphs (prefill and
/// decode, encoder and decoder) become the functions of one package, weights equal in content
/// stored once (``PortableModel/merging(_:)``).
enum ConvertCommand {
    static let spec = CommandSpec(
        name: "convert",
        abstract: "Convert an ONNX model to a portable Kiln package.",
        usage: "kiln convert MODEL.onnx… -o Name.kiln [--name NAME] [--function-name NAME] [--state INPUT=OUTPUT]",
        arguments: [("MODEL.onnx…", "An ONNX model; external data is read from files beside it. Several (FUNCTION=MODEL.onnx, or a file whose name less .onnx names the function) become the functions of one package.")],
        options: [
            OptionSpec(names: ["-o", "--output"], valueName: "Name.kiln", help: "The package to write (replaced if it exists)."),
            OptionSpec(names: ["--name"], valueName: "NAME", help: "The model's name (default: the ONNX file's name)."),
            OptionSpec(names: ["--function-name"], valueName: "NAME", help: "The function one graph becomes (default: main)."),
            OptionSpec(names: ["--state"], valueName: "INPUT=OUTPUT", help: "Declare state: each input matching INPUT is read in a stateful run from the previous run's output OUTPUT; one '*' on both sides stands for the same text (past_key_values.*=present.*); rules separated by commas. Applies to every function with matching inputs."),
        ],
        discussion: "Unsupported operators are listed together, with their counts, domains and opsets; nothing is written then. Of several graphs, weights equal in content (type, shape and bytes) are stored once and shared by the functions; the package takes its metadata from the first graph.")

    static func run(_ args: ParsedArguments) async throws {
        guard !args.positionals.isEmpty else { throw UsageError(message: "missing MODEL.onnx", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o Name.kiln", command: spec) }
        if args.positionals.count == 1, !args.positionals[0].contains("=") || FileManager.default.fileExists(atPath: args.positionals[0]) {
            var options = ConvertOptions(name: args.value("--name"))
            if let f = args.value("--function-name") { options.functionName = f }
            let model = try declaringState(ONNXImporter.convert(contentsOf: args.positionals[0], options: options), args)
            try PackageWriter.write(model, to: output)
            return
        }
        guard args.value("--function-name") == nil else {
            throw UsageError(message: "--function-name names the function of one graph; name several as FUNCTION=MODEL.onnx", command: spec)
        }
        let graphs = try args.positionals.map(functionAndPath)
        let models = try graphs.map { function, path in
            var options = ConvertOptions(name: args.value("--name") ?? graphs[0].path.split(separator: "/").last.map { String($0.hasSuffix(".onnx") ? $0.dropLast(5) : $0) })
            options.functionName = function
            return try ONNXImporter.convert(contentsOf: path, options: options)
        }
        let model: PortableModel
        do {
            model = try PortableModel.merging(models)
        } catch let e as MergeError {
            throw Failure(message: "\(args.positionals.joined(separator: ", ")): \(e)")
        }
        try PackageWriter.write(declaringState(model, args), to: output)
    }

    /// `model` with the `--state` rule's pairs declared on each function it matches (on the
    /// function when there is one); an error when it matches none.
    private static func declaringState(_ model: PortableModel, _ args: ParsedArguments) throws -> PortableModel {
        guard let rule = args.value("--state") else { return model }
        var model = model, failures: [String] = []
        for i in model.functions.indices {
            do {
                model.functions[i].states = try StatePair.pairs(rule: rule, in: model.functions[i])
            } catch let e as OpError {
                failures.append(e.reason)
            }
        }
        guard failures.count < model.functions.count else { throw UsageError(message: failures[0], command: spec) }
        return model
    }

    /// `FUNCTION=PATH`, or a path whose file name (less `.onnx`) names the function.
    private static func functionAndPath(_ argument: String) throws -> (function: String, path: String) {
        if !FileManager.default.fileExists(atPath: argument), let eq = argument.firstIndex(of: "=") {
            let function = String(argument[..<eq]), path = String(argument[argument.index(after: eq)...])
            guard !function.isEmpty, !path.isEmpty else { throw UsageError(message: "'\(argument)': expected FUNCTION=MODEL.onnx", command: spec) }
            return (function, path)
        }
        var stem = String(argument.split(separator: "/").last ?? Substring(argument))
        if stem.hasSuffix(".onnx") { stem.removeLast(5) }
        return (stem, argument)
    }
}
