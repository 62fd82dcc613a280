/// Data movement and shape ops.
extension OpSet {
    /// Resolves a slice's start/end/step for one dim of size `n` (ONNX clamping rules).
    public static func sliceRange(start: Int, end: Int, step: Int, size n: Int) -> (start: Int, count: Int) {
        var s = start < 0 ? start &+ n : start
        var e = end < 0 ? end &+ n : end
        if step > 0 {
            s = min(max(s, 0), n)
            e = min(max(e, 0), n)
            return (s, e > s ? (e - s - 1) / step + 1 : 0)
        } else {
            s = min(max(s, -1), n - 1)
            e = min(max(e, -1), n - 1)
            let magnitude = step == Int.min ? Int.max : -step
            return (s, s > e ? (s - e - 1) / magnitude + 1 : 0)
        }
    }

    /// The step a slice moves by along a dim it takes `count` elements of: `step`, or 1 when it
    /// takes at most one. ONNX allows any step (a huge one takes just the first element); a step
    /// past the dim's size means nothing then, and times a stride it could overflow. Taking two
    /// or more, a step is at most the dim's size, so step × stride stays within the tensor.
    public static func sliceStep(_ step: Int, count: Int) -> Int { count > 1 ? step : 1 }

    /// Flatten's split point: `axis` in `-rank ... rank`, negative counting from the end.
    public static func flattenAxis(_ axis: Int, rank: Int) throws -> Int {
        let a = axis < 0 ? axis + rank : axis
        guard a >= 0, a <= rank else { throw OpError("axis \(axis) is out of range for flatten of rank \(rank)") }
        return a
    }

    /// The interpolation modes of `resize` (`mode`).
    public static let resizeModes: Set<String> = ["nearest", "linear", "cubic"]
    /// The modes of `pad`.
    public static let padModes: Set<String> = ["constant", "reflect", "edge", "wrap"]

