import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime
@testable import KilnStore
import XCTest

final class StoreTests: XCTestCase {
    let root: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0 ..< 3 { url.deleteLastPathComponent() }
        return url.path
    }()

    func scratch() throws -> String {
        let path = NSTemporaryDirectory() + "kiln-store-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func entry(_ arch: String, isDefault: Bool = false, requires: [String: Any]? = nil) -> [String: Any] {
        var e: [String: Any] = ["arch": arch, "file": "M.\(arch).compiled", "bytes": 10, "sha256": String(repeating: "a", count: 64)]
        if isDefault { e["default"] = true }
        if let requires { e["requires"] = requires }
        return e
    }

    func manifest(_ entries: [[String: Any]]) throws -> AssetsManifest.Model {
        let data = try JSONSerialization.data(withJSONObject: ["model": "M", "artifacts": entries])
        return try AssetsManifest.parse(Array(data), source: "test").models[0]
    }

    func testTargetingRulesAndTheDefaultEntry() throws {
        guard let host = Architecture.host else { throw XCTSkip("this CPU has no Kiln architecture") }
        var target = try HostTarget.current()
        target.cpuFeatures = ["f1"]
        target.memoryBytes = 1 << 30
        let base = Architecture.all.first { $0.family == host.family && $0.level == 1 }!.name
        // The best arch whose rules hold.
        var m = try manifest([entry(base), entry(host.name, requires: ["cpuFeatures": ["f1"], "memoryBytes": 1 << 20])])
        XCTAssertEqual(target.choose(m).0?.arch, host.name)
        // A rule that fails moves the choice down.
        m = try manifest([entry(base), entry(host.name, requires: ["cpuFeatures": ["f2"]])])
        XCTAssertEqual(target.choose(m).0?.arch, base)
        XCTAssertTrue(target.choose(m).1.contains { $0.verdict.contains("f2") })
        m = try manifest([entry(base, requires: ["memoryBytes": 2 << 30]), entry(host.name, requires: ["runtimeVersion": "99.0"])])
        XCTAssertNil(target.choose(m).0)
        // With a default entry, it is chosen when no rule holds.
        m = try manifest([entry(base, isDefault: true, requires: ["memoryBytes": 2 << 30]), entry(host.name, requires: ["runtimeVersion": "99.0"])])
        XCTAssertEqual(target.choose(m).0?.arch, base)
        // An arch of another family is never chosen, even as the default.
        let foreign = Architecture.all.first { $0.family != host.family }!.name
        m = try manifest([entry(foreign, isDefault: true)])
        XCTAssertNil(target.choose(m).0)
        // An unknown rule is an error, not ignored.
        XCTAssertThrowsError(try manifest([entry(base, requires: ["gpu": true])])) { e in
            XCTAssertTrue("\(e)".contains("artifacts[0].requires.gpu: is not a rule"), "\(e)")
        }
    }

    func testManifestErrorsNameTheField() throws {
        let cases: [(Any, String)] = [
            (["model": "M"], "no 'artifacts' or 'models'"),
            (["model": "M", "artifacts": [["arch": "x86_64", "file": "../M.x86_64.compiled", "bytes": 1, "sha256": String(repeating: "a", count: 64)]]], "artifacts[0].file"),
            (["model": "M", "artifacts": [["arch": "x86_64", "file": "M.x86_64.compiled", "bytes": 1, "sha256": "xyz"]]], "artifacts[0].sha256"),
            (["model": "M", "version": "../x", "artifacts": [entry("x86_64")]], "version"),
            (["models": [["model": "M", "artifacts": [entry("x86_64")]]], "collections": [["name": "C", "models": ["N"]]]], "names model 'N'"),
        ]
        for (json, message) in cases {
            let data = try JSONSerialization.data(withJSONObject: json)
            XCTAssertThrowsError(try AssetsManifest.parse(Array(data), source: "m.json")) { e in
                XCTAssertTrue("\(e)".hasPrefix("m.json: ") && "\(e)".contains(message), "\(e)")
            }
        }
        XCTAssertThrowsError(try AssetsManifest.parse(Array("[1, 2".utf8), source: "m.json"))
    }

    func testLoadFallsBackToTheBundledPackageWithTheReason() async throws {
        guard Architecture.host != nil else { throw XCTSkip("this CPU has no Kiln architecture") }
        let dir = try scratch()
        let store = ModelStore(directory: "\(dir)/store")
        let bundled = URL(fileURLWithPath: "\(root)/examples/TinyClassifier.kiln")
        // Nothing installed.
        var model = try await store.load(model: "TinyClassifier", fallback: bundled)
        XCTAssertTrue(model.explanation.fallback?.contains("not installed") ?? false, "\(model.explanation)")
        do {
            _ = try await store.load(model: "TinyClassifier")
            XCTFail("expected an error")
        } catch let e as StoreError {
            XCTAssertTrue(e.reason.contains("not installed"))
        }

        // Installed from a manifest of one host artifact, it loads from the store.
        let package = try PackageReader.read(at: bundled.path)
        let (header, plan) = try Compiler.compile(package, options: Compiler.Options(arch: Architecture.host!), sourceDigest: [UInt8](repeating: 1, count: 32))
        let file = "TinyClassifier.\(header.arch).compiled"
        let chunks = try CompiledArtifact.write(header: header, plan: plan, to: "\(dir)/pub/\(file)")
        let bytes = chunks.reduce(0) { $0 + $1.count }
        let sha = SHA256.hex(try FileSystem.sha256(ofFileAt: "\(dir)/pub/\(file)"))
        let manifest: [String: Any] = ["model": "TinyClassifier", "version": "7",
                                       "artifacts": [["arch": header.arch, "file": file, "bytes": bytes, "sha256": sha]]]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: "\(dir)/pub/assets.json"))
        let result = try store.install(from: "\(dir)/pub/assets.json")
        XCTAssertEqual(result.version, "7")
        XCTAssertEqual(result.downloadedBytes, bytes)
        model = try await store.load(model: "TinyClassifier", fallback: bundled)
        XCTAssertNil(model.explanation.fallback)
        XCTAssertEqual(model.architecture, header.arch)
        XCTAssertTrue(model.explanation.chosen?.hasPrefix("\(dir)/store/TinyClassifier/7/") ?? false, "\(model.explanation)")

        // Damaged after install: the fallback loads, and the explanation says why.
        let installed = "\(dir)/store/TinyClassifier/7/\(file)"
        var data = try Data(contentsOf: URL(fileURLWithPath: installed))
        data[data.count / 2] ^= 1
        try data.write(to: URL(fileURLWithPath: installed))
        model = try await store.load(model: "TinyClassifier", fallback: bundled)
        XCTAssertNil(model.architecture, "the bundled package runs")
        let reason = model.explanation.fallback ?? ""
        XCTAssertTrue(reason.contains("did not load") && reason.contains(file), reason)
        XCTAssertTrue(model.explanation.description.contains("fallback: "))

        // Listing, and removing.
        XCTAssertEqual(try store.list().map(\.name), ["TinyClassifier"])
        XCTAssertEqual(try store.list()[0].current, "7")
        XCTAssertThrowsError(try store.remove("TinyClassifier", version: "7"))
        _ = try store.remove("TinyClassifier")
        XCTAssertEqual(try store.list().count, 0)
    }

    /// Publishes TinyClassifier compiled for the host as `version` under `dir`; returns the manifest's path.
    func publish(_ dir: String, version: String) throws -> String {
        let package = try PackageReader.read(at: "\(root)/examples/TinyClassifier.kiln")
        let (header, plan) = try Compiler.compile(package, options: Compiler.Options(arch: Architecture.host!), sourceDigest: [UInt8](repeating: 1, count: 32))
        let file = "TinyClassifier.\(header.arch).compiled"
        let bytes = try CompiledArtifact.write(header: header, plan: plan, to: "\(dir)/\(file)").reduce(0) { $0 + $1.count }
        let sha = SHA256.hex(try FileSystem.sha256(ofFileAt: "\(dir)/\(file)"))
        let manifest: [String: Any] = ["model": "TinyClassifier", "version": version,
                                       "artifacts": [["arch": header.arch, "file": file, "bytes": bytes, "sha256": sha]]]
        try JSONSerialization.data(withJSONObject: manifest).write(to: URL(fileURLWithPath: "\(dir)/assets.json"))
        return "\(dir)/assets.json"
    }

    /// Versions installed one after another while other tasks load and run the current one: every
    /// load finds a whole version (never a half-installed one) and runs to the same outputs.
    func testConcurrentInstallsWhileLoading() async throws {
        guard Architecture.host != nil else { throw XCTSkip("this CPU has no Kiln architecture") }
        let dir = try scratch()
        let (one, two) = (try publish("\(dir)/pub1", version: "1"), try publish("\(dir)/pub2", version: "2"))
        let store = ModelStore(directory: "\(dir)/store")
        _ = try store.install(from: one)
        let features = try NDArray(npyBytes: try FileSystem.readFile("\(root)/examples/TinyClassifier.features.npy"))
        let first = try await store.load(model: "TinyClassifier")
        let function = try await first.loadFunction(named: first.functionNames[0])!
        let name = function.descriptor.inputs[0].name
        let want = try await function.run(inputs: [name: features]).map { $0.value.bytes }
        let installs = 20
        let loads = try await withThrowingTaskGroup(of: Int.self) { group in
            group.addTask {
                for k in 0 ..< installs { _ = try store.install(from: k % 2 == 0 ? two : one) }
                return 0
            }
            for _ in 0 ..< 3 {
                group.addTask {
                    var count = 0
                    for _ in 0 ..< 40 {
                        let model = try await store.load(model: "TinyClassifier")
                        let chosen = model.explanation.chosen ?? ""
                        // A version's directory, or a reinstall's (`1-r2`), never a temporary one.
                        let version = chosen.components(separatedBy: "/store/TinyClassifier/").last?.split(separator: "/").first ?? ""
                        XCTAssertTrue(["1", "2"].contains(version.split(separator: "-").first ?? ""), chosen)
                        XCTAssertFalse(version.hasPrefix("."), chosen)
                        let f = try await model.loadFunction(named: model.functionNames[0])!
                        let got = try await f.run(inputs: [name: features]).map { $0.value.bytes }
                        XCTAssertEqual(got, want)
                        count += 1
                    }
                    return count
                }
            }
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(loads, 120)
        // The last install (the twentieth) was version 1.
        XCTAssertTrue(try store.list()[0].current?.hasPrefix("1") ?? false)
    }
}
