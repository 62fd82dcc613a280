import KilnRuntime
#if canImport(Glibc)
import Glibc
#endif

/// One option a subcommand accepts.
struct OptionSpec: Sendable {
    /// Spellings, for example `["-o", "--output"]`; the last is the canonical name.
    var names: [String]
    /// The value's placeholder (`FILE`), or `nil` for a flag.
    var valueName: String?
    var help: String

    var canonical: String { names.last! }
}

/// What a subcommand is, for parsing and for `--help`.
struct CommandSpec: Sendable {
    var name: String
    var abstract: String
    var usage: String
    var arguments: [(String, String)] = []
    var options: [OptionSpec] = []
    var discussion: String = ""

    static let helpOption = OptionSpec(names: ["-h", "--help"], valueName: nil, help: "Show help information.")

    var helpText: String {
        var s = "OVERVIEW: \(abstract)\n\nUSAGE: \(usage)\n"
        if !arguments.isEmpty {
            s += "\nARGUMENTS:\n" + table(arguments)
        }
        let opts = (options + [CommandSpec.helpOption]).map { o -> (String, String) in
            (o.names.joined(separator: ", ") + (o.valueName.map { " \($0)" } ?? ""), o.help)
        }
        s += "\nOPTIONS:\n" + table(opts)
        if !discussion.isEmpty { s += "\n" + discussion + "\n" }
        return s
    }
}

/// Two-column help rows.
func table(_ rows: [(String, String)]) -> String {
    let width = min(28, (rows.map { $0.0.count }.max() ?? 0) + 2)
    return rows.map { left, right in
        let gap = left.count < width ? String(repeating: " ", count: width - left.count) : "\n" + String(repeating: " ", count: width + 2)
        return "  \(left)\(gap)\(right)\n"
    }.joined()
}

/// A mistake in how `kiln` was called: printed with the usage line, exit 64.
struct UsageError: Error {
    var message: String
    var command: CommandSpec?
}

/// A failure doing the work: printed as one line, exit 1.
struct Failure: Error {
    var message: String
}

/// Parsed options and positional arguments of one subcommand.
struct ParsedArguments {
    var positionals: [String] = []
    var values: [String: [String]] = [:]
    var flags: Set<String> = []
    var wantsHelp = false

    func value(_ name: String) -> String? { values[name]?.last }
    func has(_ flag: String) -> Bool { flags.contains(flag) }
}

extension CommandSpec {
    /// Splits `args` into options and positionals; rejects unknown options with a suggestion.
    func parse(_ args: [String]) throws -> ParsedArguments {
        var out = ParsedArguments()
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || !a.hasPrefix("-") || a == "-" {
                out.positionals.append(a)
                continue
            }
            if a == "--" {
                onlyPositionals = true
                continue
            }
            if a == "-h" || a == "--help" {
                out.wantsHelp = true
                continue
            }
            var name = a
            var inlineValue: String?
            if a.hasPrefix("--"), let eq = a.firstIndex(of: "=") {
                name = String(a[..<eq])
                inlineValue = String(a[a.index(after: eq)...])
            }
            guard let spec = options.first(where: { $0.names.contains(name) }) else {
                let all = options.flatMap(\.names) + ["--help"]
                var message = "unknown option '\(name)'"
                if let near = nearest(name, in: all) { message += "; did you mean '\(near)'?" }
                throw UsageError(message: message, command: self)
            }
            if spec.valueName != nil {
                if let v = inlineValue {
                    out.values[spec.canonical, default: []].append(v)
                } else {
                    guard i < args.count else {
                        throw UsageError(message: "option '\(name)' needs a value (\(spec.valueName!))", command: self)
                    }
                    out.values[spec.canonical, default: []].append(args[i])
                    i += 1
                }
            } else {
                guard inlineValue == nil else {
                    throw UsageError(message: "option '\(name)' takes no value", command: self)
                }
                out.flags.insert(spec.canonical)
            }
        }
        return out
    }
}

/// The candidate closest to `word` by edit distance, when it is close enough to be a typo.
func nearest(_ word: String, in candidates: [String]) -> String? {
    let scored = candidates.map { ($0, editDistance(word, $0)) }.min { $0.1 < $1.1 }
    guard let (best, d) = scored, d <= max(2, word.count / 3) else { return nil }
    return best
}

