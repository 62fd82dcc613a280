import XCTest
@testable import KilnFormat

final class PackageRoundTripTests: XCTestCase {
    func testWriteThenReadGivesTheSameModel() throws {
        let dir = try temporaryDirectory(self)
        let model = try sampleModel()
        try PackageWriter.write(model, to: "\(dir)/Sample.kiln")
        let back = try PackageReader.read(at: "\(dir)/Sample.kiln")
        XCTAssertEqual(back.metadata, model.metadata)
        XCTAssertEqual(back.functions, model.functions)
        XCTAssertEqual(back.weights.map(\.name), model.weights.map(\.name))
        for (a, b) in zip(back.weights, model.weights) {
            XCTAssertEqual(a.dtype, b.dtype)
            XCTAssertEqual(a.shape, b.shape)
            XCTAssertEqual(a.encoding.kindName, b.encoding.kindName)
            for (x, y) in zip(a.encoding.blobs, b.encoding.blobs) {
                XCTAssertEqual(x.dtype, y.dtype)
                XCTAssertEqual(x.shape, y.shape)
                XCTAssertEqual(Array(x.data.bytes), Array(y.data.bytes), a.name)
            }
        }
        XCTAssertEqual(back.function(named: "main")?.inputs[0].type.description, "float32[batch, ?, 8]")
        XCTAssertEqual(back.function(named: "main")?.outputs[1].value, "x")
    }

    /// Pages of a package's weights let go after a pass are read again, unchanged; storage not
    /// read from a file is never touched.
    func testReleasedPagesReadBackUnchanged() throws {
        let dir = try temporaryDirectory(self)
        let values = (0 ..< 300_000).map { Float($0 % 977) * 0.5 }
        var b = ModelBuilder(name: "Big")
        let w = try b.addWeight("w", shape: [600, 500], values: values)
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, .size(500)]))
        f.output("y", try f.apply1("linear", [x, f.use(w)]))
        try b.add(f)
        try PackageWriter.write(try b.build(), to: "\(dir)/Big.kiln")
        let back = try PackageReader.read(at: "\(dir)/Big.kiln")
        guard case .dense(let blob) = back.weights[0].encoding else { return XCTFail("not dense") }
        let before = Array(blob.data.bytes)
        blob.data.releaseResidentPages(0 ..< blob.data.count)
        blob.data.releaseResidentPages(-5 ..< 1 << 40)
        XCTAssertEqual(Array(blob.data.bytes), before)
        XCTAssertEqual(Array(blob.data.bytes.bindMemory(to: Float.self)), values)
        let owned = ByteStorage(before)
        owned.releaseResidentPages(0 ..< owned.count)
        XCTAssertEqual(Array(owned.bytes), before)
    }

    func testWritingIsDeterministic() throws {
        let dir = try temporaryDirectory(self)
        try PackageWriter.write(try sampleModel(), to: "\(dir)/A.kiln")
        try PackageWriter.write(try sampleModel(), to: "\(dir)/B.kiln")
        for file in [PackageFormat.manifestFileName, PackageFormat.weightsFileName] {
            XCTAssertEqual(try fileBytes("\(dir)/A.kiln/\(file)"), try fileBytes("\(dir)/B.kiln/\(file)"), file)
        }
        // Rewriting over an existing package replaces it and leaves no staging files.
        try PackageWriter.write(try sampleModel(), to: "\(dir)/A.kiln")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir).sorted(), ["A.kiln", "B.kiln"])
    }

    func testBlobsAreAlignedAndChecksummed() throws {
        let (contents, blobs) = PackageWriter.layout(try sampleModel())
        XCTAssertEqual(blobs.count, 6)
        for (loc, blob) in blobs {
            XCTAssertEqual(loc.offset % 64, 0)
            XCTAssertEqual(loc.crc32, crc32(blob.data.bytes))
        }
        XCTAssertEqual(contents.weightsFileSize, blobs.last!.0.offset + blobs.last!.0.byteLength)
    }

    func testMetadataRewriteLeavesWeightsUntouched() throws {
        let dir = try temporaryDirectory(self)
        let path = "\(dir)/Sample.kiln"
        try PackageWriter.write(try sampleModel(), to: path)
        let weightsPath = "\(path)/\(PackageFormat.weightsFileName)"
        let before = try fileBytes(weightsPath)
        let inode = try FileManager.default.attributesOfItem(atPath: weightsPath)[.systemFileNumber] as? Int
        var meta = try PackageReader.read(at: path).metadata
        meta.user["team"] = "vision"
        meta.author = "someone"
        try PackageWriter.rewriteMetadata(meta, ofPackageAt: path)
        XCTAssertEqual(try PackageReader.read(at: path).metadata, meta)
        XCTAssertEqual(try fileBytes(weightsPath), before)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: weightsPath)[.systemFileNumber] as? Int, inode)
    }

    func testCommittedExamplesReadAndValidate() throws {
        let classifier = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyClassifier.kiln")
        XCTAssertEqual(classifier.functions.map(\.name), ["main"])
        let linear = classifier.weights.filter { $0.shape.count == 2 }.map(\.elementCount)
        XCTAssertEqual(linear.count, 3)
        XCTAssertTrue(linear.contains { $0 > 2048 } && linear.contains { $0 < 2048 })
        XCTAssertEqual(classifier.operationHistogram.map(\.opType), ["linear", "relu", "softmax"])

        let encoder = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        XCTAssertEqual(encoder.functions.map(\.name), ["embed", "encode"])
        for f in encoder.functions {
            XCTAssertEqual(f.inputs[0].type.shape, ["batch", "seq"])
            XCTAssertTrue(f.operations.contains { $0.opType == "gather" && $0.inputs[0] == "embedding" })
        }
        let ops = Set(encoder.operationHistogram.map(\.opType))
        XCTAssertTrue(ops.isSuperset(of: ["gather", "layer_norm", "matmul", "softmax", "gelu", "linear"]))
        XCTAssertEqual(encoder.function(named: "encode")?.outputs[0].type.description, "float32[batch, seq, 64]")
    }
}

final class SHA256Tests: XCTestCase {
    func testKnownVectors() {
        func hex(_ s: String) -> String { Array(s.utf8).withUnsafeBytes { SHA256.hex(SHA256.hash($0)) } }
        XCTAssertEqual(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // Streaming in odd pieces gives the same digest as one call.
        let data = (0 ..< 1000).map { UInt8($0 % 251) }
        var h = SHA256()
        var at = 0
        for step in [1, 63, 64, 65, 200, 607] { data[at ..< at + step].withUnsafeBytes { h.update($0) }; at += step }
        XCTAssertEqual(h.finalize(), data.withUnsafeBytes { SHA256.hash($0) })
    }
}
