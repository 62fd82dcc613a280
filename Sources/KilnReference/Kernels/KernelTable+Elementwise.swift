import KilnFormat

extension KernelTable {
    /// Kernels of the arithmetic ops: signs, integer forms of the unary ops, clipping, and the binary and
    /// variadic arithmetic (broadcasting, any numeric dtype); `nil` for other ops.
    static func arithmeticKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "sign":
            return { inputs in
                let x = try present(inputs, 0)
                if x.scalarType == .float32 { return [try Elementwise.mapFloat(x) { $0.isNaN ? $0 : $0 > 0 ? 1 : $0 < 0 ? -1 : 0 }] }
                let zero = NDArray(shape: [], scalarType: x.scalarType)
                let pos = try Elementwise.cast(try Elementwise.compare("greater", x, zero), to: x.scalarType)
                let neg = try Elementwise.cast(try Elementwise.compare("less", x, zero), to: x.scalarType)
                return [try Elementwise.arithmetic("sub", pos, neg)]
            }
        // Integer inputs (float32 ones take the registry's formula).
        case "relu", "abs", "neg":
            let name = op.opType
            return { inputs in
                let x = try present(inputs, 0)
                let zero = NDArray(shape: [], scalarType: x.scalarType)
                switch name {
                case "relu": return [try Elementwise.arithmetic("max", x, zero)]
                case "neg": return [try Elementwise.arithmetic("sub", zero, x)]
                default: return [try Elementwise.arithmetic("max", x, try Elementwise.arithmetic("sub", zero, x))]
                }
            }
        case "mod":
            let name = try a.int("fmod", 0) != 0 ? "fmod" : "mod"
            return { inputs in [try Elementwise.arithmetic(name, try present(inputs, 0), try present(inputs, 1))] }
        case "add", "sub", "mul", "div":
            let name = op.opType
            return { inputs in [try Elementwise.arithmetic(name, try present(inputs, 0), try present(inputs, 1))] }
        case "max", "min", "sum", "mean":
            let name = op.opType
            return { inputs in
                var acc = try present(inputs, 0)
                for i in 1 ..< max(inputs.count, 1) { acc = try Elementwise.arithmetic(name, acc, try present(inputs, i)) }
                if name == "mean" {
                    let n = Float(inputs.count)
                    acc = acc.scalarType == .float32 ? try Elementwise.mapFloat(acc) { $0 / n }
                        : try Elementwise.arithmetic("div", acc, try Elementwise.cast(NDArray(scalar: n), to: acc.scalarType))
                }
                return [acc]
            }
        case "pow": return { inputs in [try Elementwise.pow(try present(inputs, 0), try present(inputs, 1))] }
        case "prelu":
            return { inputs in
                let (x, slope) = (try present(inputs, 0), try present(inputs, 1))
                let zero = NDArray(shape: [], scalarType: x.scalarType)
                return [try Elementwise.select(try Elementwise.compare("less", x, zero), try Elementwise.arithmetic("mul", x, slope), x)]
            }
        case "swiglu":
            let alpha = Float(try a.float("alpha", 1))
            return { inputs in
                let (x, y) = (try present(inputs, 0), try present(inputs, 1))
                guard x.shape == y.shape else { throw OpError("swiglu needs a and b of one shape, got \(x.shape) and \(y.shape)") }
                let gate = try Elementwise.mapFloat(x) { $0 * Elementwise.sigmoid(alpha * $0) }
                return [try Elementwise.arithmetic("mul", gate, y)]
            }
        case "clip":
            let lo = a["min"] != nil ? Float(try a.float("min", 0)) : nil, hi = a["max"] != nil ? Float(try a.float("max", 0)) : nil
            return { inputs in
                var x = try present(inputs, 0)
                if let m = inputs.count > 1 ? inputs[1] : nil { x = try Elementwise.arithmetic("max", x, m) } else if let lo {
                    x = try Elementwise.arithmetic("max", x, try Elementwise.cast(NDArray(scalar: lo), to: x.scalarType))
                }
                if let m = inputs.count > 2 ? inputs[2] : nil { x = try Elementwise.arithmetic("min", x, m) } else if let hi {
                    x = try Elementwise.arithmetic("min", x, try Elementwise.cast(NDArray(scalar: hi), to: x.scalarType))
                }
                return [x]
            }
        default:
            return nil
        }
    }

    /// Kernels of the bitwise, logical, comparison, selection and test ops, identity and cast; `nil` for
    /// other ops.
    static func logicKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "bitwise_and", "bitwise_or", "bitwise_xor":
            let name = op.opType
            return { inputs in [try Elementwise.arithmetic(name, try present(inputs, 0), try present(inputs, 1))] }
        case "bit_shift":
            let name = try a.string("direction", "") == "LEFT" ? "shift_left" : "shift_right"
            return { inputs in [try Elementwise.arithmetic(name, try present(inputs, 0), try present(inputs, 1))] }
        case "bitwise_not":
            return { inputs in
                let x = try present(inputs, 0)
                // All bits set, whatever the integer type.
                var ones = NDArray(shape: [], scalarType: x.scalarType)
                ones.withUnsafeMutableBytes { for i in $0.indices { $0[i] = 0xFF } }
                return [try Elementwise.arithmetic("bitwise_xor", x, ones)]
            }
        case "identity": return { inputs in [try present(inputs, 0)] }
        case "is_nan": return { inputs in [try Elementwise.testFloat(try present(inputs, 0)) { $0.isNaN }] }
        case "is_inf":
            let neg = try a.int("detect_negative", 1) != 0, pos = try a.int("detect_positive", 1) != 0
            return { inputs in
                [try Elementwise.testFloat(try present(inputs, 0)) { $0.isInfinite && ($0 > 0 ? pos : neg) }]
            }
        case "not":
            return { inputs in
                let x = try present(inputs, 0)
                guard x.scalarType == .bool else { throw OpError("not needs bool input") }
                return [NDArray(shape: x.shape, scalars: try x.values(Bool.self).map { !$0 })]
            }
        case "cast":
            guard case .dtype(let to)? = a["to"] else { throw OpError("'to' must be a dtype") }
            return { inputs in [try Elementwise.cast(try present(inputs, 0), to: to)] }
        case "equal", "less", "less_or_equal", "greater", "greater_or_equal":
            let name = op.opType
            return { inputs in [try Elementwise.compare(name, try present(inputs, 0), try present(inputs, 1))] }
        case "and", "or", "xor":
            let name = op.opType
            return { inputs in
                let (x, y) = (try present(inputs, 0), try present(inputs, 1))
                guard x.scalarType == .bool, y.scalarType == .bool else { throw OpError("\(name) needs bool inputs") }
                return [try Elementwise.binary(x, y, Bool.self, Bool.self) { p, q in
                    name == "and" ? p && q : name == "or" ? p || q : p != q
                }]
            }
        case "where":
            return { inputs in [try Elementwise.select(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2))] }
        default:
            return nil
        }
    }
}
