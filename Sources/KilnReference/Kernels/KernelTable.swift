import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// One op, ready to run: attributes are parsed when the plan is made, not per call.
typealias Kernel = @Sendable ([NDArray?]) throws -> [NDArray]

/// Maps each op type of specs/ops.md to its reference kernel.
enum KernelTable {
    static func present(_ inputs: [NDArray?], _ i: Int) throws -> NDArray {
        guard i < inputs.count, let x = inputs[i] else { throw OpError("input \(i) is missing") }
        return x
    }

    /// A parameter given as an ints attribute, or else as an optional input tensor.
    static func intsParameter(_ op: Operation, _ name: String, input: Int) throws -> @Sendable ([NDArray?]) throws -> [Int]? {
        let fixed = try op.attributes.ints(name)
        return { inputs in
            if let fixed { return fixed }
            guard input < inputs.count, let t = inputs[input] else { return nil }
            return try t.intValues()
        }
    }

    /// An elementwise unary op: the registry's formula on float32 inputs (computed in Double);
    /// other dtypes (and clip with bound inputs) by the op's own kernel below.
    static func unaryKernel(for op: Operation, _ map: UnaryMap, subgraphs: SubgraphPlanner) throws -> Kernel {
        let f = try map.formula(OpAttributes(op))
        let other: Kernel? = map.acceptsIntegers ? try kernel(of: op, subgraphs: subgraphs) : nil
        let type = op.opType
        return { inputs in
            let x = try present(inputs, 0)
            if x.scalarType == .float32, inputs.count == 1 { return [try Elementwise.mapFloat(x) { Float(f(Double($0))) }] }
            guard let other else { throw OpError("\(type) needs a float32 input, got \(x.scalarType.rawValue)") }
            return try other(inputs)
        }
    }

    static func kernel(for op: Operation, subgraphs: SubgraphPlanner = ReferenceInterpreter.planSubgraph) throws -> Kernel {
        if let map = OpSet.schema(op.opType)?.unary { return try unaryKernel(for: op, map, subgraphs: subgraphs) }
        return try kernel(of: op, subgraphs: subgraphs)
    }

