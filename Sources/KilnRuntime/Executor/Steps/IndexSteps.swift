@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// Reads index `i` of an int64 or int32 operand.
@inline(__always) func index(_ o: Operand, _ p: UnsafeMutableRawPointer, _ i: Int) -> Int {
    o.dtype == .int64 ? Int(p.load(fromByteOffset: i * 8, as: Int64.self)) : Int(p.load(fromByteOffset: i * 4, as: Int32.self))
}

/// `gather_nd` (with batch dims): one slice copy per index tuple.
struct GatherNDStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        let b = try op.attributes.int("batch_dims", 0)
        guard inputs.count == 2, let x = inputs[0], let idx = inputs[1], idx.dtype == .int64 || idx.dtype == .int32,
              let k = idx.shape.last, b >= 0, b + k <= x.shape.count else { throw OpError("indices do not fit the data") }
        let size = x.dtype.bitWidth / 8
        let strides = byteStrides(x.shape, size)
        let slice = x.shape[(b + k)...].reduce(1, *) * size
        let tuples = idx.count / max(k, 1), batchCount = x.shape[..<b].reduce(1, *)
        let perBatch = tuples / max(batchCount, 1)
        let dims = x.shape[b ..< b + k].map { Int64($0) }, dimStrides = strides[b ..< b + k].map { Int64($0) }
        let batchStride = b > 0 ? strides[b - 1] : 0, y = outputs[0], indices32: Int32 = idx.dtype == .int32 ? 1 : 0
        guard y.byteCount == tuples * slice else { throw OpError("output \(y.shape) does not fit") }
        return BoundStep { slots in
            let pi = idx.pointer(slots)
            let bad = kiln_gather_nd__scalar(slice, tuples, perBatch, batchStride, k, dims, dimStrides, x.pointer(slots), pi, indices32, y.pointer(slots))
            guard bad == 0 else {
                throw OpError("gather_nd index \(index(idx, pi, bad - 1)) is out of range for a dim of \(dims[(bad - 1) % max(k, 1)])")
            }
        }
    }
}

/// `scatter_nd` without reduction: the data copied, then one slice written per index tuple.
struct ScatterNDStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard try op.attributes.string("reduction", "none") == "none", inputs.count == 3, let x = inputs[0], let idx = inputs[1], let u = inputs[2],
              idx.dtype == .int64 || idx.dtype == .int32, u.dtype == x.dtype, let k = idx.shape.last, k <= x.shape.count else {
            throw OpError("only scatter_nd without reduction, with fitting indices, has a kernel")
        }
        let size = x.dtype.bitWidth / 8
        let strides = byteStrides(x.shape, size)
        let slice = x.shape[k...].reduce(1, *) * size
        let tuples = idx.count / max(k, 1)
        guard u.byteCount == tuples * slice else { throw OpError("updates do not fit") }
        let dims = Array(x.shape[..<k]), y = outputs[0]
        return BoundStep { slots in
            let px = x.pointer(slots), pi = idx.pointer(slots), pu = u.pointer(slots), py = y.pointer(slots)
            if px != py { py.copyMemory(from: px, byteCount: y.byteCount) }
            for t in 0 ..< tuples {
                var base = 0
                for j in 0 ..< k {
                    var i = index(idx, pi, t * k + j)
                    if i < 0 { i += dims[j] }
                    guard i >= 0, i < dims[j] else { throw OpError("scatter_nd index is out of range") }
                    base += i * strides[j]
                }
                (py + base).copyMemory(from: pu + t * slice, byteCount: slice)
            }
        }
    }
}
