import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// Per-block scales of packed quantized weights are stored panel by panel ([panels, K blocks,
/// nr]); artifacts written before held them [K blocks, padded N], and those still run, with the
/// same results.
final class PackedScaleLayoutTests: XCTestCase {
    /// `x[3, 64] · W[64, 40]`, W int8 (or int4) with a scale per block of 16 inputs per column and,
    /// for int8, a zero point.
    func model(int4: Bool) throws -> PortableModel {
        let (k, n, block) = (64, 40, 16)
        var b = ModelBuilder(name: "blocks")
        let ints = (0 ..< k * n).map { Int8(truncatingIfNeeded: ($0 * 37 + 11) % (int4 ? 15 : 255) - (int4 ? 7 : 127)) }
        let scales = (0 ..< k / block * n).map { Float(1 + $0 % 7) / 256 }
        func blob(_ bytes: [UInt8], _ dtype: DataType, _ shape: [Int]) -> WeightBlob { WeightBlob(dtype: dtype, shape: shape, data: ByteStorage(bytes)) }
        let data = int4 ? blob(PackedBits.pack(ints.map(Int.init), bits: 4), .int4, [k, n]) : blob(ints.map { UInt8(bitPattern: $0) }, .int8, [k, n])
        let scale = blob(scales.withUnsafeBytes { Array($0) }, .float32, [k / block, n])
        let zero = int4 ? nil : blob((0 ..< k / block * n).map { UInt8(bitPattern: Int8($0 % 5 - 2)) }, .int8, [k / block, n])
        let w = Weight(name: "w", dtype: .float32, shape: [k, n], encoding: .quantized(QuantizedWeight(data: data, scale: scale, zeroPoint: zero)))
        try b.add(w)
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [.size(3), .size(k)]))
        f.output("y", try f.apply1("matmul", [x, f.use(w)], name: "mm"))
        try b.add(f)
        return try b.build()
    }

    /// The packed weight's scales (and zero points) put back in the earlier order.
    func earlierLayout(_ plan: CompiledPlan) throws -> CompiledPlan {
        var plan = plan
        let i = try XCTUnwrap(plan.model.weights.firstIndex { $0.name.contains("@") })
        guard case .quantized(var q) = plan.model.weights[i].encoding else { throw XCTSkip("not packed quantized") }
        let (panels, blocks, nr) = (q.scale.shape[0], q.scale.shape[1], q.scale.shape[2])
        XCTAssertGreaterThan(blocks, 1)
        func reorder(_ b: WeightBlob) -> WeightBlob {
            let v = b.data.bytes.bindMemory(to: Float.self)
            var out = [Float](repeating: 0, count: v.count)
            for p in 0 ..< panels { for k in 0 ..< blocks { for j in 0 ..< nr { out[k * panels * nr + p * nr + j] = v[(p * blocks + k) * nr + j] } } }
            return WeightBlob(dtype: .float32, shape: [blocks, panels * nr], data: out.withUnsafeBytes { ByteStorage(copying: $0) })
        }
        q.scale = reorder(q.scale)
        q.zeroPoint = q.zeroPoint.map(reorder)
        plan.model.weights[i].encoding = .quantized(q)
        return plan
    }

    func testEarlierScaleLayoutRunsTheSame() async throws {
        guard let arch = Architecture.host else { throw XCTSkip("no runnable architecture") }
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        for int4 in [false, true] {
            let model = try model(int4: int4)
            let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 7, count: 32))
            let now = "\(dir)/now-\(int4).compiled", before = "\(dir)/before-\(int4).compiled"
            _ = try CompiledArtifact.write(header: header, plan: plan, to: now)
            _ = try CompiledArtifact.write(header: header, plan: try earlierLayout(plan), to: before)
            let x = NDArray(shape: [3, 64], scalars: (0 ..< 192).map { Float(($0 * 13) % 17) / 8 - 1 })
            let a = try await assertCompiledMatchesReference(model, artifact: now, function: "main", inputs: ["x": x], label: "int4 \(int4)")
            let b = try await assertCompiledMatchesReference(model, artifact: before, function: "main", inputs: ["x": x], label: "earlier, int4 \(int4)")
            XCTAssertEqual(a["y"]?.bytes, b["y"]?.bytes, "int4 \(int4)")
        }
    }
}
