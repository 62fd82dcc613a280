import KilnFormat

/// Ops that place values by index: scatter_elements, one_hot, eye_like, compress, hardmax.
enum Indexing {
    /// Row-major strides of `shape`, in elements.
    static func strides(_ shape: [Int]) -> [Int] {
        var s = [Int](repeating: 1, count: shape.count)
        for i in stride(from: shape.count - 2, through: 0, by: -1) { s[i] = s[i + 1] * shape[i + 1] }
        return s
    }

    /// An index along a dim of `n`, negative counted from the end; out of range is an error.
    static func wrap(_ i: Int, _ n: Int, _ what: String) throws -> Int {
        let j = i < 0 ? i + n : i
        guard j >= 0, j < n else { throw OpError("\(what) index \(i) is out of range for a dim of \(n)") }
        return j
    }

    /// `scatter_elements`: a copy of `data` with `updates[i]` written (or combined by
    /// `reduction`) at `i` with its `axis` coordinate replaced by `indices[i]`.
    static func scatterElements(_ data: NDArray, _ indices: NDArray, _ updates: NDArray, axis: Int, reduction: String) throws -> NDArray {
        guard indices.shape == updates.shape, indices.rank == data.rank else { throw OpError("indices and updates must have one shape, of the data's rank") }
        for (d, (n, m)) in zip(indices.shape, data.shape).enumerated() where d != axis && n > m {
            throw OpError("indices dim \(d) (\(n)) is larger than the data's (\(m))")
        }
        let idx = try indices.intValues()
        let ds = strides(data.shape), us = strides(indices.shape)
        // The flat data offset each update goes to.
        var targets = [Int](repeating: 0, count: idx.count)
        for flat in 0 ..< idx.count {
            var rest = flat, offset = 0
            for d in 0 ..< data.rank {
                let coordinate = rest / us[d]
                rest %= us[d]
                offset += (d == axis ? try wrap(idx[flat], data.shape[axis], "scatter_elements") : coordinate) * ds[d]
            }
            targets[flat] = offset
        }
        func typed<T: NDArrayScalar & Comparable & Numeric>(_: T.Type) throws -> NDArray {
            var out = data.contiguous()
            let u = try updates.contiguous().values(T.self)
            try out.mutableView(as: T.self) { p in
                for (k, t) in targets.enumerated() {
                    switch reduction {
                    case "none": p[t] = u[k]
                    case "add": p[t] += u[k]
                    case "mul": p[t] *= u[k]
                    case "max": p[t] = max(p[t], u[k])
                    case "min": p[t] = min(p[t], u[k])
                    default: throw OpError("reduction must be none, add, mul, max or min, got \"\(reduction)\"")
                    }
                }
            }
            return out
        }
        switch data.scalarType {
        case .float32: return try typed(Float.self)
        case .float16: return try typed(Float16.self)
        case .float64: return try typed(Double.self)
        case .int64: return try typed(Int64.self)
        case .int32: return try typed(Int32.self)
        case .int16: return try typed(Int16.self)
        case .int8: return try typed(Int8.self)
        case .uint8: return try typed(UInt8.self)
        case .uint16: return try typed(UInt16.self)
        case .uint32: return try typed(UInt32.self)
        case .uint64: return try typed(UInt64.self)
        case .bool where reduction == "none":
            var out = data.contiguous()
            let u = try updates.contiguous().values(Bool.self)
            out.mutableView(as: Bool.self) { p in for (k, t) in targets.enumerated() { p[t] = u[k] } }
            return out
        default: throw OpError("scatter_elements does not support \(data.scalarType.rawValue)")
        }
    }

    /// `one_hot`: `values[1]` where the new `axis` coordinate equals the index (negative
    /// indices counted from `depth`), `values[0]` elsewhere; indices out of range give a row of `values[0]`.
    static func oneHot(_ indices: NDArray, _ values: NDArray, depth: Int, axis: Int) throws -> NDArray {
        guard values.elementCount == 2 else { throw OpError("values must hold two elements (off, on)") }
        guard depth >= 0 else { throw OpError("depth must be ≥ 0") }
        let idx = try indices.scalarType.isFloatingPoint ? indices.doubleValues().map { Int($0.rounded(.towardZero)) } : indices.intValues()
        let at = try OpSet.normalize(axis: axis, rank: indices.rank + 1)
        var shape = indices.shape
        shape.insert(depth, at: at)
        let outer = indices.shape[..<at].reduce(1, *), inner = indices.shape[at...].reduce(1, *)
        let size = values.scalarType.bitWidth / 8
        let v = values.contiguous().bytes
        var out = NDArray(shape: try checkedShape(shape), scalarType: values.scalarType)
        out.withUnsafeMutableBytes { raw in
            for o in 0 ..< outer {
                for d in 0 ..< depth {
                    for i in 0 ..< inner {
                        let k = idx[o * inner + i], hot = (k < 0 ? k + depth : k) == d
                        let dst = ((o * depth + d) * inner + i) * size
                        for b in 0 ..< size { raw[dst + b] = v[(hot ? size : 0) + b] }
                    }
                }
            }
        }
        return out
    }

