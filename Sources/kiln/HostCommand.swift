import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime

/// `kiln host [--json]`: what this machine runs — CPU features, arches in preference order,
/// the cache locations.
enum HostCommand {
    static let spec = CommandSpec(
        name: "host",
        abstract: "Show the CPU features Kiln detected, the arches this host runs (best first) and the cache locations.",
        usage: "kiln host [--max-arch NAME] [--json]",
        options: [
            OptionSpec(names: ["--max-arch"], valueName: "NAME", help: "Show the choice under this arch cap."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON."),
        ])

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.isEmpty else { throw UsageError(message: "takes no arguments", command: spec) }
        let features = Architecture.hostFeatures
        let runnable = Architecture.runnableOnHost
        var chosen: Architecture?
        if Architecture.host != nil {
            do { chosen = try Architecture.host(cappedAt: args.value("--max-arch")) } catch {
                throw UsageError(message: "--max-arch: \(error)", command: spec)
            }
        }
        let cache = SpecializationCache()
        let locations: [(String, String)] = [
            ("evictable", "\(cache.directory)/evictable"), ("persistent", "\(cache.persistentDirectory)/persistent"),
            ("locks", "\(cache.directory)/locks"), ("verified", "\(cache.directory)/verified"),
        ]
        if args.has("--json") {
            Console.out(JSON.object([
                ("family", CPUFamily.host.map { .string($0.rawValue) } ?? .null),
                ("features", .array(features.map { .object([("name", .string($0.name)), ("present", .bool($0.present))]) })),
                ("architectures", .array(runnable.map { .string($0.name) })),
                ("chosen", chosen.map { .string($0.name) } ?? .null),
                ("maxArchitecture", args.value("--max-arch").map { .string($0) } ?? .null),
                ("crc32Hardware", .bool(crc32UsesHardware)), ("sha256Hardware", .bool(SHA256.usesHardware)),
                ("cache", .object(locations.map { ($0.0, .string($0.1)) })),
                ("runtimeVersion", .string(CompiledFormat.runtimeVersion.description)),
                ("compilerVersion", .string(CompiledFormat.compilerVersion)),
            ]).rendered() + "\n")
            return
        }
        var rows: [(String, String)] = [("family", CPUFamily.host?.rawValue ?? "unsupported")]
        rows.append(("features", features.filter(\.present).map(\.name).joined(separator: " ")))
        let absent = features.filter { !$0.present }.map(\.name)
        if !absent.isEmpty { rows.append(("absent", absent.joined(separator: " "))) }
        rows.append(("runs", runnable.map(\.name).joined(separator: ", ") + (runnable.isEmpty ? "nothing Kiln compiles for" : " (best first)")))
        rows.append(("chosen", chosen.map { $0.name + (args.value("--max-arch") != nil ? " (capped at \(args.value("--max-arch")!))" : "") } ?? "none"))
        if let cap = getenv("KILN_MAX_ISA") { rows.append(("limited", "kernels and arches up to \(String(cString: cap)) (KILN_MAX_ISA)")) }
        rows.append(("checksums", "CRC-32 \(crc32UsesHardware ? "by carry-less multiply" : "by table"), SHA-256 \(SHA256.usesHardware ? "by SHA instructions" : "in software")"))
        for (k, v) in locations { rows.append(("cache " + k, v)) }
        rows.append(("runtime", "\(CompiledFormat.runtimeVersion) (compiler \(CompiledFormat.compilerVersion))"))
        Console.out(table(rows))
    }
}

/// `kiln specialize PKG [--persistent] [--cache-dir DIR] [--max-arch NAME] [--json]`: specializes
/// a package for this host ahead of time and prints the bookmark that reopens it.
enum SpecializeCommand {
    static let spec = CommandSpec(
        name: "specialize",
        abstract: "Specialize a package for this host into the cache ahead of time and print its bookmark.",
        usage: "kiln specialize PKG [--persistent] [--cache-dir DIR] [--max-arch NAME] [--json]",
        arguments: [("PKG", "A Kiln package (Name.kiln).")],
        options: [
            OptionSpec(names: ["--persistent"], valueName: nil, help: "Keep the entry out of eviction (under $XDG_DATA_HOME/kiln unless --cache-dir is given)."),
            OptionSpec(names: ["--cache-dir"], valueName: "DIR", help: "The cache directory (default $XDG_CACHE_HOME/kiln)."),
            OptionSpec(names: ["--max-arch"], valueName: "NAME", help: "Specialize for the best arch at or below NAME."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON: the entry, what happened and the bookmark."),
        ],
        discussion: "A second run finds the entry and only prints the bookmark. 'kiln run' and 'kiln bench' take the directory beside the package, or the same --cache-dir.")

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else { throw UsageError(message: args.positionals.isEmpty ? "missing PKG" : "expected one PKG", command: spec) }
        let path = args.positionals[0]
        guard FileManager.default.fileExists(atPath: "\(path)/\(PackageFormat.manifestFileName)") else {
            throw Failure(message: "\(path): not a Kiln package (no \(PackageFormat.manifestFileName))")
        }
        let cache = SpecializationCache(directory: args.value("--cache-dir"))
        var options = SpecializationOptions()
        options.policy = args.has("--persistent") ? .persistent : .evictable
        options.maxArchitecture = args.value("--max-arch")
        let model = try await cache.specialize(contentsOf: URL(fileURLWithPath: path), options: options)
        guard let bookmark = model.bookmarkData, let text = String(data: bookmark, encoding: .utf8) else {
            throw Failure(message: "\(path): specialized in memory only (\(model.explanation.warnings.joined(separator: "; "))); nothing to bookmark")
        }
        if args.has("--json") {
            Console.out(JSON.object([
                ("package", .string(path)), ("architecture", model.architecture.map { .string($0) } ?? .null),
                ("artifact", .string(model.url.path)), ("policy", .string(options.policy.rawValue)),
                ("specialization", model.explanation.specialization.map { .string($0) } ?? .null),
                ("bookmark", .string(text)),
            ]).rendered() + "\n")
        } else {
            Console.err("\(model.explanation.specialization ?? "specialized")\n")
            Console.out(text + "\n")
        }
    }
}
