import Foundation
import KilnFormat
import KilnRuntime

/// `kiln select DIR [--json]`: which artifact this host would load from a directory, and why.
enum SelectCommand {
    static let spec = CommandSpec(
        name: "select",
        abstract: "Show which compiled artifact this host would load from a directory, and why.",
        usage: "kiln select DIR [--model NAME] [--cache-dir DIR] [--max-arch NAME] [--no-verify] [--key FILE] [--json]",
        arguments: [("DIR", "A directory of Name.<arch>.compiled files, optionally with Name.kiln.")],
        options: [
            OptionSpec(names: ["--explain"], valueName: nil, help: "Accepted for symmetry with 'kiln run --explain' (the report always explains)."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON."),
        ] + LoadFlags.options,
        discussion: "Specialization, when needed, is not done: the report says whether the cache already holds it and estimates its cost.")

    /// Measured compile throughput on a 2-core x86-64 machine, for the estimate (bytes per second).
    static let specializationBytesPerSecond = 150.0 * 1024 * 1024

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else { throw UsageError(message: "expected one DIR", command: spec) }
        let dir = args.positionals[0]
        var isDir: ObjCBool = false
        guard FileManager.default.fileExists(atPath: dir, isDirectory: &isDir), isDir.boolValue else {
            throw Failure(message: "\(dir): not a directory")
        }
        let report = try await ArtifactReport.make(dir, options: try LoadFlags.loadOptions(args))
        Console.out(args.has("--json") ? report.json.rendered() + "\n" : report.text)
    }
}

/// What `kiln select` reports.
struct ArtifactReport {
    var explanation: LoadExplanation
    var package: String?
    var packageBytes: Int
    var cached: Bool

    static func make(_ dir: String, options: ModelLoadOptions) async throws -> ArtifactReport {
        let e = try Model.explainSelection(inDirectory: dir, options: options)
        var package: String?
        var bytes = 0, cached = false
        if e.chosen == nil {
            let name = e.model ?? options.model
            package = ModelDirectory(path: dir).package(of: name)
            if let package {
                bytes = PackageReader.diskSize(ofPackageAt: package)
                var s = SpecializationOptions()
                s.maxArchitecture = options.maxArchitecture
                cached = try await (options.cache ?? SpecializationCache()).model(for: URL(fileURLWithPath: package), options: s) != nil
            }
        }
        return ArtifactReport(explanation: e, package: package, packageBytes: bytes, cached: cached)
    }

    var estimate: Double { Double(packageBytes) / SelectCommand.specializationBytesPerSecond + 0.05 }

    var text: String {
        var s = explanation.description
        if explanation.chosen == nil {
            if let package {
                s += cached ? "would load: the cached specialization of \(package)\n"
                    : "would specialize: \(package) (\(humanBytes(packageBytes)), about \(String(format: "%.1f", estimate)) s)\n"
            } else {
                s += "would fail: no usable artifact and no package\n"
            }
        } else {
            s += "would load: \(explanation.chosen!)\n"
        }
        return s
    }

    var json: JSON {
        .object([
            ("host", explanation.host.map { .string($0) } ?? .null),
            ("maxArchitecture", explanation.maxArchitecture.map { .string($0) } ?? .null),
            ("model", explanation.model.map { .string($0) } ?? .null),
            ("verification", explanation.verification.map { .string($0) } ?? .null),
            ("chosen", explanation.chosen.map { .string($0) } ?? .null),
            ("candidates", .array(explanation.candidates.map { c in
                .object([("path", .string(c.path)), ("arch", c.arch.map { .string($0) } ?? .null),
                         ("verdict", .string(c.path == explanation.chosen ? "chosen" : c.refusal == nil ? "usable" : "refused")),
                         ("reason", c.refusal.map { .string($0.reason) } ?? .null), ("kind", c.refusal.map { .string($0.kind.rawValue) } ?? .null)])
            })),
            ("specializationNeeded", .bool(explanation.chosen == nil && package != nil)),
            ("package", package.map { .string($0) } ?? .null),
            ("cached", .bool(cached)),
            ("estimatedSpecializationSeconds", explanation.chosen == nil && package != nil && !cached ? .number(estimate) : .null),
        ])
    }
}