func editDistance(_ a: String, _ b: String) -> Int {
    let x = Array(a), y = Array(b)
    if x.isEmpty { return y.count }
    var prev = Array(0 ... y.count)
    for i in 1 ... x.count {
        var cur = [i] + Array(repeating: 0, count: y.count)
        for j in 1 ... max(y.count, 1) where j <= y.count {
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1))
        }
        prev = cur
    }
    return prev[y.count]
}

/// Standard output and error, written without buffering surprises.
/// The function a command runs: `--function`, else the only one, else `main`.
/// - Throws: ``UsageError`` when there are several and none is named `main`.
func chooseFunction(_ requested: String?, among names: [String], path: String, command: CommandSpec) throws -> String {
    if let requested { return requested }
    if names.count == 1 { return names[0] }
    if names.contains("main") { return "main" }
    throw UsageError(message: "\(path) has several functions (\(names.joined(separator: ", "))); choose one with --function", command: command)
}

enum Console {
    static func out(_ s: String) { write(1, s) }
    static func err(_ s: String) { write(2, s) }

    private static func write(_ fd: Int32, _ s: String) {
        let bytes = Array(s.utf8)
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
            if n <= 0 { return }
            done += n
        }
    }
}

/// `1,234,567`.
func grouped(_ n: Int) -> String {
    let s = String(n.magnitude)
    var out = ""
    for (i, c) in s.enumerated() {
        if i > 0 && (s.count - i) % 3 == 0 { out.append(",") }
        out.append(c)
    }
    return (n < 0 ? "-" : "") + out
}

/// `250.1 KiB`.
func humanBytes(_ n: Int) -> String {
    let units = ["bytes", "KiB", "MiB", "GiB", "TiB"]
    var v = Double(n)
    var u = 0
    while v >= 1024 && u < units.count - 1 {
        v /= 1024
        u += 1
    }
    return u == 0 ? "\(n) bytes" : "\(oneDecimal(v)) \(units[u])"
}

/// `17.2M`.
func humanCount(_ n: Int) -> String {
    if n >= 1_000_000_000 { return oneDecimal(Double(n) / 1e9) + "B" }
    if n >= 1_000_000 { return oneDecimal(Double(n) / 1e6) + "M" }
    if n >= 1000 { return oneDecimal(Double(n) / 1e3) + "K" }
    return String(n)
}

func oneDecimal(_ v: Double) -> String {
    let tenths = Int((v * 10).rounded())
    return "\(tenths / 10).\(tenths % 10)"
}

/// The loader options `run`, `bench` and `select` share.
enum LoadFlags {
    static let options: [OptionSpec] = [
        OptionSpec(names: ["--model"], valueName: "NAME", help: "Load only NAME.<arch>.compiled / NAME.kiln from a directory (needed when it holds several models)."),
        OptionSpec(names: ["--cache-dir"], valueName: "DIR", help: "Specialization cache and verified-file memo (default $XDG_CACHE_HOME/kiln; persistent entries then live in DIR too)."),
        OptionSpec(names: ["--max-arch"], valueName: "NAME", help: "Never choose or specialize for an arch above NAME (for example x86_64_v3)."),
        OptionSpec(names: ["--no-verify"], valueName: nil, help: "Do not verify weight checksums before the first run (header and plan are still checked)."),
        OptionSpec(names: ["--key"], valueName: "FILE", help: "Key file (kiln keygen) of encrypted artifacts; decrypted in memory only."),
    ]

    /// Options from the shared flags.
    static func loadOptions(_ args: ParsedArguments) throws -> ModelLoadOptions {
        var o = ModelLoadOptions()
        if let keyFile = args.value("--key") { o.useKeys([try ArtifactKey.read(at: keyFile)]) }
        o.model = args.value("--model")
        if let dir = args.value("--cache-dir") { o.cache = SpecializationCache(directory: dir) }
        o.maxArchitecture = args.value("--max-arch")
        o.verifyChecksums = !args.has("--no-verify")
        return o
    }
}
