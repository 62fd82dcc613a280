import KilnFormat

extension KernelTable {
    /// Kernels of the reductions over axes: `reduce_*`, arg extremes, cumulative sums and products, top
    /// k and the negative log-likelihood loss; `nil` for other ops.
    static func reductionKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case _ where OpSet.reduceNames.contains(op.opType):
            let name = op.opType, keep = try a.int("keepdims", 1) != 0, noop = try a.int("noop_with_empty_axes", 0) != 0
            let axes = try intsParameter(op, "axes", input: 1)
            return { inputs in [try Reduction.reduceOp(name, try present(inputs, 0), axes: try axes(inputs), keepDims: keep, noopWithEmpty: noop)] }
        case "argmax", "argmin":
            let axis = try a.int("axis", 0), keep = try a.int("keepdims", 1) != 0, last = try a.int("select_last_index", 0) != 0
            let isMax = op.opType == "argmax"
            return { inputs in
                let x = try present(inputs, 0)
                return [try Reduction.argExtreme(x, axis: try OpSet.normalize(axis: axis, rank: x.rank), keepDims: keep, max: isMax, last: last)]
            }
        case "cumsum", "cumprod":
            let exclusive = try a.int("exclusive", 0) != 0, reverse = try a.int("reverse", 0) != 0
            let fixed = a["axis"] != nil ? try a.int("axis", 0) : nil
            let product = op.opType == "cumprod"
            return { inputs in
                let x = try present(inputs, 0)
                guard let ax = try fixed ?? (inputs.count > 1 ? inputs[1] : nil)?.intValues().first else { throw OpError("\(product ? "cumprod" : "cumsum") needs an axis") }
                return [try Reduction.cumsum(x, axis: try OpSet.normalize(axis: ax, rank: x.rank), exclusive: exclusive, reverse: reverse,
                                             product: product)]
            }
        case "top_k":
            let axis = try a.int("axis", -1), largest = try a.int("largest", 1) != 0
            let fixed = a["k"] != nil ? try a.int("k", 0) : nil
            return { inputs in
                let x = try present(inputs, 0)
                guard let k = try fixed ?? inputs.dropFirst().first??.intValues().first else { throw OpError("top_k needs k") }
                let (v, i) = try Reduction.topK(x, k: k, axis: try OpSet.normalize(axis: axis, rank: x.rank), largest: largest)
                return [v, i]
            }
        case "nll_loss":
            let reduction = try a.string("reduction", "mean"), ignore = a["ignore_index"] != nil ? try a.int("ignore_index", 0) : nil
            return { inputs in
                [try Indexing.nllLoss(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                      reduction: reduction, ignore: ignore)]
            }
        default:
            return nil
        }
    }

    /// Kernels of the indexing ops that build or scatter by index; `nil` for other ops.
    static func indexingKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "scatter_elements":
            let axis = try a.int("axis", 0), reduction = try a.string("reduction", "none")
            return { inputs in
                let data = try present(inputs, 0)
                return [try Indexing.scatterElements(data, try present(inputs, 1), try present(inputs, 2),
                                                     axis: try OpSet.normalize(axis: axis, rank: data.rank), reduction: reduction)]
            }
        case "one_hot":
            let fixed = a["depth"] != nil ? try a.int("depth", 0) : nil, axis = try a.int("axis", -1)
            return { inputs in
                var depth = fixed ?? 0
                if fixed == nil {
                    let d = try present(inputs, 1)
                    guard d.elementCount == 1 else { throw OpError("depth must hold one value") }
                    depth = Int(try d.doubleValues()[0].rounded(.towardZero))
                }
                return [try Indexing.oneHot(try present(inputs, 0), try present(inputs, 2), depth: depth, axis: axis)]
            }
        case "eye_like":
            let k = try a.int("k", 0)
            var dtype: DataType?
            if case .dtype(let d)? = a["dtype"] { dtype = d }
            let fixed = dtype
            return { inputs in
                let x = try present(inputs, 0)
                return [try Indexing.eyeLike(shape: x.shape, dtype: fixed ?? x.scalarType, k: k)]
            }
        case "compress":
            let axis = a["axis"] != nil ? try a.int("axis", 0) : nil
            return { inputs in [try Indexing.compress(try present(inputs, 0), try present(inputs, 1), axis: axis)] }
        default:
            return nil
        }
    }
}
