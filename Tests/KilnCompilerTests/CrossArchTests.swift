import CKilnKernels
import Foundation
import KilnCompiler
import KilnCompression
import KilnFormat
import KilnReference
import XCTest

/// Artifacts for every arch, including ones this host cannot run: their packed weights
/// unpack to exactly the portable weights' values.
final class CrossArchTests: XCTestCase {
    /// Unpacks a packed [K, N] weight of an artifact into row-major K × N floats.
    func unpack(_ w: Weight, nr: Int) throws -> [Float] {
        let (k, n) = (w.shape[0], w.shape[1])
        let panels = (n + nr - 1) / nr
        var b = kiln_packed_b()
        b.k = k; b.n = n; b.nr = nr
        var keep: [ByteStorage] = []
        switch w.encoding {
        case .dense(let d):
            b.kind = Int32(KILN_B_F32); b.data = d.data.baseAddress; keep = [d.data]
        case .quantized(let q):
            switch q.data.dtype {
            case .int8: b.kind = Int32(KILN_B_INT8)
            case .uint8: b.kind = Int32(KILN_B_UINT8)
            default: b.kind = Int32(KILN_B_INT4); b.is_signed = q.data.dtype == .int32 ? 1 : 0
            }
            b.data = q.data.data.baseAddress
            b.scale = q.scale.data.baseAddress.assumingMemoryBound(to: Float.self)
            b.zero = q.zeroPoint.map { $0.data.baseAddress.assumingMemoryBound(to: Float.self) }
            // Scales panel by panel: [panels, K blocks, nr].
            XCTAssertEqual(q.scale.shape.count, 3)
            b.k_block = k / q.scale.shape[1]
            keep = [q.data.data, q.scale.data]
        case .palettized(let p):
            b.kind = Int32(p.indices.dtype == .uint32 ? KILN_B_LUT_K : KILN_B_LUT)
            b.data = p.indices.data.baseAddress
            b.lut = p.lut.data.baseAddress.assumingMemoryBound(to: Float.self)
            b.entries = p.lut.shape[1]
            b.group_size = n / p.lut.shape[0]
            b.nbits = p.indices.dtype == .uint32 ? p.lut.shape[1].trailingZeroBitCount : p.indices.shape[2] * 8 / nr
            b.column_scale = p.scale.map { $0.data.baseAddress.assumingMemoryBound(to: Float.self) }
            keep = [p.indices.data, p.lut.data]
        }
        var out = [Float](repeating: 0, count: k * n)
        var panel = [Float](repeating: 0, count: k * nr)
        for p in 0 ..< panels {
            kiln_unpack_b_panel(&b, p, &panel)
            for kk in 0 ..< k { for j in 0 ..< nr where p * nr + j < n { out[kk * n + p * nr + j] = panel[kk * nr + j] } }
        }
        withExtendedLifetime(keep) {}
        return out
    }

    func check(_ model: PortableModel, label: String) throws {
        for arch in Architecture.all {
            let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 0, count: 32))
            let bytes = CompiledArtifact.serialize(header: header, plan: plan).flatMap { $0 }
            let back = try bytes.withUnsafeBytes { raw in
                try CompiledArtifact.read(raw, verifyWeights: true) { ByteStorage(copying: UnsafeRawBufferPointer(rebasing: raw[$0])) }
            }
            XCTAssertEqual(back.header.arch, arch.name)
            var checked = 0
            for op in back.plan.model.functions.flatMap(\.operations) where op.inputs.count > 1 && op.inputs[1].contains("@") {
                let packed = back.plan.model.weight(named: op.inputs[1])!
                let originalName = String(op.inputs[1].split(separator: "@")[0])
                guard let original = model.weight(named: originalName) else { continue } // folded weights are new
                let values = try WeightDecoding.dense(original).scalars(as: Float.self)
                let (k, n) = (packed.shape[0], packed.shape[1])
                // The portable value at (k, n) for this op's orientation.
                let expected: [Float] = (0 ..< k * n).map { i in
                    let (kk, nn) = (i / n, i % n)
                    return op.opType == "matmul" ? values[kk * n + nn] : values[nn * k + kk]
                }
                XCTAssertEqual(try unpack(packed, nr: arch.gemm.tile.nr), expected,
                               "\(label) \(arch.name) \(packed.name)")
                checked += 1
            }
            XCTAssertGreaterThan(checked, 0, "\(label) \(arch.name)")
        }
    }

    func testDenseWeightsUnpackExactly() throws {
        try check(try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln"), label: "TinyEncoder")
    }

    func testCompressedWeightsUnpackExactly() throws {
        let model = try PackageReader.read(at: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        for text in [#"{"global": {"mode": "linear_symmetric", "dtype": "int8", "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "linear", "dtype": "uint4", "granularity": "per_block", "block_size": 16, "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "kmeans", "nbits": 3, "weight_threshold": 0}}"#,
                     #"{"global": {"mode": "uniform", "nbits": 6, "granularity": "per_grouped_channel", "group_size": 16, "enable_per_channel_scale": true, "weight_threshold": 0}}"#] {
            let (compressed, _) = try Compressor.apply(try CompressionConfig(data: Data(text.utf8), path: "c.json"), to: model, progress: nil)
            try check(compressed, label: text)
        }
    }
}
