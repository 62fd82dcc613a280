@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// A GEMM weight in its arch's packed layout, ready for `kiln_f32_gemm`.
/// Its pointers refer into the artifact's mapping, which the plan keeps alive.
struct PackedGEMM: @unchecked Sendable {
    var b: kiln_packed_b
    let ukernel: kiln_f32_gemm_ukernel
    let mr: Int
    let storage: [ByteStorage]

    var k: Int { b.k }
    var n: Int { b.n }
    var panels: Int { (b.n + b.nr - 1) / b.nr }
    /// Scratch bytes one chunk needs (a decoded panel of a compressed weight).
    var scratchBytes: Int { kiln_f32_gemm_scratch_bytes([b]) }

    init(weight w: Weight, kernel id: KernelID) throws {
        guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available on this host") }
        ukernel = uk
        mr = tile.mr
        let nr = tile.nr
        guard w.shape.count == 2 else { throw OpError("packed weight '\(w.name)' has shape \(w.shape), expected [K, N]") }
        let (k, n) = (w.shape[0], w.shape[1])
        let panels = (n + nr - 1) / nr
        var b = kiln_packed_b()
        b.k = k
        b.n = n
        b.nr = nr
        func expect(_ blob: WeightBlob, _ dtype: DataType, _ shape: [Int], _ what: String) throws {
            guard blob.dtype == dtype, blob.shape == shape else {
                throw OpError("packed weight '\(w.name)' \(what) is \(blob.dtype.rawValue)\(blob.shape), expected \(dtype.rawValue)\(shape)")
            }
        }
        switch w.encoding {
        case .dense(let d):
            try expect(d, .float32, [panels, k, nr], "data")
            b.kind = Int32(KILN_B_F32)
            b.data = d.data.baseAddress
            storage = [d.data]
        case .quantized(let q) where q.data.dtype == .int32 || q.data.dtype == .uint32:
            // int4 / uint4 packed along K: eight values of a column per word.
            try expect(q.data, q.data.dtype, [panels, (k + 7) / 8, nr], "data")
            let scales = try Self.panelScales(q, name: w.name, k: k, panels: panels, nr: nr)
            guard scales.blocks == 1 || (k / scales.blocks) % 8 == 0 else {
                throw OpError("packed weight '\(w.name)' has K blocks of \(k / scales.blocks), not a multiple of 8")
            }
            b.kind = Int32(KILN_B_INT4)
            b.is_signed = q.data.dtype == .int32 ? 1 : 0
            Self.setScales(q, scales, &b, k: k)
            storage = [q.data.data, scales.scale] + (scales.zero.map { [$0] } ?? [])
        case .quantized(let q):
            guard q.data.dtype == .int8 || q.data.dtype == .uint8 else { throw OpError("packed weight '\(w.name)' has \(q.data.dtype.rawValue) data") }
            try expect(q.data, q.data.dtype, [panels, k, nr], "data")
            let scales = try Self.panelScales(q, name: w.name, k: k, panels: panels, nr: nr)
            b.kind = Int32(q.data.dtype == .int8 ? KILN_B_INT8 : KILN_B_UINT8)
            Self.setScales(q, scales, &b, k: k)
            storage = [q.data.data, scales.scale] + (scales.zero.map { [$0] } ?? [])
        case .palettized(let p):
            let bits: Int
            if p.indices.dtype == .uint32 {
                // Packed along K: 32 / bits indices of a column per word.
                bits = p.lut.shape.count == 2 ? p.lut.shape[1].trailingZeroBitCount : 0
                guard [1, 2, 3, 4, 6, 8].contains(bits) else { throw OpError("packed weight '\(w.name)' table has shape \(p.lut.shape)") }
                let g = 32 / bits
                try expect(p.indices, .uint32, [panels, (k + g - 1) / g, nr], "indices")
                b.kind = Int32(KILN_B_LUT_K)
            } else {
                guard p.indices.shape.count == 3, p.indices.shape[0] == panels, p.indices.shape[1] == k,
                      (p.indices.shape[2] * 8) % nr == 0 else { throw OpError("packed weight '\(w.name)' indices have shape \(p.indices.shape)") }
                bits = p.indices.shape[2] * 8 / nr
                b.kind = Int32(KILN_B_LUT)
            }
            guard [1, 2, 3, 4, 6, 8].contains(bits), p.lut.shape.count == 2, p.lut.shape[1] == 1 << bits,
                  p.lut.shape[0] >= 1, n % p.lut.shape[0] == 0, p.lut.dtype == .float32 else {
                throw OpError("packed weight '\(w.name)' table has shape \(p.lut.shape)")
            }
            if let s = p.scale { try expect(s, .float32, [n], "scale") }
            b.data = p.indices.data.baseAddress
            b.lut = p.lut.data.baseAddress.assumingMemoryBound(to: Float.self)
            b.entries = 1 << bits
            b.group_size = n / p.lut.shape[0]
            b.nbits = bits
            b.column_scale = p.scale.map { $0.data.baseAddress.assumingMemoryBound(to: Float.self) }
            storage = [p.indices.data, p.lut.data] + (p.scale.map { [$0.data] } ?? [])
        }
        if b.kind != Int32(KILN_B_F32) { b.q_ukernel = id.compressedMicrokernel }
        self.b = b
    }

