/// Reductions, normalizing reductions (softmax) and index-producing ops.
extension OpSet {
    public static let reduceNames = ["reduce_mean", "reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_l2", "reduce_l1",
                                     "reduce_sum_square", "reduce_log_sum", "reduce_log_sum_exp"]

    /// Output dims of a reduction over `axes` (all when `nil` and not a no-op).
    static func reduced(_ x: TensorType, axes: [Int]?, keepDims: Bool) throws -> [Dimension] {
        let set = Set(try (axes ?? Array(0 ..< x.rank)).map { try normalize(axis: $0, rank: x.rank) })
        var out: [Dimension] = []
        for (i, d) in x.shape.enumerated() {
            if set.contains(i) {
                if keepDims { out.append(.size(1)) }
            } else {
                out.append(d)
            }
        }
        return out
    }

    static var reductionOps: [OpSchema] {
        var ops: [OpSchema] = []
        for name in reduceNames {
            ops.append(op(name, ["x", "axes?"], ["axes": .ints, "keepdims": .int, "noop_with_empty_axes": .int], shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                let keep = try ctx.attributes.int("keepdims", 1) != 0
                if let axes = try ctx.attributes.ints("axes") {
                    if axes.isEmpty, try ctx.attributes.int("noop_with_empty_axes", 0) != 0 { return [x] }
                    return [TensorType(x.dtype, try reduced(x, axes: axes.isEmpty ? nil : axes, keepDims: keep))]
                }
                if let axes = ctx.optionalInput(1) {
                    if keep { return [TensorType(x.dtype, unknownDims(x.rank))] }
                    // Without keepdims the rank drops by the number of axes, when that is known.
                    return [staticLength(axes).map { TensorType(x.dtype, unknownDims(max(0, x.rank - $0))) }]
                }
                if try ctx.attributes.int("noop_with_empty_axes", 0) != 0 { return [x] }
                return [TensorType(x.dtype, try reduced(x, axes: nil, keepDims: keep))]
            })
        }
        for (name, onnx) in [("argmax", "ArgMax"), ("argmin", "ArgMin")] {
            ops.append(op(name, onnx: onnx, ["x"], ["axis": .int, "keepdims": .int, "select_last_index": .int]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 1 else { throw OpError("\(name) needs an input of rank ≥ 1") }
                let a = try axis(ctx, default: 0, rank: x.rank)
                return [TensorType(.int64, try reduced(x, axes: [a], keepDims: try ctx.attributes.int("keepdims", 1) != 0))]
            })
        }
        for name in ["softmax", "log_softmax"] {
            ops.append(op(name, ["x"], ["axis": .int]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, name)
                _ = try axis(ctx, default: -1, rank: x.rank)
                return [x]
            })
        }
        ops += [
            op("cumsum", ["x", "axis?"], ["axis": .int, "exclusive": .int, "reverse": .int], infer: sameAsInput),
            op("cumprod", ["x", "axis?"], ["axis": .int, "exclusive": .int, "reverse": .int], infer: sameAsInput),
            op("nll_loss", ["x", "target", "weight?"], ["reduction": .string, "ignore_index": .int]) { ctx in
                let (x, target) = (try ctx.input(0), try ctx.input(1))
                guard x.rank >= 2, target.rank == x.rank - 1 else { throw OpError("nll_loss needs x [N, C, …] and target [N, …]") }
                guard [.int64, .int32].contains(target.dtype) else { throw OpError("target must be int64 or int32") }
                try requireFloat(x, "nll_loss")
                let reduction = try ctx.attributes.string("reduction", "mean")
                guard ["none", "sum", "mean"].contains(reduction) else { throw OpError("reduction must be none, sum or mean, got \"\(reduction)\"") }
                return [TensorType(x.dtype, reduction == "none" ? target.shape : [])]
            },
            op("hardmax", ["x"], ["axis": .int]) { ctx in
                let x = try ctx.input(0)
                _ = try axis(ctx, default: -1, rank: x.rank)
                return [x]
            },
            op("top_k", ["x", "k?"], outputs: 2 ... 2, ["k": .int, "axis": .int, "largest": .int, "sorted": .int], shapeInputs: [1]) { ctx in
                let x = try ctx.input(0)
                let a = try axis(ctx, default: -1, rank: x.rank)
                var dims = x.shape
                if let k = ctx.attributes["k"], case .int(let n) = k { dims[a] = .size(n) } else { dims[a] = .unknown }
                return [TensorType(x.dtype, dims), TensorType(.int64, dims)]
            },
        ]
        return ops
    }
}
