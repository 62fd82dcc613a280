import Foundation
import XCTest

/// `inspect` of every form, `select --model`, `--no-verify`, `specialize`, `host`.
final class TrustCommandTests: XCTestCase {
    let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"

    func json(_ args: [String], environment: [String: String] = [:]) throws -> [String: Any] {
        let r = try kiln(args + ["--json"], environment: environment)
        XCTAssertEqual(r.status, 0, r.stderr)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout.utf8)) as? [String: Any], r.stdout)
    }

    func canonical(_ v: Any?) throws -> String {
        guard let v else { return "null" }
        return String(decoding: try JSONSerialization.data(withJSONObject: v, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
    }

    func testInspectShowsTheSameModelFieldsForEveryForm() throws {
        let dir = try temporaryDirectory(self)
        XCTAssertEqual(try kiln(["compile", encoder, "--arch", "all", "-o", "\(dir)/out"]).status, 0)
        let artifacts = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/out").filter { $0.hasSuffix(".compiled") }.sorted()
        let package = try json(["inspect", encoder])
        let artifact = try json(["inspect", "\(dir)/out/\(artifacts[0])"])
        let directory = try json(["inspect", "\(dir)/out"])
        let manifest = try json(["inspect", "\(dir)/out/assets.json"])
        XCTAssertEqual(package["kind"] as? String, "package")
        XCTAssertEqual(artifact["kind"] as? String, "compiled")
        XCTAssertEqual(directory["kind"] as? String, "directory")
        XCTAssertEqual(manifest["kind"] as? String, "assets")
        let shared = ["name", "formatVersion", "metadata", "parameterCount", "computePrecision", "storagePrecisions",
                      "operations", "functions", "weights"]
        for form in [artifact, directory, manifest] {
            XCTAssertEqual(Set(form.keys), Set(package.keys), "every form has the same top-level keys")
            for key in shared {
                XCTAssertEqual(try canonical(form[key]), try canonical(package[key]), "\(key) of \(form["kind"]!)")
            }
            XCTAssertNotNil(form["artifact"] as? [String: Any])
        }
        XCTAssertTrue(package["artifact"] is NSNull)
        XCTAssertEqual((package["artifacts"] as? [Any])?.count, 0)
        // Signatures give dtype and shape as separate fields.
        let input = ((package["functions"] as! [[String: Any]])[0]["inputs"] as! [[String: Any]])[0]
        XCTAssertEqual(input["dtype"] as? String, "int64")
        XCTAssertEqual(input["shape"] as? [String], ["batch", "seq"])
        // Artifact-only sections: arch, digests, kernels per step.
        let a = artifact["artifact"] as! [String: Any]
        XCTAssertNotNil(a["arch"] as? String)
        XCTAssertEqual((a["digests"] as? [String: Any])?["weightsIntact"] as? Bool, true)
        XCTAssertGreaterThan(((a["functions"] as! [[String: Any]])[1]["stepKernels"] as! [Any]).count, 0)
        // Directory and manifest list every artifact with a verdict.
        XCTAssertEqual((directory["artifacts"] as! [[String: Any]]).count, artifacts.count)
        XCTAssertEqual((manifest["artifacts"] as! [[String: Any]]).map { $0["verdict"] as! String }.filter { $0 == "shown" }.count, 1)
        // The text view has the same model sections.
        let text = try kiln(["inspect", "\(dir)/out"]).stdout
        for fragment in ["parameters     49,857 (49.9K)", "author         Kiln examples", "Operations (25)", "Functions (2)", "Artifact\n", "Artifacts ("] {
            XCTAssertTrue(text.contains(fragment), "missing «\(fragment)» in\n\(text)")
        }
    }

    func testInspectErrorsAreClear() throws {
        let dir = try temporaryDirectory(self)
        try Data("{\"model\": 1}".utf8).write(to: URL(fileURLWithPath: "\(dir)/assets.json"))
        let bad = try kiln(["inspect", "\(dir)/assets.json"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.contains("\(dir)/assets.json: not a Kiln assets manifest"), bad.stderr)
        XCTAssertEqual(try kiln(["compile", classifier, "--arch", "x86_64", "-o", "\(dir)/two"]).status, 0)
        XCTAssertEqual(try kiln(["compile", encoder, "--arch", "x86_64", "-o", "\(dir)/two"]).status, 0)
        let two = try kiln(["inspect", "\(dir)/two"])
        XCTAssertEqual(two.status, 1)
        XCTAssertTrue(two.stderr.contains("holds 2 models ('TinyClassifier', 'TinyEncoder')"), two.stderr)
        XCTAssertEqual(try json(["inspect", "\(dir)/two", "--model", "TinyClassifier"])["name"] as? String, "TinyClassifier")
    }

    func testSelectAndRunByModelNameAndDamagedArtifacts() throws {
        let dir = try temporaryDirectory(self)
        XCTAssertEqual(try kiln(["compile", classifier, "--arch", "x86_64,arm64", "-o", dir]).status, 0)
        XCTAssertEqual(try kiln(["compile", encoder, "--arch", "x86_64,arm64", "-o", "\(dir)/enc"]).status, 0)
        for f in try FileManager.default.contentsOfDirectory(atPath: "\(dir)/enc") where f.hasSuffix(".compiled") {
            try FileManager.default.moveItem(atPath: "\(dir)/enc/\(f)", toPath: "\(dir)/\(f)")
        }
        try FileManager.default.removeItem(atPath: "\(dir)/assets.json")
        let features = "\(repositoryRoot)/examples/TinyClassifier.features.npy"
        let noName = try kiln(["run", dir, "--input", "features=\(features)", "--print", "--cache-dir", "\(dir)/cache"])
        XCTAssertEqual(noName.status, 1)
        XCTAssertTrue(noName.stderr.contains("holds 2 models"), noName.stderr)
        #if arch(x86_64)
        let run = try kiln(["run", dir, "--model", "TinyClassifier", "--input", "features=\(features)", "--print", "--cache-dir", "\(dir)/cache"])
        XCTAssertEqual(run.status, 0, run.stderr)
        XCTAssertTrue(run.stdout.contains("probabilities"), run.stdout)
        // Damage the weights: select refuses it and says why; --no-verify is the explicit opt-out.
        let file = "\(dir)/TinyClassifier.x86_64.compiled"
        var bytes = try fileBytes(file)
        bytes[bytes.count - 200] ^= 0xFF
        try bytes.write(to: URL(fileURLWithPath: file))
        let select = try json(["select", dir, "--model", "TinyClassifier", "--cache-dir", "\(dir)/cache"])
        XCTAssertTrue(select["chosen"] is NSNull)
        let verdicts = (select["candidates"] as! [[String: Any]]).filter { ($0["path"] as! String) == file }
        XCTAssertEqual(verdicts.first?["verdict"] as? String, "refused")
        XCTAssertTrue((verdicts.first?["reason"] as? String ?? "").contains("weights: checksum mismatch"), "\(verdicts)")
        let refused = try kiln(["run", dir, "--model", "TinyClassifier", "--input", "features=\(features)", "--print", "--cache-dir", "\(dir)/cache"])
        XCTAssertEqual(refused.status, 1)
        XCTAssertTrue(refused.stderr.contains("weights: checksum mismatch"), refused.stderr)
        let unverified = try kiln(["run", dir, "--model", "TinyClassifier", "--no-verify", "--input", "features=\(features)", "--print", "--cache-dir", "\(dir)/cache"])
        XCTAssertEqual(unverified.status, 0, unverified.stderr)
        #endif
    }

    func testSpecializeHostAndCacheLocations() throws {
        let dir = try temporaryDirectory(self)
        let env = ["XDG_CACHE_HOME": "\(dir)/xdg-cache", "XDG_DATA_HOME": "\(dir)/xdg-data"]
        let host = try json(["host"], environment: env)
        let cache = host["cache"] as! [String: String]
        XCTAssertEqual(cache["evictable"], "\(dir)/xdg-cache/kiln/evictable")
        XCTAssertEqual(cache["persistent"], "\(dir)/xdg-data/kiln/persistent")
        XCTAssertFalse((host["features"] as! [Any]).isEmpty)
        guard let best = (host["architectures"] as! [String]).first else { throw XCTSkip("no Kiln architecture on this CPU") }
        XCTAssertEqual(host["chosen"] as? String, best)
        // A persistent specialization lands under XDG_DATA_HOME, and its bookmark reopens it.
        let s = try json(["specialize", classifier, "--persistent"], environment: env)
        XCTAssertTrue((s["artifact"] as! String).hasPrefix("\(dir)/xdg-data/kiln/persistent/"), "\(s)")
        XCTAssertEqual(s["architecture"] as? String, best)
        let bookmark = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data((s["bookmark"] as! String).utf8)) as? [String: String])
        XCTAssertEqual(bookmark["policy"], "persistent")
        let again = try json(["specialize", classifier, "--persistent"], environment: env)
        XCTAssertTrue((again["specialization"] as! String).hasPrefix("cache hit"), "\(again)")
        // An evictable one in an explicit --cache-dir.
        let e = try json(["specialize", classifier, "--cache-dir", "\(dir)/c"])
        XCTAssertTrue((e["artifact"] as! String).hasPrefix("\(dir)/c/evictable/"), "\(e)")
        let notPackage = try kiln(["specialize", dir])
        XCTAssertEqual(notPackage.status, 1)
        XCTAssertTrue(notPackage.stderr.contains("not a Kiln package"), notPackage.stderr)
        let badCap = try kiln(["host", "--max-arch", "z80"])
        XCTAssertEqual(badCap.status, 64)
        XCTAssertTrue(badCap.stderr.contains("unknown architecture 'z80'"), badCap.stderr)
    }
}
