import XCTest
@testable import KilnFormat

/// Large array blocks go back to a per-class pool and are handed out again: classes, reuse, the
/// limit, and arrays over reused blocks holding exactly what their writers put there.
final class BlockRecyclerTests: XCTestCase {
    func testClassesRoundUpByAnEighth() {
        XCTAssertEqual(BlockRecycler.capacity(for: 100), 100, "small blocks are the allocator's")
        XCTAssertEqual(BlockRecycler.capacity(for: 0), 1)
        // 196,608 bytes (a GPT-2 layer's cache at 64 tokens) and the next rows share a 16 KiB class.
        XCTAssertEqual(BlockRecycler.capacity(for: 196_608), 196_608)
        XCTAssertEqual(BlockRecycler.capacity(for: 196_609), 196_608 + 16_384)
        XCTAssertEqual(BlockRecycler.capacity(for: 196_608 + 5 * 3072), 196_608 + 16_384)
        for bytes in [131_072, 200_000, 1 << 20, 3_000_001, 50 << 20] {
            let c = BlockRecycler.capacity(for: bytes)
            XCTAssertGreaterThanOrEqual(c, bytes)
            XCTAssertLessThanOrEqual(c, bytes + bytes / 8 + 4096, "\(bytes)")
        }
    }

    func testFreedBlockIsHandedOutAgain() {
        let c = BlockRecycler.capacity(for: 777_777)
        let a = BlockRecycler.take(c)
        a.storeBytes(of: 0x5A, as: UInt8.self)
        BlockRecycler.give(a, c)
        let b = BlockRecycler.take(c)
        XCTAssertEqual(a, b, "the block waiting in its class")
        let other = BlockRecycler.take(c)
        XCTAssertNotEqual(other, b, "a class with no block waiting allocates")
        BlockRecycler.give(b, c)
        BlockRecycler.give(other, c)
        // Blocks larger than the limit never wait.
        let huge = BlockRecycler.capacity(for: BlockRecycler.limitBytes + 1)
        BlockRecycler.give(BlockRecycler.take(huge), huge)
    }

    func testArraysOverReusedBlocksHoldTheirOwnValues() {
        // A growing cache: each run's array slightly larger than the last, the previous freed after.
        var previous: NDArray?
        for rows in 64 ..< 96 {
            let count = 12 * rows * 64
            let values = (0 ..< count).map { Float($0 % 97) + Float(rows) }
            let x = NDArray(shape: [12, rows, 64], scalars: values)
            XCTAssertEqual(x.scalars(as: Float.self), values)
            if let p = previous { XCTAssertEqual(p.scalars(as: Float.self).first, Float(rows - 1)) }
            previous = x
            let zeroed = NDArray(shape: [count], scalarType: .float32)
            XCTAssertTrue(zeroed.scalars(as: Float.self).allSatisfy { $0 == 0 }, "zero-filled arrays are zeroed over reused blocks")
        }
    }
}
