import KilnFormat

/// Data movement and shape ops, for any element type: each computes the source
/// index of every output element and gathers.
enum Movement {
    static func reshape(_ x: NDArray, _ target: [Int], allowZero: Bool) throws -> NDArray {
        let dims = try OpSet.reshape(x.shape.map { .size($0) }, target, allowZero: allowZero)
        var shape = dims.map { $0.size ?? -1 }
        if let hole = shape.firstIndex(of: -1) {
            let rest = shape.enumerated().filter { $0.offset != hole }.map(\.element).reduce(1, *)
            guard rest > 0, x.elementCount % rest == 0 else { throw OpError("cannot reshape \(x.shape) to \(target)") }
            shape[hole] = x.elementCount / rest
        }
        guard elementCount(shape) == x.elementCount, shape.allSatisfy({ $0 >= 0 }) else { throw OpError("cannot reshape \(x.shape) to \(target)") }
        return x.reshaped(shape)
    }

    static func transpose(_ x: NDArray, _ perm: [Int]) throws -> NDArray {
        guard perm.sorted() == Array(0 ..< x.rank) else { throw OpError("perm \(perm) is not a permutation of 0..<\(x.rank)") }
        return x.transposed(perm).contiguous()
    }

    static func concat(_ xs: [NDArray], axis: Int) throws -> NDArray {
        let first = xs[0]
        let a = try OpSet.normalize(axis: axis, rank: first.rank)
        for x in xs {
            guard x.scalarType == first.scalarType, x.rank == first.rank,
                  x.shape.indices.allSatisfy({ $0 == a || x.shape[$0] == first.shape[$0] }) else {
                throw OpError("concat inputs \(xs.map { "\($0.shape)" }.joined(separator: ", ")) do not fit along axis \(a)")
            }
        }
        var shape = first.shape
        shape[a] = xs.reduce(0) { $0 + $1.shape[a] }
        let outer = shape[..<a].reduce(1, *), size = first.elementSize
        var out = NDArray(shape: shape, scalarType: first.scalarType)
        out.withUnsafeMutableBytes { dst in
            var at = 0
            for o in 0 ..< outer {
                for x in xs {
                    let chunk = x.shape[a...].reduce(1, *) * size
                    if chunk > 0 {
                        (dst.baseAddress! + at).copyMemory(from: x.contiguousElements!.baseAddress! + o * chunk, byteCount: chunk)
                    }
                    at += chunk
                }
            }
        }
        return out
    }

    static func split(_ x: NDArray, axis: Int, sizes: [Int]) throws -> [NDArray] {
        guard sizes.reduce(0, +) == x.shape[axis], sizes.allSatisfy({ $0 >= 0 }) else {
            throw OpError("split sizes \(sizes) do not add up to \(x.shape[axis])")
        }
        var start = 0
        return try sizes.map { n in
            defer { start += n }
            return try slice(x, starts: [start], ends: [start + n], axes: [axis], steps: [1])
        }
    }

