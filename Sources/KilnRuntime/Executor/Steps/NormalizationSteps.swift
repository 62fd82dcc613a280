@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// The ISA variants of the normalization kernels.
struct NormalizationKernels {
    typealias Reduce = @convention(c) (Int32, Int, Int, Int, UnsafePointer<Float>?, UnsafeMutablePointer<Float>?) -> Void
    typealias LayerNorm = @convention(c) (Int, Int, UnsafePointer<Float>?, UnsafePointer<Float>?, UnsafePointer<Float>?, Float,
                                          UnsafeMutablePointer<Float>?) -> Void
    typealias Attention = @convention(c) (Int, Int, Int, Int, Int, Int, UnsafePointer<Float>?, Int, UnsafePointer<Float>?, Int,
                                          UnsafePointer<Float>?, Int, UnsafePointer<Float>?, Int, Int, Float,
                                          UnsafeMutablePointer<Float>?, Int, UnsafeMutablePointer<Float>?) -> Void
    let reduce: Reduce
    let softmax: Reduce
    let layerNorm: LayerNorm
    let attention: Attention

    init(_ isa: ISA) {
        let vector = VectorConfig(isa)
        (reduce, softmax, layerNorm, attention) = (vector.reduce, vector.softmax, vector.layerNorm, vector.attention)
    }
}

/// Splits `shape` around `axis`: (outer, n, inner).
func around(_ shape: [Int], axis: Int) -> (Int, Int, Int) {
    (shape[..<axis].reduce(1, *), shape[axis], shape[(axis + 1)...].reduce(1, *))
}

/// `softmax`/`log_softmax` on any axis; rows split across threads.
struct SoftmaxStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let kernels: NormalizationKernels

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, !x.shape.isEmpty else { throw OpError("needs a float32 input of rank ≥ 1") }
        let axis = try OpSet.normalize(axis: try op.attributes.int("axis", -1), rank: x.shape.count)
        let (outer, n, inner) = around(x.shape, axis: axis)
        let code = Int32(op.opType == "log_softmax" ? KILN_LOG_SOFTMAX : KILN_SOFTMAX)
        let parts = splitRanges(outer, parts: x.count < 1 << 14 ? 1 : context.threads)
        let (y, kernel, threads) = (outputs[0], kernels.softmax, context.threads)
        return BoundStep { slots in
            guard n > 0 else { return }
            let px = x.floats(slots), py = y.floats(slots)
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                kernel(code, r.count, n, inner, px + r.lowerBound * n * inner, py + r.lowerBound * n * inner)
            }
        }
    }
}

/// `layer_norm` over the last axis; rows split across threads.
struct LayerNormStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let kernels: NormalizationKernels

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil else { return nil }
        return op.outputs.count == 1 ? [(x.shape, x.dtype)] : nil
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard outputs.count == 1, let x = inputs.first ?? nil, x.dtype == .float32, let n = x.shape.last, n > 0,
              try OpSet.normalize(axis: try op.attributes.int("axis", -1), rank: x.shape.count) == x.shape.count - 1,
              inputs.count >= 2, let gamma = inputs[1], gamma.count == n, gamma.dtype == .float32 else {
            throw OpError("needs a float32 input normalized over its last axis with a matching scale")
        }
        let beta = inputs.count > 2 ? inputs[2] : nil
        if let beta { guard beta.count == n, beta.dtype == .float32 else { throw OpError("bias does not fit") } }
        let eps = Float(try op.attributes.float("epsilon", 1e-5))
        let rows = x.count / n
        let parts = splitRanges(rows, parts: x.count < 1 << 14 ? 1 : context.threads)
        let (y, kernel, threads) = (outputs[0], kernels.layerNorm, context.threads)
        return BoundStep { slots in
            let px = x.floats(slots), py = y.floats(slots), pg = gamma.floats(slots), pb = beta.map { UnsafePointer($0.floats(slots)) }
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                kernel(r.count, n, px + r.lowerBound * n, pg, pb, eps, py + r.lowerBound * n)
            }
        }
    }
}

