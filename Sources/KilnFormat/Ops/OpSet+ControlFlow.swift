/// Control flow (specs/ops.md): `if`, `loop` and `scan`, each running closed subgraphs
/// (graph attributes) whose inputs the op passes explicitly. Values of the enclosing function
/// a body reads are *captures*: trailing inputs of the op, trailing inputs of the body.
extension OpSet {
    static let controlFlowOps: [OpSchema] = [
        op("if", ["cond", "captures"], variadic: true, outputs: 1 ... Int.max,
           ["then_branch!": .graph, "else_branch!": .graph], groups: .controlFlow) { ctx in
            let cond = try ctx.input(0)
            guard cond.dtype == .bool, cond.fixedElementCount.map({ $0 == 1 }) ?? true else {
                throw OpError("if needs a one-element bool condition, got \(cond)")
            }
            let captured = try (1 ..< ctx.inputs.count).map { try ctx.input($0) }
            var branches: [Function] = []
            for key in ["then_branch", "else_branch"] {
                let body = try ctx.attributes.graph(key)
                try checkInputs(body, captured, key)
                guard body.outputs.count == ctx.outputCount else {
                    throw OpError("\(key) returns \(body.outputs.count) values, the op has \(ctx.outputCount) outputs")
                }
                branches.append(body)
            }
            // Both branches give each output the same dtype; dims the two agree on are kept.
            return try zip(branches[0].outputs, branches[1].outputs).map { a, b in
                guard a.type.dtype == b.type.dtype else {
                    throw OpError("output '\(a.name)' is \(a.type.dtype.rawValue) in then_branch but \(b.type.dtype.rawValue) in else_branch")
                }
                guard a.type.rank == b.type.rank else { return nil }
                return TensorType(a.type.dtype, zip(a.type.shape, b.type.shape).map { $0 == $1 ? $0 : .unknown })
            }
        },
        op("loop", ["max_trip_count?", "cond?", "values"], variadic: true, outputs: 0 ... Int.max,
           ["body!": .graph, "captures": .int], groups: .controlFlow) { ctx in
            let body = try ctx.attributes.graph("body")
            let (carried, scans) = try loopCounts(ctx, body)
            if let m = ctx.optionalInput(0) {
                guard m.dtype == .int64, m.fixedElementCount.map({ $0 == 1 }) ?? true else { throw OpError("loop's max_trip_count must be one int64, got \(m)") }
            }
            if let c = ctx.optionalInput(1) {
                guard c.dtype == .bool, c.fixedElementCount.map({ $0 == 1 }) ?? true else { throw OpError("loop's cond must be one bool, got \(c)") }
            }
            let rest = try (2 ..< ctx.inputs.count).map { try ctx.input($0) }
            let iteration = TensorType(.int64, []), condition = TensorType(.bool, [])
            try checkInputs(body, [iteration, condition] + rest, "body", sameRank: false)
            guard body.outputs[0].type.dtype == .bool else { throw OpError("loop's body must return its condition (bool) first") }
            for k in 0 ..< carried where body.outputs[1 + k].type.dtype != rest[k].dtype {
                throw OpError("loop-carried value \(k) is \(rest[k].dtype.rawValue) but the body returns \(body.outputs[1 + k].type.dtype.rawValue)")
            }
            // A carried value's shape may change from one iteration to the next; scan outputs
            // stack every iteration's value along a new first axis.
            let outs = (0 ..< carried).map { TensorType(body.outputs[1 + $0].type.dtype, Array(repeating: .unknown, count: body.outputs[1 + $0].type.rank)) }
            return outs + (0 ..< scans).map { k -> TensorType? in
                let t = body.outputs[1 + carried + k].type
                return TensorType(t.dtype, [.unknown] + Array(repeating: .unknown, count: t.rank))
            }
        },
        op("scan", ["values"], variadic: true, outputs: 1 ... Int.max,
           ["body!": .graph, "num_scan_inputs!": .int, "captures": .int, "scan_input_axes": .ints, "scan_input_directions": .ints,
            "scan_output_axes": .ints, "scan_output_directions": .ints], groups: .controlFlow) { ctx in
            let body = try ctx.attributes.graph("body")
            let m = try ctx.attributes.int("num_scan_inputs", 0), c = try ctx.attributes.int("captures", 0)
            let n = ctx.inputs.count - m - c
            guard m >= 1, c >= 0, n >= 0 else {
                throw OpError("scan's \(ctx.inputs.count) inputs do not hold \(m) scan inputs and \(c) captures")
            }
            let k = ctx.outputCount - n
            guard k >= 0, body.outputs.count == n + k else {
                throw OpError("scan's body returns \(body.outputs.count) values for \(n) states and \(ctx.outputCount) outputs")
            }
            let inputs = try (0 ..< ctx.inputs.count).map { try ctx.input($0) }
            let inAxes = try ctx.attributes.ints("scan_input_axes") ?? Array(repeating: 0, count: m)
            let outAxes = try ctx.attributes.ints("scan_output_axes") ?? Array(repeating: 0, count: k)
            for (key, list, count) in [("scan_input_axes", inAxes, m), ("scan_output_axes", outAxes, k),
                                       ("scan_input_directions", try ctx.attributes.ints("scan_input_directions") ?? Array(repeating: 0, count: m), m),
                                       ("scan_output_directions", try ctx.attributes.ints("scan_output_directions") ?? Array(repeating: 0, count: k), k)] {
                guard list.count == count else { throw OpError("scan's \(key) has \(list.count) entries for \(count) values") }
                if key.hasSuffix("directions") { guard list.allSatisfy({ $0 == 0 || $0 == 1 }) else { throw OpError("scan's \(key) must be 0 or 1") } }
            }
            // The body sees one slice of each scan input (its scan axis removed).
            var sliced = Array(inputs[..<n])
            for j in 0 ..< m {
                let x = inputs[n + j]
                let axis = try normalize(axis: inAxes[j], rank: x.rank)
                var shape = x.shape
                shape.remove(at: axis)
                sliced.append(TensorType(x.dtype, shape))
            }
            try checkInputs(body, sliced + inputs[(n + m)...], "body")
            for s in 0 ..< n where body.outputs[s].type.dtype != inputs[s].dtype {
                throw OpError("state \(s) is \(inputs[s].dtype.rawValue) but the body returns \(body.outputs[s].type.dtype.rawValue)")
            }
            let states = (0 ..< n).map { inputs[$0] as TensorType? }
            return try states + (0 ..< k).map { j -> TensorType? in
                let t = body.outputs[n + j].type
                _ = try normalize(axis: outAxes[j], rank: t.rank + 1)
                return TensorType(t.dtype, Array(repeating: .unknown, count: t.rank + 1))
            }
        },
    ]

