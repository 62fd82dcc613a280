/// The ops the package format knows (specs/ops.md): the registry and shared shape rules.
public enum OpSet {
    /// Schemas by op type.
    public static let schemas: [String: OpSchema] = {
        var all: [String: OpSchema] = [:]
        for s in unaryOps + elementwiseOps + tensorOps + networkOps + reductionOps + recurrentOps + controlFlowOps + visionOps + sequenceOps {
            precondition(all.updateValue(s, forKey: s.name) == nil, "op \(s.name) defined twice")
        }
        return all
    }()

    /// Each ONNX operator (domain ai.onnx) that some op converts from one to one, its attributes
    /// carried over, with that op's type. Built from the schemas' `onnx` names; a name claimed by
    /// two ops is a registry error (a test checks there is none).
    public static let onnxDirect: [String: String] = Dictionary(
        schemas.values.flatMap { s in s.onnx.map { ($0, s.name) } }, uniquingKeysWith: { a, b in min(a, b) })

    /// The op types of a group, for kernel families and passes that handle the group.
    /// - Parameter group: One group.
    /// - Returns: The op types whose schemas are in it.
    public static func ops(in group: OpGroups) -> Set<String> {
        Set(schemas.values.filter { $0.groups.contains(group) }.map(\.name))
    }

    /// The schema of `opType`, if the op set has it.
    public static func schema(_ opType: String) -> OpSchema? { schemas[opType] }

    /// Builds a schema. Input names ending in `?` are optional; `attributes` maps names to
    /// kinds, with a trailing `!` on the name for required ones.
    static func op(_ name: String, onnx: String? = nil, _ inputs: [String], variadic: Bool = false, outputs: ClosedRange<Int> = 1 ... 1,
                   _ attributes: [String: AttributeKind] = [:], groups: OpGroups = [], shapeInputs: [Int] = [],
                   infer: @escaping OpSchema.Inference) -> OpSchema {
        var specs: [String: OpSchema.AttributeSpec] = [:]
        for (key, kind) in attributes {
            let required = key.hasSuffix("!")
            specs[required ? String(key.dropLast()) : key] = OpSchema.AttributeSpec(kind: kind, required: required)
        }
        return OpSchema(
            name: name,
            inputs: inputs.map { OpSchema.Input(name: $0.hasSuffix("?") ? String($0.dropLast()) : $0, optional: $0.hasSuffix("?")) },
            variadic: variadic, outputCount: outputs, attributes: specs, infer: infer, onnx: onnx.map { [$0] } ?? [], groups: groups,
            shapeInputs: shapeInputs)
    }

    // MARK: Shape helpers

    /// A possibly negative axis made non-negative, checked against `rank`.
    public static func normalize(axis a: Int, rank: Int) throws -> Int {
        let n = a < 0 ? a + rank : a
        // A scalar has no axis: every op that takes one needs rank ≥ 1.
        guard n >= 0, n < rank else {
            throw OpError("axis \(a) is out of range for rank \(rank)")
        }
        return n
    }

    static func axis(_ ctx: OpSchema.Context, _ name: String = "axis", default d: Int, rank: Int) throws -> Int {
        try normalize(axis: try ctx.attributes.int(name, d), rank: rank)
    }

    static func requireEqual(_ a: Dimension, _ b: Dimension, _ what: String) throws {
        if case .size(let x) = a, case .size(let y) = b, x != y {
            throw OpError("\(what) differ: \(x) vs \(y)")
        }
    }

    /// NumPy broadcasting of two shapes, with symbols: equal dims stay, 1 yields to
    /// the other side, a size meets a symbol as that size, two different symbols
    /// give an anonymous dim.
    public static func broadcast(_ a: [Dimension], _ b: [Dimension]) throws -> [Dimension] {
        let rank = max(a.count, b.count)
        var out: [Dimension] = []
        out.reserveCapacity(rank)
        for i in 0 ..< rank {
            let x = i < rank - a.count ? Dimension.size(1) : a[i - (rank - a.count)]
            let y = i < rank - b.count ? Dimension.size(1) : b[i - (rank - b.count)]
            switch (x, y) {
            case _ where x == y: out.append(x)
            case (.size(1), _): out.append(y)
            case (_, .size(1)): out.append(x)
            case (.size(let m), .size(let n)): throw OpError("shapes cannot broadcast: \(m) vs \(n)")
            case (.size, .symbol): out.append(x)
            case (.symbol, .size): out.append(y)
            default: out.append(.unknown)
            }
        }
        return out
    }

