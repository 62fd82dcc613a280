import KilnFormat

/// Runs a closed subgraph: arrays in its input order in, its outputs in order out. Floats are
/// float32 on both sides (as everywhere inside an interpreter).
public protocol SubgraphRunner: Sendable {
    /// Runs the subgraph once.
    /// - Parameter inputs: One array per subgraph input.
    /// - Returns: One array per subgraph output.
    /// - Throws: ``OpError`` or ``InferenceError`` when a step fails.
    func run(_ inputs: [NDArray]) throws -> [NDArray]
}

/// Prepares a subgraph (a control-flow body) once, when its op is planned.
public typealias SubgraphPlanner = @Sendable (Function) throws -> any SubgraphRunner

/// The kernels of `if`, `loop` and `scan` (specs/ops.md): each plans its bodies once with the
/// planner it is given (the reference interpreter, or the runtime's compiled plans) and runs them
/// on every call.
enum ControlFlow {
    static func kernel(for op: Operation, planner: SubgraphPlanner) throws -> Kernel {
        let a = op.attributes
        switch op.opType {
        case "if":
            let (then, otherwise) = (try planner(try a.graph("then_branch")), try planner(try a.graph("else_branch")))
            return { inputs in
                let c = try KernelTable.present(inputs, 0)
                guard c.scalarType == .bool, c.elementCount == 1 else { throw OpError("if needs a one-element bool condition, got \(c.scalarType.rawValue)\(c.shape)") }
                return try (try c.values(Bool.self)[0] ? then : otherwise).run(try captured(inputs, from: 1))
            }
        case "loop":
            let graph = try a.graph("body")
            let body = try planner(graph)
            let (carried, scans) = try OpSet.loopCounts(
                OpSchema.Context(inputs: op.inputs.map { _ in nil }, attributes: a, outputCount: op.outputs.count), graph)
            let declared = graph.outputs.map(\.type)
            return { inputs in try loop(inputs, body: body, carried: carried, scans: scans, declared: declared) }
        case "scan":
            let graph = try a.graph("body")
            let body = try planner(graph)
            let m = try a.int("num_scan_inputs", 0), c = try a.int("captures", 0)
            let n = op.inputs.count - m - c, k = op.outputs.count - n
            guard m >= 1, c >= 0, n >= 0, k >= 0 else { throw OpError("scan's inputs do not hold \(m) scan inputs and \(c) captures") }
            let inAxes = try a.ints("scan_input_axes") ?? Array(repeating: 0, count: m)
            let inDirections = try a.ints("scan_input_directions") ?? Array(repeating: 0, count: m)
            let outAxes = try a.ints("scan_output_axes") ?? Array(repeating: 0, count: k)
            let outDirections = try a.ints("scan_output_directions") ?? Array(repeating: 0, count: k)
            guard inAxes.count == m, inDirections.count == m, outAxes.count == k, outDirections.count == k else {
                throw OpError("scan's axes and directions do not match its \(m) scan inputs and \(k) scan outputs")
            }
            let declared = graph.outputs.map(\.type)
            return { inputs in
                try scan(inputs, body: body, states: n, scanInputs: m, inAxes: inAxes, inDirections: inDirections,
                         outAxes: outAxes, outDirections: outDirections, declared: declared)
            }
        default:
            throw OpError("unknown control-flow op '\(op.opType)'")
        }
    }

    /// Inputs `from...`, each of which must be present.
    static func captured(_ inputs: [NDArray?], from start: Int) throws -> [NDArray] {
        try (start ..< inputs.count).map { try KernelTable.present(inputs, $0) }
    }

    /// ONNX `Loop`: run while the trip count and the condition allow; carried values feed the next
    /// iteration; scan outputs stack each iteration's value along a new first axis.
    static func loop(_ inputs: [NDArray?], body: any SubgraphRunner, carried: Int, scans: Int, declared: [TensorType]) throws -> [NDArray] {
        var limit = Int.max
        if let m = inputs[0] {
            guard m.scalarType == .int64, m.elementCount == 1 else { throw OpError("loop's max_trip_count must be one int64") }
            limit = max(0, try m.intValues()[0])
        }
        var keepGoing = true
        if let c = inputs[1] {
            guard c.scalarType == .bool, c.elementCount == 1 else { throw OpError("loop's cond must be one bool") }
            keepGoing = try c.values(Bool.self)[0]
        }
        var values = try (2 ..< 2 + carried).map { try KernelTable.present(inputs, $0) }
        let captures = try captured(inputs, from: 2 + carried)
        var stacked = [[NDArray]](repeating: [], count: scans)
        var iteration = 0
        while iteration < limit && keepGoing {
            let out = try body.run([NDArray.int64([iteration], shape: []), NDArray(shape: [], scalars: [keepGoing])] + values + captures)
            guard out.count == 1 + carried + scans else { throw OpError("loop's body returned \(out.count) values") }
            guard out[0].scalarType == .bool, out[0].elementCount == 1 else { throw OpError("loop's body must return a one-element bool condition") }
            keepGoing = try out[0].values(Bool.self)[0]
            values = Array(out[1 ..< 1 + carried])
            for k in 0 ..< scans { stacked[k].append(out[1 + carried + k]) }
            iteration += 1
            guard stacked.reduce(0, { $0 + $1.reduce(0) { $0 + $1.elementCount } }) <= maximumElements else {
                throw OpError("loop's scan outputs exceed \(maximumElements) elements")
            }
        }
        return try values + (0 ..< scans).map { k in try stack(stacked[k], axis: 0, empty: declared[1 + carried + k]) }
    }