    static var tensorOps: [OpSchema] {
        [
            op("constant", [], ["value!": .tensor], groups: .generator) { ctx in
                guard case .tensor(let t)? = ctx.attributes["value"] else { throw OpError("value must be a tensor") }
                guard let n = elementCount(t.shape), t.dtype.byteCount(elements: n) == t.bytes.count else {
                    throw OpError("value holds \(t.bytes.count) bytes, which do not fit \(t.dtype.rawValue)\(t.shape)")
                }
                return [TensorType(t.dtype, t.shape.map { .size($0) })]
            },
            op("reshape", ["x", "shape?"], ["shape": .ints, "allowzero": .int], groups: .view, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                if let target = try ctx.attributes.ints("shape") {
                    return [TensorType(x.dtype, try reshape(x.shape, target, allowZero: try ctx.attributes.int("allowzero", 0) != 0))]
                }
                guard ctx.optionalInput(1) != nil else { throw OpError("reshape needs a shape attribute or input") }
                return [staticLength(ctx.optionalInput(1)).map { TensorType(x.dtype, unknownDims($0)) }]
            },
            op("transpose", ["x"], ["perm": .ints], groups: .copy) { ctx in
                let x = try ctx.input(0)
                let perm = try ctx.attributes.ints("perm") ?? Array((0 ..< x.rank).reversed())
                guard perm.count == x.rank, Set(perm) == Set(0 ..< x.rank) else {
                    throw OpError("perm must be a permutation of 0..<\(x.rank)")
                }
                return [TensorType(x.dtype, perm.map { x.shape[$0] })]
            },
            op("flatten", ["x"], ["axis": .int], groups: .view) { ctx in
                let x = try ctx.input(0)
                let a = try flattenAxis(try ctx.attributes.int("axis", 1), rank: x.rank)
                return [TensorType(x.dtype, [product(x.shape[..<a]), product(x.shape[a...])])]
            },
            op("squeeze", ["x", "axes?"], ["axes": .ints], groups: .view, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                if let axes = try ctx.attributes.ints("axes") {
                    let set = Set(try axes.map { try normalize(axis: $0, rank: x.rank) })
                    for a in set { if let n = x.shape[a].size, n != 1 { throw OpError("cannot squeeze dim \(a) of size \(n)") } }
                    return [TensorType(x.dtype, x.shape.enumerated().filter { !set.contains($0.offset) }.map(\.element))]
                }
                if let n = staticLength(ctx.optionalInput(1)) {
                    guard n <= x.rank else { throw OpError("squeezes \(n) axes of a rank-\(x.rank) input") }
                    return [TensorType(x.dtype, unknownDims(x.rank - n))]
                }
                if ctx.optionalInput(1) != nil { return [nil] }
                guard x.shape.allSatisfy({ $0.size != nil }) else { return [nil] }
                return [TensorType(x.dtype, x.shape.filter { $0 != .size(1) })]
            },
            op("unsqueeze", ["x", "axes?"], ["axes": .ints], groups: .view, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                guard let axes = try ctx.attributes.ints("axes") else {
                    return [staticLength(ctx.optionalInput(1)).map { TensorType(x.dtype, unknownDims(x.rank + $0)) }]
                }
                let rank = x.rank + axes.count
                let set = Set(try axes.map { try normalize(axis: $0, rank: rank) })
                guard set.count == axes.count else { throw OpError("unsqueeze axes repeat") }
                var source = x.shape.makeIterator()
                return [TensorType(x.dtype, (0 ..< rank).map { set.contains($0) ? .size(1) : source.next()! })]
            },
            op("concat", ["x"], variadic: true, ["axis!": .int], groups: .copy) { ctx in
                let all = try ctx.inputs.indices.map { try ctx.input($0) }
                try sameDType(all)
                let rank = all[0].rank
                guard all.allSatisfy({ $0.rank == rank }) else { throw OpError("concat inputs must have equal ranks") }
                let a = try axis(ctx, default: 0, rank: rank)
                var dims = all[0].shape
                // The joined dim is the sum of the parts: a size, or an expression of their symbols
                // (a cache `past_sequence_length` long grown by `sequence_length` rows).
                var total: DimExpression? = DimExpression(constant: 0)
                for t in all {
                    for i in 0 ..< rank where i != a {
                        try requireEqual(dims[i], t.shape[i], "concat dim \(i)")
                        if dims[i].size == nil, t.shape[i].size != nil { dims[i] = t.shape[i] }
                    }
                    if let part = DimExpression(t.shape[a]), let s = total { total = s + part } else { total = nil }
                }
                dims[a] = total?.dimension ?? .unknown
                return [TensorType(all[0].dtype, dims)]
            },
            op("split", ["x", "split?"], outputs: 1 ... Int.max, ["axis": .int, "split": .ints, "num_outputs": .int], groups: .copy, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                let a = try axis(ctx, default: 0, rank: x.rank)
                let n = ctx.outputCount
                var sizes: [Int]?
                if let s = try ctx.attributes.ints("split") {
                    guard s.count == n else { throw OpError("split has \(s.count) sizes for \(n) outputs") }
                    sizes = s
                } else if ctx.optionalInput(1) == nil, let total = x.shape[a].size {
                    let chunk = (total + n - 1) / n
                    sizes = (0 ..< n).map { min(chunk, max(0, total - $0 * chunk)) }
                }
                return (0 ..< n).map { i in
                    var dims = x.shape
                    dims[a] = sizes.map { .size($0[i]) } ?? .unknown
                    return TensorType(x.dtype, dims)
                }
            },
            op("slice", ["x", "starts?", "ends?", "axes?", "steps?"], ["starts": .ints, "ends": .ints, "axes": .ints, "steps": .ints], groups: .copy, shapeInputs: [1, 2, 3, 4]) { ctx in
                let x = try ctx.input(0)
                guard let starts = try ctx.attributes.ints("starts"), let ends = try ctx.attributes.ints("ends") else {
                    return [TensorType(x.dtype, unknownDims(x.rank))]
                }
                let axes = try ctx.attributes.ints("axes") ?? Array(0 ..< starts.count)
                let steps = try ctx.attributes.ints("steps") ?? Array(repeating: 1, count: starts.count)
                guard ends.count == starts.count, axes.count == starts.count, steps.count == starts.count else {
                    throw OpError("starts, ends, axes and steps must have equal lengths")
                }
                var dims = x.shape
                for (k, ax) in axes.enumerated() {
                    let a = try normalize(axis: ax, rank: x.rank)
                    guard steps[k] != 0 else { throw OpError("slice step cannot be 0") }
                    if let n = x.shape[a].size {
                        dims[a] = .size(sliceRange(start: starts[k], end: ends[k], step: steps[k], size: n).count)
                    } else {
                        dims[a] = .unknown
                    }
                }
                return [TensorType(x.dtype, dims)]
            },
            op("gather", ["data", "indices"], ["axis": .int]) { ctx in
                let (d, i) = (try ctx.input(0), try ctx.input(1))
                guard i.dtype == .int64 || i.dtype == .int32 else { throw OpError("indices must be int64 or int32, got \(i.dtype.rawValue)") }
                guard d.rank >= 1 else { throw OpError("data must have rank 1 or more, got a scalar") }
                let a = try axis(ctx, default: 0, rank: d.rank)
                return [TensorType(d.dtype, Array(d.shape[..<a]) + i.shape + Array(d.shape[(a + 1)...]))]
            },
            op("gather_elements", onnx: "GatherElements", ["data", "indices"], ["axis": .int]) { ctx in
                let (d, i) = (try ctx.input(0), try ctx.input(1))
                guard i.rank == d.rank else { throw OpError("indices must have the data's rank") }
                _ = try axis(ctx, default: 0, rank: d.rank)
                return [TensorType(d.dtype, i.shape)]
            },
            op("gather_nd", onnx: "GatherND", ["data", "indices"], ["batch_dims": .int]) { ctx in
                let (d, i) = (try ctx.input(0), try ctx.input(1))
                let b = try ctx.attributes.int("batch_dims", 0)
                guard i.rank >= 1, let k = i.shape.last?.size else { return [nil] }
                guard b + k <= d.rank else { throw OpError("gather_nd index depth \(k) exceeds data rank \(d.rank)") }
                return [TensorType(d.dtype, Array(i.shape.dropLast()) + Array(d.shape[(b + k)...]))]
            },
            op("scatter_nd", onnx: "ScatterND", ["data", "indices", "updates"], ["reduction": .string], infer: sameAsInput),
            op("scatter_elements", ["data", "indices", "updates"], ["axis": .int, "reduction": .string]) { ctx in
                let (d, i, u) = (try ctx.input(0), try ctx.input(1), try ctx.input(2))
                guard i.rank == d.rank, u.rank == d.rank else { throw OpError("indices and updates must have the data's rank") }
                guard u.dtype == d.dtype else { throw OpError("updates must have the data's dtype") }
                guard [.int64, .int32].contains(i.dtype) else { throw OpError("indices must be int64 or int32") }
                _ = try axis(ctx, default: 0, rank: d.rank)
                return [d]
            },
            op("one_hot", ["indices", "depth?", "values"], ["depth": .int, "axis": .int], shapeInputs: [1]) { ctx in
                let (i, v) = (try ctx.input(0), try ctx.input(2))
                let at = try normalize(axis: try ctx.attributes.int("axis", -1), rank: i.rank + 1)
                var dims = i.shape
                if ctx.attributes["depth"] != nil {
                    let depth = try ctx.attributes.int("depth", 0)
                    guard depth >= 0 else { throw OpError("depth must be ≥ 0, got \(depth)") }
                    dims.insert(.size(depth), at: at)
                } else {
                    guard ctx.optionalInput(1) != nil else { throw OpError("one_hot needs depth, as an attribute or an input") }
                    dims.insert(.unknown, at: at)
                }
                guard v.rank <= 1 else { throw OpError("values must be a 2-element vector") }
                return [TensorType(v.dtype, dims)]
            },
            op("eye_like", ["x"], ["dtype": .dtype, "k": .int]) { ctx in
                let x = try ctx.input(0)
                guard x.rank == 2 else { throw OpError("eye_like needs a 2-D input") }
                var dtype = x.dtype
                if case .dtype(let d)? = ctx.attributes["dtype"] { dtype = d }
                guard !dtype.isSubByte else { throw OpError("eye_like cannot make \(dtype.rawValue)") }
                return [TensorType(dtype, x.shape)]
            },
            op("compress", ["x", "condition"], ["axis": .int], shapeInputs: [1]) { ctx in
                let (x, c) = (try ctx.input(0), try ctx.input(1))
                guard c.dtype == .bool, c.rank == 1 else { throw OpError("condition must be a 1-D bool tensor") }
                guard let a = ctx.attributes["axis"], case .int(let ax) = a else { return [TensorType(x.dtype, [.unknown])] }
                var dims = x.shape
                dims[try normalize(axis: ax, rank: x.rank)] = .unknown
                return [TensorType(x.dtype, dims)]
            },
            op("expand", ["x", "shape?"], ["shape": .ints], groups: .copy, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                if let s = try ctx.attributes.ints("shape") { return [TensorType(x.dtype, try broadcast(x.shape, s.map { .size($0) }))] }
                return [staticLength(ctx.optionalInput(1)).map { TensorType(x.dtype, unknownDims(max($0, x.rank))) }]
            },
            op("tile", ["x", "repeats?"], ["repeats": .ints], groups: .copy, shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                guard let r = try ctx.attributes.ints("repeats") else { return [TensorType(x.dtype, unknownDims(x.rank))] }
                guard r.count == x.rank, r.allSatisfy({ $0 >= 0 }) else { throw OpError("repeats must have \(x.rank) non-negative entries") }
                return [TensorType(x.dtype, zip(x.shape, r).map { d, n in d.size.map { .size($0 &* n) } ?? (n == 1 ? d : .unknown) })]
            },
            op("pad", ["x", "pads?", "constant_value?", "axes?"], ["pads": .ints, "mode": .string, "value": .float, "axes": .ints], groups: .copy, shapeInputs: [1, 3]) { ctx in
                let x = try ctx.input(0)
                let mode = try ctx.attributes.string("mode", "constant")
                guard padModes.contains(mode) else { throw OpError("unknown pad mode '\(mode)'") }
                guard let pads = try ctx.attributes.ints("pads") else { return [TensorType(x.dtype, unknownDims(x.rank))] }
                let axes = try (try ctx.attributes.ints("axes") ?? Array(0 ..< x.rank)).map { try normalize(axis: $0, rank: x.rank) }
                guard pads.count == 2 * axes.count else { throw OpError("pads must have \(2 * axes.count) entries") }
                var dims = x.shape
                for (k, a) in axes.enumerated() {
                    dims[a] = x.shape[a].size.map { .size($0 &+ pads[k] &+ pads[k + axes.count]) } ?? .unknown
                }
                return [TensorType(x.dtype, dims)]
            },
            op("resize", ["x", "roi?", "scales?", "sizes?"], [
                "mode": .string, "coordinate_transformation_mode": .string, "nearest_mode": .string,
                "cubic_coeff_a": .float, "exclude_outside": .int, "extrapolation_value": .float,
                "scales": .floats, "sizes": .ints, "axes": .ints, "keep_aspect_ratio_policy": .string, "antialias": .int,
            ], shapeInputs: [2, 3]) { ctx in
                let x = try ctx.input(0)
                let mode = try ctx.attributes.string("mode", "nearest")
                guard resizeModes.contains(mode) else { throw OpError("unknown resize mode '\(mode)'") }
                let axes = try (try ctx.attributes.ints("axes") ?? Array(0 ..< x.rank)).map { try normalize(axis: $0, rank: x.rank) }
                var dims = x.shape
                if let sizes = try ctx.attributes.ints("sizes") {
                    guard sizes.count == axes.count else { throw OpError("sizes must have \(axes.count) entries") }
                    if try ctx.attributes.string("keep_aspect_ratio_policy", "stretch") != "stretch" {
                        return [TensorType(x.dtype, unknownDims(x.rank))]
                    }
                    for (k, a) in axes.enumerated() { dims[a] = .size(sizes[k]) }
                } else if let scales = try ctx.attributes.floats("scales") {
                    guard scales.count == axes.count else { throw OpError("scales must have \(axes.count) entries") }
                    for (k, a) in axes.enumerated() {
                        let size = x.shape[a].size.map { (Double($0) * scales[k]).rounded(.down) }
                        guard size.map({ $0.isFinite && $0 >= 0 && $0 < 9e18 }) ?? true else { throw OpError("scale \(scales[k]) is invalid") }
                        dims[a] = size.map { .size(Int($0)) } ?? .unknown
                    }
                } else {
                    return [TensorType(x.dtype, unknownDims(x.rank))]
                }
                return [TensorType(x.dtype, dims)]
            },
            op("depth_to_space", onnx: "DepthToSpace", ["x"], ["blocksize!": .int, "mode": .string], groups: .copy) { ctx in
                let x = try ctx.input(0)
                let b = try ctx.attributes.int("blocksize", 1)
                guard x.rank == 4, b >= 1 else { throw OpError("depth_to_space needs rank-4 input and blocksize ≥ 1") }
                guard b <= 1 << 16 else { throw OpError("blocksize \(b) is too large") }
                if let c = x.shape[1].size, c % (b * b) != 0 { throw OpError("channels \(c) not divisible by blocksize² \(b * b)") }
                func scale(_ d: Dimension, _ f: (Int) -> Int) -> Dimension { d.size.map { .size(f($0)) } ?? .unknown }
                return [TensorType(x.dtype, [x.shape[0], scale(x.shape[1]) { $0 / (b &* b) }, scale(x.shape[2]) { $0 &* b }, scale(x.shape[3]) { $0 &* b }])]
            },
            op("space_to_depth", onnx: "SpaceToDepth", ["x"], ["blocksize!": .int, "mode": .string], groups: .copy) { ctx in
                let x = try ctx.input(0)
                let b = try ctx.attributes.int("blocksize", 1)
                let mode = try ctx.attributes.string("mode", "DCR")
                guard mode == "DCR" || mode == "CRD" else { throw OpError("mode must be DCR or CRD, got '\(mode)'") }
                guard x.rank == 4, b >= 1, b <= 1 << 16 else { throw OpError("space_to_depth needs rank-4 input and blocksize 1…65536") }
                func scale(_ d: Dimension, _ f: (Int) -> Int) -> Dimension { d.size.map { .size(f($0)) } ?? .unknown }
                return [TensorType(x.dtype, [x.shape[0], scale(x.shape[1]) { $0 * b * b }, scale(x.shape[2]) { $0 / b }, scale(x.shape[3]) { $0 / b }])]
            },
            op("shape", ["x"], ["start": .int, "end": .int], groups: .generator) { ctx in
                let x = try ctx.input(0)
                let clamp = { (v: Int) in min(max(v < 0 ? v + x.rank : v, 0), x.rank) }
                let s = clamp(try ctx.attributes.int("start", 0)), e = clamp(try ctx.attributes.int("end", x.rank))
                return [TensorType(.int64, [.size(max(0, e - s))])]
            },
            op("size", ["x"], groups: .generator) { _ in [TensorType(.int64, [])] },
            op("constant_of_shape", ["shape?"], ["value": .tensor, "shape": .ints], groups: .generator, shapeInputs: [0]) { ctx in
                var dtype = DataType.float32
                if case .tensor(let t)? = ctx.attributes["value"] {
                    guard elementCount(t.shape) == 1, t.dtype.byteCount(elements: 1) == t.bytes.count else {
                        throw OpError("value must hold one element")
                    }
                    dtype = t.dtype
                }
                if let s = try ctx.attributes.ints("shape") { return [TensorType(dtype, s.map { .size($0) })] }
                return [staticLength(ctx.optionalInput(0)).map { TensorType(dtype, unknownDims($0)) }]
            },
            op("range", ["start", "limit", "delta"], groups: .generator, shapeInputs: [0, 1, 2]) { ctx in
                let s = try ctx.input(0)
                return [TensorType(s.dtype, [.unknown])]
            },
        ]
    }
}
