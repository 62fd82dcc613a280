import Foundation
import KilnTestSupport
import XCTest

final class GraphCommandTests: XCTestCase {
    var dotAvailable: Bool { FileManager.default.isExecutableFile(atPath: "/usr/bin/dot") }

    func testDotOfAPackageAndAnArtifact() throws {
        let dir = try temporaryDirectory(self)
        let package = "\(repositoryRoot)/examples/TinyClassifier.kiln"
        let r = try kiln(["inspect", package, "--dot"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.hasPrefix("digraph \"TinyClassifier — main\" {"), r.stdout)
        XCTAssertTrue(r.stdout.contains("label=\"features\\nfloat32[batch, 64]\""), r.stdout)
        XCTAssertTrue(r.stdout.contains("shape=note") && r.stdout.contains("float32, "), "weights with their encoding and size")
        XCTAssertTrue(r.stdout.contains("-> out0"))

        // Compressed and compiled: kernels on the ops, the weights' storage, fused epilogues.
        XCTAssertEqual(try kiln(["compile", package, "--arch", "x86_64_v3", "--config", "\(repositoryRoot)/examples/compression.json",
                                 "-o", dir]).status, 0)
        let artifact = "\(dir)/TinyClassifier.x86_64_v3.compiled"
        let a = try kiln(["inspect", artifact, "--dot"])
        XCTAssertEqual(a.status, 0, a.stderr)
        XCTAssertTrue(a.stdout.contains("(x86_64_v3)"))
        XCTAssertTrue(a.stdout.contains("[f32_"), "kernel names: \(a.stdout)")
        XCTAssertTrue(a.stdout.contains("palettized") && a.stdout.contains("quantized"), a.stdout)
        XCTAssertTrue(a.stdout.contains("+ activation relu"), a.stdout)
        XCTAssertEqual(try kiln(["inspect", artifact, "--dot"]).stdout, a.stdout, "deterministic")

        // Errors: another function, --json with --dot, no dot on the PATH.
        let f = try kiln(["inspect", package, "--dot", "--function", "nope"])
        XCTAssertEqual(f.status, 1)
        XCTAssertTrue(f.stderr.contains("no function 'nope'"), f.stderr)
        XCTAssertEqual(try kiln(["inspect", package, "--dot", "--json"]).status, 64)
        let missing = try kiln(["inspect", package, "--svg", "\(dir)/x.svg"], environment: ["PATH": "\(dir)/empty"])
        XCTAssertEqual(missing.status, 1)
        XCTAssertTrue(missing.stderr.contains("apt-get install graphviz"), missing.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: "\(dir)/x.svg"))
    }

    func testSharedModelsRenderWithGraphviz() throws {
        guard dotAvailable else { throw XCTSkip("Graphviz's dot is not installed (apt-get install graphviz)") }
        let dir = try temporaryDirectory(self)
        for name in ["mobilenetv3_orientation", "magika_v3_3", "minilm_l3_paraphrase"] {
            let onnx = "\(testModels)/\(name).onnx"
            try requireTestModel(onnx)
            XCTAssertEqual(try kiln(["convert", onnx, "-o", "\(dir)/\(name).kiln"]).status, 0)
            XCTAssertEqual(try kiln(["compile", "\(dir)/\(name).kiln", "--arch", "x86_64_v3", "-o", "\(dir)/\(name)"]).status, 0)
            for path in ["\(dir)/\(name).kiln", "\(dir)/\(name)/\(name).x86_64_v3.compiled"] {
                let svg = "\(dir)/\(name)-\(path.hasSuffix(".kiln") ? "package" : "artifact").svg"
                let r = try kiln(["inspect", path, "--svg", svg])
                XCTAssertEqual(r.status, 0, "\(path): \(r.stderr)")
                let text = try String(contentsOfFile: svg, encoding: .utf8)
                XCTAssertTrue(text.contains("<svg") && text.contains("</svg>"), path)
            }
        }
        // MiniLM's three encoder layers: the first drawn, the other two as one node.
        let dot = try kiln(["inspect", "\(dir)/minilm_l3_paraphrase/minilm_l3_paraphrase.x86_64_v3.compiled", "--dot"]).stdout
        XCTAssertTrue(dot.contains("2 more like layer.0\\nlayer.1 … layer.2"), dot)
        let full = try kiln(["inspect", "\(dir)/minilm_l3_paraphrase/minilm_l3_paraphrase.x86_64_v3.compiled", "--dot", "--no-collapse"]).stdout
        XCTAssertFalse(full.contains("more like"))
        XCTAssertTrue(full.contains("label=\"layer.2\""))
    }
}
