@preconcurrency import CKilnKernels
import Foundation
import KilnCompiler
import KilnFormat

/// Visits every element of an index tensor of `shape` (row-major): `body(e, base)` with the
/// element's flat index and the byte offset, in a tensor of byte strides `strides`, of its
/// coordinates with the one along `axis` left at 0.
@inline(__always) private func walk(_ shape: [Int], strides: [Int], axis: Int, _ body: (Int, Int) throws -> Void) rethrows {
    let rank = shape.count, inner = shape[rank - 1], innerStride = rank - 1 == axis ? 0 : strides[rank - 1]
    guard inner > 0 else { return }
    let rows = shape.reduce(1, *) / inner
    var coords = [Int](repeating: 0, count: rank)
    for row in 0 ..< rows {
        var base = 0
        for d in 0 ..< rank - 1 where d != axis { base += coords[d] * strides[d] }
        for j in 0 ..< inner { try body(row * inner + j, base + j * innerStride) }
        var d = rank - 2
        while d >= 0 {
            coords[d] += 1
            if coords[d] < shape[d] { break }
            coords[d] = 0
            d -= 1
        }
    }
}

/// The checked axis and the shared checks of `gather_elements` and `scatter_elements`: same rank,
/// int64 or int32 indices no larger than the data off the axis.
private func elementAxis(_ op: KilnFormat.Operation, data x: Operand, indices idx: Operand) throws -> Int {
    guard idx.dtype == .int64 || idx.dtype == .int32, idx.shape.count == x.shape.count, !x.shape.isEmpty, !x.dtype.isSubByte else {
        throw OpError("needs int64 or int32 indices of the data's rank")
    }
    let axis = try OpSet.normalize(axis: try op.attributes.int("axis", 0), rank: x.shape.count)
    for d in x.shape.indices where d != axis && idx.shape[d] > x.shape[d] {
        throw OpError("indices dim \(d) (\(idx.shape[d])) is larger than the data's (\(x.shape[d]))")
    }
    return axis
}

@inline(__always) private func wrapped(_ i: Int, _ n: Int, _ what: String) throws -> Int {
    let j = i < 0 ? i + n : i
    guard j >= 0, j < n else { throw OpError("\(what) index \(i) is out of range for a dim of \(n)") }
    return j
}

/// `gather_elements`: each output element read from the data at its own coordinates, the one
/// along `axis` replaced by its index. Any element type, copied by width.
struct GatherElementsStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 2, let x = inputs[0], let idx = inputs[1] else { throw OpError("needs data and indices") }
        let axis = try elementAxis(op, data: x, indices: idx)
        try expectOutput(outputs, idx.shape)
        let y = outputs[0], size = x.dtype.bitWidth / 8, strides = byteStrides(x.shape, size)
        let (n, axisStride) = (x.shape[axis], strides[axis])
        func copy<T>(_: T.Type) -> BoundStep {
            BoundStep { slots in
                let px = UnsafeRawPointer(x.pointer(slots)), pi = idx.pointer(slots), py = y.pointer(slots).assumingMemoryBound(to: T.self)
                try walk(idx.shape, strides: strides, axis: axis) { e, base in
                    let i = try wrapped(index(idx, pi, e), n, "gather_elements")
                    py[e] = px.load(fromByteOffset: base + i * axisStride, as: T.self)
                }
            }
        }
        switch size {
        case 8: return copy(UInt64.self)
        case 4: return copy(UInt32.self)
        case 2: return copy(UInt16.self)
        default: return copy(UInt8.self)
        }
    }
}

