/// Linear algebra, convolution, pooling and normalization.
extension OpSet {
    /// Spatial attributes of conv and pooling ops, with ONNX defaults filled in.
    public struct Window: Sendable, Equatable {
        public var kernel: [Int]
        public var strides: [Int]
        public var dilations: [Int]
        /// Begin pads then end pads, one per spatial dim each.
        public var pads: [Int]
        public var autoPad: String
        public var ceilMode: Bool

        /// Reads the window attributes for `spatial` dims and a kernel.
        public init(_ a: [String: AttributeValue], kernel: [Int]) throws {
            let n = kernel.count
            self.kernel = kernel
            strides = try a.ints("strides") ?? Array(repeating: 1, count: n)
            dilations = try a.ints("dilations") ?? Array(repeating: 1, count: n)
            pads = try a.ints("pads") ?? Array(repeating: 0, count: 2 * n)
            autoPad = try a.string("auto_pad", "NOTSET")
            ceilMode = try a.int("ceil_mode", 0) != 0
            guard strides.count == n, dilations.count == n, pads.count == 2 * n else {
                throw OpError("strides, dilations and pads must have \(n), \(n) and \(2 * n) entries")
            }
            guard strides.allSatisfy({ $0 > 0 }), dilations.allSatisfy({ $0 > 0 }), pads.allSatisfy({ $0 >= 0 }),
                  kernel.allSatisfy({ $0 > 0 }) else {
                throw OpError("strides, dilations and kernel sizes must be positive and pads non-negative")
            }
            guard (strides + dilations + pads + kernel).allSatisfy({ $0 <= 1 << 24 }) else {
                throw OpError("strides, dilations, pads and kernel sizes must be at most 2^24")
            }
            guard ["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"].contains(autoPad) else {
                throw OpError("unknown auto_pad '\(autoPad)'")
            }
        }

        /// Begin and end padding of spatial dim `i` for an input of size `size`.
        public func padding(_ i: Int, size: Int) -> (Int, Int) {
            switch autoPad {
            case "VALID": return (0, 0)
            case "SAME_UPPER", "SAME_LOWER":
                let out = (size + strides[i] - 1) / strides[i]
                let total = max(0, (out - 1) * strides[i] + (kernel[i] - 1) * dilations[i] + 1 - size)
                return autoPad == "SAME_UPPER" ? (total / 2, total - total / 2) : (total - total / 2, total / 2)
            default: return (pads[i], pads[i + kernel.count])
            }
        }

        /// Output size of spatial dim `i`.
        public func outputSize(_ i: Int, size: Int) -> Int {
            let (b, e) = padding(i, size: size)
            let span = size + b + e - ((kernel[i] - 1) * dilations[i] + 1)
            if span < 0 { return 0 }
            var out = (ceilMode ? (span + strides[i] - 1) / strides[i] : span / strides[i]) + 1
            // With ceil_mode, a window that starts inside the end padding is dropped.
            if ceilMode, (out - 1) * strides[i] >= size + b { out -= 1 }
            return out
        }
    }

    static func windowOutput(_ x: TensorType, channels: Dimension, window: Window) -> [Dimension] {
        var spatial: [Dimension] = []
        for i in 0 ..< window.kernel.count {
            if let n = x.shape[i + 2].size { spatial.append(.size(window.outputSize(i, size: n))) } else { spatial.append(.unknown) }
        }
        return [x.shape[0], channels] + spatial
    }

    /// The output dims of a NumPy-style matrix product.
    public static func matmulShape(_ a: TensorType, _ b: TensorType) throws -> [Dimension] {
        guard a.rank >= 1, b.rank >= 1 else { throw OpError("matmul operands need rank ≥ 1") }
        let a2 = a.rank == 1 ? [.size(1)] + a.shape : a.shape
        let b2 = b.rank == 1 ? b.shape + [.size(1)] : b.shape
        try requireEqual(a2[a2.count - 1], b2[b2.count - 2], "matmul inner dims")
        var out = try broadcast(Array(a2.dropLast(2)), Array(b2.dropLast(2)))
        if a.rank > 1 { out.append(a2[a2.count - 2]) }
        if b.rank > 1 { out.append(b2[b2.count - 1]) }
        return out
    }