    /// ONNX `Scan` (opset 9 and later): the body runs once per slice along each scan input's axis.
    static func scan(_ inputs: [NDArray?], body: any SubgraphRunner, states n: Int, scanInputs m: Int, inAxes: [Int], inDirections: [Int],
                     outAxes: [Int], outDirections: [Int], declared: [TensorType]) throws -> [NDArray] {
        var states = try (0 ..< n).map { try KernelTable.present(inputs, $0) }
        let xs = try (n ..< n + m).map { try KernelTable.present(inputs, $0).contiguous() }
        let captures = try captured(inputs, from: n + m)
        let axes = try zip(xs, inAxes).map { try OpSet.normalize(axis: $1, rank: $0.rank) }
        let length = xs[0].shape[axes[0]]
        for (x, axis) in zip(xs, axes) where x.shape[axis] != length {
            throw OpError("scan inputs differ in sequence length: \(length) vs \(x.shape[axis])")
        }
        let k = outAxes.count
        var collected = [[NDArray]](repeating: [], count: k)
        for t in 0 ..< length {
            let slices = try (0 ..< m).map { j in try slice(xs[j], axis: axes[j], index: inDirections[j] == 1 ? length - 1 - t : t) }
            let out = try body.run(states + slices + captures)
            guard out.count == n + k else { throw OpError("scan's body returned \(out.count) values") }
            states = Array(out[..<n])
            for j in 0 ..< k { collected[j].append(out[n + j]) }
        }
        return try states + (0 ..< k).map { j in
            let items = outDirections[j] == 1 ? collected[j].reversed() : collected[j]
            let rank = (items.first?.rank ?? declared[n + j].rank) + 1
            return try stack(items, axis: try OpSet.normalize(axis: outAxes[j], rank: rank), empty: declared[n + j])
        }
    }

    /// Index `index` of `x` along `axis`, that axis removed.
    static func slice(_ x: NDArray, axis: Int, index: Int) throws -> NDArray {
        var shape = x.shape
        let count = shape.remove(at: axis)
        let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *) * x.elementSize
        var out = NDArray(shape: shape, scalarType: x.scalarType)
        x.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for o in 0 ..< outer where inner > 0 {
                    dst.baseAddress!.advanced(by: o * inner).copyMemory(from: src.baseAddress!.advanced(by: (o * count + index) * inner), byteCount: inner)
                }
            }
        }
        return out
    }

    /// Equal-shaped arrays stacked along a new axis `axis`; none gives a 0-long axis over the
    /// declared element shape (unknown dims 0).
    static func stack(_ items: [NDArray], axis: Int, empty: TensorType) throws -> NDArray {
        guard let first = items.first else {
            var shape = empty.shape.map { $0.size ?? 0 }
            shape.insert(0, at: min(axis, shape.count))
            return NDArray(shape: shape, scalarType: empty.dtype.isFloatingPoint ? .float32 : empty.dtype)
        }
        for x in items where x.shape != first.shape || x.scalarType != first.scalarType {
            throw OpError("scan outputs differ between iterations: \(first.scalarType.rawValue)\(first.shape) vs \(x.scalarType.rawValue)\(x.shape)")
        }
        var shape = first.shape
        shape.insert(items.count, at: axis)
        let outer = first.shape[..<axis].reduce(1, *), inner = first.shape[axis...].reduce(1, *) * first.elementSize
        var out = NDArray(shape: shape, scalarType: first.scalarType)
        out.withUnsafeMutableBytes { dst in
            for (t, x) in items.enumerated() {
                x.withUnsafeBytes { src in
                    for o in 0 ..< outer where inner > 0 {
                        dst.baseAddress!.advanced(by: (o * items.count + t) * inner).copyMemory(from: src.baseAddress!.advanced(by: o * inner), byteCount: inner)
                    }
                }
            }
        }
        return out
    }
}