/// `scatter_elements`: the data copied, then each update written (or added, multiplied, maxed,
/// mined for float32, int64 and int32) where its coordinates, the one along `axis` replaced by
/// its index, point. Updates apply in order, as the reference does.
struct ScatterElementsStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 3, let x = inputs[0], let idx = inputs[1], let u = inputs[2], u.dtype == x.dtype, u.shape == idx.shape else {
            throw OpError("needs data, indices and updates of the indices' shape")
        }
        let axis = try elementAxis(op, data: x, indices: idx)
        try expectOutput(outputs, x.shape)
        let y = outputs[0], size = x.dtype.bitWidth / 8, strides = byteStrides(x.shape, size)
        let (n, axisStride, bytes) = (x.shape[axis], strides[axis], y.byteCount)
        let reduction = try op.attributes.string("reduction", "none")
        func scatter<T>(_: T.Type, _ combine: @escaping (T, T) -> T) -> BoundStep {
            BoundStep { slots in
                let px = x.pointer(slots), pi = idx.pointer(slots), py = y.pointer(slots)
                let pu = u.pointer(slots).assumingMemoryBound(to: T.self)
                if px != py { py.copyMemory(from: px, byteCount: bytes) }
                try walk(idx.shape, strides: strides, axis: axis) { e, base in
                    let at = try base + wrapped(index(idx, pi, e), n, "scatter_elements") * axisStride
                    py.storeBytes(of: combine(py.load(fromByteOffset: at, as: T.self), pu[e]), toByteOffset: at, as: T.self)
                }
            }
        }
        func reduced<T: Numeric & Comparable>(_ t: T.Type) throws -> BoundStep {
            switch reduction {
            case "add": return scatter(t) { $0 + $1 }
            case "mul": return scatter(t) { $0 * $1 }
            case "max": return scatter(t) { max($0, $1) }
            case "min": return scatter(t) { min($0, $1) }
            default: throw OpError("reduction must be none, add, mul, max or min, got \"\(reduction)\"")
            }
        }
        if reduction == "none" {
            switch size {
            case 8: return scatter(UInt64.self) { $1 }
            case 4: return scatter(UInt32.self) { $1 }
            case 2: return scatter(UInt16.self) { $1 }
            default: return scatter(UInt8.self) { $1 }
            }
        }
        switch x.dtype {
        case .float32: return try reduced(Float.self)
        case .int64: return try reduced(Int64.self)
        case .int32: return try reduced(Int32.self)
        default: throw OpError("scatter_elements with reduction '\(reduction)' on \(x.dtype.rawValue) has no kernel")
        }
    }
}

/// `cumsum` on float32, int64 or int32 along an axis given as an attribute or a known input:
/// a running sum per line, the inner dims contiguous (vectorized), forwards or reversed,
/// inclusive or exclusive. Integers wrap as two's complement, as onnxruntime's do.
struct CumulativeStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, [.float32, .int64, .int32].contains(x.dtype) else { throw OpError("needs float32, int64 or int32 data") }
        let a = op.attributes
        let given = a["axis"] != nil ? [try a.int("axis", 0)] : try knownIntegers(inputs.count > 1 ? inputs[1] : nil, "axis")
        guard let raw = given?.first, given?.count == 1 else { throw OpError("needs one axis") }
        let rank = max(x.shape.count, 1), axis = try OpSet.normalize(axis: raw, rank: rank)
        try expectOutput(outputs, x.shape)
        let y = outputs[0], exclusive = try a.int("exclusive", 0) != 0, reverse = try a.int("reverse", 0) != 0
        let shape = x.shape.isEmpty ? [1] : x.shape
        let n = shape[axis], inner = shape[(axis + 1)...].reduce(1, *), outer = shape[..<axis].reduce(1, *)
        func sums<T: AdditiveArithmetic>(_: T.Type, _ add: @escaping (T, T) -> T) -> BoundStep {
            BoundStep { slots in
                let px = x.pointer(slots).assumingMemoryBound(to: T.self), py = y.pointer(slots).assumingMemoryBound(to: T.self)
                for o in 0 ..< outer {
                    let line = o * n * inner
                    var previous = -1
                    for step in 0 ..< n {
                        let k = reverse ? n - 1 - step : step
                        let row = line + k * inner
                        if previous < 0 {
                            for j in 0 ..< inner { py[row + j] = exclusive ? .zero : px[row + j] }
                        } else {
                            let read = exclusive ? previous : row
                            for j in 0 ..< inner { py[row + j] = add(py[previous + j], px[read + j]) }
                        }
                        previous = row
                    }
                }
            }
        }
        switch x.dtype {
        case .float32: return sums(Float.self, +)
        case .int64: return sums(Int64.self, &+)
        default: return sums(Int32.self, &+)
        }
    }
}

