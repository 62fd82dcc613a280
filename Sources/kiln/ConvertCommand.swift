import KilnFormat
import KilnONNX

/// `kiln convert MODEL.onnx -o Name.kiln`: ONNX to a portable package.
enum ConvertCommand {
    static let spec = CommandSpec(
        name: "convert",
        abstract: "Convert an ONNX model to a portable Kiln package.",
        usage: "kiln convert MODEL.onnx -o Name.kiln [--name NAME] [--function-name NAME]",
        arguments: [("MODEL.onnx", "An ONNX model; external data is read from files beside it.")],
        options: [
            OptionSpec(names: ["-o", "--output"], valueName: "Name.kiln", help: "The package to write (replaced if it exists)."),
            OptionSpec(names: ["--name"], valueName: "NAME", help: "The model's name (default: the ONNX file's name)."),
            OptionSpec(names: ["--function-name"], valueName: "NAME", help: "The function the graph becomes (default: main)."),
        ],
        discussion: "Unsupported operators are listed together, with their counts, domains and opsets; nothing is written then.")

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else {
            throw UsageError(message: args.positionals.isEmpty ? "missing MODEL.onnx" : "expected one MODEL.onnx", command: spec)
        }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o Name.kiln", command: spec) }
        var options = ConvertOptions(name: args.value("--name"))
        if let f = args.value("--function-name") { options.functionName = f }
        let model = try ONNXImporter.convert(contentsOf: args.positionals[0], options: options)
        try PackageWriter.write(model, to: output)
    }
}
