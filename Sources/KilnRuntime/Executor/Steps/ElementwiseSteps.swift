@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat


/// Broadcast strides (in elements, 0 where broadcast) of operands against `shape`, with
/// dims merged where every operand stays regular and size-1 dims dropped.
func broadcastLayout(_ shape: [Int], _ operands: [[Int]]) -> (shape: [Int], strides: [[Int]]) {
    let rank = shape.count
    let full = operands.map { [Int](repeating: 1, count: rank - $0.count) + $0 }
    let strides = full.map { s -> [Int] in
        var out = [Int](repeating: 0, count: rank), acc = 1
        for i in (0 ..< rank).reversed() {
            out[i] = s[i] == 1 ? 0 : acc
            acc *= s[i]
        }
        return out
    }
    var dims: [Int] = [], merged: [[Int]] = Array(repeating: [], count: operands.count)
    for i in 0 ..< rank where shape[i] != 1 {
        if let last = dims.last, (0 ..< operands.count).allSatisfy({ merged[$0].last! == strides[$0][i] * shape[i] }) {
            dims[dims.count - 1] = last * shape[i]
            for o in 0 ..< operands.count { merged[o][merged[o].count - 1] = strides[o][i] }
        } else {
            dims.append(shape[i])
            for o in 0 ..< operands.count { merged[o].append(strides[o][i]) }
        }
    }
    if dims.isEmpty { return ([1], operands.map { _ in [0] }) }
    return (dims, merged)
}

/// Splits the outermost merged dim across threads when the work is large: (start, count) per part.
func outerParts(_ shape: [Int], threads: Int) -> [Range<Int>] {
    let total = shape.reduce(1, *)
    return splitRanges(shape[0], parts: total < 1 << 16 ? 1 : threads)
}

/// Elementwise float32 functions (``UnaryFunction``), split across threads.
struct UnaryStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int32, Int, UnsafePointer<Float>?, UnsafeMutablePointer<Float>?, Float, Float) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    /// The function; clip with bound inputs reads them when bound.
    let application: UnaryFunction.Application?
    let kernel: Kernel

    init(id: KernelID, op: KilnFormat.Operation) throws {
        self.id = id
        self.op = op
        application = UnaryFunction.of(op)
        guard application != nil || op.opType == "clip" else { throw OpError("\(op.opType) is not a unary function") }
        kernel = VectorConfig(id.isa).unary
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil else { return nil }
        return [(x.shape, x.dtype)]
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32 else { throw OpError("needs a float32 input") }
        var f = application
        if f == nil {
            // clip(x, min?, max?) with bounds known before the run.
            func bound(_ i: Int, _ fallback: Float) throws -> Float {
                guard i < inputs.count, let b = inputs[i] else { return fallback }
                guard let v = b.value, v.elementCount == 1, v.scalarType == .float32 else { throw OpError("clip bound \(i) is not a known float32 scalar") }
                return v.contiguous().unsafeBase.load(as: Float.self)
            }
            f = UnaryFunction.Application(function: .clip, alpha: try bound(1, -.infinity), beta: try bound(2, .infinity))
        }
        let (code, alpha, beta) = (f!.function.code, f!.alpha, f!.beta)
        let count = x.count, y = outputs[0]
        let ranges = splitRanges(count, parts: count < 1 << 16 ? 1 : context.threads, align: 64)
        let (kernel, threads) = (kernel, context.threads)
        return BoundStep { slots in
            let px = x.floats(slots), py = y.floats(slots)
            parallelFor(ranges.count, threads: threads) { r in
                let range = ranges[r]
                kernel(code, range.count, px + range.lowerBound, py + range.lowerBound, alpha, beta)
            }
        }
    }
}

/// Broadcasting binary ops: arithmetic on float32/int64/int32, comparisons, logic on bool.
struct BinaryStep: StepKernel, @unchecked Sendable {
    typealias Kernel = @convention(c) (Int32, Int32, Int, UnsafePointer<Int>?, UnsafeRawPointer?, UnsafePointer<Int>?, UnsafeRawPointer?,
                                       UnsafePointer<Int>?, UnsafeMutableRawPointer?) -> Void
    let id: KernelID
    let op: KilnFormat.Operation
    let code: Int32
    let kernel: Kernel

    /// The C code of each binary op of the registry's arithmetic, comparison and logic groups
    /// (kiln_binary.inc, by name).
    static let codes: [String: Int32] = Dictionary(uniqueKeysWithValues: OpSet.ops(in: [.arithmetic]).union(OpSet.ops(in: .comparison))
        .union(OpSet.ops(in: .logical)).compactMap { name in
            let code = kiln_binary_code(name)
            return code == 0 ? nil : (name, code)
        })

    init(id: KernelID, op: KilnFormat.Operation) throws {
        guard let code = BinaryStep.codes[op.opType], op.inputs.count == 2 else { throw OpError("\(op.opType) is not a binary op") }
        self.id = id
        self.op = op
        self.code = code
        kernel = VectorConfig(id.isa).binaryND
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 2, let x = inputs[0], let z = inputs[1], x.dtype == z.dtype, let dtype = kernelDType(x.dtype) else {
            throw OpError("operand types do not fit")
        }
        let y = outputs[0]
        let (shape, strides) = broadcastLayout(y.shape, [x.shape, z.shape])
        guard shape.count <= Int(KILN_MAX_RANK) else { throw OpError("rank \(shape.count) after merging is above \(KILN_MAX_RANK)") }
        let es = x.dtype.bitWidth / 8, ys = y.dtype.bitWidth / 8
        // Parts along the outermost merged dim (each a contiguous block of y).
        let parts = y.count == 0 ? [] : outerParts(shape, threads: context.threads)
        let inner = shape.dropFirst().reduce(1, *)
        let (kernel, code, threads) = (kernel, code, context.threads)
        let layout = ShapeBuffer(shape: shape, strides: strides)
        return BoundStep { slots in
            let px = x.pointer(slots), pz = z.pointer(slots), py = y.pointer(slots)
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                layout.withPart(count: r.count) { dims, xs, zs in
                    kernel(code, dtype, shape.count, dims, px + r.lowerBound * strides[0][0] * es, xs,
                           pz + r.lowerBound * strides[1][0] * es, zs, py + r.lowerBound * inner * ys)
                }
            }
        }
    }
}

