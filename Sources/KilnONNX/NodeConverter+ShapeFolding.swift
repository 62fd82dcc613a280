import KilnFormat
import KilnReference

/// Shape arithmetic folded at convert time, and the shape-taking operators.
extension NodeConverter {
    /// The shape family's handlers.
    static let shapeHandlers: [String: Handler] = [
        "Constant": constantNode, "Shape": shape, "Size": size, "Range": range, "ConstantOfShape": constantOfShape,
        "Reshape": reshape, "Squeeze": squeeze, "Unsqueeze": squeeze, "Slice": slice, "Gather": gather, "Pad": pad,
        "Resize": resize, "Upsample": resize,
    ]

    /// Elementwise ops on partly known int vectors (shape arithmetic), entry by entry.
    func symbolic(_ op: String, _ inputs: [String]) -> [Element]? {
        guard ["add", "sub", "mul", "div", "equal", "where", "max", "min"].contains(op), !inputs.isEmpty else { return nil }
        let parts = inputs.map { elements($0) }
        guard parts.allSatisfy({ $0 != nil }), parts.contains(where: { _ in true }) else { return nil }
        // Only when some input is computed at run time (otherwise folding handles it).
        guard inputs.contains(where: { if case .value? = known($0) { return true } else { return false } }) else { return nil }
        let lists = parts.map { $0! }
        let n = lists.map(\.count).max() ?? 0
        guard lists.allSatisfy({ $0.count == n || $0.count == 1 }) else { return nil }
        func at(_ k: Int, _ i: Int) -> Element { lists[k].count == 1 ? lists[k][0] : lists[k][i] }
        return (0 ..< n).map { i -> Element in
            let a = at(0, i)
            if op == "where" {
                guard lists.count == 3, let cond = a.int else { return .unknown }
                return cond != 0 ? at(1, i) : at(2, i)
            }
            guard lists.count >= 2 else { return .unknown }
            let b = at(1, i)
            if let x = a.int, let y = b.int {
                switch op {
                case "add": return .known(x + y)
                case "sub": return .known(x - y)
                case "mul": return .known(x * y)
                case "div": return y == 0 ? .unknown : .known(x / y)
                case "equal": return .known(x == y ? 1 : 0)
                case "max": return .known(max(x, y))
                default: return .known(min(x, y))
                }
            }
            switch (op, a, b) {
            case ("add", _, .known(0)), ("sub", _, .known(0)), ("mul", _, .known(1)), ("div", _, .known(1)): return a
            case ("add", .known(0), _), ("mul", .known(1), _): return b
            // Dims are never negative, so a dim never equals a negative number.
            case ("equal", .dim, .known(let v)) where v < 0: return .known(0)
            case ("equal", .known(let v), .dim) where v < 0: return .known(0)
            case ("equal", .dim(let x), .dim(let y)) where x == y: return .known(1)
            case ("max", .dim, .known(let v)) where v <= 0: return a
            case ("max", .known(let v), .dim) where v <= 0: return b
            default: return NodeConverter.dimArithmetic(op, a, b) ?? .unknown
            }
        }
    }

    /// A sum, difference or multiple of run-time dims as the expression of their symbols
    /// (`past_sequence_length + sequence_length`), when some operand is a dim.
    static func dimArithmetic(_ op: String, _ a: Element, _ b: Element) -> Element? {
        func expression(_ e: Element) -> DimExpression? {
            switch e {
            case .known(let n): return DimExpression(constant: n)
            case .dim(let s): return DimExpression(.symbol(s))
            case .unknown: return nil
            }
        }
        guard a.int == nil || b.int == nil, let x = expression(a), let y = expression(b) else { return nil }
        let result: DimExpression?
        switch op {
        case "add": result = x + y
        case "sub": result = x - y
        case "mul" where y.symbols.isEmpty: result = x.scaled(by: y.constant)
        case "mul" where x.symbols.isEmpty: result = y.scaled(by: x.constant)
        default: result = nil
        }
        switch result?.dimension {
        case .size(let n)?: return .known(n)
        case .symbol(let s)?: return .dim(s)
        case nil: return nil
        }
    }

