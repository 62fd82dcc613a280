import XCTest

final class CommandLineContractTests: XCTestCase {
    func testHelpHasTheStandardSections() throws {
        for args in [["help"], ["--help"], []] {
            let r = try kiln(args)
            XCTAssertEqual(r.status, 0, "\(args)")
            for section in ["OVERVIEW:", "USAGE:", "OPTIONS:", "SUBCOMMANDS:"] {
                XCTAssertTrue(r.stdout.contains(section), "\(args): \(section)")
            }
            XCTAssertTrue(r.stdout.contains("inspect") && r.stdout.contains("meta"))
        }
        for sub in ["inspect", "meta", "convert", "optimize", "run"] {
            for args in [[sub, "--help"], ["help", sub], [sub, "-h"]] {
                let r = try kiln(args)
                XCTAssertEqual(r.status, 0)
                XCTAssertTrue(r.stdout.hasPrefix("OVERVIEW:"), r.stdout)
                XCTAssertTrue(r.stdout.contains("USAGE: kiln \(sub)"))
                XCTAssertTrue(r.stdout.contains("OPTIONS:"))
                XCTAssertEqual(r.stderr, "")
            }
        }
    }

    func testUnknownSubcommandSuggestsTheNearest() throws {
        let r = try kiln(["inspec", "x"])
        XCTAssertEqual(r.status, 64)
        XCTAssertEqual(r.stdout, "")
        XCTAssertTrue(r.stderr.hasPrefix("error: unknown subcommand 'inspec'; did you mean 'inspect'?\n"), r.stderr)
        XCTAssertTrue(r.stderr.contains("See 'kiln help'."))
    }

    func testUnknownOptionSuggestsTheNearest() throws {
        let r = try kiln(["inspect", "\(repositoryRoot)/examples/TinyClassifier.kiln", "--jsn"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.hasPrefix("error: unknown option '--jsn'; did you mean '--json'?\n"), r.stderr)
        XCTAssertTrue(r.stderr.contains("Usage: kiln inspect PATH [--model NAME] [--key FILE] [--json | --dot | --svg FILE]"))
        XCTAssertTrue(r.stderr.contains("See 'kiln inspect --help'."))
    }

    func testMissingArgumentsAreUsageErrors() throws {
        XCTAssertEqual(try kiln(["inspect"]).status, 64)
        XCTAssertEqual(try kiln(["meta"]).status, 64)
        let r = try kiln(["meta", "\(repositoryRoot)/examples/TinyClassifier.kiln", "frob"])
        XCTAssertEqual(r.status, 64)
        XCTAssertTrue(r.stderr.contains("unknown action 'frob'"), r.stderr)
    }

    func testMissingPackageFailsWithOneLine() throws {
        let r = try kiln(["inspect", "/nonexistent/Model.kiln"])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr, "error: /nonexistent/Model.kiln: no such package\n")
    }
}
