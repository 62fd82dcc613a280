import Foundation
import XCTest

/// `Tests/Fixtures/deploy/serve.py` on 127.0.0.1: serves a directory, logs requests, and cuts
/// transfers short, stalls or changes bytes under /short/, /stall/ and /wrong/.
final class TestServer {
    let process = Process()
    let port: Int
    let log: String

    init(root: String, test: XCTestCase) throws {
        log = "\(root)/.requests.log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "\(repositoryRoot)/Tests/Fixtures/deploy/serve.py", root, log]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        var line = Data()
        while !line.contains(10) {
            let chunk = out.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            line += chunk
        }
        let text = String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard text.hasPrefix("port "), let p = Int(text.dropFirst(5)) else {
            process.terminate()
            throw XCTSkip("python3 could not start the test HTTP server (\(text))")
        }
        port = p
        let proc = process
        test.addTeardownBlock {
            proc.terminate()
            proc.waitUntilExit()
        }
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)/\(path)" }

    /// The request paths so far.
    var requests: [String] {
        ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
    }
}

final class DeploymentTests: XCTestCase {
    let package = "\(repositoryRoot)/examples/TinyClassifier.kiln"
    let features = "features=\(repositoryRoot)/examples/TinyClassifier.features.npy"

    func hostArch() throws -> String {
        let r = try kiln(["host", "--json"])
        let root = try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any]
        guard let chosen = root?["chosen"] as? String else { throw XCTSkip("this CPU has no Kiln architecture") }
        return chosen
    }

    func compile(_ out: String, _ extra: [String] = []) throws {
        let r = try kiln(["compile", package, "--arch", "all", "-o", out] + extra)
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    /// `kiln run` outputs as bytes, by file name.
    func outputs(_ path: String, _ extra: [String] = [], scratch: String) throws -> [String: Data] {
        let dir = "\(scratch)/out-\(UUID().uuidString)"
        let r = try kiln(["run", path, "--input", features, "--output-dir", dir] + extra)
        XCTAssertEqual(r.status, 0, r.stderr)
        var out: [String: Data] = [:]
        for (name, data) in try tree(dir) { out[name] = data }
        XCTAssertFalse(out.isEmpty)
        return out
    }

    /// Every path and content under the store, the lock file aside.
    func snapshot(_ store: String) throws -> [String] {
        let fm = FileManager.default
        var out: [String] = []
        for case let rel as String in fm.enumerator(atPath: store) ?? NSEnumerator() where rel != ".lock" {
            let p = "\(store)/\(rel)"
            if let target = try? fm.destinationOfSymbolicLink(atPath: p) {
                out.append("\(rel) -> \(target)")
            } else if let data = fm.contents(atPath: p) {
                out.append("\(rel) \(data.count) \(data.hashValue)")
            } else {
                out.append("\(rel)/")
            }
        }
        return out.sorted()
    }

    func assertNoTemporaryFiles(_ store: String, file: StaticString = #filePath, line: UInt = #line) {
        let fm = FileManager.default
        for case let rel as String in fm.enumerator(atPath: store) ?? NSEnumerator() {
            let name = URL(fileURLWithPath: rel).lastPathComponent
            XCTAssertTrue(!name.hasPrefix(".") || name == ".lock", "left behind: \(rel)", file: file, line: line)
            XCTAssertFalse(name.contains(".tmp-"), "left behind: \(rel)", file: file, line: line)
        }
    }

    func testFetchOverHTTPDownloadsOnlyTheHostArtifactAndNothingWhenUnchanged() throws {
        let root = try temporaryDirectory(self)
        let arch = try hostArch()
        try compile("\(root)/pub")
        let server = try TestServer(root: root, test: self)
        let store = "\(root)/store"
        let r = try kiln(["fetch", server.url("pub/assets.json"), "-o", store])
        XCTAssertEqual(r.status, 0, r.stderr)
        let hostFile = "TinyClassifier.\(arch).compiled"
        XCTAssertEqual(server.requests, ["/pub/assets.json", "/pub/\(hostFile)"])
        let current = "\(store)/TinyClassifier/current"
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: current).sorted(), ["assets.json", hostFile].sorted())
        XCTAssertEqual(try fileBytes("\(current)/\(hostFile)"), try fileBytes("\(root)/pub/\(hostFile)"))
        XCTAssertEqual(try outputs(current, scratch: root), try outputs("\(root)/pub/\(hostFile)", scratch: root))
        assertNoTemporaryFiles(store)

        // Nothing changed: only the manifest is read again.
        let before = try snapshot(store)
        let again = try kiln(["fetch", server.url("pub/assets.json"), "-o", store])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertTrue(again.stdout.contains("up to date"), again.stdout)
        XCTAssertEqual(server.requests.count, 3)
        XCTAssertEqual(server.requests.last, "/pub/assets.json")
        XCTAssertEqual(try snapshot(store), before)

        // The store lists it; a path and a file:// URL work too.
        let list = try kiln(["store", "list", store])
        XCTAssertTrue(list.stdout.contains("TinyClassifier") && list.stdout.contains(hostFile), list.stdout)
        let local = try kiln(["fetch", "file://\(root)/pub/assets.json", "-o", "\(root)/store2", "--json"])
        XCTAssertEqual(local.status, 0, local.stderr)
        XCTAssertTrue(local.stdout.contains("\"upToDate\": false"), local.stdout)
    }

    func testArtifactURLsResolveAgainstTheManifest() throws {
        let root = try temporaryDirectory(self)
        let arch = try hostArch()
        try compile("\(root)/pub")
        let hostFile = "TinyClassifier.\(arch).compiled"
        try FileManager.default.createDirectory(atPath: "\(root)/pub/files", withIntermediateDirectories: true)
        try FileManager.default.moveItem(atPath: "\(root)/pub/\(hostFile)", toPath: "\(root)/pub/files/\(hostFile)")
        var manifest = try JSONSerialization.jsonObject(with: fileBytes("\(root)/pub/assets.json")) as! [String: Any]
        func write(_ url: String, _ name: String) throws {
            manifest["artifacts"] = (manifest["artifacts"] as! [[String: Any]]).map { e in
                var e = e
                if e["file"] as? String == hostFile { e["url"] = url }
                return e
            }
            try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: "\(root)/pub/\(name)"))
        }
        try write("files/\(hostFile)", "relative.json")
        try write("file://\(root)/pub/files/\(hostFile)", "local.json")
        let server = try TestServer(root: root, test: self)
        let r = try kiln(["fetch", server.url("pub/relative.json"), "-o", "\(root)/store"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(server.requests, ["/pub/relative.json", "/pub/files/\(hostFile)"])
        // The same manifest read from disk resolves against its directory.
        XCTAssertEqual(try kiln(["fetch", "\(root)/pub/relative.json", "-o", "\(root)/store2"]).status, 0)
        XCTAssertEqual(try fileBytes("\(root)/store2/TinyClassifier/current/\(hostFile)"), try fileBytes("\(root)/pub/files/\(hostFile)"))
        // A remote manifest may not name a local file.
        let local = try kiln(["fetch", server.url("pub/local.json"), "-o", "\(root)/store3"])
        XCTAssertEqual(local.status, 1)
        XCTAssertTrue(local.stderr.contains("is not an http(s) URL"), local.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(root)/store3"))
    }

    func testFailedFetchesLeaveThePreviousInstallAndNoTemporaryFiles() throws {
        let root = try temporaryDirectory(self)
        let arch = try hostArch()
        try compile("\(root)/old", ["--config", "\(repositoryRoot)/examples/compression.json", "--version", "1"])
        try compile("\(root)/pub", ["--version", "2"])
        let server = try TestServer(root: root, test: self)
        let store = "\(root)/store"
        XCTAssertEqual(try kiln(["fetch", server.url("old/assets.json"), "-o", store]).status, 0)
        let installed = try snapshot(store)
        let hostFile = "TinyClassifier.\(arch).compiled"

        // A manifest whose digest for the host's file is wrong.
        try FileManager.default.createDirectory(atPath: "\(root)/badsha", withIntermediateDirectories: true)
        var text = try String(contentsOfFile: "\(root)/pub/assets.json", encoding: .utf8)
        let manifest = try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
        let entry = (manifest["artifacts"] as! [[String: Any]]).first { $0["file"] as? String == hostFile }!
        let sha = entry["sha256"] as! String
        text = text.replacingOccurrences(of: sha, with: String(repeating: "0", count: 64))
        try text.write(toFile: "\(root)/badsha/assets.json", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: "\(root)/pub/\(hostFile)", toPath: "\(root)/badsha/\(hostFile)")
        // A manifest whose host file is missing on the server.
        try FileManager.default.createDirectory(atPath: "\(root)/missing", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: "\(root)/pub/assets.json", toPath: "\(root)/missing/assets.json")

        let cases: [(String, [String], String)] = [
            ("badsha/assets.json", [], "differs from the manifest's"),
            ("wrong/pub/assets.json", [], "differs from the manifest's"),
            ("short/pub/assets.json", [], "transfer"),
            ("missing/assets.json", [], "HTTP 404"),
            ("nothere/assets.json", [], "HTTP 404"),
            ("stall/pub/assets.json", ["--timeout", "1"], "stalled"),
        ]
        for (path, extra, message) in cases {
            let r = try kiln(["fetch", server.url(path), "-o", store] + extra)
            XCTAssertEqual(r.status, 1, path)
            XCTAssertTrue(r.stderr.hasPrefix("error: http://127.0.0.1:"), "\(path): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains(message), "\(path): \(r.stderr)")
            XCTAssertEqual(try snapshot(store), installed, path)
            assertNoTemporaryFiles(store)
        }
        // The previous install still runs.
        XCTAssertEqual(try kiln(["run", "\(store)/TinyClassifier/current", "--input", features, "--print"]).status, 0)

        // Then a good fetch switches; --keep 1 prunes the old version.
        let good = try kiln(["fetch", server.url("pub/assets.json"), "-o", store, "--keep", "1"])
        XCTAssertEqual(good.status, 0, good.stderr)
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: "\(store)/TinyClassifier/current"), "2")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: "\(store)/TinyClassifier").sorted(), ["2", "current"])
    }

    func testACollectionWithOneBadMemberInstallsNothing() throws {
        let root = try temporaryDirectory(self)
        _ = try hostArch()
        try compile("\(root)/pub")
        let encoder = try kiln(["compile", "\(repositoryRoot)/examples/TinyEncoder.kiln", "--arch", "host", "-o", "\(root)/pub"])
        XCTAssertEqual(encoder.status, 0, encoder.stderr)
        // compile rewrote assets.json for TinyEncoder; build a two-model manifest from each build.
        let classifier = try kiln(["compile", package, "--arch", "host", "-o", "\(root)/c", "--json"])
        func model(_ json: String, version: String) throws -> [String: Any] {
            var m = try JSONSerialization.jsonObject(with: Data(json.utf8)) as! [String: Any]
            m["version"] = version
            return m
        }
        let a = try model(classifier.stdout, version: "1")
        let b = try model(try String(contentsOfFile: "\(root)/pub/assets.json", encoding: .utf8), version: "1")
        func write(_ name: String, _ models: [[String: Any]], version: String) throws {
            let manifest: [String: Any] = ["models": models, "collections": [["name": "Pair", "version": version, "models": ["TinyClassifier", "TinyEncoder"]]]]
            try JSONSerialization.data(withJSONObject: manifest, options: [.sortedKeys]).write(to: URL(fileURLWithPath: "\(root)/pub/\(name)"))
        }
        try write("good.json", [a, b], version: "1")
        var broken = b
        var artifacts = broken["artifacts"] as! [[String: Any]]
        artifacts[0]["sha256"] = String(repeating: "f", count: 64)
        broken["artifacts"] = artifacts
        // Version 2: the classifier is unchanged (reused from version 1), the encoder's digest is wrong.
        try write("bad.json", [a, broken], version: "2")

        let server = try TestServer(root: root, test: self)
        let store = "\(root)/store"
        let r = try kiln(["fetch", server.url("pub/good.json"), "-o", store, "--collection", "Pair"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let current = "\(store)/Pair/current"
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: current).filter { $0.hasSuffix(".compiled") }.count, 2)
        XCTAssertEqual(try kiln(["run", current, "--model", "TinyClassifier", "--input", features, "--print"]).status, 0)
        let installed = try snapshot(store)

        let bad = try kiln(["fetch", server.url("pub/bad.json"), "-o", store, "--collection", "Pair"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("differs from the manifest's"), bad.stderr)
        XCTAssertEqual(try snapshot(store), installed)
        assertNoTemporaryFiles(store)

        let unknown = try kiln(["fetch", server.url("pub/good.json"), "-o", store, "--collection", "Trio"])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertTrue(unknown.stderr.contains("lists no collection 'Trio'"), unknown.stderr)
    }

    func testArchiveRunsAndFetchesLikeTheDirectory() throws {
        let root = try temporaryDirectory(self)
        let arch = try hostArch()
        try compile("\(root)/pub")
        let archive = "\(root)/TinyClassifier.kilnarchive"
        let r = try kiln(["archive", "\(root)/pub", "-o", archive])
        XCTAssertEqual(r.status, 0, r.stderr)
        // Deterministic.
        let again = "\(root)/again.kilnarchive"
        XCTAssertEqual(try kiln(["archive", "\(root)/pub", "-o", again]).status, 0)
        XCTAssertEqual(try fileBytes(archive), try fileBytes(again))

        let expected = try outputs("\(root)/pub", scratch: root)
        XCTAssertEqual(try outputs(archive, scratch: root), expected)
        let inspected = try kiln(["inspect", archive])
        XCTAssertEqual(inspected.status, 0, inspected.stderr)
        XCTAssertTrue(inspected.stdout.contains("Kiln archive of 6 artifacts"), inspected.stdout)
        let server = try TestServer(root: root, test: self)
        let fetched = try kiln(["fetch", server.url("TinyClassifier.kilnarchive"), "-o", "\(root)/store"])
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        let current = "\(root)/store/TinyClassifier/current"
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(current)/TinyClassifier.\(arch).compiled"))
        XCTAssertEqual(try outputs(current, scratch: root), expected)
        assertNoTemporaryFiles("\(root)/store")

        // A changed byte inside the host's member: refused by both.
        var bytes = try fileBytes(archive)
        let text = String(decoding: bytes.prefix(4096), as: UTF8.self)
        let index = try JSONSerialization.jsonObject(with: Data(text[text.range(of: "{\"members\"")!.lowerBound...].utf8.prefix { $0 != 10 })) as! [String: Any]
        let member = (index["members"] as! [[String: Any]]).first { $0["name"] as? String == "TinyClassifier.\(arch).compiled" }!
        let at = (member["offset"] as! Int) + (member["bytes"] as! Int) / 2
        bytes[at] ^= 0x40
        let damaged = "\(root)/damaged/TinyClassifier.kilnarchive"
        try FileManager.default.createDirectory(atPath: "\(root)/damaged", withIntermediateDirectories: true)
        try bytes.write(to: URL(fileURLWithPath: damaged))
        // The loader refuses the damaged member and loads the next best, as from a directory.
        let run = try kiln(["run", damaged, "--input", features, "--print", "--explain"])
        XCTAssertEqual(run.status, 0, run.stderr)
        let report = run.stdout + run.stderr
        XCTAssertTrue(report.contains("TinyClassifier.\(arch).compiled: refused: ") && report.contains("differs from the archive index"), report)
        let fetch = try kiln(["fetch", damaged, "-o", "\(root)/store3"])
        XCTAssertEqual(fetch.status, 1)
        XCTAssertTrue(fetch.stderr.contains("the archive is corrupt"), fetch.stderr)
        let damagedReport = try kiln(["inspect", damaged])
        XCTAssertTrue(damagedReport.stdout.contains("refused: TinyClassifier.\(arch).compiled: SHA-256"), damagedReport.stdout)
        // A truncated archive.
        try bytes.prefix(bytes.count - 10).write(to: URL(fileURLWithPath: damaged))
        let cut = try kiln(["run", damaged, "--input", features, "--print"])
        XCTAssertEqual(cut.status, 1)
        XCTAssertTrue(cut.stderr.contains("truncated"), cut.stderr)
    }

    func testEncryptedArtifactsHoldNoPlaintextWeightsAndNeedTheirKey() throws {
        let root = try temporaryDirectory(self)
        let arch = try hostArch()
        let key = "\(root)/Model.kilnkey", other = "\(root)/Other.kilnkey"
        let k = try kiln(["keygen", "-o", key])
        XCTAssertEqual(k.status, 0, k.stderr)
        var st = stat()
        XCTAssertEqual(stat(key, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600)
        XCTAssertEqual(try kiln(["keygen", "-o", key]).status, 1, "an existing key is not replaced")
        XCTAssertEqual(try kiln(["keygen", "-o", other]).status, 0)
        let keyID = String(try String(contentsOfFile: key, encoding: .utf8).split(separator: "\n")[1].dropFirst(3))

        try compile("\(root)/plain")
        try compile("\(root)/enc", ["--encrypt", key])
        try compile("\(root)/enc2", ["--encrypt", key])
        let file = "TinyClassifier.\(arch).compiled"
        let plain = try fileBytes("\(root)/plain/\(file)"), encrypted = try fileBytes("\(root)/enc/\(file)")
        XCTAssertEqual(encrypted, try fileBytes("\(root)/enc2/\(file)"), "encryption is deterministic")
        // None of the plaintext weight section's 32-byte pieces appears in the encrypted file.
        let offset = plain.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 152, as: UInt64.self)) }
        let length = plain.withUnsafeBytes { Int($0.loadUnaligned(fromByteOffset: 160, as: UInt64.self)) }
        var checked = 0
        var at = offset
        while at + 32 <= offset + length {
            let piece = plain[at ..< at + 32]
            if Set(piece).count > 4 {
                XCTAssertNil(encrypted.range(of: piece), "plaintext weight bytes at \(at)")
                checked += 1
            }
            at += 32
        }
        XCTAssertGreaterThan(checked, 100)

        // With the key: bit-identical outputs; without it or with another: the key error.
        let expected = try outputs("\(root)/plain/\(file)", scratch: root)
        XCTAssertEqual(try outputs("\(root)/enc/\(file)", ["--key", key], scratch: root), expected)
        XCTAssertEqual(try outputs("\(root)/enc", ["--key", key], scratch: root), expected)
        let none = try kiln(["run", "\(root)/enc/\(file)", "--input", features, "--print"])
        XCTAssertEqual(none.status, 1)
        XCTAssertTrue(none.stderr.contains("needs key \(keyID)"), none.stderr)
        let wrong = try kiln(["run", "\(root)/enc/\(file)", "--key", other, "--input", features, "--print"])
        XCTAssertEqual(wrong.status, 1)
        XCTAssertTrue(wrong.stderr.contains("needs key \(keyID); the key given is"), wrong.stderr)
        let dir = try kiln(["run", "\(root)/enc", "--input", features, "--print"])
        XCTAssertEqual(dir.status, 1)
        XCTAssertTrue(dir.stderr.contains("needs key \(keyID)"), dir.stderr)

        // Truncated or altered: authentication or size errors, not the key error.
        try FileManager.default.createDirectory(atPath: "\(root)/bad", withIntermediateDirectories: true)
        for (name, damaged) in [("cut", encrypted.prefix(encrypted.count - 1)), ("flip", { var d = encrypted; d[d.count - 100] ^= 1; return d }()),
                                ("flipweights", { var d = encrypted; d[offset + length / 2] ^= 0x10; return d }()),
                                ("header", { var d = encrypted; d[64 + 20] ^= 1; return d }())] {
            let path = "\(root)/bad/\(file)"
            try Data(damaged).write(to: URL(fileURLWithPath: path))
            let r = try kiln(["run", path, "--key", key, "--input", features, "--print"])
            XCTAssertEqual(r.status, 1, name)
            XCTAssertFalse(r.stderr.contains("needs key"), "\(name): \(r.stderr)")
            XCTAssertTrue(r.stderr.contains("authentication failed") || r.stderr.contains("truncated") || r.stderr.contains("checksum mismatch"),
                          "\(name): \(r.stderr)")
        }
        // A malformed key file.
        try "kiln-key 1\nkey 1234\n".write(toFile: "\(root)/short.kilnkey", atomically: true, encoding: .utf8)
        let badKey = try kiln(["run", "\(root)/enc/\(file)", "--key", "\(root)/short.kilnkey", "--input", features, "--print"])
        XCTAssertEqual(badKey.status, 1)
        XCTAssertTrue(badKey.stderr.contains("short.kilnkey: the 'key' line must hold 64 hex digits"), badKey.stderr)
        // The manifest names the key; fetch installs the encrypted artifact, which runs with the key.
        let fetched = try kiln(["fetch", "\(root)/enc/assets.json", "-o", "\(root)/store"])
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        XCTAssertEqual(try outputs("\(root)/store/TinyClassifier/current", ["--key", key], scratch: root), expected)
    }
}