/// A merged broadcast layout kept in fixed memory, so binding's arrays are not rebuilt per run.
final class ShapeBuffer: @unchecked Sendable {
    let rank: Int
    private let storage: UnsafeMutablePointer<Int>

    init(shape: [Int], strides: [[Int]]) {
        rank = shape.count
        storage = .allocate(capacity: rank * (1 + strides.count))
        for (i, d) in shape.enumerated() { storage[i] = d }
        for (o, s) in strides.enumerated() { for (i, v) in s.enumerated() { storage[rank * (o + 1) + i] = v } }
    }

    deinit { storage.deallocate() }

    /// The layout with the outermost dim set to `count` (a part of it), as C arrays; one part at a time per thread.
    func withPart(count: Int, _ body: (UnsafePointer<Int>, UnsafePointer<Int>, UnsafePointer<Int>) -> Void) {
        withUnsafeTemporaryAllocation(of: Int.self, capacity: rank) { dims in
            for i in 0 ..< rank { dims[i] = storage[i] }
            dims[0] = count
            body(UnsafePointer(dims.baseAddress!), UnsafePointer(storage + rank), UnsafePointer(storage + 2 * rank))
        }
    }

    /// The strides of operand `o` as a C array.
    func strides(_ o: Int) -> UnsafePointer<Int> { UnsafePointer(storage + rank * (o + 1)) }
    var shape: UnsafePointer<Int> { UnsafePointer(storage) }
}

/// `where(condition, x, y)` with broadcasting.
struct SelectStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 3, let c = inputs[0], let x = inputs[1], let z = inputs[2], c.dtype == .bool, x.dtype == z.dtype else {
            throw OpError("operand types do not fit")
        }
        let y = outputs[0]
        let (shape, strides) = broadcastLayout(y.shape, [c.shape, x.shape, z.shape])
        guard shape.count <= Int(KILN_MAX_RANK) else { throw OpError("rank \(shape.count) after merging is above \(KILN_MAX_RANK)") }
        let layout = ShapeBuffer(shape: shape, strides: strides)
        let size = x.dtype.bitWidth / 8
        // Parts along the outermost merged dim (each a contiguous block of y).
        let parts = y.count == 0 ? [] : outerParts(shape, threads: context.threads)
        let (inner, threads) = (shape.dropFirst().reduce(1, *), context.threads)
        return BoundStep { slots in
            let pc = c.pointer(slots).assumingMemoryBound(to: UInt8.self), px = x.pointer(slots), pz = z.pointer(slots), py = y.pointer(slots)
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                layout.withPart(count: r.count) { dims, _, _ in
                    kiln_where_nd__scalar(size, layout.rank, dims, pc + r.lowerBound * strides[0][0], layout.strides(0),
                                          px + r.lowerBound * strides[1][0] * size, layout.strides(1),
                                          pz + r.lowerBound * strides[2][0] * size, layout.strides(2), py + r.lowerBound * inner * size)
                }
            }
        }
    }
}

/// `cast` between numeric types.
/// kiln_map.inc's maps: `y[i] = f(x[i])`, bool out for the predicates.
struct MapStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, outputs.count == 1, outputs[0].count == x.count, let code = mapCode(op), let dt = kernelDType(x.dtype),
              kiln_map__scalar(code, dt, 0, nil, nil) != 0 else {
            throw OpError("\(op.opType) on \(inputs.first??.dtype.rawValue ?? "nothing") has no map kernel")
        }
        let y = outputs[0]
        let (xs, ys, threads) = (x.dtype.bitWidth / 8, y.dtype.bitWidth / 8, context.threads)
        let parts = splitRanges(x.count, parts: x.count < 1 << 16 ? 1 : threads)
        return BoundStep { slots in
            let px = x.pointer(slots), py = y.pointer(slots)
            parallelFor(parts.count, threads: threads) { i in
                let r = parts[i]
                _ = kiln_map__scalar(code, dt, r.count, px + r.lowerBound * xs, py + r.lowerBound * ys)
            }
        }
    }
}

struct CastStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, let from = kernelDType(x.dtype), let to = kernelDType(outputs[0].dtype) else {
            throw OpError("cast between these types has no kernel")
        }
        let y = outputs[0]
        // Probe the pair once so an unsupported one falls back at binding, not at run time.
        var probeIn = [UInt8](repeating: 0, count: 8), probeOut = [UInt8](repeating: 0, count: 8)
        guard kiln_cast__scalar(from, to, 1, &probeIn, &probeOut) != 0 else { throw OpError("cast \(x.dtype.rawValue) to \(y.dtype.rawValue) has no kernel") }
        return BoundStep { slots in
            _ = kiln_cast__scalar(from, to, x.count, x.pointer(slots), y.pointer(slots))
        }
    }
}