    /// Reshape's target shape: 0 copies the input dim (unless `allowZero`), -1 takes what is left.
    public static func reshape(_ input: [Dimension], _ target: [Int], allowZero: Bool = false) throws -> [Dimension] {
        guard target.filter({ $0 == -1 }).count <= 1 else { throw OpError("shape has more than one -1") }
        var out: [Dimension] = []
        for (i, t) in target.enumerated() {
            switch t {
            case 0 where !allowZero:
                guard i < input.count else { throw OpError("shape[\(i)] = 0 copies a dim the input lacks") }
                out.append(input[i])
            case -1: out.append(.unknown)
            case let n where n >= 0: out.append(.size(n))
            default: throw OpError("shape[\(i)] = \(t) is invalid")
            }
        }
        let known = input.compactMap(\.size)
        let inputStatic = known.count == input.count
        if let hole = target.firstIndex(of: -1) {
            let rest = out.enumerated().filter { $0.offset != hole }.map(\.element.size)
            if inputStatic, !rest.contains(where: { $0 == nil }) {
                guard let total = elementCount(known), let part = elementCount(rest.map { $0! }),
                      part > 0, total % part == 0 else {
                    throw OpError("cannot reshape [\(input.map(\.displayText).joined(separator: ", "))] to \(target)")
                }
                out[hole] = .size(total / part)
            } else if let size = cancelledHole(input, out, hole) {
                out[hole] = .size(size)
            }
        } else if inputStatic, out.allSatisfy({ $0.size != nil }),
                  elementCount(known) != elementCount(out.map { $0.size! }) {
            throw OpError("cannot reshape [\(input.map(\.displayText).joined(separator: ", "))] to \(target)")
        }
        return out
    }

    /// The size of a reshape's -1 when the input and the other output dims share named symbols
    /// (`[batch, seq, 256]` to `[batch, seq, -1, 64]`: 4): the shared symbols cancel and the
    /// rest must be static. Nil when it cannot be told.
    static func cancelledHole(_ input: [Dimension], _ out: [Dimension], _ hole: Int) -> Int? {
        var rest = out.enumerated().filter { $0.offset != hole }.map(\.element)
        var left: [Dimension] = []
        for d in input {
            if case .symbol(let s) = d, !s.isEmpty, let i = rest.firstIndex(of: d) { rest.remove(at: i) } else { left.append(d) }
        }
        let (a, b) = (left.compactMap(\.size), rest.compactMap(\.size))
        guard a.count == left.count, b.count == rest.count, let total = elementCount(a), let part = elementCount(b), part > 0,
              total % part == 0 else { return nil }
        return total / part
    }

    /// `n` anonymous dims.
    static func unknownDims(_ n: Int) -> [Dimension] {
        [Dimension](repeating: .unknown, count: n)
    }

    /// The static length of a 1-D parameter tensor (shape, pads, …), when known.
    static func staticLength(_ t: TensorType?) -> Int? {
        guard let t, t.rank == 1 else { return nil }
        return t.shape[0].size
    }

    /// Product of dims, or an anonymous dim when any is dynamic (or the product is past
    /// ``maximumTensorElements``, which validation then refuses).
    static func product(_ dims: ArraySlice<Dimension>) -> Dimension {
        var p = 1
        for d in dims {
            guard let n = d.size else { return .unknown }
            let (q, overflow) = p.multipliedReportingOverflow(by: n)
            guard !overflow, q <= maximumTensorElements else { return .unknown }
            p = q
        }
        return .size(p)
    }
}
