import Foundation
import KilnFormat
import KilnRuntime

/// `kiln cache list | prune [--max-bytes N] | clear [--all]` with `--dir`.
enum CacheCommand {
    static let spec = CommandSpec(
        name: "cache",
        abstract: "List, prune or clear the specialization cache.",
        usage: "kiln cache list|prune|clear [--dir DIR] [--max-bytes N] [--all] [--json]",
        arguments: [("ACTION", "list, prune (evictable entries, least recently used first) or clear.")],
        options: [
            OptionSpec(names: ["--dir"], valueName: "DIR", help: "The cache directory (default \(SpecializationCache.defaultDirectory))."),
            OptionSpec(names: ["--max-bytes"], valueName: "N", help: "prune: keep evictable entries within N bytes (default 2 GiB)."),
            OptionSpec(names: ["--all"], valueName: nil, help: "clear: persistent entries too."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON."),
        ])

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1, let action = args.positionals.first, ["list", "prune", "clear"].contains(action) else {
            throw UsageError(message: "expected one of list, prune, clear", command: spec)
        }
        var maxBytes = 2 << 30
        if let text = args.value("--max-bytes") {
            guard let n = Int(text), n >= 0 else { throw UsageError(message: "--max-bytes '\(text)' is not a byte count", command: spec) }
            maxBytes = n
        }
        let cache = SpecializationCache(directory: args.value("--dir"), maxBytes: maxBytes)
        let entries: [SpecializationCache.Entry]
        switch action {
        case "prune": entries = cache.prune(maxBytes: maxBytes)
        case "clear": entries = cache.clear(all: args.has("--all"))
        default: entries = cache.entries()
        }
        if args.has("--json") {
            Console.out(JSON.object([
                ("directory", .string(cache.directory)), ("action", .string(action)),
                ("entries", .array(entries.map { e in
                    .object([("key", .string(e.key)), ("policy", .string(e.policy.rawValue)), ("bytes", .int(e.bytes)),
                             ("lastUsed", .number(e.lastUsed.timeIntervalSince1970)), ("source", .string(e.source))])
                })),
            ]).rendered() + "\n")
            return
        }
        let verb = action == "list" ? "" : "removed "
        Console.out("\(cache.directory): \(verb)\(entries.count) entr\(entries.count == 1 ? "y" : "ies"), \(humanBytes(entries.reduce(0) { $0 + $1.bytes }))\n")
        for e in entries { Console.out("  \(e.key.prefix(16))  \(e.policy.rawValue)  \(humanBytes(e.bytes))  \(e.source)\n") }
    }
}