    static let windowAttributes: [String: AttributeKind] = [
        "strides": .ints, "pads": .ints, "dilations": .ints, "auto_pad": .string,
    ]

    /// `attention`'s outputs: Y like Q (V's head size), the present key and value caches
    /// `[B, Hkv, past + L, ·]`, and the scores `[B, Hq, S, past + L]`.
    static func attentionTypes(_ ctx: OpSchema.Context) throws -> [TensorType?] {
        let (q, k, v) = (try ctx.input(0), try ctx.input(1), try ctx.input(2))
        guard (q.rank == 3 || q.rank == 4), k.rank == q.rank, v.rank == q.rank else { throw OpError("q, k and v must all be 3-D or all 4-D") }
        try sameDType([q, k, v])
        try requireFloat(q, "attention")
        let heads = (q: try ctx.attributes.int("q_num_heads", 0), kv: try ctx.attributes.int("kv_num_heads", 0))
        func div(_ d: Dimension, _ n: Int) -> Dimension { d.size.map { n > 0 && $0 % n == 0 ? .size($0 / n) : .unknown } ?? .unknown }
        // 4-D views: [B, H, S, D].
        let (batch, hq, s, dq): (Dimension, Dimension, Dimension, Dimension)
        let (hkv, l, dk, dv): (Dimension, Dimension, Dimension, Dimension)
        if q.rank == 3 {
            guard heads.q > 0, heads.kv > 0 else { throw OpError("3-D attention needs q_num_heads and kv_num_heads") }
            (batch, hq, s, dq) = (q.shape[0], .size(heads.q), q.shape[1], div(q.shape[2], heads.q))
            (hkv, l, dk, dv) = (.size(heads.kv), k.shape[1], div(k.shape[2], heads.kv), div(v.shape[2], heads.kv))
        } else {
            (batch, hq, s, dq) = (q.shape[0], q.shape[1], q.shape[2], q.shape[3])
            (hkv, l, dk, dv) = (k.shape[1], k.shape[2], k.shape[3], v.shape[3])
        }
        try requireEqual(dq, dk, "q and k head sizes")
        var total = l
        if let past = ctx.optionalInput(4) {
            guard past.rank == 4 else { throw OpError("past_key must be 4-D") }
            total = past.shape[2].size.flatMap { p in l.size.map { .size(p + $0) } } ?? .unknown
        }
        let y = q.rank == 3 ? TensorType(q.dtype, [batch, s, hq.size.flatMap { h in dv.size.map { .size(h * $0) } } ?? .unknown])
            : TensorType(q.dtype, [batch, hq, s, dv])
        let all = [y, TensorType(q.dtype, [batch, hkv, total, dk]), TensorType(q.dtype, [batch, hkv, total, dv]),
                   TensorType(q.dtype, [batch, hq, s, total])]
        return Array(all.prefix(max(1, ctx.outputCount)))
    }