    /// Records `node`'s output as a dim test (see `Conversion.dimTests`): `Equal` of one run-time
    /// dim and 0 or 1, and what `Not`, `Cast`, `Squeeze`, `Unsqueeze`, `Reshape` and `Identity`
    /// make of one.
    func noteDimTest(_ node: ONNXNode) {
        guard let out = node.outputs.first, !out.isEmpty, case .value? = known(out) else { return }
        switch node.opType {
        case "Equal" where node.inputs.count == 2:
            let (a, b) = (elements(node.inputs[0]), elements(node.inputs[1]))
            func dim(_ e: [Element]?) -> Bool { e?.count == 1 && e![0].int == nil }
            func small(_ e: [Element]?) -> Int? { e?.count == 1 && (e![0].int == 0 || e![0].int == 1) ? e![0].int : nil }
            if let v = dim(a) ? small(b) : dim(b) ? small(a) : nil { c.dimTests[out] = v == 1 }
        case "Not":
            if let v = c.dimTests[input(node, 0)] { c.dimTests[out] = !v }
        case "Cast", "Squeeze", "Unsqueeze", "Reshape", "Identity":
            if let v = c.dimTests[input(node, 0)] { c.dimTests[out] = v }
        default:
            break
        }
    }

    /// Shape: a constant when every dim of the slice is known, else `shape` with what is known
    /// of each dim (its size or its symbol).
    /// - Parameter node: A `Shape` node.
    /// - Throws: `ConvertError` for an undefined input.
    func shape(_ node: ONNXNode) throws {
        guard let t = try type(input(node, 0)) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        let rank = t.rank
        let clamp = { (v: Int) in min(max(v < 0 ? v + rank : v, 0), rank) }
        let start = clamp(int(node, "start", 0)), end = clamp(int(node, "end", rank))
        let dims = Array(t.shape[start ..< max(start, end)])
        let e: [Element] = dims.map { d in
            switch d {
            case .size(let n): return .known(n)
            case .symbol(let s): return s.isEmpty ? .unknown : .dim(s)
            }
        }
        if let ints = Optional(e.compactMap(\.int)), ints.count == e.count {
            c.values[node.outputs[0]] = .constant(NDArray.int64vector(ints))
            return
        }
        var attrs: [String: AttributeValue] = [:]
        if start != 0 { attrs["start"] = .int(start) }
        if end != rank { attrs["end"] = .int(end) }
        try emit(node, "shape", [input(node, 0)], attrs, elements: [e])
    }

