import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// The `kiln` command line: subcommand dispatch, help and exit codes
/// (0 success, 1 failure, 64 usage error).
enum Kiln {
    static let version = "0.1.0"

    static let subcommands: [(CommandSpec, @Sendable (ParsedArguments) async throws -> Void)] = [
        (InspectCommand.spec, InspectCommand.run),
        (MetaCommand.spec, MetaCommand.run),
        (ConvertCommand.spec, ConvertCommand.run),
        (OptimizeCommand.spec, OptimizeCommand.run),
        (CompileCommand.spec, CompileCommand.run),
        (BenchCommand.spec, BenchCommand.run),
        (SelectCommand.spec, SelectCommand.run),
        (CacheCommand.spec, CacheCommand.run),
        (SpecializeCommand.spec, SpecializeCommand.run),
        (HostCommand.spec, HostCommand.run),
        (RunCommand.spec, RunCommand.run),
        (KeygenCommand.spec, KeygenCommand.run),
        (ArchiveCommand.spec, ArchiveCommand.run),
        (FetchCommand.spec, FetchCommand.run),
        (StoreCommand.spec, StoreCommand.run),
    ]

    static var helpText: String {
        var rows = subcommands.map { ($0.0.name, $0.0.abstract) }
        rows.append(("help", "Show help for kiln or a subcommand."))
        return """
            OVERVIEW: Kiln — an ahead-of-time model compiler toolchain for Linux CPUs.

            USAGE: kiln <subcommand> [options]

            OPTIONS:
            \(table([("-h, --help", "Show help information."), ("--version", "Show Kiln's version.")]))
            SUBCOMMANDS:
            \(table(rows))
              See 'kiln help <subcommand>' for detailed help.

            """
    }

    static func main(_ argv: [String]) async -> Int32 {
        guard let first = argv.first else {
            Console.out(helpText)
            return 0
        }
        do {
            switch first {
            case "-h", "--help":
                Console.out(helpText)
                return 0
            case "--version":
                Console.out("kiln \(version)\n")
                return 0
            case "help":
                guard argv.count > 1 else {
                    Console.out(helpText)
                    return 0
                }
                guard let sub = subcommands.first(where: { $0.0.name == argv[1] }) else {
                    throw unknownSubcommand(argv[1])
                }
                Console.out(sub.0.helpText)
                return 0
            default:
                guard let sub = subcommands.first(where: { $0.0.name == first }) else {
                    throw unknownSubcommand(first)
                }
                let args = try sub.0.parse(Array(argv.dropFirst()))
                if args.wantsHelp {
                    Console.out(sub.0.helpText)
                    return 0
                }
                try await sub.1(args)
                return 0
            }
        } catch let e as UsageError {
            Console.err("error: \(e.message)\n")
            if let c = e.command {
                Console.err("Usage: \(c.usage)\n  See 'kiln \(c.name) --help'.\n")
            } else {
                Console.err("Usage: kiln <subcommand> [options]\n  See 'kiln help'.\n")
            }
            return 64
        } catch let e as Failure {
            Console.err("error: \(e.message)\n")
            return 1
        } catch let e as any KilnError {
            Console.err("error: \(oneLine(e.line))\n")
            return 1
        } catch {
            Console.err("error: \(oneLine(String(describing: error)))\n")
            return 1
        }
    }

    static func unknownSubcommand(_ name: String) -> UsageError {
        var message = "unknown subcommand '\(name)'"
        let names = subcommands.map(\.0.name) + ["help"]
        if let near = nearest(name, in: names) { message += "; did you mean '\(near)'?" }
        return UsageError(message: message, command: nil)
    }

    static func oneLine(_ s: String) -> String {
        s.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

exit(await Kiln.main(Array(CommandLine.arguments.dropFirst())))