    static func slice(_ x: NDArray, starts: [Int], ends: [Int], axes: [Int]?, steps: [Int]?) throws -> NDArray {
        let axes = try (axes ?? Array(0 ..< starts.count)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
        let steps = steps ?? Array(repeating: 1, count: starts.count)
        guard ends.count == starts.count, axes.count == starts.count, steps.count == starts.count else {
            throw OpError("starts, ends, axes and steps must have equal lengths")
        }
        var begin = [Int](repeating: 0, count: x.rank), step = [Int](repeating: 1, count: x.rank), shape = x.shape
        for (k, a) in axes.enumerated() {
            guard steps[k] != 0 else { throw OpError("slice step cannot be 0") }
            let r = OpSet.sliceRange(start: starts[k], end: ends[k], step: steps[k], size: x.shape[a])
            begin[a] = r.start
            step[a] = OpSet.sliceStep(steps[k], count: r.count)
            shape[a] = r.count
        }
        let strides = stridesOf(x.shape)
        let base = zip(begin, strides).reduce(0) { $0 + $1.0 * $1.1 }
        // Trailing axes taken whole, plus one more with unit step, are contiguous in x: copy
        // them as one run per index of the axes before.
        var d = x.rank - 1, run = 1
        while d >= 0, step[d] == 1, begin[d] == 0, shape[d] == x.shape[d] { run *= shape[d]; d -= 1 }
        if d >= 0, step[d] == 1 { run *= shape[d]; d -= 1 }
        if d < x.rank - 1, run > 0 {
            let src = x.contiguous()
            defer { withExtendedLifetime(src) {} }
            let size = x.elementSize, from = src.contiguousElements!.baseAddress!
            var out = NDArray(shape: shape, scalarType: x.scalarType)
            let outer = Array(shape[...d]), outerStrides = Array(zip(step, strides).map { $0 * $1 }[...d])
            out.withUnsafeMutableBytes { dst in
                forEachIndex(outer, [outerStrides]) { flat, off in
                    (dst.baseAddress! + flat * run * size).copyMemory(from: from + (base + off[0]) * size, byteCount: run * size)
                }
            }
            return out
        }
        var indices: [Int] = []
        indices.reserveCapacity(shape.reduce(1, *))
        forEachIndex(shape, [zip(step, strides).map { $0 * $1 }]) { _, off in indices.append(base + off[0]) }
        return gatherFlat(x, indices, shape: shape)
    }

    static func indexList(_ t: NDArray, size: Int) throws -> [Int] {
        try t.intValues().map { i in
            let j = i < 0 ? i + size : i
            guard j >= 0, j < size else { throw OpError("index \(i) is out of range for a dim of \(size)") }
            return j
        }
    }

    static func gather(_ x: NDArray, _ indices: NDArray, axis: Int) throws -> NDArray {
        let idx = try indexList(indices, size: x.shape[axis])
        let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *), n = x.shape[axis]
        let shape = Array(x.shape[..<axis]) + indices.shape + Array(x.shape[(axis + 1)...])
        if inner > 1 {
            // Copy whole rows: the common embedding-lookup case.
            let size = x.elementSize * inner
            var out = NDArray(shape: shape, scalarType: x.scalarType)
            let src = x.contiguousElements!.baseAddress!
            out.withUnsafeMutableBytes { dst in
                var at = 0
                for o in 0 ..< outer {
                    for i in idx {
                        (dst.baseAddress! + at).copyMemory(from: src + (o * n + i) * size, byteCount: size)
                        at += size
                    }
                }
            }
            return out
        }
        var map: [Int] = []
        map.reserveCapacity(outer * idx.count)
        for o in 0 ..< outer { for i in idx { map.append(o * n + i) } }
        return gatherFlat(x, map, shape: shape)
    }

    static func gatherElements(_ x: NDArray, _ indices: NDArray, axis: Int) throws -> NDArray {
        guard indices.rank == x.rank else { throw OpError("indices must have the data's rank") }
        let idx = try indexList(indices, size: x.shape[axis])
        let strides = stridesOf(x.shape)
        var map = [Int](repeating: 0, count: idx.count)
        var failure: OpError?
        forEachIndex(indices.shape, [stridesOf(x.shape).enumerated().map { $0.offset == axis ? 0 : $0.element }]) { i, off in
            map[i] = off[0] + idx[i] * strides[axis]
        }
        for d in 0 ..< x.rank where d != axis && indices.shape[d] > x.shape[d] {
            failure = OpError("indices dim \(d) (\(indices.shape[d])) exceeds data dim \(x.shape[d])")
        }
        if let failure { throw failure }
        return gatherFlat(x, map, shape: indices.shape)
    }

    static func gatherND(_ x: NDArray, _ indices: NDArray, batchDims b: Int) throws -> NDArray {
        guard indices.rank >= 1, let k = indices.shape.last, b + k <= x.rank else { throw OpError("gather_nd indices do not fit the data") }
        let idx = try indices.intValues()
        let batchCount = x.shape[..<b].reduce(1, *)
        let slice = x.shape[(b + k)...].reduce(1, *)
        let tuples = indices.elementCount / max(k, 1)
        let perBatch = tuples / max(batchCount, 1)
        let strides = stridesOf(x.shape)
        var map: [Int] = []
        map.reserveCapacity(tuples * slice)
        for t in 0 ..< tuples {
            let batch = t / max(perBatch, 1)
            var base = batch * (b > 0 ? strides[b - 1] : 0)
            for j in 0 ..< k {
                var i = idx[t * k + j]
                let n = x.shape[b + j]
                if i < 0 { i += n }
                guard i >= 0, i < n else { throw OpError("gather_nd index \(idx[t * k + j]) out of range for a dim of \(n)") }
                base += i * strides[b + j]
            }
            for s in 0 ..< slice { map.append(base + s) }
        }
        return gatherFlat(x, map, shape: Array(indices.shape.dropLast()) + Array(x.shape[(b + k)...]))
    }

