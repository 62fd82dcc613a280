import Foundation
import KilnRuntime
import XCTest

let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 3 { url.deleteLastPathComponent() }
    return url.path
}()

/// Reads files NumPy wrote (tools/make_npy_fixtures.py) and writes files NumPy can read.
final class NPYTests: XCTestCase {
    let dir = "\(repositoryRoot)/Tests/Fixtures/npy"

    func testEveryDtypeNumPyWrote() throws {
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/float32.npy").scalars(as: Float.self), [0, 0.5, 1, 1.5, 2, 2.5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/float16.npy").scalars(as: Float16.self), [0, 0.5, 1, 1.5, 2, 2.5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/float64.npy").scalars(as: Double.self), [0, 0.5, 1, 1.5, 2, 2.5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/int64.npy").scalars(as: Int64.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/int32.npy").scalars(as: Int32.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/int16.npy").scalars(as: Int16.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/int8.npy").scalars(as: Int8.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/uint8.npy").scalars(as: UInt8.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/bool.npy").scalars(as: Bool.self), [true, false, true, false, false, true])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/uint16.npy").scalars(as: UInt16.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/uint32.npy").scalars(as: UInt32.self), [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/uint64.npy").scalars(as: UInt64.self), [0, 1, 2, 3, 4, 5])
        // bfloat16 is NumPy's 2-byte void holding the bits.
        let bf16 = try NDArray(npyFile: "\(dir)/bfloat16.npy")
        XCTAssertEqual(bf16.scalarType, .bfloat16)
        XCTAssertEqual(bf16.withUnsafeBytes { raw in (0 ..< 6).map { Float(bitPattern: UInt32(raw.load(fromByteOffset: 2 * $0, as: UInt16.self)) << 16) } },
                       [0, 0.5, 1, 1.5, 2, 2.5])
        XCTAssertEqual(try NDArray(npyBytes: bf16.npyBytes()).bytes, bf16.bytes)
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/float32.npy").shape, [2, 3])
        let scalar = try NDArray(npyFile: "\(dir)/scalar.npy")
        XCTAssertEqual(scalar.shape, [])
        XCTAssertEqual(scalar.scalars(as: Float.self), [3.25])
        XCTAssertEqual(try NDArray(npyFile: "\(dir)/empty.npy").shape, [0, 3])
    }

    func testFormatVersions2And3() throws {
        for v in ["version2", "version3"] {
            let x = try NDArray(npyFile: "\(dir)/\(v).npy")
            XCTAssertEqual(x.shape, [2, 3], v)
            XCTAssertEqual(x.scalars(as: Float.self), [0, 0.5, 1, 1.5, 2, 2.5], v)
        }
    }

    func testUnsupportedFilesGetClearErrors() {
        let expectations = [
            "fortran": "Fortran-order arrays are not supported; save with np.ascontiguousarray",
            "big_endian": "big-endian dtype '>f4' is not supported",
            "object": "object arrays are not supported",
            "complex": "unsupported dtype '<c8'",
            "truncated": "truncated data: float32[2, 3] needs 24 bytes, file has 19",
            "not_npy": "not an .npy file (bad magic)",
        ]
        for (name, reason) in expectations {
            let path = "\(dir)/\(name).npy"
            XCTAssertThrowsError(try NDArray(npyFile: path), name) { error in
                XCTAssertEqual("\(error)", "\(path): \(reason)")
            }
        }
        XCTAssertThrowsError(try NDArray(npyFile: "\(dir)/missing.npy")) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(dir)/missing.npy: open failed"), "\(error)")
        }
    }

    func testRoundTripKeepsBytesAndHeaderAlignment() throws {
        let tmp = NSTemporaryDirectory() + "kiln-npy-\(UUID().uuidString).npy"
        defer { try? FileManager.default.removeItem(atPath: tmp) }
        for x in [NDArray(shape: [2, 2], scalars: [Float(1), -2, 3.5, 4]), NDArray(shape: [3], scalars: [true, false, true]),
                  NDArray(shape: [], scalars: [Int64(-9)]), NDArray(shape: [1, 0], scalarType: .int32)] {
            try x.writeNPY(to: tmp)
            let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: tmp)))
            let headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            XCTAssertEqual((10 + headerLength) % 64, 0)
            let back = try NDArray(npyFile: tmp)
            XCTAssertEqual(back.shape, x.shape)
            XCTAssertEqual(back.scalarType, x.scalarType)
            XCTAssertEqual(Array(back.contiguousElements!), Array(x.contiguousElements!))
        }
    }

    func testMutatedHeadersNeverCrash() throws {
        let valid = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(dir)/float32.npy")))
        var state: UInt64 = 7
        func next() -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int(truncatingIfNeeded: state >> 33)
        }
        var refused = 0, read = 0
        for _ in 0 ..< 2000 {
            var b = valid
            for _ in 0 ... next() % 4 { b[next() % min(b.count, 128)] = UInt8(truncatingIfNeeded: next()) }
            if next() % 4 == 0 { b.removeLast(next() % b.count) }
            do {
                // What reads is whole: its elements lie in the bytes after the header (trailing bytes are
                // ignored, as NumPy does), and it writes back as it read.
                let x = try NDArray(npyBytes: b)
                read += 1
                let headerLength = b[6] == 1 ? 10 + (Int(b[8]) | Int(b[9]) << 8) : 12 + (Int(b[8]) | Int(b[9]) << 8 | Int(b[10]) << 16 | Int(b[11]) << 24)
                XCTAssertTrue(x.shape.allSatisfy { $0 >= 0 })
                XCTAssertLessThanOrEqual(x.elementCount * x.elementSize, b.count - headerLength, "shape \(x.shape)")
                let back = try NDArray(npyBytes: x.npyBytes())
                XCTAssertEqual(back.shape, x.shape)
                XCTAssertEqual(back.bytes, x.bytes)
            } catch {
                refused += 1
                XCTAssertFalse("\(error)".isEmpty)
            }
        }
        // The mutations reach both outcomes: bytes of the data, and headers that are refused.
        XCTAssertGreaterThan(refused, 100)
        XCTAssertGreaterThan(read, 10)
    }
}
