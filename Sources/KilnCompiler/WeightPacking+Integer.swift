import CKilnKernels
import KilnFormat

extension WeightPacking {
    /// Bytes before the panels of an `s8_panels` blob holding `n` columns' sums and zero points
    /// (two int32 each), rounded up to 64 so the panels start on a cache line.
    package static func s8SumsBytes(_ n: Int) -> Int { (8 * n + 63) / 64 * 64 }

    /// A stored 8-bit matmul weight `[K, N]` (and its zero point, one value or one per column) in
    /// the `u8s8_gemm` kernels' layout: int8 blob of `s8SumsBytes(N)` bytes of int32 column sums
    /// then zero points (both less 128 for a uint8 weight), then `kiln_s8_pack_b`'s panels. The
    /// weight keeps its logical dtype and shape; the zero point input is folded in.
    package static func packS8Panels(_ w: Weight, zero: Weight?, name: String) throws -> Weight {
        guard case .dense(let blob) = w.encoding, [.int8, .uint8].contains(blob.dtype), w.shape.count == 2 else {
            throw CompileError("weight '\(w.name)' is not a stored 2-D 8-bit matrix")
        }
        let (k, n) = (w.shape[0], w.shape[1])
        var zeroBytes: [UInt8] = []
        if let zero {
            guard case .dense(let z) = zero.encoding, z.dtype == blob.dtype, [1, n].contains(z.shape.reduce(1, *)) else {
                throw CompileError("zero point '\(zero.name)' of weight '\(w.name)' is not one \(blob.dtype) value or one per column")
            }
            zeroBytes = Array(z.data.bytes)
        }
        let header = s8SumsBytes(n), panels = kiln_s8_packed_bytes(k, n)
        var out = [UInt8](repeating: 0, count: header + panels)
        var sums = [Int32](repeating: 0, count: 2 * n)
        zeroBytes.withUnsafeBytes { z in
            out.withUnsafeMutableBytes { o in
                kiln_s8_pack_b(k, n, blob.data.baseAddress, n, blob.dtype == .uint8 ? 1 : 0, z.baseAddress, zeroBytes.count,
                               o.baseAddress!.advanced(by: header).assumingMemoryBound(to: Int8.self), &sums)
            }
        }
        sums.withUnsafeBytes { s in out.withUnsafeMutableBytes { o in o.copyMemory(from: s) } }
        let packed = WeightBlob(dtype: .int8, shape: [out.count], data: ByteStorage(out))
        return Weight(name: name, dtype: w.dtype, shape: w.shape, encoding: .dense(packed))
    }
}

extension Lowering {
    /// Whether `matmul_integer` runs on the `u8s8_gemm` kernels: an 8-bit input of rank ≥ 2 with
    /// at most one zero point, times a stored 2-D 8-bit weight whose zero point (if any) is stored,
    /// one value or one per column, giving int32.
    static func integerGEMMFits(_ op: Operation, _ unit: CompilationUnit, _ type: (String) -> TensorType?) -> Bool {
        guard op.opType == "matmul_integer", op.outputs.count == 1, op.outputs[0].type.dtype == .int32, op.inputs.count >= 2,
              let a = type(op.inputs[0]), [.int8, .uint8].contains(a.dtype), a.rank >= 2,
              let w = unit.weight(op.inputs[1]), case .dense(let blob) = w.encoding, [.int8, .uint8].contains(blob.dtype),
              w.shape.count == 2, w.shape.allSatisfy({ $0 > 0 }) else { return false }
        if op.inputs.count > 2, !op.inputs[2].isEmpty {
            guard let z = type(op.inputs[2]), z.dtype == a.dtype, z.rank <= 1, z.shape.allSatisfy({ $0.size == 1 }) else { return false }
        }
        if op.inputs.count > 3, !op.inputs[3].isEmpty {
            guard let z = unit.weight(op.inputs[3]), case .dense(let zb) = z.encoding, zb.dtype == blob.dtype,
                  [1, w.shape[1]].contains(z.shape.reduce(1, *)) else { return false }
        }
        return op.inputs.count <= 4
    }
}