    static func scatterND(_ x: NDArray, _ indices: NDArray, _ updates: NDArray, reduction: String) throws -> NDArray {
        guard let k = indices.shape.last, k <= x.rank else { throw OpError("scatter_nd indices do not fit the data") }
        guard x.scalarType == updates.scalarType else { throw OpError("scatter_nd updates must match the data's dtype") }
        guard ["none", "add", "mul", "max", "min"].contains(reduction) else { throw OpError("unknown reduction '\(reduction)'") }
        let idx = try indices.intValues()
        let strides = stridesOf(x.shape)
        let slice = x.shape[k...].reduce(1, *)
        let tuples = indices.elementCount / max(k, 1)
        guard updates.elementCount == tuples * slice else { throw OpError("scatter_nd updates have the wrong size") }
        let asFloat = x.scalarType == .float32
        var out = x
        let size = x.elementSize
        let src = updates.contiguousElements!.baseAddress!
        try out.withUnsafeMutableBytes { dst in
            for t in 0 ..< tuples {
                var base = 0
                for j in 0 ..< k {
                    var i = idx[t * k + j]
                    if i < 0 { i += x.shape[j] }
                    guard i >= 0, i < x.shape[j] else { throw OpError("scatter_nd index out of range") }
                    base += i * strides[j]
                }
                for s in 0 ..< slice {
                    let d = dst.baseAddress! + (base + s) * size, u = src + (t * slice + s) * size
                    if reduction == "none" || !asFloat {
                        d.copyMemory(from: u, byteCount: size)
                    } else {
                        let a = d.load(as: Float.self), b = u.load(as: Float.self)
                        let r: Float = reduction == "add" ? a + b : reduction == "mul" ? a * b : reduction == "max" ? max(a, b) : min(a, b)
                        d.storeBytes(of: r, as: Float.self)
                    }
                }
            }
        }
        return out
    }

    static func expand(_ x: NDArray, _ shape: [Int]) throws -> NDArray {
        let out = try checkedShape(try broadcastShapes([x.shape, shape]))
        var map: [Int] = []
        map.reserveCapacity(out.reduce(1, *))
        forEachIndex(out, [broadcastStrides(x.shape, to: out)]) { _, off in map.append(off[0]) }
        return gatherFlat(x, map, shape: out)
    }

