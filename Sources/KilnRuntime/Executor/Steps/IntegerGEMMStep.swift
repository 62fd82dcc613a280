@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat
import KilnReference

/// `matmul_integer` of an 8-bit input `[…, M, K]` (uint8 or int8, one zero point) by a weight
/// packed as `s8_panels` (the `u8s8_gemm` entry of its ISA's vector config): int32 results,
/// exactly int32 accumulation's. Threads split the weight's panels, or the rows when there are
/// fewer panels than chunks.
struct IntegerGEMMStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    /// The packed blob: column sums and zero points, then the panels.
    let blob: NDArray
    let k: Int
    let n: Int

    init(id: KernelID, op: KilnFormat.Operation, weight w: Weight) throws {
        guard w.shape.count == 2 else { throw OpError("needs a 2-D weight, got \(w.shape)") }
        let blob = try WeightDecoding.dense(w)
        (k, n) = (w.shape[0], w.shape[1])
        let bytes = WeightPacking.s8SumsBytes(n) + kiln_s8_packed_bytes(k, n)
        guard blob.scalarType == .int8, blob.shape == [bytes] else {
            throw OpError("weight '\(w.name)' is not packed as s8_panels for [\(k), \(n)] (blob \(blob.shape)); compile the package again")
        }
        self.id = id
        self.op = op
        self.blob = blob
    }

    /// `[…, M, N]` int32.
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let a = inputs.first ?? nil, a.shape.count >= 2 else { return nil }
        return [(Array(a.shape.dropLast()) + [n], .int32)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let a = inputs.first ?? nil, [.uint8, .int8].contains(a.dtype), a.shape.count >= 2, a.shape.last == k else {
            throw OpError("needs an 8-bit input [..., M, \(k)]")
        }
        let zero = inputs.count > 2 ? inputs[2] : nil
        if let zero { guard zero.dtype == a.dtype, zero.count == 1 else { throw OpError("needs one \(a.dtype) zero point for the input") } }
        try expectOutput(outputs, Array(a.shape.dropLast()) + [n])
        let y = outputs[0]
        guard y.dtype == .int32, y.rowStride == nil || y.rowStride == n else { throw OpError("needs a dense int32 output") }
        let (k, n, m) = (k, n, a.count / max(k, 1))
        let panels = (n + Int(KILN_I8_NR) - 1) / Int(KILN_I8_NR)
        let threads = context.threads, parts = workChunks(threads)
        let chunks: [(rows: Range<Int>, panels: Range<Int>)] = panels >= parts || m < 16
            ? splitRanges(panels, parts: parts).map { (0 ..< m, $0) }
            : splitRanges(m, parts: parts, align: 8).map { ($0, 0 ..< panels) }
        let gemm = VectorConfig(id.isa).u8s8GEMM
        let signed: Int32 = a.dtype == .int8 ? 1 : 0
        let sums = UnsafePointer(blob.unsafeBase.assumingMemoryBound(to: Int32.self))
        let packed = UnsafePointer((blob.unsafeBase + WeightPacking.s8SumsBytes(n)).assumingMemoryBound(to: Int8.self))
        return BoundStep { slots in
            guard m > 0, n > 0 else { return }
            var az: Int32 = 0
            if let zero {
                let p = zero.pointer(slots)
                az = signed != 0 ? Int32(p.load(as: Int8.self)) : Int32(p.load(as: UInt8.self))
            }
            let pa = UnsafePointer(a.pointer(slots).assumingMemoryBound(to: UInt8.self))
            let py = y.pointer(slots).assumingMemoryBound(to: Int32.self)
            parallelFor(chunks.count, threads: threads) { i in
                let (r, p) = chunks[i]
                gemm(r.lowerBound, r.upperBound, n, k, pa, k, signed, az, packed, sums, p.lowerBound, p.upperBound, py, n)
            }
        }
    }
}
