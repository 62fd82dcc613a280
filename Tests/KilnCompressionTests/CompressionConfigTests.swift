import Foundation
@testable import KilnCompression
import KilnFormat
import XCTest

final class CompressionConfigTests: XCTestCase {
    func config(_ json: String) throws -> CompressionConfig {
        try CompressionConfig(data: Data(json.utf8), path: "cfg.json")
    }

    func assertRefused(_ json: String, _ message: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try config(json), file: file, line: line) { error in
            XCTAssertEqual("\(error)", message, file: file, line: line)
        }
    }

    func testBadConfigsAreRefusedWithTheJSONPath() {
        assertRefused(#"{"global": {"mode": "kmeans", "nbits": 5}}"#, "cfg.json: $.global.nbits: must be one of 1, 2, 3, 4, 6, 8")
        assertRefused(#"{"op_types": {"conv": {"mode": "linear_symmetric", "block_size": 0}}}"#, "cfg.json: $.op_types.conv.block_size: must be a positive integer")
        assertRefused(#"{"op_types": {"conv": {"nbit": 4}}}"#, "cfg.json: $.op_types.conv.nbit: unknown key; known keys are block_size, channel_axis, dtype, enable_per_channel_scale, granularity, group_size, lut_dtype, mode, nbits, weight_threshold")
        assertRefused(#"{"globals": {}}"#, "cfg.json: $.globals: unknown key; the config has global, op_types and op_names")
        assertRefused(#"{"global": {"mode": "linear", "dtype": "int2"}}"#, #"cfg.json: $.global.dtype: must be one of "int8", "uint8", "int4", "uint4""#)
        assertRefused(#"{"global": {"mode": "linear", "granularity": "per_grouped_channel"}}"#, #"cfg.json: $.global.granularity: must be one of "per_tensor", "per_channel", "per_block""#)
        assertRefused(#"{"global": 3}"#, "cfg.json: $.global: must be an object or null")
        assertRefused("{", "cfg.json: $: not valid JSON")
        assertRefused(#"{"global": {"weight_threshold": true}}"#, "cfg.json: $.global.weight_threshold: must be a non-negative integer")
    }

    func testPrecedenceWeightNameThenOpNameThenOpTypeThenGlobal() throws {
        let c = try config(#"""
            {"global": {"mode": "linear_symmetric", "dtype": "int8"},
             "op_types": {"linear": {"mode": "linear", "dtype": "uint8"}},
             "op_names": {"fc2": {"mode": "linear_symmetric", "dtype": "int4"}, "fc3.*": null, "head*": {"mode": "linear", "dtype": "int4"}}}
            """#)
        let op = { (name: String, type: String) in Operation(opType: type, name: name, inputs: [], outputs: []) }
        func dtype(_ e: CompressionConfig.Entry?) -> String? {
            if case .compress(let s)? = e { return s.dtype }
            return e == .skip ? "skip" : nil
        }
        XCTAssertEqual(dtype(c.resolve(weight: "fc1.weight", op: op("fc1", "linear"))), "uint8")
        XCTAssertEqual(dtype(c.resolve(weight: "fc2.weight", op: op("fc2", "linear"))), "int4")
        XCTAssertEqual(dtype(c.resolve(weight: "fc3.weight", op: op("fc3", "linear"))), "skip")
        XCTAssertEqual(dtype(c.resolve(weight: "w", op: op("conv1", "conv"))), "int8")
        XCTAssertEqual(dtype(c.resolve(weight: "w", op: op("head_proj", "conv"))), "int4")
        XCTAssertTrue(glob("a*b?c", matches: "aXXbYc"))
        XCTAssertFalse(glob("a*b?c", matches: "aXXbc"))
    }

    func testConsumersResolvingDifferentlyIsAnError() throws {
        var b = ModelBuilder(name: "Shared")
        let w = try b.addWeight("shared", shape: [64, 64], values: (0 ..< 4096).map { Float($0 % 7) - 3 })
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 64]))
        let y1 = try f.apply1("linear", [x, f.use(w)], name: "a")
        let y2 = try f.apply1("matmul", [x, f.use(w)], name: "b")
        f.output("y1", y1)
        f.output("y2", y2)
        try b.add(f)
        let model = try b.build()
        let c = try config(#"{"op_types": {"linear": {"mode": "linear_symmetric"}, "matmul": null}}"#)
        XCTAssertThrowsError(try Compressor.apply(c, to: model)) { error in
            XCTAssertEqual("\(error)", "weight 'shared': its consumers resolve to different settings: a (linear), b (matmul)")
        }
    }

    func testThresholdRankAndBlockSizeSkips() throws {
        var b = ModelBuilder(name: "Skips")
        let big = try b.addWeight("big", shape: [64, 48], values: (0 ..< 3072).map { Float($0 % 11) / 11 - 0.5 })
        let small = try b.addWeight("small", shape: [8, 48], values: (0 ..< 384).map { Float($0) / 384 })
        let bias = try b.addWeight("bias", shape: [64], values: [Float](repeating: 0.5, count: 64))
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, 48]))
        f.output("y", try f.apply1("linear", [x, f.use(big), f.use(bias)]))
        f.output("z", try f.apply1("linear", [x, f.use(small)]))
        try b.add(f)
        let model = try b.build()
        let c = try config(#"{"global": {"mode": "linear_symmetric", "granularity": "per_block", "block_size": 32}}"#)
        let (out, report) = try Compressor.apply(c, to: model)
        XCTAssertEqual(report.rows.map(\.detail), ["block_size 32 does not divide dim 1 (48)", "384 ≤ weight_threshold 2048", "rank ≤ 1"])
        XCTAssertEqual(report.warnings, ["weight 'big': block_size 32 does not divide its input dim 48; left uncompressed"])
        XCTAssertTrue(out.weights.allSatisfy { $0.encoding.kindName == "dense" })
    }

    func testCompressionIsDeterministicAcrossRuns() throws {
        let model = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        let c = try config(#"{"global": {"mode": "linear", "dtype": "uint4", "granularity": "per_block", "block_size": 32, "weight_threshold": 1000}}"#)
        let dir = NSTemporaryDirectory() + "kiln-det-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for name in ["a", "b"] {
            try PackageWriter.write(try Compressor.apply(c, to: model).0, to: "\(dir)/\(name).kiln")
        }
        for file in ["manifest.pb", "weights.bin"] {
            XCTAssertEqual(FileManager.default.contents(atPath: "\(dir)/a.kiln/\(file)"), FileManager.default.contents(atPath: "\(dir)/b.kiln/\(file)"))
        }
    }
}