/// `attention` over 3-D `[B, S, H·D]` q, k, v (as many key as query heads) or 4-D `[B, H, S, D]`
/// ones (query heads a multiple of key heads, grouped-query attention), with an optional float32
/// additive mask that broadcasts to `[B, Hq, Sq, Skv]`: the (batch, head) pairs split across
/// threads, each query row's scores, softmax and weighted values computed in place.
struct AttentionStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let kernels: NormalizationKernels
    /// Heads of the 3-D form; 0 for 4-D operands.
    let heads: Int
    let scale: Float

    init(id: KernelID, op: KilnFormat.Operation, kernels: NormalizationKernels) throws {
        self.id = id
        self.op = op
        self.kernels = kernels
        heads = try op.attributes.int("q_num_heads", 0)
        scale = Float(try op.attributes.float("scale", 1))
        guard try op.attributes.int("kv_num_heads", 0) == heads else { throw OpError("needs as many key heads as query heads") }
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard inputs.count >= 3, let q = inputs[0], let v = inputs[2], q.shape.count == v.shape.count else { return nil }
        switch q.shape.count {
        case 3: return [([q.shape[0], q.shape[1], v.shape[2]], .float32)]
        case 4: return [([q.shape[0], q.shape[1], q.shape[2], v.shape[3]], .float32)]
        default: return nil
        }
    }

    /// One batch entry's geometry: element offsets and row strides of q, k, v and y per head.
    struct Geometry {
        var batch = 0, heads = 0, group = 1, sq = 0, skv = 0, d = 0, dv = 0
        var qRow = 0, kvRow = 0, vRow = 0, yRow = 0
        // Per batch entry and per head (for key/value heads: per key head).
        var qBatch = 0, kBatch = 0, vBatch = 0, yBatch = 0
        var qHead = 0, kHead = 0, vHead = 0, yHead = 0
    }

    func geometry(_ q: Operand, _ k: Operand, _ v: Operand) throws -> Geometry {
        var g = Geometry()
        if heads > 0 {
            guard [q, k, v].allSatisfy({ $0.shape.count == 3 }) else { throw OpError("needs 3-D q, k and v") }
            (g.batch, g.heads, g.sq, g.skv) = (q.shape[0], heads, q.shape[1], k.shape[1])
            guard q.shape[2] % heads == 0, v.shape[2] % heads == 0, k.shape[2] == q.shape[2], k.shape[0] == g.batch, v.shape[0] == g.batch,
                  v.shape[1] == g.skv else { throw OpError("q \(q.shape), k \(k.shape) and v \(v.shape) do not fit \(heads) heads") }
            (g.d, g.dv) = (q.shape[2] / heads, v.shape[2] / heads)
            (g.qRow, g.kvRow, g.vRow, g.yRow) = (heads * g.d, heads * g.d, heads * g.dv, heads * g.dv)
            // Keys and values of a state kept in place have room for more entries than they hold.
            let (kRoom, vRoom) = (try room(k, axis: 1, g.skv), try room(v, axis: 1, g.skv))
            (g.qBatch, g.kBatch, g.vBatch, g.yBatch) = (g.sq * heads * g.d, kRoom * heads * g.d, vRoom * heads * g.dv, g.sq * heads * g.dv)
            (g.qHead, g.kHead, g.vHead, g.yHead) = (g.d, g.d, g.dv, g.dv)
        } else {
            guard [q, k, v].allSatisfy({ $0.shape.count == 4 }) else { throw OpError("needs 4-D q, k and v") }
            let hkv = k.shape[1]
            (g.batch, g.heads, g.sq, g.skv, g.d, g.dv) = (q.shape[0], q.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3])
            guard hkv > 0, g.heads % hkv == 0, k.shape[0] == g.batch, v.shape[0] == g.batch, v.shape[1] == hkv, v.shape[2] == g.skv,
                  k.shape[3] == g.d else { throw OpError("q \(q.shape), k \(k.shape) and v \(v.shape) do not fit [B, H, S, D] attention") }
            g.group = g.heads / hkv
            (g.qRow, g.kvRow, g.vRow, g.yRow) = (g.d, g.d, g.dv, g.dv)
            let (kRoom, vRoom) = (try room(k, axis: 2, g.skv), try room(v, axis: 2, g.skv))
            (g.qHead, g.kHead, g.vHead, g.yHead) = (g.sq * g.d, kRoom * g.d, vRoom * g.dv, g.sq * g.dv)
            (g.qBatch, g.kBatch, g.vBatch, g.yBatch) = (g.heads * g.qHead, hkv * g.kHead, hkv * g.vHead, g.heads * g.yHead)
        }
        return g
    }

    /// Entries `x` has room for along its sequence `axis`: `skv`, or its state's capacity.
    private func room(_ x: Operand, axis: Int, _ skv: Int) throws -> Int {
        guard let e = x.extent else { return skv }
        guard e.axis == axis else { throw OpError("a state kept in place grows on axis \(e.axis), not the sequence axis \(axis)") }
        return e.capacity
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count >= 3, let q = inputs[0], let k = inputs[1], let v = inputs[2],
              [q, k, v].allSatisfy({ $0.dtype == .float32 }) else { throw OpError("needs float32 q, k and v") }
        let g = try geometry(q, k, v)
        // The mask's strides over [B, H, Sq, Skv] (0 where it broadcasts); its last dim must be Skv.
        var strides = [0, 0, 0, 0]
        let mask = inputs.count > 3 ? inputs[3] : nil
        if let m = mask {
            guard m.dtype == .float32, (1 ... 4).contains(m.shape.count) else { throw OpError("needs a float32 mask of rank 1…4") }
            let dims = [Int](repeating: 1, count: 4 - m.shape.count) + m.shape
            let full = [g.batch, g.heads, g.sq, g.skv]
            var step = 1
            for i in stride(from: 3, through: 0, by: -1) {
                guard dims[i] == 1 || dims[i] == full[i] else { throw OpError("mask \(m.shape) does not broadcast to \(full)") }
                strides[i] = dims[i] == 1 ? 0 : step
                step *= dims[i]
            }
            guard dims[3] == g.skv else { throw OpError("mask \(m.shape) does not cover \(g.skv) keys") }
        }
        let units = g.batch * g.heads
        let parts = splitRanges(units, parts: units * g.sq * g.skv * (g.d + g.dv) < 1 << 15 ? 1 : workChunks(context.threads))
        let width = kiln_attention_scratch_floats(g.skv, g.d, g.dv) // floats of scratch one part needs
        context.scratch(parts.count * width * MemoryLayout<Float>.stride)
        let (y, kernel, threads, scale, scratchSlot) = (outputs[0], kernels.attention, context.threads, self.scale, context.scratchSlot)
        let planar = heads == 0
        return BoundStep { slots in
            let (pq, pk, pv, py) = (UnsafePointer(q.floats(slots)), UnsafePointer(k.floats(slots)), UnsafePointer(v.floats(slots)), y.floats(slots))
            let pm = mask.map { UnsafePointer($0.floats(slots)) }
            let rows = slots[scratchSlot].assumingMemoryBound(to: Float.self)
            parallelFor(parts.count, threads: threads) { p in
                // Each part's units: (batch, head) pairs. 3-D heads: a run of heads within a batch
                // entry per call (the kernel offsets head h by h·d); 4-D: one head plane per call.
                var u = parts[p].lowerBound
                while u < parts[p].upperBound {
                    let (b, h0) = u.quotientAndRemainder(dividingBy: g.heads)
                    let h1 = planar ? h0 + 1 : min(g.heads, h0 + parts[p].upperBound - u)
                    let (hq, hk, first, last) = planar ? (h0, h0 / g.group, 0, 1) : (0, 0, h0, h1)
                    let pmh = pm.map { $0 + b * strides[0] + (planar ? h0 * strides[1] : 0) }
                    kernel(g.sq, g.skv, g.d, g.dv, first, last, pq + b * g.qBatch + hq * g.qHead, g.qRow, pk + b * g.kBatch + hk * g.kHead, g.kvRow,
                           pv + b * g.vBatch + hk * g.vHead, g.vRow, pmh, strides[1], strides[2], scale, py + b * g.yBatch + hq * g.yHead, g.yRow,
                           rows + p * width)
                    u += h1 - h0
                }
            }
        }
    }
}