    static var networkOps: [OpSchema] {
        [
            op("matmul", onnx: "MatMul", ["a", "b"]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                try sameDType([a, b])
                return [TensorType(a.dtype, try matmulShape(a, b))]
            },
            op("gemm", ["a", "b", "c?"], ["alpha": .float, "beta": .float, "trans_a": .int, "trans_b": .int]) { ctx in
                let (a, b) = (try ctx.input(0), try ctx.input(1))
                guard a.rank == 2, b.rank == 2 else { throw OpError("gemm needs rank-2 operands, got \(a) and \(b)") }
                let ta = try ctx.attributes.int("trans_a", 0) != 0, tb = try ctx.attributes.int("trans_b", 0) != 0
                try requireEqual(a.shape[ta ? 0 : 1], b.shape[tb ? 1 : 0], "gemm inner dims")
                return [TensorType(a.dtype, [a.shape[ta ? 1 : 0], b.shape[tb ? 0 : 1]])]
            },
            op("linear", ["x", "weight", "bias?"]) { ctx in
                let (x, w) = (try ctx.input(0), try ctx.input(1))
                guard w.rank == 2, x.rank >= 1 else { throw OpError("linear needs x of rank ≥ 1 and a rank-2 weight, got \(x) and \(w)") }
                try requireEqual(x.shape[x.rank - 1], w.shape[1], "x's last dim and weight's dim 1")
                if let b = ctx.optionalInput(2), b.rank != 1 { throw OpError("bias must have rank 1, got \(b)") }
                return [TensorType(x.dtype, Array(x.shape.dropLast()) + [w.shape[0]])]
            },
            op("einsum", onnx: "Einsum", ["x"], variadic: true, ["equation!": .string]) { ctx in
                let inputs = try ctx.inputs.indices.map { try ctx.input($0) }
                let eq = try Einsum(try ctx.attributes.string("equation", ""), ranks: inputs.map(\.rank))
                var sizes: [Character: Dimension] = [:]
                for (t, labels) in zip(inputs, eq.inputs) {
                    for (d, l) in zip(t.shape, labels) where sizes[l] == nil || sizes[l] == .size(1) { sizes[l] = d }
                }
                return [TensorType(inputs[0].dtype, eq.output.map { sizes[$0] ?? .unknown })]
            },
            op("conv", ["x", "weight", "bias?", "residual?"], windowAttributes.merging(["group": .int, "kernel_shape": .ints]) { a, _ in a }) { ctx in
                let (x, w) = (try ctx.input(0), try ctx.input(1))
                guard x.rank >= 3, w.rank == x.rank else { throw OpError("conv needs x [N, C, …] and weight of the same rank, got \(x) and \(w)") }
                let group = try ctx.attributes.int("group", 1)
                guard group >= 1 else { throw OpError("group must be ≥ 1") }
                if let c = x.shape[1].size, let wc = w.shape[1].size, c != wc * group {
                    throw OpError("input channels \(c) ≠ weight channels \(wc) × group \(group)")
                }
                let kernel = try w.shape[2...].map { d -> Int in
                    guard let k = d.size else { throw OpError("conv kernel must be static") }
                    return k
                }
                let window = try Window(ctx.attributes, kernel: kernel)
                return [TensorType(x.dtype, windowOutput(x, channels: w.shape[0], window: window))]
            },
            op("conv_transpose", ["x", "weight", "bias?"], windowAttributes.merging(
                ["group": .int, "output_padding": .ints, "output_shape": .ints, "kernel_shape": .ints]) { a, _ in a }) { ctx in
                let (x, w) = (try ctx.input(0), try ctx.input(1))
                guard x.rank >= 3, w.rank == x.rank else { throw OpError("conv_transpose needs x [N, C, …] and weight of the same rank") }
                let group = try ctx.attributes.int("group", 1)
                let kernel = try w.shape[2...].map { d -> Int in
                    guard let k = d.size else { throw OpError("conv_transpose kernel must be static") }
                    return k
                }
                let window = try Window(ctx.attributes, kernel: kernel)
                let outPad = try ctx.attributes.ints("output_padding") ?? Array(repeating: 0, count: kernel.count)
                guard outPad.count == kernel.count else { throw OpError("output_padding must have \(kernel.count) entries") }
                let channels: Dimension = w.shape[1].size.map { .size($0 * group) } ?? .unknown
                var dims = [x.shape[0], channels]
                if let shape = try ctx.attributes.ints("output_shape") {
                    guard shape.count >= kernel.count, shape.allSatisfy({ $0 >= 0 }) else { throw OpError("output_shape must end in \(kernel.count) sizes") }
                    dims += shape.suffix(kernel.count).map { .size($0) }
                } else {
                    for i in 0 ..< kernel.count {
                        guard let n = x.shape[i + 2].size else { dims.append(.unknown); continue }
                        let full = window.strides[i] &* (n - 1) &+ outPad[i] &+ (kernel[i] - 1) &* window.dilations[i] &+ 1
                        if window.autoPad == "SAME_UPPER" || window.autoPad == "SAME_LOWER" {
                            dims.append(.size(n &* window.strides[i]))
                        } else {
                            dims.append(.size(full &- window.pads[i] &- window.pads[i + kernel.count]))
                        }
                    }
                }
                return [TensorType(x.dtype, dims)]
            },
            op("lp_pool", ["x"], windowAttributes.merging(["kernel_shape!": .ints, "ceil_mode": .int, "p": .int]) { a, _ in a }) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("lp_pool needs x [N, C, …]") }
                try requireFloat(x, "lp_pool")
                let window = try Window(ctx.attributes, kernel: try ctx.attributes.ints("kernel_shape") ?? [])
                guard window.kernel.count == x.rank - 2 else { throw OpError("kernel_shape must have \(x.rank - 2) entries") }
                guard try ctx.attributes.int("p", 2) > 0 else { throw OpError("p must be positive") }
                return [TensorType(x.dtype, windowOutput(x, channels: x.shape[1], window: window))]
            },
            op("rotary_embedding", onnx: "RotaryEmbedding", ["x", "cos_cache", "sin_cache", "position_ids?"], ["interleaved": .int, "rotary_embedding_dim": .int,
                                                                                     "num_heads": .int]) { ctx in
                let x = try ctx.input(0)
                guard x.rank == 3 || x.rank == 4 else { throw OpError("rotary_embedding needs a 3-D or 4-D input") }
                try requireFloat(x, "rotary_embedding")
                return [x]
            },
            op("max_pool", ["x"], outputs: 1 ... 2, windowAttributes.merging(["kernel_shape!": .ints, "ceil_mode": .int, "storage_order": .int]) { a, _ in a }) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("max_pool needs x [N, C, …]") }
                let window = try Window(ctx.attributes, kernel: try ctx.attributes.ints("kernel_shape") ?? [])
                guard window.kernel.count == x.rank - 2 else { throw OpError("kernel_shape must have \(x.rank - 2) entries") }
                let y = TensorType(x.dtype, windowOutput(x, channels: x.shape[1], window: window))
                guard ctx.outputCount == 2 else { return [y] }
                return [y, TensorType(.int64, y.shape)]
            },
            op("average_pool", ["x"], windowAttributes.merging(["kernel_shape!": .ints, "ceil_mode": .int, "count_include_pad": .int]) { a, _ in a }) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("average_pool needs x [N, C, …]") }
                let window = try Window(ctx.attributes, kernel: try ctx.attributes.ints("kernel_shape") ?? [])
                guard window.kernel.count == x.rank - 2 else { throw OpError("kernel_shape must have \(x.rank - 2) entries") }
                return [TensorType(x.dtype, windowOutput(x, channels: x.shape[1], window: window))]
            },
            op("global_average_pool", onnx: "GlobalAveragePool", ["x"]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("global_average_pool needs x [N, C, …]") }
                return [TensorType(x.dtype, Array(x.shape[..<2]) + Array(repeating: .size(1), count: x.rank - 2))]
            },
            op("global_max_pool", onnx: "GlobalMaxPool", ["x"]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("global_max_pool needs x [N, C, …]") }
                return [TensorType(x.dtype, Array(x.shape[..<2]) + Array(repeating: .size(1), count: x.rank - 2))]
            },
            op("batch_norm", ["x", "scale", "bias", "mean", "variance"], ["epsilon": .float]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 2 else { throw OpError("batch_norm needs x of rank ≥ 2") }
                return [x]
            },
            op("instance_norm", ["x", "scale", "bias"], ["epsilon": .float]) { ctx in
                let x = try ctx.input(0)
                guard x.rank >= 3 else { throw OpError("instance_norm needs x of rank ≥ 3") }
                return [x]
            },
            op("layer_norm", ["x", "scale", "bias?"], ["axis": .int, "epsilon": .float]) { ctx in
                let x = try ctx.input(0)
                _ = try axis(ctx, default: -1, rank: x.rank)
                return [x]
            },
            op("dequantize_linear", ["x", "x_scale", "x_zero_point?"], ["axis": .int, "block_size": .int, "output_dtype": .dtype]) { ctx in
                let (x, s) = (try ctx.input(0), try ctx.input(1))
                try requireFloat(s, "dequantize_linear's scale")
                var dtype = s.dtype
                if case .dtype(let d)? = ctx.attributes["output_dtype"] { dtype = d }
                return [TensorType(dtype, x.shape)]
            },
            op("quantize_linear", ["x", "y_scale", "y_zero_point?"], ["axis": .int, "block_size": .int, "output_dtype": .dtype,
                                                                     "saturate": .int, "precision": .int]) { ctx in
                let x = try ctx.input(0)
                var dtype = ctx.optionalInput(2)?.dtype ?? .uint8
                if case .dtype(let d)? = ctx.attributes["output_dtype"] { dtype = d }
                guard [.uint8, .int8, .uint16, .int16].contains(dtype) else { throw OpError("quantize_linear cannot make \(dtype.rawValue)") }
                return [TensorType(dtype, x.shape)]
            },
            op("dynamic_quantize_linear", onnx: "DynamicQuantizeLinear", ["x"], outputs: 3 ... 3) { ctx in
                let x = try ctx.input(0)
                return [TensorType(.uint8, x.shape), TensorType(.float32, []), TensorType(.uint8, [])]
            },
            op("conv_integer", ["x", "weight", "x_zero_point?", "w_zero_point?"], windowAttributes.merging(["group": .int, "kernel_shape": .ints]) { a, _ in a }) { ctx in
                [TensorType(.int32, try integerConvShape(try ctx.input(0), try ctx.input(1), ctx.attributes))]
            },
            op("qlinear_conv", ["x", "x_scale", "x_zero_point", "weight", "w_scale", "w_zero_point", "y_scale", "y_zero_point", "bias?"],
               windowAttributes.merging(["group": .int, "kernel_shape": .ints]) { a, _ in a }) { ctx in
                [TensorType(try ctx.input(7).dtype, try integerConvShape(try ctx.input(0), try ctx.input(3), ctx.attributes))]
            },
            op("matmul_integer", onnx: "MatMulInteger", ["a", "b", "a_zero_point?", "b_zero_point?"]) { ctx in
                [TensorType(.int32, try matmulShape(try ctx.input(0), try ctx.input(1)))]
            },
            op("qlinear_matmul", onnx: "QLinearMatMul", ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale", "y_zero_point"]) { ctx in
                [TensorType(try ctx.input(7).dtype, try matmulShape(try ctx.input(0), try ctx.input(3)))]
            },
            op("attention", onnx: "Attention", ["q", "k", "v", "attn_mask?", "past_key?", "past_value?", "nonpad_kv_seqlen?"], outputs: 1 ... 4,
               ["scale": .float, "is_causal": .int, "q_num_heads": .int, "kv_num_heads": .int, "softmax_precision": .int,
                "softcap": .float, "qk_matmul_output_mode": .int, "left_window_size": .int, "right_window_size": .int],
               infer: attentionTypes),
        ]
    }
}

