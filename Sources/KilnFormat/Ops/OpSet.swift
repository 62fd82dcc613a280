/// The ops the package format knows (specs/ops.md).
public enum OpSet {
    /// Schemas by op type.
    public static let schemas: [String: OpSchema] = {
        var all: [String: OpSchema] = [:]
        for s in definitions { all[s.name] = s }
        return all
    }()

    /// The schema of `opType`, if the op set has it.
    public static func schema(_ opType: String) -> OpSchema? { schemas[opType] }

    private static func input(_ name: String, optional: Bool = false) -> OpSchema.Input {
        OpSchema.Input(name: name, optional: optional)
    }

    private static func attr(_ kind: AttributeKind, required: Bool = false) -> OpSchema.AttributeSpec {
        OpSchema.AttributeSpec(kind: kind, required: required)
    }

    private static func binary(_ name: String) -> OpSchema {
        OpSchema(name: name, inputs: [input("a"), input("b")], variadic: false, outputCount: 1, attributes: [:]) { t, _ in
            let (a, b) = (try present(t, 0), try present(t, 1))
            guard a.dtype == b.dtype else { throw OpError("dtypes differ: \(a.dtype.rawValue) and \(b.dtype.rawValue)") }
            return [TensorType(a.dtype, try broadcast(a.shape, b.shape))]
        }
    }

    private static func unary(_ name: String, attributes: [String: OpSchema.AttributeSpec] = [:]) -> OpSchema {
        OpSchema(name: name, inputs: [input("x")], variadic: false, outputCount: 1, attributes: attributes) { t, _ in
            [try present(t, 0)]
        }
    }

    static let definitions: [OpSchema] = [
        binary("add"), binary("sub"), binary("mul"), binary("div"),
        unary("relu"),
        unary("gelu", attributes: ["approximate": attr(.string)]),
        OpSchema(name: "softmax", inputs: [input("x")], variadic: false, outputCount: 1,
                 attributes: ["axis": attr(.int)]) { t, a in
            let x = try present(t, 0)
            _ = try axis(a["axis"], default: -1, rank: x.rank)
            return [x]
        },
        OpSchema(name: "layer_norm", inputs: [input("x"), input("scale"), input("bias", optional: true)],
                 variadic: false, outputCount: 1,
                 attributes: ["axis": attr(.int), "epsilon": attr(.float)]) { t, a in
            let x = try present(t, 0)
            _ = try axis(a["axis"], default: -1, rank: x.rank)
            return [x]
        },
        OpSchema(name: "linear", inputs: [input("x"), input("weight"), input("bias", optional: true)],
                 variadic: false, outputCount: 1, attributes: [:]) { t, _ in
            let (x, w) = (try present(t, 0), try present(t, 1))
            guard w.rank == 2, x.rank >= 1 else { throw OpError("linear needs x of rank ≥ 1 and a rank-2 weight, got \(x) and \(w)") }
            try requireEqual(x.shape[x.rank - 1], w.shape[1], "x's last dim and weight's dim 1")
            if let b = t.count > 2 ? t[2] : nil, b.rank != 1 {
                throw OpError("bias must have rank 1, got \(b)")
            }
            return [TensorType(x.dtype, Array(x.shape.dropLast()) + [w.shape[0]])]
        },
        OpSchema(name: "matmul", inputs: [input("a"), input("b")], variadic: false, outputCount: 1, attributes: [:]) { t, _ in
            let (a, b) = (try present(t, 0), try present(t, 1))
            guard a.rank >= 2, b.rank >= 2 else { throw OpError("matmul operands need rank ≥ 2, got \(a) and \(b)") }
            try requireEqual(a.shape[a.rank - 1], b.shape[b.rank - 2], "a's last dim and b's second-to-last dim")
            let batch = try broadcast(Array(a.shape.dropLast(2)), Array(b.shape.dropLast(2)))
            return [TensorType(a.dtype, batch + [a.shape[a.rank - 2], b.shape[b.rank - 1]])]
        },
        OpSchema(name: "gather", inputs: [input("data"), input("indices")], variadic: false, outputCount: 1,
                 attributes: ["axis": attr(.int)]) { t, a in
            let (d, i) = (try present(t, 0), try present(t, 1))
            guard i.dtype == .int64 || i.dtype == .int32 else { throw OpError("indices must be int64 or int32, got \(i.dtype.rawValue)") }
            let ax = try axis(a["axis"], default: 0, rank: d.rank)
            return [TensorType(d.dtype, Array(d.shape[..<ax]) + i.shape + Array(d.shape[(ax + 1)...]))]
        },
        OpSchema(name: "transpose", inputs: [input("x")], variadic: false, outputCount: 1,
                 attributes: ["perm": attr(.ints, required: true)]) { t, a in
            let x = try present(t, 0)
            guard case .ints(let perm)? = a["perm"], perm.count == x.rank,
                  Set(perm) == Set(0 ..< x.rank) else {
                throw OpError("perm must be a permutation of 0..<\(x.rank)")
            }
            return [TensorType(x.dtype, perm.map { x.shape[$0] })]
        },
        OpSchema(name: "reshape", inputs: [input("x")], variadic: false, outputCount: 1,
                 attributes: ["shape": attr(.ints, required: true)]) { t, a in
            let x = try present(t, 0)
            guard case .ints(let target)? = a["shape"] else { throw OpError("shape is missing") }
            return [TensorType(x.dtype, try reshape(x.shape, target))]
        },
    ]

    // MARK: Shape helpers

    static func present(_ t: [TensorType?], _ i: Int) throws -> TensorType {
        guard i < t.count, let v = t[i] else { throw OpError("input \(i) is missing") }
        return v
    }

    static func axis(_ value: AttributeValue?, default d: Int, rank: Int) throws -> Int {
        var a = d
        if let value {
            guard case .int(let v) = value else { throw OpError("axis must be an int") }
            a = v
        }
        let n = a < 0 ? a + rank : a
        guard n >= 0, n < max(rank, 1) else { throw OpError("axis \(a) is out of range for rank \(rank)") }
        return n
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

    /// Reshape's target shape: 0 copies the input dim, -1 takes what is left.
    static func reshape(_ input: [Dimension], _ target: [Int]) throws -> [Dimension] {
        guard target.filter({ $0 == -1 }).count <= 1 else { throw OpError("shape has more than one -1") }
        var out: [Dimension] = []
        for (i, t) in target.enumerated() {
            switch t {
            case 0:
                guard i < input.count else { throw OpError("shape[\(i)] = 0 copies a dim the input lacks") }
                out.append(input[i])
            case -1: out.append(.unknown)
            case let n where n > 0: out.append(.size(n))
            default: throw OpError("shape[\(i)] = \(t) is invalid")
            }
        }
        if let hole = target.firstIndex(of: -1) {
            let known = input.compactMap(\.size)
            let rest = out.enumerated().filter { $0.offset != hole }.map(\.element.size)
            if known.count == input.count, !rest.contains(where: { $0 == nil }) {
                guard let total = elementCount(known), let part = elementCount(rest.map { $0! }),
                      part > 0, total % part == 0 else {
                    throw OpError("cannot reshape \(input.map(\.displayText)) to \(target)")
                }
                out[hole] = .size(total / part)
            }
        } else if let total = elementCount(input.compactMap(\.size)), input.allSatisfy({ $0.size != nil }),
                  out.allSatisfy({ $0.size != nil }), elementCount(out.map { $0.size! }) != total {
            throw OpError("cannot reshape \(input.map(\.displayText)) to \(target)")
        }
        return out
    }
}
