import Foundation
import KilnCompression
import KilnFormat
import KilnReference

/// `kiln optimize IN.kiln (--config CFG.json | --target-snr DB | --target-cosine C --input …) -o OUT.kiln`.
enum OptimizeCommand {
    static let spec = CommandSpec(
        name: "optimize",
        abstract: "Compress weights per layer (quantization, palettization) as a config says, or as an accuracy target allows.",
        usage: "kiln optimize IN.kiln (--config CFG.json | --target-snr DB | --target-cosine C --input NAME=FILE.npy…) -o OUT.kiln "
            + "[--candidates LIST] [--function NAME] [--report REPORT.json] [--json]",
        arguments: [("IN.kiln", "The package to compress.")],
        options: [
            OptionSpec(names: ["--config"], valueName: "CFG.json", help: "Per-layer compression config (specs/compression.md); with a target, only the weights it compresses are considered."),
            OptionSpec(names: ["--target-snr"], valueName: "DB", help: "Choose per layer the smallest candidate so that all compressed weights keep this SNR."),
            OptionSpec(names: ["--target-cosine"], valueName: "C", help: "Choose per layer the smallest candidate so that the function's outputs keep this cosine similarity."),
            OptionSpec(names: ["--input"], valueName: "NAME=FILE", help: "An input of the function for --target-cosine, from a .npy file; repeat per input."),
            OptionSpec(names: ["--function"], valueName: "NAME", help: "The function --target-cosine runs (default: the only one, or main)."),
            OptionSpec(names: ["--candidates"], valueName: "LIST", help: "Candidate settings for a target, comma-separated (default kmeans4,kmeans6,kmeans8,int8; also kmeans1-3, int4)."),
            OptionSpec(names: ["-o", "--output"], valueName: "OUT.kiln", help: "The compressed package to write."),
            OptionSpec(names: ["--report"], valueName: "REPORT.json", help: "Also write the per-layer report as JSON."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print the report as JSON instead of a table."),
        ])

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one IN.kiln", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o OUT.kiln", command: spec) }
        let target = try parseTarget(args)
        guard target != nil || args.value("--config") != nil else {
            throw UsageError(message: "give --config CFG.json, --target-snr DB or --target-cosine C", command: spec)
        }
        if target == nil, let extra = ["--input", "--function", "--candidates"].first(where: { args.values[$0] != nil }) {
            throw UsageError(message: "\(extra) goes with --target-snr or --target-cosine", command: spec)
        }
        let config = try args.value("--config").map { try CompressionConfig(contentsOf: $0) }
        let model = try PackageReader.read(at: args.positionals[0])
        if let target {
            let plan = try naming(args.positionals[0]) { try planForTarget(target, model: model, config: config, args: args) }
            try PackageWriter.write(plan.model, to: output)
            var json = reportJSON(plan.report)
            if case .object(var fields) = json {
                fields.append(("target", targetJSON(plan)))
                json = .object(fields)
            }
            try writeReport(json, args)
            for w in plan.report.warnings { Console.err("warning: \(w)\n") }
            Console.out(args.has("--json") ? json.rendered() + "\n" : table(plan.report) + targetLine(plan) + "\n")
            return
        }
        guard let config else { return }
        // Progress on a terminal only; quiet when piped.
        let tty = isatty(2) != 0
        var progress: (@Sendable (Int, Int, String) -> Void)?
        if tty {
            progress = { done, total, weight in Console.err("\r\u{1B}[Kcompressing \(done)/\(total) \(weight)") }
        }
        let (compressed, report) = try naming(args.positionals[0]) { try Compressor.apply(config, to: model, progress: progress) }
        if tty { Console.err("\r\u{1B}[K") }
        try PackageWriter.write(compressed, to: output)
        let json = reportJSON(report)
        try writeReport(json, args)
        for w in report.warnings { Console.err("warning: \(w)\n") }
        Console.out(args.has("--json") ? json.rendered() + "\n" : table(report))
    }

    /// Runs `body`, naming the package in what it throws about the model's weights.
    static func naming<T>(_ path: String, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let error as CompressionError {
            throw Failure(message: "\(path): \(error.reason)")
        }
    }

    static func writeReport(_ json: JSON, _ args: ParsedArguments) throws {
        guard let path = args.value("--report") else { return }
        let tmp = "\(path).tmp-\(ProcessInfo.processInfo.processIdentifier)"
        guard FileManager.default.createFile(atPath: tmp, contents: Data((json.rendered() + "\n").utf8)),
              rename(tmp, path) == 0 else {
            try? FileManager.default.removeItem(atPath: tmp)
            throw Failure(message: "\(path): cannot write the report")
        }
    }

    static func parseTarget(_ args: ParsedArguments) throws -> PrecisionTarget? {
        let snr = args.value("--target-snr"), cosine = args.value("--target-cosine")
        switch (snr, cosine) {
        case (nil, nil): return nil
        case (_?, _?): throw UsageError(message: "give --target-snr or --target-cosine, not both", command: spec)
        case (let s?, nil):
            guard let db = Double(s), db.isFinite, db > 0 else { throw UsageError(message: "--target-snr '\(s)' is not a positive number of dB", command: spec) }
            return .snr(db)
        case (nil, let c?):
            guard let v = Double(c), v > -1, v < 1 else { throw UsageError(message: "--target-cosine '\(c)' is not a number between -1 and 1", command: spec) }
            return .cosine(v)
        }
    }

    /// Runs the mixed-precision planner; for a cosine target, on the reference interpreter with the given inputs.
    static func planForTarget(_ target: PrecisionTarget, model: PortableModel, config: CompressionConfig?, args: ParsedArguments) throws -> PrecisionPlan {
        let candidates = args.value("--candidates").map { $0.split(separator: ",").map(String.init) } ?? MixedPrecision.defaultCandidates
        guard !candidates.isEmpty else { throw UsageError(message: "--candidates is empty", command: spec) }
        // Progress on a terminal only; quiet when piped.
        var progress: (@Sendable (String) -> Void)?
        if isatty(2) != 0 {
            progress = { (line: String) in Console.err("\r\u{1B}[K" + line) }
        }
        defer { if progress != nil { Console.err("\r\u{1B}[K") } }
        guard case .cosine = target else {
            if args.values["--input"] != nil { throw UsageError(message: "--input goes with --target-cosine", command: spec) }
            return try MixedPrecision.plan(model, candidates: candidates, target: target, only: config, progress: progress)
        }
        let names = model.functions.map(\.name)
        let functionName = try chooseFunction(args.value("--function"), among: names, path: args.positionals[0], command: spec)
        guard names.contains(functionName) else {
            throw UsageError(message: "\(args.positionals[0]) has no function '\(functionName)'; it has \(names.map { "'\($0)'" }.joined(separator: ", "))", command: spec)
        }
        let function = model.functions.first { $0.name == functionName }!
        var inputs: [String: NDArray] = [:]
        for pair in args.values["--input"] ?? [] {
            guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex, pair.index(after: eq) != pair.endIndex else {
                throw UsageError(message: "'\(pair)' is not NAME=FILE.npy", command: spec)
            }
            let name = String(pair[..<eq])
            guard function.inputs.contains(where: { $0.name == name }) else {
                throw UsageError(message: "function '\(functionName)' has no input '\(name)'; its inputs are \(function.inputs.map { "'\($0.name)'" }.joined(separator: ", "))", command: spec)
            }
            guard inputs.updateValue(try NDArray(npyFile: String(pair[pair.index(after: eq)...])), forKey: name) == nil else {
                throw UsageError(message: "input '\(name)' is given twice", command: spec)
            }
        }
        let missing = function.inputs.map(\.name).filter { inputs[$0] == nil }
        guard missing.isEmpty else {
            throw UsageError(message: "--target-cosine needs --input for \(missing.map { "'\($0)'" }.joined(separator: ", "))", command: spec)
        }
        let outputNames = function.outputs.map(\.name)
        let fixed = inputs
        return try MixedPrecision.plan(model, candidates: candidates, target: target, only: config, evaluate: { candidate in
            let outputs = try ReferenceInterpreter(model: candidate, function: functionName).run(fixed)
            return outputNames.flatMap { name -> [Float] in
                guard let o = outputs[name], o.scalarType == .float32 else { return [] }
                return o.scalars(as: Float.self)
            }
        }, progress: progress)
    }

    static func targetLine(_ plan: PrecisionPlan) -> String {
        switch plan.target {
        case .snr(let db):
            return String(format: "target SNR %.1f dB: %.2f dB", db, plan.measured)
        case .cosine(let c):
            return String(format: "target cosine %.6g: predicted %.6f, measured %.6f", c, plan.predicted, plan.measured)
        }
    }

    static func targetJSON(_ plan: PrecisionPlan) -> JSON {
        let (kind, value): (String, Double) = switch plan.target {
        case .snr(let db): ("snr", db)
        case .cosine(let c): ("cosine", c)
        }
        func number(_ v: Double) -> JSON { v.isFinite ? .number(v) : .string(v.isNaN ? "nan" : "inf") }
        return .object([
            ("kind", .string(kind)), ("value", .number(value)), ("predicted", number(plan.predicted)), ("measured", number(plan.measured)),
            ("choices", .array(plan.choices.map { c in
                .object([("weight", .string(c.weight)), ("candidate", .string(c.candidate)), ("predictedError", number(c.predictedError))])
            })),
        ])
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