    /// Loop-carried and scan-output counts of a `loop` (body inputs: iteration, condition,
    /// carried values, captures; body outputs: condition, carried values, scan outputs).
    public static func loopCounts(_ ctx: OpSchema.Context, _ body: Function) throws -> (carried: Int, scans: Int) {
        let captures = try ctx.attributes.int("captures", 0)
        let carried = ctx.inputs.count - 2 - captures
        guard ctx.inputs.count >= 2, captures >= 0, carried >= 0 else {
            throw OpError("loop's \(ctx.inputs.count) inputs do not hold max_trip_count, cond and \(captures) captures")
        }
        let scans = ctx.outputCount - carried
        guard scans >= 0, body.outputs.count == 1 + carried + scans else {
            throw OpError("loop's body returns \(body.outputs.count) values for its condition, \(carried) carried values and \(max(scans, 0)) scan outputs")
        }
        return (carried, scans)
    }

    /// A body's inputs must be as many as `types`, each of the same dtype (and rank, unless
    /// `sameRank` is off: a loop-carried value may change rank).
    static func checkInputs(_ body: Function, _ types: [TensorType], _ key: String, sameRank: Bool = true) throws {
        guard body.inputs.count == types.count else {
            throw OpError("\(key) takes \(body.inputs.count) inputs, the op passes \(types.count)")
        }
        for (a, t) in zip(body.inputs, types) where a.type.dtype != t.dtype || (sameRank && a.type.rank != t.rank) {
            throw OpError("\(key) input '\(a.name)' is \(a.type) but the op passes \(t)")
        }
    }
}

extension Dictionary where Key == String, Value == AttributeValue {
    /// A graph attribute (a subgraph), which must be present.
    public func graph(_ name: String) throws -> Function {
        switch self[name] {
        case .graph(let f)?: return f
        case nil: throw OpError("attribute '\(name)' is missing")
        case let v?: throw OpError("attribute '\(name)' must be graph, got \(v.kind.rawValue)")
        }
    }
}

extension TensorType {
    /// The element count when every dim is fixed.
    var fixedElementCount: Int? {
        var n = 1
        for d in shape {
            guard case .size(let s) = d else { return nil }
            n *= s
        }
        return n
    }
}

extension Function {
    /// Whether an op of this function has a graph attribute (control flow).
    public var hasSubgraphs: Bool { operations.contains(where: \.hasSubgraphs) }
}

extension Operation {
    /// Whether the op has a graph attribute (control flow).
    public var hasSubgraphs: Bool {
        attributes.values.contains { if case .graph = $0 { return true } else { return false } }
    }
}