    // swiftlint:disable:next cyclomatic_complexity function_body_length
    static func kernel(of op: Operation, subgraphs: SubgraphPlanner) throws -> Kernel {
        let a = op.attributes
        switch op.opType {
        case "if", "loop", "scan": return try ControlFlow.kernel(for: op, planner: subgraphs)
        case "sign":
            return { inputs in
                let x = try present(inputs, 0)
                if x.scalarType == .float32 { return [try Elementwise.mapFloat(x) { $0.isNaN ? $0 : $0 > 0 ? 1 : $0 < 0 ? -1 : 0 }] }
                let zero = NDArray(shape: [], scalarType: x.scalarType)
                let pos = try Elementwise.cast(try Elementwise.compare("greater", x, zero), to: x.scalarType)
                let neg = try Elementwise.cast(try Elementwise.compare("less", x, zero), to: x.scalarType)
                return [try Elementwise.arithmetic("sub", pos, neg)]
            }
        case "mod":
            let name = try a.int("fmod", 0) != 0 ? "fmod" : "mod"
            return { inputs in [try Elementwise.arithmetic(name, try present(inputs, 0), try present(inputs, 1))] }
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
        // Binary and variadic.
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
        // Linear algebra.
        case "matmul": return { inputs in [try LinearAlgebra.matmul(try present(inputs, 0), try present(inputs, 1))] }
        case "gemm":
            let alpha = Float(try a.float("alpha", 1)), beta = Float(try a.float("beta", 1))
            let ta = try a.int("trans_a", 0) != 0, tb = try a.int("trans_b", 0) != 0
            return { inputs in
                [try LinearAlgebra.gemm(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                        alpha: alpha, beta: beta, transA: ta, transB: tb)]
            }
        case "linear":
            return { inputs in [try LinearAlgebra.linear(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil)] }
        case "einsum":
            let equation = try a.string("equation", "")
            return { inputs in [try LinearAlgebra.einsum(equation, try inputs.indices.map { try present(inputs, $0) })] }
        // Convolution and pooling.
        case "conv" where try OpSet.channelsLayout(a) == .planesToLast:
            return { inputs in
                let y = try Convolution.conv(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a)
                return [try Convolution.adding(y.transposed([0] + Array(2 ..< y.rank) + [1]).contiguous(), inputs.count > 3 ? inputs[3] : nil)]
            }
        case "conv" where try OpSet.channelsLast(a):
            return { inputs in
                let y = try Convolution.channelsLast(try present(inputs, 0)) { try Convolution.conv($0, try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a) }
                return [try Convolution.adding(y, inputs.count > 3 ? inputs[3] : nil)]
            }
        case "max_pool" where try OpSet.channelsLast(a):
            return { inputs in [try Convolution.channelsLast(try present(inputs, 0)) { try Convolution.pool($0, a, max: true) }] }
        case "average_pool" where try OpSet.channelsLast(a):
            return { inputs in [try Convolution.channelsLast(try present(inputs, 0)) { try Convolution.pool($0, a, max: false) }] }
        case "conv":
            return { inputs in
                [try Convolution.adding(try Convolution.conv(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a),
                                        inputs.count > 3 ? inputs[3] : nil)]
            }
        case "conv_transpose":
            return { inputs in [try Convolution.convTranspose(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a)] }
        case "max_pool" where op.outputs.count == 2:
            return { inputs in
                let r = try Convolution.poolWithIndices(try present(inputs, 0), a, max: true, indices: true)
                return [r.values, r.indices!]
            }
        case "max_pool": return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: true)] }
        case "average_pool": return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: false)] }
        case "global_average_pool": return { inputs in [try Convolution.globalPool(try present(inputs, 0), max: false)] }
        case "global_max_pool": return { inputs in [try Convolution.globalPool(try present(inputs, 0), max: true)] }
        // Normalization.
        case "batch_norm":
            let eps = Float(try a.float("epsilon", 1e-5))
            return { inputs in
                [try Reduction.batchNorm(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2),
                                         try present(inputs, 3), try present(inputs, 4), epsilon: eps)]
            }
        case "instance_norm":
            let eps = Float(try a.float("epsilon", 1e-5))
            return { inputs in [try Reduction.instanceNorm(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2), epsilon: eps)] }
        case "layer_norm":
            let eps = Float(try a.float("epsilon", 1e-5)), axis = try a.int("axis", -1)
            return { inputs in
                let x = try present(inputs, 0)
                return [try Reduction.layerNorm(x, try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                                axis: try OpSet.normalize(axis: axis, rank: x.rank), epsilon: eps)]
            }
        case "softmax", "log_softmax":
            let axis = try a.int("axis", -1), log = op.opType == "log_softmax"
            return { inputs in
                let x = try present(inputs, 0)
                return [try Reduction.softmax(x, axis: try OpSet.normalize(axis: axis, rank: x.rank), log: log)]
            }
        // Reductions.
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
        case "dequantize_linear":
            let axis = try a.int("axis", 1), block = try a.int("block_size", 0)
            return { inputs in
                [try Quantization.dequantize(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, axis: axis, block: block)]
            }
        case "quantize_linear":
            let axis = try a.int("axis", 1), block = try a.int("block_size", 0)
            var fixed: DataType?
            if case .dtype(let d)? = a["output_dtype"] { fixed = d }
            let output = fixed
            return { inputs in
                let zp = inputs.count > 2 ? inputs[2] : nil
                return [try Quantization.quantize(try present(inputs, 0), try present(inputs, 1), zp, axis: axis, block: block,
                                                  dtype: output ?? zp?.scalarType ?? .uint8)]
            }
        case "dynamic_quantize_linear":
            return { inputs in try Quantization.dynamicQuantize(try present(inputs, 0)) }
        case "matmul_integer":
            return { inputs in
                [try Quantization.matmulInteger(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                                inputs.count > 3 ? inputs[3] : nil)]
            }
        case "qlinear_matmul":
            return { inputs in [try Quantization.qlinearMatmul(inputs)] }
        case "attention":
            let options = try Attention.Options(a), outputs = op.outputs.count
            return { inputs in try Attention.run(inputs, options, outputs: outputs) }
        case "nll_loss":
            let reduction = try a.string("reduction", "mean"), ignore = a["ignore_index"] != nil ? try a.int("ignore_index", 0) : nil
            return { inputs in
                [try Indexing.nllLoss(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                      reduction: reduction, ignore: ignore)]
            }
        case "rotary_embedding":
            let interleaved = try a.int("interleaved", 0) != 0, dim = try a.int("rotary_embedding_dim", 0), heads = try a.int("num_heads", 0)
            return { inputs in
                [try Rotary.run(try present(inputs, 0), cos: try present(inputs, 1), sin: try present(inputs, 2),
                                positions: inputs.count > 3 ? inputs[3] : nil, interleaved: interleaved, dim: dim, heads: heads)]
            }
        case "lp_pool":
            let p = Float(try a.int("p", 2))
            return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: false, lp: p)] }
        case "hardmax":
            let axis = try a.int("axis", -1)
            return { inputs in [try Indexing.hardmax(try present(inputs, 0), axis: axis)] }
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
        case "top_k":
            let axis = try a.int("axis", -1), largest = try a.int("largest", 1) != 0
            let fixed = a["k"] != nil ? try a.int("k", 0) : nil
            return { inputs in
                let x = try present(inputs, 0)
                guard let k = try fixed ?? inputs.dropFirst().first??.intValues().first else { throw OpError("top_k needs k") }
                let (v, i) = try Reduction.topK(x, k: k, axis: try OpSet.normalize(axis: axis, rank: x.rank), largest: largest)
                return [v, i]
            }
        case "lstm", "gru", "rnn":
            let gates = op.opType == "lstm" ? 4 : op.opType == "gru" ? 3 : 1
            _ = try Recurrent.Config(a, gates: gates)
            return { inputs in try Recurrent.run(inputs, a, gates: gates) }
        default:
            if let k = try visionKernel(for: op) { return k }
            return try MovementKernels.kernel(for: op)
        }
    }
}