    static func tile(_ x: NDArray, _ repeats: [Int]) throws -> NDArray {
        guard repeats.count == x.rank, repeats.allSatisfy({ $0 >= 0 }) else { throw OpError("repeats must have \(x.rank) non-negative entries") }
        guard repeats.allSatisfy({ $0 <= maximumElements }) else { throw OpError("repeats \(repeats) are too large") }
        let shape = try checkedShape(zip(x.shape, repeats).map { $0 * $1 })
        let strides = stridesOf(x.shape)
        var map: [Int] = []
        map.reserveCapacity(shape.reduce(1, *))
        var index = [Int](repeating: 0, count: x.rank)
        for _ in 0 ..< shape.reduce(1, *) {
            map.append((0 ..< x.rank).reduce(0) { $0 + (index[$1] % x.shape[$1]) * strides[$1] })
            var d = x.rank - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < shape[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        return gatherFlat(x, map, shape: shape)
    }

    /// Pads with a constant, or by reflecting, repeating the edge, or wrapping.
    static func pad(_ x: NDArray, pads: [Int], axes: [Int]?, mode: String, value: NDArray?) throws -> NDArray {
        let axes = try (axes ?? Array(0 ..< x.rank)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
        guard pads.count == 2 * axes.count else { throw OpError("pads must have \(2 * axes.count) entries") }
        var begin = [Int](repeating: 0, count: x.rank), end = begin
        for (k, a) in axes.enumerated() {
            begin[a] = pads[k]
            end[a] = pads[k + axes.count]
        }
        guard pads.allSatisfy({ abs($0) <= maximumElements }) else { throw OpError("pads \(pads) are too large") }
        let shape = x.shape.indices.map { x.shape[$0] + begin[$0] + end[$0] }
        guard shape.allSatisfy({ $0 >= 0 }) else { throw OpError("pads \(pads) remove more than the input has") }
        _ = try checkedShape(shape)
        let strides = stridesOf(x.shape)
        // Source index per output element; -1 marks the constant.
        var map: [Int] = []
        map.reserveCapacity(shape.reduce(1, *))
        var index = [Int](repeating: 0, count: x.rank)
        for _ in 0 ..< shape.reduce(1, *) {
            var src = 0
            for d in 0 ..< x.rank {
                var i = index[d] - begin[d]
                let n = x.shape[d]
                if i < 0 || i >= n {
                    switch mode {
                    case "constant": src = -1
                    case "edge": i = i < 0 ? 0 : n - 1
                    case "wrap": i = ((i % n) + n) % n
                    default:
                        if n == 1 { i = 0 } else {
                            let period = 2 * (n - 1)
                            i = ((i % period) + period) % period
                            if i >= n { i = period - i }
                        }
                    }
                    if src < 0 { break }
                    if n == 0 { throw OpError("cannot \(mode)-pad an empty dim") }
                }
                src += i * strides[d]
            }
            map.append(src)
            var d = x.rank - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < shape[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        var fill = NDArray(shape: [1], scalarType: x.scalarType)
        if let value, value.elementCount >= 1 {
            let v = value.scalarType == x.scalarType ? value : try Elementwise.cast(value, to: x.scalarType)
            fill = v.reshaped([v.elementCount])
        }
        // Gather from [x…, fill] so the constant is the last element.
        let combined = try concat([x.reshaped([x.elementCount]), try slice(fill, starts: [0], ends: [1], axes: [0], steps: [1])], axis: 0)
        return gatherFlat(combined, map.map { $0 < 0 ? x.elementCount : $0 }, shape: shape)
    }

    static func depthToSpace(_ x: NDArray, blocksize b: Int, mode: String) throws -> NDArray {
        guard x.rank == 4, b >= 1, x.shape[1] % (b * b) == 0 else { throw OpError("depth_to_space needs [N, C, H, W] with C divisible by \(b * b)") }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let oc = c / (b * b)
        let r = mode == "CRD"
            ? x.reshaped([n, oc, b, b, h, w]).transposed([0, 1, 4, 2, 5, 3])
            : x.reshaped([n, b, b, oc, h, w]).transposed([0, 3, 4, 1, 5, 2])
        return r.contiguous().reshaped([n, oc, h * b, w * b])
    }

    /// Output channel `(b1·b + b2)·C + c` (DCR) or `c·b² + b1·b + b2` (CRD) for input `(c, h'·b + b1, w'·b + b2)`.
    static func spaceToDepth(_ x: NDArray, blocksize b: Int, crd: Bool = false) throws -> NDArray {
        guard x.rank == 4, b >= 1, x.shape[2] % b == 0, x.shape[3] % b == 0 else { throw OpError("space_to_depth needs H and W divisible by \(b)") }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let blocks = x.reshaped([n, c, h / b, b, w / b, b])
        return (crd ? blocks.transposed([0, 1, 3, 5, 2, 4]) : blocks.transposed([0, 3, 5, 1, 2, 4])).contiguous().reshaped([n, c * b * b, h / b, w / b])
    }

    static func range(_ start: NDArray, _ limit: NDArray, _ delta: NDArray) throws -> NDArray {
        let (s, l, d) = (try start.doubleValues(), try limit.doubleValues(), try delta.doubleValues())
        guard s.count == 1, l.count == 1, d.count == 1, d[0] != 0 else { throw OpError("range needs scalar start, limit and a nonzero delta") }
        let count = max(0, Int(((l[0] - s[0]) / d[0]).rounded(.up)))
        guard count <= maximumElements else { throw OpError("range of \(count) elements is too large") }
        let values = (0 ..< count).map { s[0] + Double($0) * d[0] }
        switch start.scalarType {
        case .float32: return NDArray(shape: [count], scalars: values.map { Float($0) })
        case .int32: return NDArray(shape: [count], scalars: values.map { Int32($0) })
        case .int64: return NDArray(shape: [count], scalars: values.map { Int64($0) })
        default: throw OpError("range does not support \(start.scalarType.rawValue)")
        }
    }

    static func constantOfShape(_ shape: [Int], value: TensorLiteral?) throws -> NDArray {
        _ = try checkedShape(shape)
        let literal = value ?? TensorLiteral(dtype: .float32, shape: [1], bytes: [0, 0, 0, 0])
        let one = try Literal.array(literal)
        return try expand(one.reshaped([]), shape)
    }
}

/// Inline tensor literals as arrays (float16/bfloat16 widened to float32).
enum Literal {
    static func array(_ t: TensorLiteral) throws -> NDArray {
        guard !t.dtype.isSubByte, let n = elementCount(t.shape), t.dtype.byteCount(elements: n) == t.bytes.count else {
            throw OpError("literal holds \(t.bytes.count) bytes, which do not fit \(t.dtype.rawValue)\(t.shape)")
        }
        let raw = NDArray(shape: t.shape, scalarType: t.dtype, borrowing: ByteStorage(t.bytes))
        return try Weights.widened(raw)
    }
}

extension Movement {
    /// `trilu`: keeps the upper (`j - i >= k`) or lower (`j - i <= k`) triangle of each of the
    /// innermost matrices, zeroing the rest.
    static func trilu(_ x: NDArray, upper: Bool, k: Int) throws -> NDArray {
        guard x.rank >= 2 else { throw OpError("trilu needs rank ≥ 2") }
        var out = x.contiguous()
        let (rows, cols) = (x.shape[x.rank - 2], x.shape[x.rank - 1])
        let size = x.scalarType.bitWidth / 8, matrices = x.elementCount / max(rows * cols, 1)
        out.withUnsafeMutableBytes { raw in
            for m in 0 ..< (rows * cols == 0 ? 0 : matrices) {
                for i in 0 ..< rows {
                    for j in 0 ..< cols where upper ? j - i < k : j - i > k {
                        let at = ((m * rows + i) * cols + j) * size
                        for b in 0 ..< size { raw[at + b] = 0 }
                    }
                }
            }
        }
        return out
    }
}
