import XCTest
@testable import KilnFormat

final class ValidationTests: XCTestCase {
    private func expectInvalid(_ model: PortableModel, _ fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try model.validate(), file: file, line: line) { error in
            XCTAssertTrue(String(describing: error).contains(fragment), "\(error)", file: file, line: line)
        }
    }

    /// A reshape's -1 is told when the named symbols it shares with the input cancel.
    func testReshapeHoleCancelsSharedSymbols() throws {
        let x: [KilnFormat.Dimension] = ["batch", "seq", .size(256)]
        XCTAssertEqual(try OpSet.reshape(x, [0, 0, -1, 64]), ["batch", "seq", .size(4), .size(64)])
        XCTAssertEqual(try OpSet.reshape(["seq", .size(6)], [0, 3, -1]), ["seq", .size(3), .size(2)])
        // An anonymous dim, or a symbol left over, leaves it unknown.
        XCTAssertEqual(try OpSet.reshape([.unknown, .size(8)], [0, -1, 4]), [.unknown, .unknown, .size(4)])
        XCTAssertEqual(try OpSet.reshape(["a", .size(8)], [-1, 4]), [.unknown, .size(4)])
        XCTAssertEqual(try OpSet.reshape(["a", .size(10)], [0, -1, 4]), ["a", .unknown, .size(4)])
    }

    func testDuplicateNamesAreRejected() throws {
        var m = try sampleModel()
        m.weights.append(m.weights[0])
        expectInvalid(m, "duplicate weight name 'w'")

        m = try sampleModel()
        m.functions.append(m.functions[1])
        expectInvalid(m, "duplicate function name 'second'")

        m = try sampleModel()
        m.functions[0].operations[1].name = "fc"
        expectInvalid(m, "duplicate op name 'fc'")

        m = try sampleModel()
        m.functions[0].inputs[0].name = "w"
        expectInvalid(m, "value 'w' is defined more than once")
    }

    func testOpsAreCheckedAgainstTheirSchemas() throws {
        var m = try sampleModel()
        m.functions[0].operations[0].inputs = ["x"]
        expectInvalid(m, "linear takes 2–3 inputs, got 1")

        m = try sampleModel()
        m.functions[0].operations[0].inputs[1] = ""
        expectInvalid(m, "required input 1 (weight) is empty")

        m = try sampleModel()
        m.functions[0].operations[1].attributes["bogus"] = .int(1)
        expectInvalid(m, "gelu has no attribute 'bogus'")

        m = try sampleModel()
        m.functions[0].operations[2].attributes = [:]
        expectInvalid(m, "reshape needs a shape attribute or input")

        m = try sampleModel()
        m.functions[0].operations[0].outputs[0].type.dtype = .int32
        expectInvalid(m, "is declared int32")
    }

    func testEncodingsAreChecked() throws {
        var m = try sampleModel()
        guard case .quantized(var q) = m.weights[2].encoding else { return XCTFail("expected quantized") }
        q.scale.shape = [3, 1]
        q.scale.data = ByteStorage([UInt8](repeating: 0, count: 12))
        m.weights[2].encoding = .quantized(q)
        expectInvalid(m, "does not divide the weight's shape")

        m = try sampleModel()
        guard case .palettized(var p) = m.weights[3].encoding else { return XCTFail("expected palettized") }
        p.lut.shape = [1, 1, 8]
        p.lut.data = ByteStorage([UInt8](repeating: 0, count: 32))
        m.weights[3].encoding = .palettized(p)
        expectInvalid(m, "ending in 4 entries")

        m = try sampleModel()
        guard case .dense(var d) = m.weights[0].encoding else { return XCTFail("expected dense") }
        d.data = ByteStorage([1, 2, 3])
        m.weights[0].encoding = .dense(d)
        expectInvalid(m, "holds 3 bytes, but float32[4, 8] needs 128")
    }

    func testOverflowingShapesAreRejected() throws {
        var m = try sampleModel()
        m.functions[1].inputs[0].type.shape = [.size(1 << 62), .size(8)]
        expectInvalid(m, "is too large")
        // No elements, but products of its other dims overflow: refused, so no pass multiplies them.
        m = try sampleModel()
        m.functions[1].inputs[0].type.shape = [.size(0), .size(1 << 40), .size(1 << 40)]
        expectInvalid(m, "is too large")
        m = try sampleModel()
        m.functions[1].inputs[0].type.shape = [.size(-3)]
        expectInvalid(m, "negative")
    }

    func testCyclesAndUseBeforeDefinitionAreTold() throws {
        var m = try sampleModel()
        m.functions[0].operations[0].inputs[0] = "act"
        expectInvalid(m, "cycle: fc → act → fc")

        m = try sampleModel()
        m.functions[0].operations.swapAt(1, 2)
        expectInvalid(m, "input 'act' is used before its definition by op 'act'")

        m = try sampleModel()
        m.functions[0].operations[1].inputs = ["act"]
        expectInvalid(m, "cycle: op 'act' consumes its own output 'act'")
    }

    func testMetadataMayNotHoldNulCharacters() throws {
        var m = try sampleModel()
        m.metadata.user["bad"] = "a\u{0}b"
        expectInvalid(m, "NUL")
    }

    func testBuilderInfersTypes() throws {
        var b = ModelBuilder(name: "T")
        var f = b.function("main")
        let a = f.input("a", TensorType(.float32, ["batch", 1, 8, 16]))
        let c = f.input("c", TensorType(.float32, [4, 16, 2]))
        let mm = try f.apply1("matmul", [a, c])
        XCTAssertEqual(mm.type.description, "float32[batch, 4, 8, 2]")
        let t = try f.apply1("transpose", [mm], ["perm": .ints([3, 0, 1, 2])])
        XCTAssertEqual(t.type.description, "float32[2, batch, 4, 8]")
        let r = try f.apply1("reshape", [t], ["shape": .ints([0, -1, 8])])
        XCTAssertEqual(r.type.description, "float32[2, ?, 8]")
        XCTAssertThrowsError(try f.apply1("add", [a, c])) { error in
            XCTAssertTrue("\(error)".contains("cannot broadcast"), "\(error)")
        }
        f.output("r", r)
        try b.add(f)
        XCTAssertNoThrow(try b.build())
    }

    func testBroadcastingWithSymbols() throws {
        XCTAssertEqual(try OpSet.broadcast(["seq", 1], [4]), ["seq", 4])
        XCTAssertEqual(try OpSet.broadcast(["seq"], [1]), ["seq"])
        XCTAssertEqual(try OpSet.broadcast(["seq"], [5]), [5])
        XCTAssertEqual(try OpSet.broadcast(["a"], ["b"]), [.unknown])
        XCTAssertEqual(try OpSet.broadcast([], [2, 3]), [2, 3])
        XCTAssertThrowsError(try OpSet.broadcast([2], [3]))
    }
}
