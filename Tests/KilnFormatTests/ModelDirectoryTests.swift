import Foundation
import XCTest

@testable import KilnFormat

/// The file-name rules (`ModelFile`, `ModelDirectory`) and the typed `assets.json`.
final class ModelDirectoryTests: XCTestCase {
    func testFileNamesParseAndPrint() {
        let cases: [(String, ModelFile?)] = [
            ("Tiny.kiln", .package(name: "Tiny")),
            ("Tiny.x86_64_v3.compiled", .artifact(name: "Tiny", arch: "x86_64_v3")),
            // The arch is the last dotted part; the model name may hold dots.
            ("my.model.v2.arm64.compiled", .artifact(name: "my.model.v2", arch: "arm64")),
            ("Tiny.kilnarchive", .archive(name: "Tiny")),
            ("assets.json", .manifest),
            ("Tiny.compiled", nil), (".arm64.compiled", nil), ("Tiny..compiled", nil), (".kiln", nil),
            ("Tiny.onnx", nil), ("weights.bin", nil),
        ]
        for (file, expected) in cases {
            XCTAssertEqual(ModelFile(fileName: file), expected, file)
            if let expected { XCTAssertEqual(expected.fileName, file) }
        }
        XCTAssertEqual(ModelFile(path: "/a/b/Tiny.kiln/"), .package(name: "Tiny"))
        XCTAssertEqual(ModelFile(path: "out/Tiny.arm64.compiled")?.modelName, "Tiny")
        XCTAssertNil(ModelFile.manifest.modelName)
    }

    func testDirectoryNarrowsToAModel() {
        let d = ModelDirectory(path: "/m", files: [
            "B.arm64.compiled", "A.kiln", "A.x86_64.compiled", "A.arm64.compiled", "assets.json", "notes.txt", "B.kiln",
        ])
        XCTAssertEqual(d.modelNames, ["A", "B"])
        XCTAssertEqual(d.artifacts(of: "A"), ["A.arm64.compiled", "A.x86_64.compiled"])
        XCTAssertEqual(d.files(of: "B"), ["B.arm64.compiled", "B.kiln"])
        XCTAssertEqual(d.package(of: "B"), "/m/B.kiln")
        XCTAssertEqual(d.package(of: nil), "/m/A.kiln")
        XCTAssertEqual(d.manifestPath, "/m/assets.json")
        XCTAssertEqual(d.artifacts(of: nil).count, 3)
    }

    func testManifestRendersWhatItParses() throws {
        let sha = String(repeating: "ab", count: 32)
        let entry = AssetsManifest.Entry(arch: "x86_64_v3", file: "M.x86_64_v3.compiled", bytes: 1234, sha256: sha,
                                         minimumRuntime: RuntimeVersion("0.6"), encryptionKeyID: "k1", formatVersion: 6,
                                         sourceDigest: String(repeating: "0", count: 64))
        let text = AssetsManifest.Model(name: "M", version: "1.0", artifacts: [entry]).json.rendered()
        // Keys in the order kiln compile writes them, checked against the JSON text itself.
        let keys = ["\"model\"", "\"version\"", "\"arch\"", "\"file\"", "\"bytes\"", "\"sha256\"", "\"formatVersion\"",
                    "\"minimumRuntimeVersion\"", "\"sourceDigest\"", "\"encryptionKeyID\""]
        let offsets = keys.map { text.range(of: $0)?.lowerBound }
        XCTAssertFalse(offsets.contains(nil), text)
        XCTAssertEqual(offsets.compactMap { $0 }, offsets.compactMap { $0 }.sorted(), text)
        let back = try AssetsManifest.parse(Array(text.utf8), source: "m.json")
        let e = try XCTUnwrap(back.models.first?.artifacts.first)
        XCTAssertEqual(back.models.map(\.name), ["M"])
        XCTAssertEqual(back.models[0].version, "1.0")
        XCTAssertEqual(e, entry)
        XCTAssertEqual(e.minimumRuntime, RuntimeVersion("0.6"))
        XCTAssertEqual(e.encryptionKeyID, "k1")
        XCTAssertEqual(e.formatVersion, 6)
        XCTAssertEqual(e.sourceDigest, entry.sourceDigest)
    }

    func testManifestErrorsNameTheField() {
        let bad = #"{"model": "M", "artifacts": [{"arch": "arm64", "file": "M.x86_64.compiled", "bytes": 1, "sha256": "00"}]}"#
        XCTAssertThrowsError(try AssetsManifest.parse(Array(bad.utf8), source: "a.json")) { error in
            guard let e = error as? any KilnError else { return XCTFail("\(error)") }
            XCTAssertEqual(e.errorPath, "a.json")
            XCTAssertEqual(e.errorField, "artifacts[0].file")
            XCTAssertEqual(e.errorKind, .malformed)
            XCTAssertEqual(e.line, "a.json: artifacts[0].file: 'M.x86_64.compiled' is not M.arm64.compiled")
            XCTAssertEqual(e.line, e.description)
        }
    }
}