/// `assume`: every element of the condition must be true (a convert-time assumption, such as a
/// dim squeezed without axes not being 1), else the op's message is the run's error; the data
/// is copied through.
struct AssumeStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { try Self.inferred(op, inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count == 2, let x = inputs[0], let c = inputs[1], c.dtype == .bool, !x.dtype.isSubByte else { throw OpError("needs data and a bool condition") }
        try expectOutput(outputs, x.shape)
        let y = outputs[0], message = try op.attributes.string("message", "a convert-time assumption does not hold for this input")
        let (count, bytes) = (c.count, y.byteCount)
        return BoundStep { slots in
            let pc = UnsafeRawPointer(c.pointer(slots)).assumingMemoryBound(to: UInt8.self)
            for i in 0 ..< count where pc[i] == 0 { throw OpError(message) }
            let px = x.pointer(slots), py = y.pointer(slots)
            if px != py { py.copyMemory(from: px, byteCount: bytes) }
        }
    }
}

/// `non_zero`: the coordinates of the nonzero elements, `[rank, count]` int64 in row-major
/// order. The count comes from the data: a plan is bound to one count and a run finding
/// another throws ``PlanMismatch``; generic runs call ``evaluate(_:)``.
struct NonZeroStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    /// The bits that make an element nonzero (floats: any but the sign).
    static func mask(_ dtype: DataType) -> UInt64 {
        switch (dtype.bitWidth, dtype.isFloatingPoint) {
        case (64, true): return ~(1 << 63)
        case (32, true): return 0x7fff_ffff
        case (16, true): return 0x7fff
        default: return ~0
        }
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, !x.dtype.isSubByte, outputs.count == 1, outputs[0].dtype == .int64 else { throw OpError("needs one input") }
        let rank = x.shape.count, y = outputs[0], total = x.count
        guard rank > 0, y.shape.count == 2, y.shape[0] == rank else { throw OpError("the plan's output \(y.shape) does not fit rank \(rank)") }
        let planned = y.shape[1], size = x.dtype.bitWidth / 8, mask = Self.mask(x.dtype), shape = x.shape.map { Int64($0) }
        context.scratch(max(total, 1) * 8)
        let scratchSlot = context.scratchSlot
        return BoundStep { slots in
            let flat = slots[scratchSlot].assumingMemoryBound(to: Int64.self)
            let found = kiln_non_zero_flat__scalar(x.pointer(slots), size, mask, total, flat)
            guard found == planned else { throw PlanMismatch(reason: "found \(found) nonzero elements where the plan has \(planned)") }
            kiln_non_zero_coords__scalar(flat, found, rank, shape, y.pointer(slots).assumingMemoryBound(to: Int64.self))
        }
    }

    func evaluate(_ inputs: [NDArray?]) throws -> [NDArray]? {
        guard let x = inputs.first??.contiguous(), x.rank > 0, !x.scalarType.isSubByte else { return nil }
        var flat = [Int64](repeating: 0, count: max(x.elementCount, 1))
        let found = withExtendedLifetime(x) {
            kiln_non_zero_flat__scalar(x.unsafeBase, x.scalarType.bitWidth / 8, Self.mask(x.scalarType), x.elementCount, &flat)
        }
        let y = NDArray(uninitializedShape: [x.rank, found], scalarType: .int64)
        kiln_non_zero_coords__scalar(flat, found, x.rank, x.shape.map { Int64($0) }, y.unsafeBase.assumingMemoryBound(to: Int64.self))
        return [y]
    }
}
