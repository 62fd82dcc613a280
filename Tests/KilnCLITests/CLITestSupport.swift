import Foundation
import XCTest

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()

/// A built executable of this package, from the same build directory as the tests
/// (`.build/<triple>/debug` or `.build/<triple>/release`).
func productPath(_ name: String) -> String {
    let testBinary = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
    var dir = testBinary.deletingLastPathComponent()
    // The runner may be inside the .xctest bundle on some platforms.
    if dir.path.hasSuffix(".xctest") || dir.path.contains(".xctest/") {
        while dir.path.contains(".xctest") { dir.deleteLastPathComponent() }
    }
    let candidate = dir.appendingPathComponent(name).path
    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    return "\(repositoryRoot)/.build/debug/\(name)"
}

struct RunResult {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Spawns a built product and collects its output and exit status.
func runProduct(_ product: String, _ arguments: [String], environment: [String: String] = [:]) throws -> RunResult {
    let scratch = NSTemporaryDirectory() + "kiln-run-" + UUID().uuidString
    let (outPath, errPath) = (scratch + ".out", scratch + ".err")
    _ = FileManager.default.createFile(atPath: outPath, contents: nil)
    _ = FileManager.default.createFile(atPath: errPath, contents: nil)
    defer {
        try? FileManager.default.removeItem(atPath: outPath)
        try? FileManager.default.removeItem(atPath: errPath)
    }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: productPath(product))
    p.arguments = arguments
    if !environment.isEmpty { p.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new } }
    p.standardInput = FileHandle.nullDevice
    p.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: outPath))
    p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
    try p.run()
    p.waitUntilExit()
    return RunResult(status: p.terminationStatus,
                     stdout: String(decoding: try fileBytes(outPath), as: UTF8.self),
                     stderr: String(decoding: try fileBytes(errPath), as: UTF8.self))
}

/// Runs the `kiln` command line.
func kiln(_ arguments: [String], environment: [String: String] = [:]) throws -> RunResult {
    try runProduct("kiln", arguments, environment: environment)
}

func temporaryDirectory(_ test: XCTestCase) throws -> String {
    let path = NSTemporaryDirectory() + "kiln-cli-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
}

func fileBytes(_ path: String) throws -> Data {
    try Data(contentsOf: URL(fileURLWithPath: path))
}

/// Every file under `dir`, relative paths sorted, with contents.
func tree(_ dir: String) throws -> [(String, Data)] {
    let fm = FileManager.default
    guard let e = fm.enumerator(atPath: dir) else { return [] }
    var out: [(String, Data)] = []
    for case let rel as String in e {
        var isDir: ObjCBool = false
        if fm.fileExists(atPath: "\(dir)/\(rel)", isDirectory: &isDir), !isDir.boolValue {
            out.append((rel, try fileBytes("\(dir)/\(rel)")))
        }
    }
    return out.sorted { $0.0 < $1.0 }
}
