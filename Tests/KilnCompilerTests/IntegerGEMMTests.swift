import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import XCTest

/// `matmul_integer` on the `u8s8_gemm` kernels: every runnable arch's artifact against the
/// reference interpreter (exact int32 sums in Swift), bit for bit, on edge shapes — one row and
/// odd row counts, K not a multiple of 4, N across panel edges — with uint8 and int8 inputs and
/// weights, zero points absent, one, or per column, a 3-D input, and sums that wrap.
final class IntegerGEMMTests: XCTestCase {
    struct Case {
        var m: [Int]
        var k: Int
        var n: Int
        var input: DataType
        var weight: DataType
        var inputZero: Bool
        var weightZeros: Int // 0: none, 1: one, n: per column
        var extreme = false
    }

    /// Deterministic bytes: a linear congruential sequence (or the type's extremes).
    func bytes(_ count: Int, seed: UInt32, extreme: Bool = false, signed: Bool = false) -> [UInt8] {
        var s = seed &* 2654435761 &+ 1
        return (0 ..< count).map { _ in
            if extreme { return signed ? 0x80 : 0xFF }
            s = s &* 1664525 &+ 1013904223
            return UInt8(truncatingIfNeeded: s >> 24)
        }
    }

    func model(_ c: Case) throws -> (PortableModel, [String: NDArray]) {
        var b = ModelBuilder(name: "integer_gemm")
        let w = try b.addWeight("w", dtype: c.weight, shape: [c.k, c.n], bytes: bytes(c.k * c.n, seed: 3, extreme: c.extreme, signed: c.weight == .int8))
        let wz = c.weightZeros > 0
            ? try b.addWeight("wz", dtype: c.weight, shape: c.weightZeros == 1 ? [] : [c.n], bytes: bytes(c.weightZeros, seed: 5))
            : nil
        var f = b.function("main")
        let x = f.input("x", TensorType(c.input, c.m.map { .size($0) } + [.size(c.k)]))
        let xz = c.inputZero ? f.input("xz", TensorType(c.input, [])) : nil
        var inputs: [ValueRef?] = [x, f.use(w)]
        if xz != nil || wz != nil { inputs.append(xz) }
        if let wz { inputs.append(f.use(wz)) }
        f.output("y", try f.apply1("matmul_integer", inputs, name: "mm"))
        try b.add(f)
        let count = c.m.reduce(1, *) * c.k
        var feeds = ["x": NDArray(shape: c.m + [c.k], scalarType: c.input, borrowing: ByteStorage(bytes(count, seed: 7, extreme: c.extreme)))]
        if c.inputZero { feeds["xz"] = NDArray(shape: [], scalarType: c.input, borrowing: ByteStorage(c.extreme ? [0x01] : [0x83])) }
        return (try b.build(), feeds)
    }

    func testEveryArchMatchesTheInterpreterBitForBit() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var cases: [Case] = []
        for (m, k, n) in [([1], 1, 1), ([1], 5, 33), ([3], 4, 32), ([7], 7, 17), ([8], 64, 31), ([9], 65, 64), ([17], 3, 70), ([2, 5], 130, 40)] {
            cases.append(Case(m: m, k: k, n: n, input: .uint8, weight: .int8, inputZero: true, weightZeros: 0))
            cases.append(Case(m: m, k: k, n: n, input: .int8, weight: .uint8, inputZero: true, weightZeros: n))
            cases.append(Case(m: m, k: k, n: n, input: .uint8, weight: .uint8, inputZero: false, weightZeros: 1))
        }
        // 255 · 128 · 66000 passes 2^31: int32 accumulation wraps, and so must every kernel.
        cases.append(Case(m: [9], k: 66000, n: 3, input: .uint8, weight: .int8, inputZero: false, weightZeros: 0, extreme: true))
        for (i, c) in cases.enumerated() {
            let (model, feeds) = try model(c)
            let want = try XCTUnwrap(try ReferenceInterpreter(model: model, function: "main").run(feeds)["y"])
            for arch in runnableArchitectures {
                let label = "case \(i) \(c.m)x\(c.k)x\(c.n) \(c.input)·\(c.weight) \(arch.name)"
                let path = "\(dir)/m\(i).\(arch.name).compiled"
                try compileArtifact(model, arch, to: path)
                try assertNoReferenceSteps(path, label)
                let loaded = try await Model.load(contentsOf: URL(fileURLWithPath: path))
                let loadedFunction = try await loaded.loadFunction(named: "main")
                let function = try XCTUnwrap(loadedFunction)
                for run in ["first", "planned"] {
                    let outputs = try await function.run(inputs: feeds)
                    let got = try XCTUnwrap(outputs["y"])
                    XCTAssertEqual(got.shape, want.shape, "\(label) \(run)")
                    XCTAssertEqual(got.scalars(as: Int32.self), want.scalars(as: Int32.self), "\(label) \(run)")
                }
            }
        }
    }

    /// The packed weight's header: each column's sum of packed values and its zero point, both
    /// less 128 for a uint8 weight; panels of 32 columns padded with zeros.
    func testPackingKeepsColumnSumsAndZeroPoints() throws {
        let values: [UInt8] = [0, 255, 128, 7, 200, 1] // [3, 2]
        let w = Weight(name: "w", dtype: .uint8, shape: [3, 2], encoding: .dense(WeightBlob(dtype: .uint8, shape: [3, 2], data: ByteStorage(values))))
        let z = Weight(name: "z", dtype: .uint8, shape: [2], encoding: .dense(WeightBlob(dtype: .uint8, shape: [2], data: ByteStorage([10, 250]))))
        let packed = try WeightPacking.packS8Panels(w, zero: z, name: "p")
        guard case .dense(let blob) = packed.encoding else { return XCTFail("not dense") }
        XCTAssertEqual(blob.shape, [64 + 32 * 4])
        let header = Array(blob.data.bytes.prefix(16)).withUnsafeBytes { Array($0.bindMemory(to: Int32.self)) }
        XCTAssertEqual(header, [Int32(0 + 128 + 200) - 384, Int32(255 + 7 + 1) - 384, 10 - 128, 250 - 128])
        let panel = Array(blob.data.bytes.dropFirst(64)).map { Int8(bitPattern: $0) }
        XCTAssertEqual(Array(panel[0 ..< 8]), [-128, 0, 72, 0, 127, -121, -127, 0])
        XCTAssertTrue(panel[8...].allSatisfy { $0 == 0 })
    }
}