    /// A packed quantized weight's scale (and zero point) in the kernels' order, float32
    /// [panels, K blocks, nr] (`kiln_panel_block`): a panel's scales stream beside its values.
    /// Artifacts written before that order hold them [K blocks, padded N]; with more than one
    /// block those are reordered here (one block is the same either way).
    private static func panelScales(_ q: QuantizedWeight, name: String, k: Int, panels: Int, nr: Int) throws
        -> (scale: ByteStorage, zero: ByteStorage?, blocks: Int) {
        let shape = q.scale.shape
        let blocks = shape.count == 3 ? shape[1] : shape.count == 2 ? shape[0] : 0
        let fits = shape.count == 3 ? shape == [panels, blocks, nr] : shape.count == 2 && shape[1] == panels * nr
        guard fits, blocks >= 1, k % blocks == 0, q.scale.dtype == .float32, q.scale.data.count == blocks * panels * nr * 4 else {
            throw OpError("packed weight '\(name)' scale is \(q.scale.dtype.rawValue)\(shape), expected float32 [\(panels), K blocks, \(nr)]")
        }
        if let z = q.zeroPoint, z.dtype != .float32 || z.shape != shape || z.data.count != q.scale.data.count {
            throw OpError("packed weight '\(name)' zero point is \(z.dtype.rawValue)\(z.shape), expected float32\(shape)")
        }
        guard shape.count == 2, blocks > 1 else { return (q.scale.data, q.zeroPoint?.data, blocks) }
        func reordered(_ old: ByteStorage) -> ByteStorage {
            ByteStorage(byteCount: old.count) { out in
                let src = old.baseAddress.assumingMemoryBound(to: Float.self), dst = out.bindMemory(to: Float.self)
                for p in 0 ..< panels { for blk in 0 ..< blocks { for j in 0 ..< nr {
                    dst[(p * blocks + blk) * nr + j] = src[blk * panels * nr + p * nr + j]
                } } }
            }
        }
        return (reordered(q.scale.data), q.zeroPoint.map { reordered($0.data) }, blocks)
    }

    private static func setScales(_ q: QuantizedWeight, _ scales: (scale: ByteStorage, zero: ByteStorage?, blocks: Int), _ b: inout kiln_packed_b, k: Int) {
        b.data = q.data.data.baseAddress
        b.scale = scales.scale.baseAddress.assumingMemoryBound(to: Float.self)
        b.zero = scales.zero.map { $0.baseAddress.assumingMemoryBound(to: Float.self) }
        b.k_block = k / scales.blocks
    }

    init(b: kiln_packed_b, ukernel: kiln_f32_gemm_ukernel, mr: Int, storage: [ByteStorage] = []) {
        self.b = b
        self.ukernel = ukernel
        self.mr = mr
        self.storage = storage
    }

    /// How `m` rows split across threads: by rows when the panels are too few to share or fit in
    /// each thread's L2 (each thread then reads only its rows of A, and the pool's home ranges
    /// give it the same rows the previous step wrote from that core); by panels when the weight is
    /// too large for L2 and has enough of them, so each thread streams only its share of it.
    func chunks(m: Int, threads: Int) -> [(rows: Range<Int>, panels: Range<Int>)] {
        guard m > 0, n > 0 else { return [] }
        guard m * n * max(k, 1) >= 1 << 15, threads > 1 else { return [(0 ..< m, 0 ..< panels)] }
        let parts = workChunks(threads)
        let weightBytes = k * panels * b.nr * 4
        let byRows = panels < threads || (m >= 2 * mr * threads && weightBytes <= l2WeightBytes)
        return byRows
            ? splitRanges(m, parts: parts, align: mr).map { ($0, 0 ..< panels) }
            : splitRanges(panels, parts: parts).map { (0 ..< m, $0) }
    }

    /// C[m × N] = epilogue(A[m × K] · B) over precomputed chunks; `scratch` holds
    /// `scratchBytes` per chunk.
    func run(a: UnsafePointer<Float>, lda: Int, c: UnsafeMutablePointer<Float>, ldc: Int, chunks: [(rows: Range<Int>, panels: Range<Int>)],
             epilogue: kiln_epilogue, scratch: UnsafeMutableRawPointer?, threads: Int) {
        let stride = scratchBytes
        parallelFor(chunks.count, threads: threads) { i in
            let (rows, cols) = chunks[i]
            var e = epilogue
            var packed = b
            let s = stride > 0 ? scratch.map { ($0 + i * stride).assumingMemoryBound(to: Float.self) } : nil
            kiln_f32_gemm(ukernel, mr, &packed, a, lda, c, ldc, rows.lowerBound, rows.upperBound, cols.lowerBound, cols.upperBound, &e, s)
        }
    }
}

/// The epilogue of a lowered step: bias pointer set at run time, its fused activation (if any).
func epilogue(_ config: StepConfig) throws -> kiln_epilogue {
    var e = kiln_epilogue()
    if let a = try UnaryFunction.fused(in: config) {
        e.activation = a.function.code
        e.alpha = a.alpha
        e.beta = a.beta
    }
    return e
}
