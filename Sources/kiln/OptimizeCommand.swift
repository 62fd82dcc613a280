import Foundation
import KilnCompression
import KilnFormat

/// `kiln optimize IN.kiln --config CFG.json -o OUT.kiln [--report REPORT.json]`.
enum OptimizeCommand {
    static let spec = CommandSpec(
        name: "optimize",
        abstract: "Compress weights per layer (quantization, palettization) as a config says.",
        usage: "kiln optimize IN.kiln --config CFG.json -o OUT.kiln [--report REPORT.json] [--json]",
        arguments: [("IN.kiln", "The package to compress.")],
        options: [
            OptionSpec(names: ["--config"], valueName: "CFG.json", help: "Per-layer compression config (specs/compression.md)."),
            OptionSpec(names: ["-o", "--output"], valueName: "OUT.kiln", help: "The compressed package to write."),
            OptionSpec(names: ["--report"], valueName: "REPORT.json", help: "Also write the per-layer report as JSON."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print the report as JSON instead of a table."),
        ])

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one IN.kiln", command: spec) }
        guard let configPath = args.value("--config") else { throw UsageError(message: "missing --config CFG.json", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o OUT.kiln", command: spec) }
        let config = try CompressionConfig(contentsOf: configPath)
        let model = try PackageReader.read(at: args.positionals[0])
        // Progress on a terminal only; quiet when piped.
        let tty = isatty(2) != 0
        var progress: (@Sendable (Int, Int, String) -> Void)?
        if tty {
            progress = { done, total, weight in Console.err("\r\u{1B}[Kcompressing \(done)/\(total) \(weight)") }
        }
        let (compressed, report) = try Compressor.apply(config, to: model, progress: progress)
        if tty { Console.err("\r\u{1B}[K") }
        try PackageWriter.write(compressed, to: output)
        let json = reportJSON(report)
        if let path = args.value("--report") {
            let tmp = "\(path).tmp-\(ProcessInfo.processInfo.processIdentifier)"
            guard FileManager.default.createFile(atPath: tmp, contents: Data((json.rendered() + "\n").utf8)),
                  rename(tmp, path) == 0 else {
                try? FileManager.default.removeItem(atPath: tmp)
                throw Failure(message: "\(path): cannot write the report")
            }
        }
        for w in report.warnings { Console.err("warning: \(w)\n") }
        Console.out(args.has("--json") ? json.rendered() + "\n" : table(report))
    }

    static func snrText(_ v: Double?) -> String {
        guard let v else { return "" }
        return v.isInfinite ? "exact" : String(format: "%.1f dB", v)
    }

    static func table(_ report: CompressionReport) -> String {
        let header = ["weight", "consumer", "method", "bits", "detail", "before", "after", "SNR"]
        let rows = report.rows.map { r in
            [r.weight, r.consumers.first.map { $0 + (r.consumers.count > 1 ? " +\(r.consumers.count - 1)" : "") } ?? "",
             r.method, String(r.bits), r.detail, humanBytes(r.bytesBefore), humanBytes(r.bytesAfter), snrText(r.snr)]
        }
        let widths = header.indices.map { i in ([header[i]] + rows.map { $0[i] }).map(\.count).max()! }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { i, c in c.padding(toLength: widths[i], withPad: " ", startingAt: 0) }
                .joined(separator: "  ").trimmingCharacters(in: .whitespaces) + "\n"
        }
        let before = report.bytesBefore, after = report.bytesAfter
        let ratio = before == 0 ? 100 : Double(after) / Double(before) * 100
        return line(header) + rows.map(line).joined()
            + "\ntotal: \(humanBytes(before)) → \(humanBytes(after)) (\(String(format: "%.1f", ratio))% of the weights)\n"
    }

    static func reportJSON(_ report: CompressionReport) -> JSON {
        .object([
            ("rows", .array(report.rows.map { r in
                .object([
                    ("weight", .string(r.weight)), ("consumers", .array(r.consumers.map { .string($0) })),
                    ("method", .string(r.method)), ("bits", .int(r.bits)), ("detail", .string(r.detail)),
                    ("bytesBefore", .int(r.bytesBefore)), ("bytesAfter", .int(r.bytesAfter)),
                    ("snrDecibels", r.snr.map { $0.isInfinite ? .string("inf") : .number($0) } ?? .null),
                ])
            })),
            ("bytesBefore", .int(report.bytesBefore)),
            ("bytesAfter", .int(report.bytesAfter)),
            ("warnings", .array(report.warnings.map { .string($0) })),
        ])
    }
}
