import KilnRuntime
import XCTest

final class NDArrayTests: XCTestCase {
    func testZeroFilledAndScalars() {
        let z = NDArray(shape: [2, 3], scalarType: .float32)
        XCTAssertEqual(z.scalars(as: Float.self), [0, 0, 0, 0, 0, 0])
        XCTAssertEqual(z.elementCount, 6)
        let x = NDArray(shape: [2, 2], scalars: [Int64(1), 2, 3, 4])
        XCTAssertEqual(x.scalarType, .int64)
        XCTAssertEqual(x.contiguousElements(as: Int64.self).map(Array.init), [1, 2, 3, 4])
        XCTAssertEqual(NDArray(scalar: Float(2.5)).shape, [])
    }

    func testTransposedViewIsNotContiguousAndCopiesOutInOrder() {
        let x = NDArray(shape: [2, 3], scalars: (0 ..< 6).map(Float.init))
        let t = x.transposed([1, 0])
        XCTAssertEqual(t.shape, [3, 2])
        XCTAssertNil(t.contiguousElements)
        XCTAssertNil(t.contiguousElements(as: Float.self))
        XCTAssertEqual(t.scalars(as: Float.self), [0, 3, 1, 4, 2, 5])
        XCTAssertNotNil(t.contiguous().contiguousElements)
        // A size-1 dim does not break contiguity.
        XCTAssertNotNil(NDArray(shape: [1, 4], scalarType: .float32).transposed([1, 0]).contiguousElements)
    }

    func testWritesGoThroughMutableViewAndDoNotShowThroughCopies() {
        let a = NDArray(shape: [3], scalars: [Float(1), 2, 3])
        var b = a
        b.mutableView(as: Float.self) { $0[0] = 100 }
        XCTAssertEqual(a.scalars(as: Float.self), [1, 2, 3])
        XCTAssertEqual(b.scalars(as: Float.self), [100, 2, 3])
        // Writing a transposed view writes a contiguous copy in the view's order.
        var t = NDArray(shape: [2, 2], scalars: [Float(1), 2, 3, 4]).transposed([1, 0])
        t.mutableView(as: Float.self) { $0[1] = 9 }
        XCTAssertEqual(t.scalars(as: Float.self), [1, 9, 2, 4])
        XCTAssertNotNil(t.contiguousElements)
    }

    func testReshapedKeepsElements() {
        let x = NDArray(shape: [2, 3], scalars: (0 ..< 6).map(Int32.init))
        XCTAssertEqual(x.reshaped([3, 2]).shape, [3, 2])
        XCTAssertEqual(x.transposed([1, 0]).reshaped([6]).scalars(as: Int32.self), [0, 3, 1, 4, 2, 5])
    }

    func testEmptyArrays() {
        let e = NDArray(shape: [0, 3], scalarType: .float32)
        XCTAssertEqual(e.elementCount, 0)
        XCTAssertNotNil(e.contiguousElements)
        XCTAssertEqual(e.scalars(as: Float.self), [])
    }

    /// Every numeric type reads back as its values (never as bit patterns), bool as 0 and 1.
    func testDoublesOfEveryType() {
        XCTAssertEqual(NDArray(shape: [3], scalars: [UInt64(3), 5, 1 << 40]).doubles(), [3, 5, Double(1 << 40)])
        XCTAssertEqual(NDArray(shape: [2], scalars: [Int64(-3), 7]).doubles(), [-3, 7])
        XCTAssertEqual(NDArray(shape: [2], scalars: [UInt32(3), 9]).doubles(), [3, 9])
        XCTAssertEqual(NDArray(shape: [2], scalars: [Int8(-2), 4]).doubles(), [-2, 4])
        XCTAssertEqual(NDArray(shape: [2], scalars: [Float16(1.5), -2]).doubles(), [1.5, -2])
        XCTAssertEqual(NDArray(shape: [2], scalars: [Float(0.25), -8]).doubles(), [0.25, -8])
        XCTAssertEqual(NDArray(shape: [2], scalars: [true, false]).doubles(), [1, 0])
    }
}