    /// `eye_like`: ones on the diagonal shifted by `k` (above for k > 0), zeros elsewhere.
    static func eyeLike(shape: [Int], dtype: DataType, k: Int) throws -> NDArray {
        guard shape.count == 2 else { throw OpError("eye_like needs a 2-D input") }
        let ones = try Elementwise.cast(NDArray(scalar: Float(1)), to: dtype).bytes
        var out = NDArray(shape: shape, scalarType: dtype)
        // A diagonal past either edge is all zeros; clamped to the edges, `i + k` cannot overflow.
        let k = min(max(k, -shape[0]), shape[1])
        out.withUnsafeMutableBytes { raw in
            for i in 0 ..< shape[0] {
                let j = i + k
                guard j >= 0, j < shape[1] else { continue }
                for (b, byte) in ones.enumerated() { raw[(i * shape[1] + j) * ones.count + b] = byte }
            }
        }
        return out
    }

    /// `compress`: the slices along `axis` (of the flattened input when `axis` is nil) whose
    /// condition is true; a condition shorter than the dim leaves the rest out.
    static func compress(_ x: NDArray, _ condition: NDArray, axis: Int?) throws -> NDArray {
        let c = try condition.values(Bool.self)
        let input = axis == nil ? x.contiguous().reshaped([x.elementCount]) : x.contiguous()
        let a = try OpSet.normalize(axis: axis ?? 0, rank: input.rank)
        let n = input.shape[a]
        guard c.count <= n else { throw OpError("condition has \(c.count) entries for a dim of \(n)") }
        let kept = c.indices.filter { c[$0] }
        let outer = input.shape[..<a].reduce(1, *), inner = input.shape[(a + 1)...].reduce(1, *)
        let size = x.scalarType.bitWidth / 8
        var shape = input.shape
        shape[a] = kept.count
        let src = input.bytes
        var out = NDArray(shape: shape, scalarType: x.scalarType)
        out.withUnsafeMutableBytes { raw in
            var dst = 0
            for o in 0 ..< outer {
                for k in kept {
                    let from = (o * n + k) * inner * size
                    for b in 0 ..< inner * size { raw[dst + b] = src[from + b] }
                    dst += inner * size
                }
            }
        }
        return out
    }

    /// `nll_loss`: `−x[n, target, …] · weight[target]` per element (0 where the target is
    /// `ignore`), then none, the sum, or the weighted mean (divided by the weights summed).
    static func nllLoss(_ x: NDArray, _ target: NDArray, _ weight: NDArray?, reduction: String, ignore: Int?) throws -> NDArray {
        guard x.scalarType == .float32, x.rank >= 2, target.rank == x.rank - 1 else { throw OpError("nll_loss needs float x [N, C, …] and target [N, …]") }
        let (n, c) = (x.shape[0], x.shape[1]), inner = x.shape[2...].reduce(1, *)
        guard target.shape == [n] + Array(x.shape[2...]) else { throw OpError("target \(target.shape) does not fit x \(x.shape)") }
        let w = try weight.map { w -> [Float] in
            guard w.elementCount == c else { throw OpError("weight has \(w.elementCount) values for \(c) classes") }
            return try Elementwise.cast(w, to: .float32).scalars(as: Float.self)
        }
        let t = try target.intValues(), p = try x.contiguous().values(Float.self)
        var losses = [Float](repeating: 0, count: t.count)
        var weightSum: Float = 0
        for i in 0 ..< n {
            for k in 0 ..< inner {
                let at = i * inner + k, cls = t[at]
                if cls == ignore { continue }
                guard cls >= 0, cls < c else { throw OpError("target \(cls) is out of range for \(c) classes") }
                let wt = w?[cls] ?? 1
                losses[at] = -p[(i * c + cls) * inner + k] * wt
                weightSum += wt
            }
        }
        switch reduction {
        case "none": return NDArray(shape: target.shape, scalars: losses)
        case "sum": return NDArray(shape: [], scalars: [losses.reduce(0, +)])
        default: return NDArray(shape: [], scalars: [weightSum == 0 ? .nan : losses.reduce(0, +) / weightSum])
        }
    }

    /// `hardmax`: 1 at the first largest element along `axis`, 0 elsewhere.
    static func hardmax(_ x: NDArray, axis: Int) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("hardmax needs float32 input") }
        let a = try OpSet.normalize(axis: axis, rank: x.rank)
        let n = x.shape[a], inner = x.shape[(a + 1)...].reduce(1, *), outer = x.shape[..<a].reduce(1, *)
        let c = x.contiguous()
        return try withExtendedLifetime(c) {
            let p = try c.f32
            return NDArray.make(x.shape, Float.self) { out in
                for o in 0 ..< outer {
                    for i in 0 ..< inner where n > 0 {
                        var best = 0
                        for k in 1 ..< n where p[(o * n + k) * inner + i] > p[(o * n + best) * inner + i] { best = k }
                        out[(o * n + best) * inner + i] = 1
                    }
                }
            }
        }
    }
}