    /// Size: a constant when the input's shape is static, else `size`.
    /// - Parameter node: A `Size` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func size(_ node: ONNXNode) throws {
        if let t = try type(input(node, 0)), let s = t.staticShape {
            c.values[node.outputs[0]] = .constant(NDArray(scalar: Int64(s.reduce(1, *))))
        } else {
            try emit(node, "size", node.inputs, [:])
        }
    }

    /// Range: `range`.
    /// - Parameter node: A `Range` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func range(_ node: ONNXNode) throws {
        // a ..< b by 1, for run-time dims (or expressions of dims, or sizes) a ≤ b, is b - a long:
        // `0 ..< past_sequence_length + sequence_length`, or a decoder's new positions
        // `past_sequence_length ..< past_sequence_length + sequence_length`.
        let (start, limit, delta) = (elements(input(node, 0)), elements(input(node, 1)), elements(input(node, 2)))
        var length: Dimension?
        if start?.count == 1, delta?.count == 1, delta?[0].int == 1, limit?.count == 1,
           case .dim(let s)? = NodeConverter.dimArithmetic("sub", limit![0], start![0]),
           let e = DimExpression(parsing: s), e.coefficients.allSatisfy({ $0 > 0 }), e.constant >= 0 {
            // (Dims are never negative, so a sum of them is b - a exactly, never clipped to 0.)
            length = .symbol(s)
        }
        try emit(node, "range", node.inputs, [:]) { _, t in
            guard let t, let length, t.rank == 1 else { return t }
            return TensorType(t.dtype, [length])
        }
    }

    /// ConstantOfShape: a known shape becomes an attribute; a partly known one gives the output
    /// the dims it knows.
    /// - Parameter node: A `ConstantOfShape` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func constantOfShape(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["value"])
        let e = elements(input(node, 0))
        if let s = try staticInts(node, 0) {
            attrs["shape"] = .ints(s)
            try emit(node, "constant_of_shape", [], attrs)
        } else {
            try emit(node, "constant_of_shape", [input(node, 0)], attrs) { _, t in
                guard let t, let e else { return t }
                return TensorType(t.dtype, e.map(\.dimension))
            }
        }
    }

    /// Gather: of a shape vector by constant indices, the entries it picks (a constant when all
    /// are known), else `gather`.
    /// - Parameter node: A `Gather` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func gather(_ node: ONNXNode) throws {
        let axis = int(node, "axis", 0)
        let data = input(node, 0), indices = input(node, 1)
        var e: [Element]?
        if let d = elements(data), let idx = constant(indices), idx.rank <= 1, let list = try? intValues(idx) {
            e = list.map { i in
                let j = i < 0 ? i + d.count : i
                return j >= 0 && j < d.count ? d[j] : .unknown
            }
            if let ints = Optional(e!.compactMap(\.int)), ints.count == e!.count, case .value? = known(data) {
                // The entries are known even though the vector is computed at run time.
                c.values[node.outputs[0]] = .constant(idx.rank == 0 ? NDArray(scalar: Int64(ints[0])) : NDArray.int64vector(ints))
                return
            }
        }
        try emit(node, "gather", [data, indices], ["axis": .int(axis)], elements: [e])
    }

    /// Squeeze and Unsqueeze: known axes (attribute or input 1) become an attribute; a Squeeze
    /// without axes of run-time dims keeps them (`squeezeRunTimeDims`).
    /// - Parameter node: A `Squeeze` or `Unsqueeze` node.
    /// - Throws: `ConvertError` when an op refuses the node.
    func squeeze(_ node: ONNXNode) throws {
        let kiln = node.opType == "Squeeze" ? "squeeze" : "unsqueeze"
        var attrs: [String: AttributeValue] = [:]
        var inputs = [input(node, 0)]
        if let axes = ints(node, "axes") {
            attrs["axes"] = .ints(axes)
        } else if !input(node, 1).isEmpty {
            if let axes = try staticInts(node, 1) { attrs["axes"] = .ints(axes) } else { inputs.append(input(node, 1)) }
        }
        let e = elements(input(node, 0))
        if kiln == "squeeze", attrs["axes"] == nil, inputs.count == 1, try squeezeRunTimeDims(node) { return }
        try emit(node, kiln, inputs, attrs, elements: [e])
    }

    /// `Squeeze` without axes of an input with run-time dims: its rank would depend on which of
    /// them are 1. The known 1s are squeezed and the run-time dims kept, assumed not to be 1 (a
    /// dim the exporter could not fix is a batch or a length); an `assume` checks it when the
    /// function runs. Returns false when every dim is known (the op converts as is).
    func squeezeRunTimeDims(_ node: ONNXNode) throws -> Bool {
        let x = input(node, 0)
        guard let t = try type(x), t.shape.contains(where: { $0.size == nil }) else { return false }
        let ones = t.shape.indices.filter { t.shape[$0] == .size(1) }
        let open = t.shape.indices.filter { t.shape[$0].size == nil }
        let (shape, picked, isOne, notOne, squeezed) = (c.freshName("\(x)_shape"), c.freshName("\(x)_run_time_dims"), c.freshName("\(x)_dim_is_one"),
                                                        c.freshName("\(x)_dim_not_one"), c.freshName("\(node.outputs[0])_unchecked"))
        try emit(node, "shape", [x], [:], outputs: [shape])
        let (index, one) = (c.freshName("\(x)_run_time_axes"), c.freshName("\(x)_one"))
        c.values[index] = .constant(NDArray(shape: [open.count], scalars: open.map { Int64($0) }))
        c.values[one] = .constant(NDArray(shape: [], scalars: [Int64(1)]))
        c.usedNames.formUnion([index, one])
        try emit(node, "gather", [shape, index], ["axis": .int(0)], outputs: [picked])
        try emit(node, "equal", [picked, one], [:], outputs: [isOne])
        try emit(node, "not", [isOne], [:], outputs: [notOne])
        try emit(node, "squeeze", [x], ["axes": .ints(ones)], outputs: [squeezed])
        let message = "node '\(node.name)' (Squeeze) without axes was converted keeping its run-time dims (assumed not to be 1); this input has one of size 1"
        try emit(node, "assume", [squeezed, notOne], ["message": .string(message)], outputs: [node.outputs[0]])
        return true
    }

    /// Reshape: a target known entry by entry (sizes, symbols equal to the input's dims, one
    /// left to infer) becomes the `shape` attribute; a partly known one still gives the output
    /// the dims it knows.
    /// - Parameter node: A `Reshape` node.
    /// - Throws: `ConvertError` for an undefined input or when the op refuses the node.
    func reshape(_ node: ONNXNode) throws {
        let x = input(node, 0)
        var attrs = try attributes(node, only: ["allowzero"])
        let allowZero = int(node, "allowzero", 0) != 0
        let e = elements(x)
        guard let t = try type(x) else { throw c.fail("node '\(node.name)' reads an undefined value") }
        if let shape = ints(node, "shape") {
            attrs["shape"] = .ints(shape)
            try emit(node, "reshape", [x], attrs, elements: [e])
            return
        }
        guard let target = elements(input(node, 1)) else {
            try emit(node, "reshape", [x, input(node, 1)], attrs, elements: [e])
            return
        }
        // Turn a partly known target into a static one: a symbol equal to the input's
        // dim at the same position is "copy" (0), one remaining unknown is "infer" (-1).
        var fixed: [Int?] = target.enumerated().map { i, el in
            switch el {
            case .known(let n): return n
            case .dim(let s) where !allowZero && i < t.rank && t.shape[i] == .symbol(s): return 0
            default: return nil
            }
        }
        let unknown = fixed.indices.filter { fixed[$0] == nil }
        if unknown.count <= 1, !(unknown.count == 1 && fixed.contains(-1)) {
            if let u = unknown.first { fixed[u] = -1 }
            attrs["shape"] = .ints(fixed.map { $0! })
            try emit(node, "reshape", [x], attrs, elements: [e]) { _, inferred in
                guard let inferred, let u = unknown.first, case .dim(let s) = target[u] else { return inferred }
                var dims = inferred.shape
                dims[u] = .symbol(s)
                return TensorType(inferred.dtype, dims)
            }
        } else {
            // What the partly known target says per dim: -1 is inferred at run time, 0 copies the input's dim.
            let dims = target.enumerated().map { i, el -> Dimension in
                switch el {
                case .known(-1): return .unknown
                case .known(0) where !allowZero: return i < t.rank ? t.shape[i] : .unknown
                case .known(let n) where n < 0: return .unknown
                default: return el.dimension
                }
            }
            try emit(node, "reshape", [x, input(node, 1)], attrs, elements: [e]) { _, inferred in
                TensorType(inferred?.dtype ?? t.dtype, dims)
            }
        }
    }

    /// Slice: known starts, ends, axes and steps become attributes (inputs from opset 10 on,
    /// attributes before it); a slice of a shape vector keeps what is known.
    /// - Parameter node: A `Slice` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func slice(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = [:]
        var inputs = [input(node, 0)]
        if c.opset < 10 {
            for key in ["starts", "ends", "axes"] { if let v = ints(node, key) { attrs[key] = .ints(v) } }
        } else {
            let keys = ["starts", "ends", "axes", "steps"]
            let known = try (1 ... 4).map { try staticInts(node, $0) }
            let present = (1 ... 4).map { !input(node, $0).isEmpty }
            if zip(known, present).allSatisfy({ $0 != nil || !$1 }) {
                for (k, v) in zip(keys, known) { if let v { attrs[k] = .ints(v) } }
            } else {
                inputs += (1 ... 4).map { input(node, $0) }
            }
        }
        // Slicing a partly known shape vector keeps what is known.
        var e: [Element]?
        if let d = elements(input(node, 0)), case .ints(let s)? = attrs["starts"], case .ints(let en)? = attrs["ends"], s.count == 1 {
            let step: Int = { if case .ints(let st)? = attrs["steps"] { return st.first ?? 1 } else { return 1 } }()
            if step != 0 {
                let r = OpSet.sliceRange(start: s[0], end: en[0], step: step, size: d.count)
                e = (0 ..< r.count).map { d[r.start + $0 * step] }
            }
        }
        let params = (1 ... 4).map { elements(input(node, $0)) }
        try emit(node, "slice", inputs, attrs, elements: [e]) { _, inferred in
            // starts 0, step 1 and an end that is a symbol give that symbol.
            guard let inferred, inputs.count > 1, let starts = params[0], let ends = params[1], let x = try? self.type(self.input(node, 0)) else { return inferred }
            let axes = params[2]?.map(\.int) ?? Array(0 ..< starts.count).map { Optional($0) }
            let steps = params[3] ?? Array(repeating: .known(1), count: starts.count)
            var dims = x.shape
            for a in axes { if var a { if a < 0 { a += x.rank }; if a >= 0, a < dims.count { dims[a] = .unknown } } }
            for k in 0 ..< min(starts.count, ends.count, axes.count, steps.count) {
                guard var a = axes[k] else { return inferred }
                if a < 0 { a += x.rank }
                guard a >= 0, a < dims.count else { return inferred }
                if starts[k] == .known(0), steps[k] == .known(1), case .dim(let s) = ends[k] {
                    dims[a] = .symbol(s)
                } else if starts[k] == .known(0), steps[k] == .known(1), let end = ends[k].int, end >= Int(Int32.max) {
                    dims[a] = x.shape[a]
                }
            }
            return TensorType(inferred.dtype, dims)
        }
    }

    /// Pad: known pads, a constant one-value pad value and known axes become attributes (the
    /// attributes before opset 11).
    /// - Parameter node: A `Pad` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func pad(_ node: ONNXNode) throws {
        var attrs: [String: AttributeValue] = [:]
        if case .string(let m)? = node.attributes["mode"] { attrs["mode"] = .string(m) }
        var inputs = [input(node, 0)]
        if c.opset < 11 {
            if let p = ints(node, "pads") ?? ints(node, "paddings") { attrs["pads"] = .ints(p) }
            if case .float(let v)? = node.attributes["value"] { attrs["value"] = .float(Double(v)) }
        } else {
            if let p = try staticInts(node, 1) { attrs["pads"] = .ints(p); inputs.append("") } else { inputs.append(input(node, 1)) }
            if let v = constant(input(node, 2)), v.elementCount == 1, v.scalarType.isFloatingPoint {
                attrs["value"] = .float(try floatValues(v)[0])
                inputs.append("")
            } else {
                inputs.append(input(node, 2))
            }
            if !input(node, 3).isEmpty {
                if let a = try staticInts(node, 3) { attrs["axes"] = .ints(a) } else { inputs.append(input(node, 3)) }
            }
        }
        try emit(node, "pad", inputs, attrs)
    }

    /// Resize and Upsample: `resize`, known scales or sizes as attributes; Upsample and opsets
    /// before 11 resize with asymmetric coordinates and floor rounding.
    /// - Parameter node: A `Resize` or `Upsample` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func resize(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "antialias",
                                                "exclude_outside", "extrapolation_value", "axes", "keep_aspect_ratio_policy"])
        if case .string(let m)? = attrs["mode"] { attrs["mode"] = .string(m == "bilinear" || m == "trilinear" ? "linear" : m) }
        let legacy = node.opType == "Upsample" || c.opset < 11
        if legacy {
            attrs["coordinate_transformation_mode"] = .string("asymmetric")
            attrs["nearest_mode"] = .string("floor")
        }
        var inputs = [input(node, 0)]
        // Upsample-7 has scales as an attribute; Upsample-9 and Resize-10 as input 1.
        let scalesIndex = legacy ? 1 : 2, sizesIndex = legacy ? -1 : 3
        if case .floats(let s)? = node.attributes["scales"] {
            attrs["scales"] = .floats(s.map(Double.init))
        } else if let s = constant(input(node, scalesIndex)), s.elementCount > 0 {
            attrs["scales"] = .floats(try floatValues(s))
        } else if sizesIndex > 0, let s = try staticInts(node, sizesIndex), !s.isEmpty {
            attrs["sizes"] = .ints(s)
        } else if !legacy {
            inputs += [input(node, 1), input(node, 2), input(node, 3)]
        } else {
            inputs += ["", input(node, 1)]
        }
        if !legacy, inputs.count == 1, !input(node, 1).isEmpty, constant(input(node, 1))?.elementCount ?? 0 > 0 {
            inputs.append(input(node, 1))
        }
        try emit(node, "resize", inputs, attrs)
    }
}