extension OpSet {
    /// The output dims of an integer convolution (channels first).
    static func integerConvShape(_ x: TensorType, _ w: TensorType, _ attributes: [String: AttributeValue]) throws -> [Dimension] {
        guard x.rank >= 3, w.rank == x.rank else { throw OpError("integer convolutions need x [N, C, …] and a weight of the same rank") }
        let kernel = try w.shape[2...].map { d -> Int in
            guard let k = d.size else { throw OpError("the kernel must be static") }
            return k
        }
        let window = try Window(attributes, kernel: kernel)
        return windowOutput(x, channels: w.shape[0], window: window)
    }
}

/// A parsed einsum equation such as `bij,bjk->bik` (explicit or implicit output).
public struct Einsum: Sendable {
    /// Labels of each input's dims.
    public var inputs: [[Character]]
    /// Labels of the output's dims.
    public var output: [Character]

    /// Parses `equation` for inputs of the given ranks. An ellipsis (`...`) stands for an
    /// operand's remaining dims, aligned from the right and broadcast across operands; it
    /// becomes labels of its own (one per dim), which lead an implicit output.
    public init(_ equation: String, ranks: [Int]) throws {
        let text = equation.filter { $0 != " " }
        let parts = text.components(separatedBy: "->")
        guard parts.count <= 2 else { throw OpError("einsum equation '\(equation)' has more than one '->'") }
        let operands = parts[0].split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        guard operands.count == ranks.count else {
            throw OpError("einsum equation '\(equation)' names \(operands.count) operands, got \(ranks.count)")
        }
        // Dims each operand's ellipsis covers; labels for the widest, from an alphabet no equation uses.
        var covered: [Int] = []
        for (term, rank) in zip(operands, ranks) {
            let pieces = term.components(separatedBy: "...")
            guard pieces.count <= 2 else { throw OpError("einsum operand '\(term)' has more than one ellipsis") }
            let named = pieces.reduce(0) { $0 + $1.count }
            if pieces.count == 2 {
                guard rank >= named else { throw OpError("einsum operand '\(term)' has \(named) labels for rank \(rank)") }
                covered.append(rank - named)
            } else {
                guard named == rank else { throw OpError("einsum operand '\(term)' has \(named) labels for rank \(rank)") }
                covered.append(0)
            }
        }
        let width = covered.max() ?? 0
        let broadcast = (0 ..< width).map { Character(UnicodeScalar(0x3B1 + $0)!) }
        func expand(_ term: String, _ n: Int) -> [Character] {
            let pieces = term.components(separatedBy: "...")
            guard pieces.count == 2 else { return Array(term) }
            return Array(pieces[0]) + broadcast.suffix(n) + Array(pieces[1])
        }
        inputs = zip(operands, covered).map { expand($0, $1) }
        let all = operands.flatMap { Array($0) }.filter { $0 != "." }
        guard all.allSatisfy({ $0.isASCII && $0.isLetter }) else { throw OpError("einsum labels must be letters") }
        if parts.count == 2 {
            guard parts[1].components(separatedBy: "...").count <= 2 else { throw OpError("einsum output '\(parts[1])' has more than one ellipsis") }
            output = expand(parts[1], width)
            let named = inputs.flatMap { $0 }
            guard output.allSatisfy({ named.contains($0) }), Set(output).count == output.count else {
                throw OpError("einsum output '\(parts[1])' has unknown or repeated labels")
            }
        } else {
            // Implicit output: the ellipsis's dims, then labels that appear once, in alphabetical order.
            output = broadcast + Set(all).filter { l in all.filter { $0 == l }.count == 1 }.sorted()
        }
    }
}

extension String {
    func components(separatedBy separator: String) -> [String] {
        var out: [String] = []
        var rest = Substring(self)
        while let r = rest.range(of: separator) {
            out.append(String(rest[..<r.lowerBound]))
            rest = rest[r.upperBound...]
        }
        out.append(String(rest))
        return out
    }
}

extension Substring {
    func range(of s: String) -> Range<Index>? {
        var i = startIndex
        while i < endIndex {
            if self[i...].hasPrefix(s) { return i ..< index(i, offsetBy: s.count) }
            i = index(after: i)
        }
        return nil
    }
}
