/// Elementwise ops: arithmetic, comparisons, logic, casts (unary functions: OpSet+Unary.swift).
extension OpSet {
    static let bitwiseNames = [("bitwise_and", "BitwiseAnd"), ("bitwise_or", "BitwiseOr"), ("bitwise_xor", "BitwiseXor")]
    static let arithmeticNames = [("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("div", "Div")]
    static let comparisonNames = [("equal", "Equal"), ("less", "Less"), ("less_or_equal", "LessOrEqual"), ("greater", "Greater"),
                                  ("greater_or_equal", "GreaterOrEqual")]
    static let logicalNames = [("and", "And"), ("or", "Or"), ("xor", "Xor")]
    static let variadicNames = [("max", "Max"), ("min", "Min"), ("sum", "Sum"), ("mean", "Mean")]

    static func sameAsInput(_ ctx: OpSchema.Context) throws -> [TensorType?] {
        [try ctx.input(0)]
    }

    static func broadcastAll(_ types: [TensorType]) throws -> [Dimension] {
        try types.dropFirst().reduce(types.first?.shape ?? []) { try broadcast($0, $1.shape) }
    }

    static func sameDType(_ types: [TensorType]) throws {
        if let first = types.first, let other = types.first(where: { $0.dtype != first.dtype }) {
            throw OpError("dtypes differ: \(first.dtype.rawValue) and \(other.dtype.rawValue)")
        }
    }

    static func requireInteger(_ t: TensorType, _ op: String) throws {
        guard [.int64, .int32, .int16, .int8, .uint8, .uint16, .uint32, .uint64].contains(t.dtype) else { throw OpError("\(op) needs an integer input, got \(t.dtype.rawValue)") }
    }

    static func requireFloat(_ t: TensorType, _ op: String) throws {
        guard t.dtype.isFloatingPoint else { throw OpError("\(op) needs a floating-point input, got \(t.dtype.rawValue)") }
    }

    static var elementwiseOps: [OpSchema] {
        var ops: [OpSchema] = []
        for (name, onnx) in bitwiseNames {
            ops.append(op(name, onnx: onnx, ["a", "b"]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                try requireInteger(a, name)
                return [TensorType(a.dtype, try broadcast(a.shape, b.shape))]
            })
        }
        ops += [
            op("is_nan", onnx: "IsNaN", ["x"]) { ctx in [TensorType(.bool, try ctx.input(0).shape)] },
            op("is_inf", onnx: "IsInf", ["x"], ["detect_negative": .int, "detect_positive": .int]) { ctx in
                [TensorType(.bool, try ctx.input(0).shape)]
            },
            op("not", onnx: "Not", ["x"]) { ctx in
                let x = try ctx.input(0)
                guard x.dtype == .bool else { throw OpError("not needs bool input, got \(x.dtype.rawValue)") }
                return [x]
            },
            op("cast", ["x"], ["to!": .dtype]) { ctx in
                guard case .dtype(let to)? = ctx.attributes["to"] else { throw OpError("'to' must be a dtype") }
                guard !to.isSubByte else { throw OpError("cannot cast to \(to.rawValue)") }
                return [TensorType(to, try ctx.input(0).shape)]
            },
            op("bitwise_not", onnx: "BitwiseNot", ["x"]) { ctx in
                try requireInteger(try ctx.input(0), "bitwise_not")
                return [try ctx.input(0)]
            },
            op("bit_shift", onnx: "BitShift", ["a", "b"], ["direction!": .string]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                try requireInteger(a, "bit_shift")
                let direction = try ctx.attributes.string("direction", "")
                guard direction == "LEFT" || direction == "RIGHT" else { throw OpError("direction must be \"LEFT\" or \"RIGHT\", got \"\(direction)\"") }
                return [TensorType(a.dtype, try broadcast(a.shape, b.shape))]
            },
            op("mod", onnx: "Mod", ["a", "b"], ["fmod": .int], groups: .arithmetic) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                return [TensorType(a.dtype, try broadcast(a.shape, b.shape))]
            },
            op("prelu", onnx: "PRelu", ["x", "slope"]) { ctx in
                let (x, slope) = (try ctx.input(0), try ctx.input(1))
                try sameDType([x, slope])
                return [TensorType(x.dtype, try broadcast(x.shape, slope.shape))]
            },
            op("swiglu", ["a", "b"], ["alpha": .float]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                try requireFloat(a, "swiglu")
                guard a.rank == b.rank else { throw OpError("swiglu needs a and b of one shape") }
                for (x, y) in zip(a.shape, b.shape) { try requireEqual(x, y, "swiglu's shapes") }
                return [a]
            },
            op("trilu", ["x", "k?"], ["upper": .int, "k": .int]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 2 else { throw OpError("trilu needs x of rank ≥ 2") }
                return [x]
            },
            op("pow", onnx: "Pow", ["x", "exponent"], groups: [.arithmetic, .layoutAgnostic]) { ctx in
                let (x, e) = (try ctx.input(0), try ctx.input(1))
                return [TensorType(x.dtype, try broadcast(x.shape, e.shape))]
            },
            op("where", onnx: "Where", ["condition", "x", "y"]) { ctx in
                let (c, x, y) = (try ctx.input(0), try ctx.input(1), try ctx.input(2))
                guard c.dtype == .bool else { throw OpError("condition must be bool, got \(c.dtype.rawValue)") }
                try sameDType([x, y])
                return [TensorType(x.dtype, try broadcastAll([c, x, y]))]
            },
        ]
        for (name, onnx) in arithmeticNames {
            ops.append(op(name, onnx: onnx, ["a", "b"], groups: [.arithmetic, .layoutAgnostic]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                return [TensorType(a.dtype, try broadcast(a.shape, b.shape))]
            })
        }
        for (name, onnx) in variadicNames {
            // max and min of two inputs run the binary kernels.
            ops.append(op(name, onnx: onnx, ["x"], variadic: true, groups: name == "max" || name == "min" ? [.arithmetic, .layoutAgnostic] : []) { ctx in
                let all = try ctx.inputs.indices.map { try ctx.input($0) }
                try sameDType(all)
                return [TensorType(all[0].dtype, try broadcastAll(all))]
            })
        }
        for (name, onnx) in comparisonNames {
            ops.append(op(name, onnx: onnx, ["a", "b"], groups: .comparison) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                return [TensorType(.bool, try broadcast(a.shape, b.shape))]
            })
        }
        for (name, onnx) in logicalNames {
            ops.append(op(name, onnx: onnx, ["a", "b"], groups: .logical) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                guard a.dtype == .bool, b.dtype == .bool else { throw OpError("\(name) needs bool inputs") }
                return [TensorType(.bool, try broadcast(a.shape, b.shape))]
            })
        }
        return ops
    }
}