/// `reduce_*` over a run of adjacent axes (after dropping size-1 dims).
struct ReduceStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let kernels: NormalizationKernels

    /// The C code of each reduction of the op set that kiln_reduce.inc computes (by name).
    static let codes: [String: Int32] = Dictionary(uniqueKeysWithValues: OpSet.reduceNames.compactMap { name in
        let code = kiln_reduce_code(name)
        return code == 0 ? nil : (name, code)
    })

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    /// The reduced axes, from the attribute or a known input; `nil` means all (or none for a no-op).
    func axes(_ inputs: [Operand?], rank: Int) throws -> Set<Int> {
        var list: [Int]? = try op.attributes.ints("axes")
        if list == nil, inputs.count > 1, let a = inputs[1] {
            guard let v = a.value, v.scalarType == .int64 else { throw OpError("axes are not known before the run") }
            let c = v.contiguous()
            list = (0 ..< c.elementCount).map { Int(c.unsafeBase.load(fromByteOffset: $0 * 8, as: Int64.self)) }
        }
        if let list, !list.isEmpty { return Set(try list.map { try OpSet.normalize(axis: $0, rank: rank) }) }
        if try op.attributes.int("noop_with_empty_axes", 0) != 0 { return [] }
        return Set(0 ..< rank)
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, let code = ReduceStep.codes[op.opType],
              x.dtype == .float32 || ([.int64, .int32].contains(x.dtype) && Lowering.integerReductions.contains(op.opType)) else {
            throw OpError("needs a float32 input (int64 or int32 for min, max, sum and prod)")
        }
        let axes = try axes(inputs, rank: x.shape.count)
        guard !axes.isEmpty else { throw OpError("an empty reduction is a copy") }
        // Adjacent reduced axes (ignoring size-1 dims) become the middle of [outer, n, inner].
        let dims = x.shape.enumerated().filter { $0.element != 1 }
        let reduced = dims.filter { axes.contains($0.offset) }
        if let first = reduced.first, let last = reduced.last {
            let positions = dims.map(\.offset)
            let span = positions.firstIndex(of: first.offset)! ... positions.firstIndex(of: last.offset)!
            guard span.allSatisfy({ axes.contains(dims[$0].offset) }) else { throw OpError("reduced axes are not adjacent") }
        }
        let n = reduced.reduce(1) { $0 * $1.element }
        let outer = dims.filter { d in reduced.first.map { d.offset < $0.offset } ?? true }.reduce(1) { $0 * $1.element }
        let inner = x.count / max(n * outer, 1)
        let (y, kernel) = (outputs[0], kernels.reduce)
        guard y.count == outer * inner || x.count == 0 else { throw OpError("output \(y.shape) does not fit the reduction") }
        if x.dtype == .int64 { return try integers(Int64.self, x, y, outer: outer, n: n, inner: inner) }
        if x.dtype == .int32 { return try integers(Int32.self, x, y, outer: outer, n: n, inner: inner) }
        return BoundStep { slots in
            guard y.count > 0 else { return }
            kernel(code, outer, n, inner, x.floats(slots), y.floats(slots))
        }
    }
}

