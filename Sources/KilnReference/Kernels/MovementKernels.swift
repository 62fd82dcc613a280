import KilnFormat

/// Kernels of the shape and data-movement ops.
enum MovementKernels {
    /// Input `i`, or an error naming it when it is missing.
    static func present(_ inputs: [NDArray?], _ i: Int) throws -> NDArray { try KernelTable.present(inputs, i) }

    /// The kernel of a shape or data-movement op, the last family ``KernelTable`` tries.
    /// - Throws: ``OpError`` for attributes that do not fit the op, or an op type no family knows.
    static func kernel(for op: Operation) throws -> Kernel {
        if let kernel = try shapeKernel(for: op) ?? rearrangingKernel(for: op) { return kernel }
        throw OpError("the reference interpreter has no kernel for '\(op.opType)'")
    }

    /// Kernels of the ops that make tensors or change only their shapes: constants, ranges, shapes and
    /// sizes, reshapes, squeezes, expansion and tiling; `nil` for other ops.
    static func shapeKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "constant":
            guard case .tensor(let t)? = a["value"] else { throw OpError("value must be a tensor") }
            let value = try Literal.array(t)
            return { _ in [value] }
        case "constant_of_shape":
            var literal: TensorLiteral?
            if case .tensor(let t)? = a["value"] { literal = t }
            let shape = try KernelTable.intsParameter(op, "shape", input: 0)
            let value = literal
            return { inputs in
                guard let s = try shape(inputs) else { throw OpError("constant_of_shape needs a shape") }
                return [try Movement.constantOfShape(s, value: value)]
            }
        case "range":
            return { inputs in [try Movement.range(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2))] }
        case "shape":
            let start = try a.int("start", 0), end = a["end"] != nil ? try a.int("end", 0) : nil
            return { inputs in
                let x = try present(inputs, 0)
                let clamp = { (v: Int) in min(max(v < 0 ? v + x.rank : v, 0), x.rank) }
                let s = clamp(start), e = clamp(end ?? x.rank)
                return [NDArray.int64(Array(x.shape[s ..< max(s, e)]))]
            }
        case "size": return { inputs in [NDArray(scalar: Int64(try present(inputs, 0).elementCount))] }
        case "reshape":
            let shape = try KernelTable.intsParameter(op, "shape", input: 1), allowZero = try a.int("allowzero", 0) != 0
            return { inputs in
                guard let s = try shape(inputs) else { throw OpError("reshape needs a shape") }
                return [try Movement.reshape(try present(inputs, 0), s, allowZero: allowZero)]
            }
        case "flatten":
            let axis = try a.int("axis", 1)
            return { inputs in
                let x = try present(inputs, 0)
                let ax = try OpSet.flattenAxis(axis, rank: x.rank)
                return [x.reshaped([x.shape[..<ax].reduce(1, *), x.shape[ax...].reduce(1, *)])]
            }
        case "squeeze":
            let axes = try KernelTable.intsParameter(op, "axes", input: 1)
            return { inputs in
                let x = try present(inputs, 0)
                let set = Set(try (try axes(inputs) ?? x.shape.indices.filter { x.shape[$0] == 1 }).map { try OpSet.normalize(axis: $0, rank: x.rank) })
                for d in set where x.shape[d] != 1 { throw OpError("cannot squeeze dim \(d) of size \(x.shape[d])") }
                return [x.reshaped(x.shape.indices.filter { !set.contains($0) }.map { x.shape[$0] })]
            }
        case "unsqueeze":
            let axes = try KernelTable.intsParameter(op, "axes", input: 1)
            return { inputs in
                let x = try present(inputs, 0)
                guard let list = try axes(inputs) else { throw OpError("unsqueeze needs axes") }
                let rank = x.rank + list.count
                let set = Set(try list.map { try OpSet.normalize(axis: $0, rank: rank) })
                guard set.count == list.count else { throw OpError("unsqueeze axes repeat") }
                var source = x.shape.makeIterator()
                return [x.reshaped((0 ..< rank).map { set.contains($0) ? 1 : source.next()! })]
            }
        case "expand":
            let shape = try KernelTable.intsParameter(op, "shape", input: 1)
            return { inputs in
                guard let s = try shape(inputs) else { throw OpError("expand needs a shape") }
                return [try Movement.expand(try present(inputs, 0), s)]
            }
        case "tile":
            let repeats = try KernelTable.intsParameter(op, "repeats", input: 1)
            return { inputs in
                guard let r = try repeats(inputs) else { throw OpError("tile needs repeats") }
                return [try Movement.tile(try present(inputs, 0), r)]
            }
        default:
            return nil
        }
    }

    /// Kernels of the ops that move elements: transposes, concatenation and splits, slices, gathers and
    /// scatters, padding, resizing, blocks to and from depth, and triangles; `nil` for other ops.
    static func rearrangingKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "transpose":
            let perm = try a.ints("perm")
            return { inputs in
                let x = try present(inputs, 0)
                return [try Movement.transpose(x, perm ?? Array((0 ..< x.rank).reversed()))]
            }
        case "concat":
            let axis = try a.int("axis", 0)
            return { inputs in [try Movement.concat(try inputs.indices.map { try present(inputs, $0) }, axis: axis)] }
        case "split":
            let axis = try a.int("axis", 0), sizes = try KernelTable.intsParameter(op, "split", input: 1), count = op.outputs.count
            return { inputs in
                let x = try present(inputs, 0)
                let ax = try OpSet.normalize(axis: axis, rank: x.rank)
                let n = x.shape[ax]
                let parts = try sizes(inputs) ?? {
                    let chunk = (n + count - 1) / max(count, 1)
                    return (0 ..< count).map { min(chunk, max(0, n - $0 * chunk)) }
                }()
                guard parts.count == count else { throw OpError("split has \(parts.count) sizes for \(count) outputs") }
                return try Movement.split(x, axis: ax, sizes: parts)
            }
        case "slice":
            let starts = try KernelTable.intsParameter(op, "starts", input: 1), ends = try KernelTable.intsParameter(op, "ends", input: 2)
            let axes = try KernelTable.intsParameter(op, "axes", input: 3), steps = try KernelTable.intsParameter(op, "steps", input: 4)
            return { inputs in
                guard let s = try starts(inputs), let e = try ends(inputs) else { throw OpError("slice needs starts and ends") }
                return [try Movement.slice(try present(inputs, 0), starts: s, ends: e, axes: try axes(inputs), steps: try steps(inputs))]
            }
        case "gather":
            let axis = try a.int("axis", 0)
            return { inputs in
                let x = try present(inputs, 0)
                return [try Movement.gather(x, try present(inputs, 1), axis: try OpSet.normalize(axis: axis, rank: x.rank))]
            }
        case "gather_elements":
            let axis = try a.int("axis", 0)
            return { inputs in
                let x = try present(inputs, 0)
                return [try Movement.gatherElements(x, try present(inputs, 1), axis: try OpSet.normalize(axis: axis, rank: x.rank))]
            }
        case "gather_nd":
            let b = try a.int("batch_dims", 0)
            return { inputs in [try Movement.gatherND(try present(inputs, 0), try present(inputs, 1), batchDims: b)] }
        case "scatter_nd":
            let reduction = try a.string("reduction", "none")
            return { inputs in [try Movement.scatterND(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2), reduction: reduction)] }
        case "pad":
            let pads = try KernelTable.intsParameter(op, "pads", input: 1), axes = try KernelTable.intsParameter(op, "axes", input: 3)
            let mode = try a.string("mode", "constant")
            let value = a["value"] != nil ? NDArray(scalar: Float(try a.float("value", 0))) : nil
            return { inputs in
                guard let p = try pads(inputs) else { throw OpError("pad needs pads") }
                let constant = (inputs.count > 2 ? inputs[2] : nil) ?? value
                return [try Movement.pad(try present(inputs, 0), pads: p, axes: try axes(inputs), mode: mode, value: constant)]
            }
        case "resize":
            let options = try Resize.options(a)
            let fixedScales = try a.floats("scales"), fixedSizes = try a.ints("sizes"), axes = try a.ints("axes")
            return { inputs in
                let x = try present(inputs, 0)
                let roi = try (inputs.count > 1 ? inputs[1] : nil).map { try $0.doubleValues() }
                var scales = fixedScales
                var sizes = fixedSizes
                if scales == nil, sizes == nil {
                    if let s = inputs.count > 2 ? inputs[2] : nil, s.elementCount > 0 { scales = try s.doubleValues() }
                    if let s = inputs.count > 3 ? inputs[3] : nil, s.elementCount > 0 { sizes = try s.intValues() }
                }
                return [try Resize.resize(x, scales: sizes == nil ? scales : nil, sizes: sizes, roi: roi, axes: axes, options)]
            }
        case "depth_to_space":
            let b = try a.int("blocksize", 1), mode = try a.string("mode", "DCR")
            return { inputs in [try Movement.depthToSpace(try present(inputs, 0), blocksize: b, mode: mode)] }
        case "space_to_depth":
            let b = try a.int("blocksize", 1), crd = try a.string("mode", "DCR") == "CRD"
            return { inputs in [try Movement.spaceToDepth(try present(inputs, 0), blocksize: b, crd: crd)] }
        case "trilu":
            let upper = try a.int("upper", 1) != 0, fixedK = a["k"] != nil ? try a.int("k", 0) : nil
            return { inputs in
                let x = try present(inputs, 0)
                var k = fixedK ?? 0
                if fixedK == nil, inputs.count > 1, let t = inputs[1] {
                    guard t.elementCount == 1 else { throw OpError("trilu's k must hold one value") }
                    k = try t.intValues()[0]
                }
                return [try Movement.trilu(x, upper: upper, k: k)]
            }
        default:
            return nil
        }
    }
}
