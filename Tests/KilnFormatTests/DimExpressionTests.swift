import XCTest
@testable import KilnFormat

/// Dims written as expressions of other dims (a decoder's `past_sequence_length +
/// sequence_length`): how they read, print, evaluate and bind, checked against hand arithmetic.
final class DimExpressionTests: XCTestCase {
    func testParsingAndSpelling() throws {
        let grown = try XCTUnwrap(DimExpression(parsing: "past_sequence_length+sequence_length"))
        XCTAssertEqual(grown.description, "past_sequence_length + sequence_length")
        XCTAssertEqual(grown.evaluate(["past_sequence_length": 64, "sequence_length": 1]), 65)
        XCTAssertEqual(DimExpression(parsing: "2 * (n - 1) + m - n")?.description, "n + m - 2")
        XCTAssertEqual(DimExpression(parsing: "-a + 3*b")?.description, "-a + 3*b")
        XCTAssertEqual(DimExpression(parsing: "a - a + 4")?.dimension, .size(4))
        XCTAssertTrue(DimExpression(parsing: "batch")?.isSymbol ?? false)
        // Plain names are told apart without parsing; anything with an operator or a space may be an expression.
        for name in ["batch", "s0", "unk__12", "seq.len", "2n"] { XCTAssertTrue(DimExpression.isPlainName(name), name) }
        for text in ["a + b", "a+b", "seq-len", "2*n", "(n)"] { XCTAssertFalse(DimExpression.isPlainName(text), text) }
        XCTAssertEqual(DimExpression(parsing: "s0 + 1")?.evaluate(["s0": 7]), 8)
        // Products of two dims, division and stray characters are not expressions Kiln reads.
        for text in ["a * b", "n / 2", "floor(n)", "a +", "(a", "a ? b", ""] {
            XCTAssertNil(DimExpression(parsing: text), text)
        }
        XCTAssertNil(DimExpression(parsing: "9223372036854775807 + 1"), "overflow")
        // Nesting is bounded: deep text is not an expression (and parsing it recurses no deeper).
        XCTAssertEqual(DimExpression(parsing: String(repeating: "(", count: 32) + "n" + String(repeating: ")", count: 32))?.description, "n")
        XCTAssertNil(DimExpression(parsing: String(repeating: "(", count: 100_000) + "n" + String(repeating: ")", count: 100_000)))
        XCTAssertNil(DimExpression(parsing: String(repeating: "-", count: 100_000) + "n"))
        XCTAssertNil(DimExpression(.unknown))
    }

    func testSolving() {
        let e = DimExpression(parsing: "past + seq")!
        XCTAssertEqual(e.solve(for: 65, ["seq": 1])?.symbol, "past")
        XCTAssertEqual(e.solve(for: 65, ["seq": 1])?.size, 64)
        XCTAssertNil(e.solve(for: 0, ["seq": 1]), "a negative size")
        XCTAssertNil(e.solve(for: 5, [:]), "two unknowns")
        XCTAssertNil(DimExpression(parsing: "2*n")!.solve(for: 5, [:]), "not a whole size")
    }

    /// A function whose mask is as long as the past and the new rows together.
    func decoderSignature() -> Function {
        Function(name: "main", inputs: [
            Argument(name: "ids", type: TensorType(.int64, ["batch", "sequence_length"])),
            Argument(name: "mask", type: TensorType(.int64, ["batch", "past_sequence_length + sequence_length"])),
            Argument(name: "past", type: TensorType(.float32, ["batch", .size(2), "past_sequence_length", .size(4)])),
        ], outputs: [], operations: [])
    }

    func testBindingChecksExpressions() throws {
        let f = decoderSignature()
        let ids = NDArray(shape: [1, 1], scalars: [Int64(3)])
        let past = NDArray(shape: [1, 2, 6, 4], scalars: [Float](repeating: 0, count: 48))
        let sizes = try f.bind(["ids": ids, "mask": NDArray(shape: [1, 7], scalars: [Int64](repeating: 1, count: 7)), "past": past])
        XCTAssertEqual(sizes["past_sequence_length"], 6)
        XCTAssertEqual(sizes["sequence_length"], 1)
        XCTAssertEqual(sizes["past_sequence_length + sequence_length"], 7)
        XCTAssertThrowsError(try f.bind(["ids": ids, "mask": NDArray(shape: [1, 6], scalars: [Int64](repeating: 1, count: 6)), "past": past])) { error in
            XCTAssertEqual(String(describing: error), "function 'main': input 'mask' dim 1 (past_sequence_length + sequence_length) is 6, but "
                + "past_sequence_length + sequence_length is 7 (past_sequence_length = 6 from input 'past', sequence_length = 1 from input 'ids')")
        }
    }

    func testBindingSolvesAndFallsBack() throws {
        // No input has the past alone: the mask's length tells it.
        let solved = Function(name: "main", inputs: [
            Argument(name: "ids", type: TensorType(.int64, ["sequence_length"])),
            Argument(name: "mask", type: TensorType(.int64, ["past_sequence_length + sequence_length"])),
        ], outputs: [], operations: [])
        let sizes = try solved.bind(["ids": NDArray(shape: [2], scalars: [Int64(1), 2]), "mask": NDArray(shape: [9], scalars: [Int64](repeating: 1, count: 9))])
        XCTAssertEqual(sizes["past_sequence_length"], 7)
        // With neither symbol bound elsewhere, the text is one symbol: equal sizes throughout.
        let opaque = Function(name: "main", inputs: [
            Argument(name: "a", type: TensorType(.float32, ["seq-len"])), Argument(name: "b", type: TensorType(.float32, ["seq-len"])),
        ], outputs: [], operations: [])
        let two = NDArray(shape: [2], scalars: [Float(1), 2]), three = NDArray(shape: [3], scalars: [Float(1), 2, 3])
        XCTAssertEqual(try opaque.bind(["a": two, "b": two])["seq-len"], 2)
        XCTAssertThrowsError(try opaque.bind(["a": two, "b": three])) { error in
            XCTAssertTrue(String(describing: error).contains("input 'b' dim 0 (seq-len) is 3, but seq-len is 2 from input 'a'"), "\(error)")
        }
    }

    /// A concat's joined dim is the sum of its parts.
    func testConcatAddsDims() throws {
        let past = TensorType(.float32, ["batch", .size(2), "past_sequence_length", .size(4)])
        let new = TensorType(.float32, ["batch", .size(2), "sequence_length", .size(4)])
        let schema = try XCTUnwrap(OpSet.schema("concat"))
        func joined(_ a: TensorType, _ b: TensorType) throws -> TensorType? {
            try schema.infer(OpSchema.Context(inputs: [a, b], attributes: ["axis": .int(2)], outputCount: 1))[0]
        }
        XCTAssertEqual(try joined(past, new)?.description, "float32[batch, 2, past_sequence_length + sequence_length, 4]")
        XCTAssertEqual(try joined(past, TensorType(.float32, ["batch", .size(2), .size(1), .size(4)]))?.description,
                       "float32[batch, 2, past_sequence_length + 1, 4]")
        XCTAssertEqual(try joined(past, past)?.description, "float32[batch, 2, 2*past_sequence_length, 4]")
        XCTAssertEqual(try joined(past, TensorType(.float32, ["batch", .size(2), .unknown, .size(4)]))?.description, "float32[batch, 2, ?, 4]")
    }
}