extension ReduceStep {
    /// An integer reduction of [outer, n, inner] to [outer, inner]: the first row, then the others combined into it.
    func integers<T: FixedWidthInteger>(_: T.Type, _ x: Operand, _ y: Operand, outer: Int, n: Int, inner: Int) throws -> BoundStep {
        let combine: (T, T) -> T
        switch op.opType {
        case "reduce_min": combine = { min($0, $1) }
        case "reduce_max": combine = { max($0, $1) }
        case "reduce_sum": combine = { $0 &+ $1 }
        default: combine = { $0 &* $1 }
        }
        guard n > 0 || op.opType == "reduce_sum" || op.opType == "reduce_prod" else { throw OpError("cannot take the extreme of an empty axis") }
        let identity: T = op.opType == "reduce_prod" ? 1 : 0
        return BoundStep { slots in
            let px = x.pointer(slots).assumingMemoryBound(to: T.self), py = y.pointer(slots).assumingMemoryBound(to: T.self)
            for o in 0 ..< outer {
                let out = py + o * inner, line = px + o * n * inner
                if n == 0 {
                    out.update(repeating: identity, count: inner)
                    continue
                }
                out.update(from: line, count: inner)
                for k in 1 ..< max(n, 1) { for j in 0 ..< inner { out[j] = combine(out[j], line[k * inner + j]) } }
            }
        }
    }
}

/// `argmax`/`argmin` along one axis.
struct ArgReduceStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, !x.shape.isEmpty else { throw OpError("needs a float32 input") }
        let axis = try OpSet.normalize(axis: try op.attributes.int("axis", 0), rank: x.shape.count)
        let (outer, n, inner) = around(x.shape, axis: axis)
        guard n > 0 else { throw OpError("cannot take the extreme of an empty axis") }
        let largest: Int32 = op.opType == "argmax" ? 1 : 0
        let last = Int32(try op.attributes.int("select_last_index", 0) != 0 ? 1 : 0)
        let y = outputs[0]
        return BoundStep { slots in
            kiln_f32_arg_reduce__scalar(largest, last, outer, n, inner, x.floats(slots), y.pointer(slots).assumingMemoryBound(to: Int64.self))
        }
    }
}
