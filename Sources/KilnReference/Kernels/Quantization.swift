import KilnFormat

/// ONNX's linear quantization ops: per-tensor, per-axis and blocked scales and zero points,
/// integer matrix products, and the quantized matmul.
enum Quantization {
    /// For each element of `shape`, the index of its scale: one scale, one per `axis`
    /// coordinate (a 1-D scale), or one per block of `block` along `axis` (a scale of `shape`'s
    /// rank).
    static func scaleIndex(_ shape: [Int], scale: [Int], axis: Int, block: Int) throws -> [Int] {
        let count = shape.reduce(1, *)
        let n = scale.reduce(1, *)
        if n == 1 && block == 0 { return [Int](repeating: 0, count: count) }
        let a = try OpSet.normalize(axis: axis, rank: shape.count)
        let inner = shape[(a + 1)...].reduce(1, *)
        if block == 0 {
            guard scale.count == 1, scale[0] == shape[a] else { throw OpError("a per-axis scale must be 1-D with \(shape[a]) values, got \(scale)") }
            return (0 ..< count).map { ($0 / inner) % shape[a] }
        }
        guard block > 0, scale.count == shape.count else { throw OpError("a blocked scale must have the input's rank") }
        for (i, (d, s)) in zip(shape, scale).enumerated() {
            let want = i == a ? (d + block - 1) / block : d
            guard s == want else { throw OpError("a blocked scale \(scale) does not fit \(shape) in blocks of \(block) along axis \(a)") }
        }
        // Row-major coordinates of x mapped onto the scale's grid.
        var xs = [Int](repeating: 1, count: shape.count), ss = [Int](repeating: 1, count: shape.count)
        for i in stride(from: shape.count - 2, through: 0, by: -1) { xs[i] = xs[i + 1] * shape[i + 1]; ss[i] = ss[i + 1] * scale[i + 1] }
        return (0 ..< count).map { flat in
            var index = 0
            for i in 0 ..< shape.count {
                let c = (flat / xs[i]) % shape[i]
                index += (i == a ? c / block : c) * ss[i]
            }
            return index
        }
    }

    /// The representable range of an integer quantized type.
    static func range(_ t: DataType) throws -> (lo: Double, hi: Double) {
        switch t {
        case .uint8: return (0, 255)
        case .int8: return (-128, 127)
        case .uint16: return (0, 65535)
        case .int16: return (-32768, 32767)
        case .int32: return (Double(Int32.min), Double(Int32.max))
        default: throw OpError("\(t.rawValue) is not a quantized type Kiln has")
        }
    }

    /// `dequantize_linear`: `(x − zero_point) · scale`, in float32 (the declared type is the scale's).
    static func dequantize(_ x: NDArray, _ scale: NDArray, _ zeroPoint: NDArray?, axis: Int, block: Int) throws -> NDArray {
        let index = try scaleIndex(x.shape, scale: scale.shape, axis: axis, block: block)
        let s = try Elementwise.cast(scale, to: .float32).scalars(as: Float.self)
        let z = try zeroPoint.map { zp -> [Double] in
            guard zp.elementCount == scale.elementCount else { throw OpError("zero point \(zp.shape) does not match scale \(scale.shape)") }
            return try zp.doubleValues()
        }
        let v = try x.doubleValues()
        return NDArray(shape: x.shape, scalars: v.indices.map { Float((v[$0] - (z?[index[$0]] ?? 0)) * Double(s[index[$0]])) })
    }

    /// `quantize_linear`: `saturate(round_half_even(x / scale) + zero_point)` in `dtype`.
    static func quantize(_ x: NDArray, _ scale: NDArray, _ zeroPoint: NDArray?, axis: Int, block: Int, dtype: DataType) throws -> NDArray {
        let index = try scaleIndex(x.shape, scale: scale.shape, axis: axis, block: block)
        let s = try Elementwise.cast(scale, to: .float32).scalars(as: Float.self)
        let z = try zeroPoint.map { zp -> [Double] in
            guard zp.elementCount == scale.elementCount else { throw OpError("zero point \(zp.shape) does not match scale \(scale.shape)") }
            return try zp.doubleValues()
        }
        let (lo, hi) = try range(dtype)
        let v = try Elementwise.cast(x, to: .float32).scalars(as: Float.self)
        let q = v.indices.map { i -> Double in
            let r = (Double(v[i] / s[index[i]])).rounded(.toNearestOrEven) + (z?[index[i]] ?? 0)
            return r.isNaN ? 0 : min(max(r, lo), hi)
        }
        return try Elementwise.cast(NDArray(shape: x.shape, scalars: q), to: dtype)
    }

    /// `dynamic_quantize_linear`: uint8 with the scale and zero point that map [min(x, 0), max(x, 0)] onto 0…255
    /// (NaN to 0; an all-zero x to scale 0, zero point 0 and zeros).
    static func dynamicQuantize(_ x: NDArray) throws -> [NDArray] {
        let v = try Elementwise.cast(x, to: .float32).scalars(as: Float.self)
        let finite = v.filter { !$0.isNaN }
        let lo = min(finite.min() ?? 0, 0), hi = max(finite.max() ?? 0, 0)
        let scale = (hi - lo) / 255
        let zp = scale == 0 ? 0 : min(max((0 - lo / scale).rounded(.toNearestOrEven), 0), 255)
        // NaN quantizes to 0.
        let q = v.map { x -> UInt8 in
            let r = (x / scale).rounded(.toNearestOrEven) + zp
            return scale == 0 || r.isNaN ? 0 : UInt8(min(max(r, 0), 255))
        }
        return [NDArray(shape: x.shape, scalars: q), NDArray(shape: [], scalars: [scale]), NDArray(shape: [], scalars: [UInt8(zp)])]
    }

    /// Integers of a matmul operand less its zero point: scalar, or one per row of A / column of B.
    static func centered(_ x: NDArray, _ zp: NDArray?, rows: Bool) throws -> [Int] {
        let v = try x.intValues()
        guard let zp else { return v }
        let z = try zp.intValues()
        if z.count == 1 { return v.map { $0 - z[0] } }
        let (m, n) = (x.shape[x.rank - 2], x.shape[x.rank - 1])
        guard z.count == (rows ? m : n) else { throw OpError("zero point has \(z.count) values for \(rows ? m : n) \(rows ? "rows" : "columns")") }
        return v.indices.map { i in v[i] - z[rows ? (i / n) % m : i % n] }
    }

    /// `matmul_integer`: `(a − a_zero_point) · (b − b_zero_point)` in int32, batched like matmul.
    static func matmulInteger(_ a: NDArray, _ b: NDArray, _ azp: NDArray?, _ bzp: NDArray?) throws -> NDArray {
        let x = NDArray(shape: a.shape, scalars: try centered(a, azp, rows: true).map { Float($0) })
        let y = NDArray(shape: b.shape, scalars: try centered(b, bzp, rows: false).map { Float($0) })
        // Exact in float32 while every product sum stays below 2^24; larger ones are summed in Int.
        return try exactProduct(x, y)
    }

    /// A batched integer matrix product of float-held integers, summed exactly.
    static func exactProduct(_ x: NDArray, _ y: NDArray) throws -> NDArray {
        let shape = try OpSet.matmulShape(TensorType(.float32, x.shape.map { .size($0) }), TensorType(.float32, y.shape.map { .size($0) }))
        let out = shape.map { $0.size ?? 0 }
        let a = x.rank == 1 ? x.reshaped([1, x.shape[0]]) : x, b = y.rank == 1 ? y.reshaped([y.shape[0], 1]) : y
        let (m, k, n) = (a.shape[a.rank - 2], a.shape[a.rank - 1], b.shape[b.rank - 1])
        let batches = out.reduce(1, *) / max(m * n, 1)
        let ab = a.shape.dropLast(2).reduce(1, *), bb = b.shape.dropLast(2).reduce(1, *)
        guard ab == batches || ab == 1, bb == batches || bb == 1 else { throw OpError("matmul_integer batches do not broadcast") }
        let pa = try a.contiguous().values(Float.self), pb = try b.contiguous().values(Float.self)
        var r = [Int32](repeating: 0, count: batches * m * n)
        for t in 0 ..< batches {
            let oa = (ab == 1 ? 0 : t) * m * k, ob = (bb == 1 ? 0 : t) * k * n
            for i in 0 ..< m {
                for j in 0 ..< n {
                    var acc = 0
                    for e in 0 ..< k { acc += Int(pa[oa + i * k + e]) * Int(pb[ob + e * n + j]) }
                    r[(t * m + i) * n + j] = Int32(truncatingIfNeeded: acc)
                }
            }
        }
        return NDArray(shape: out, scalars: r)
    }

    /// `qlinear_matmul`: the integer product requantized by `a_scale · b_scale / y_scale` to y's type.
    static func qlinearMatmul(_ i: [NDArray?]) throws -> NDArray {
        func at(_ k: Int) throws -> NDArray {
            guard k < i.count, let x = i[k] else { throw OpError("qlinear_matmul needs input \(k)") }
            return x
        }
        let (a, aScale, aZero, b, bScale, bZero, yScale, yZero) = (try at(0), try at(1), try at(2), try at(3), try at(4), try at(5), try at(6), try at(7))
        let product = try matmulInteger(a, b, aZero, bZero).values(Int32.self)
        let sa = try Elementwise.cast(aScale, to: .float32).scalars(as: Float.self)
        let sb = try Elementwise.cast(bScale, to: .float32).scalars(as: Float.self)
        let sy = try Elementwise.cast(yScale, to: .float32).scalars(as: Float.self)
        guard sa.count == 1, sb.count == 1, sy.count == 1 else { throw OpError("qlinear_matmul supports per-tensor scales") }
        guard yZero.elementCount == 1 else { throw OpError("qlinear_matmul supports a per-tensor y_zero_point") }
        let zy = try yZero.doubleValues()[0]
        let (lo, hi) = try range(yZero.scalarType)
        let multiplier = Double(sa[0]) * Double(sb[0]) / Double(sy[0])
        let shape = try OpSet.matmulShape(TensorType(.float32, a.shape.map { .size($0) }), TensorType(.float32, b.shape.map { .size($0) })).map { $0.size ?? 0 }
        let q = product.map { min(max((Double($0) * multiplier).rounded(.toNearestOrEven) + zy, lo), hi) }
        return try Elementwise.cast(NDArray(shape: shape, scalars: q), to: yZero.scalarType)
    }
}

extension Quantization {
    /// `conv_integer`: a convolution of `(x − x_zero_point)` and `(w − w_zero_point)` (the weight's
    /// zero point per tensor or per output channel) summed exactly in integers, as int32.
    static func convInteger(_ x: NDArray, _ w: NDArray, _ xzp: NDArray?, _ wzp: NDArray?, _ a: [String: AttributeValue]) throws -> NDArray {
        guard x.rank >= 3, w.rank == x.rank else { throw OpError("conv_integer: x \(x.shape) and weight \(w.shape) do not fit") }
        let group = try a.int("group", 1)
        let (batch, channels, outChannels) = (x.shape[0], x.shape[1], w.shape[0])
        guard group >= 1, channels % group == 0, outChannels % group == 0, w.shape[1] == channels / group else {
            throw OpError("conv_integer: \(channels) input channels, weight \(w.shape) and group \(group) do not fit")
        }
        let xz = try xzp?.intValues() ?? [0], wz = try wzp?.intValues() ?? [0]
        guard xz.count == 1 else { throw OpError("x_zero_point must hold one value") }
        guard wz.count == 1 || wz.count == outChannels else { throw OpError("w_zero_point must hold 1 or \(outChannels) values") }
        let xs = try x.intValues().map { $0 - xz[0] }
        let kernel = Array(w.shape[2...]), kernelSize = kernel.reduce(1, *)
        let wv = try w.intValues()
        let ws = wv.indices.map { wv[$0] - wz[wz.count == 1 ? 0 : $0 / (w.shape[1] * kernelSize)] }
        let window = try OpSet.Window(a, kernel: kernel)
        let g = Convolution.Geometry(window: window, input: Array(x.shape[2...]))
        let shape = try checkedShape([batch, outChannels] + g.output)
        let spatialIn = g.input.reduce(1, *), spatialOut = g.output.reduce(1, *), d = kernel.count
        let inStrides = stridesOf(g.input), outStrides = stridesOf(g.output), kStrides = stridesOf(kernel)
        let (cinG, coutG) = (channels / group, outChannels / group)
        var out = [Int32](repeating: 0, count: shape.reduce(1, *))
        for n in 0 ..< batch {
            for oc in 0 ..< outChannels {
                let grp = oc / coutG
                for o in 0 ..< spatialOut {
                    var acc = 0
                    for k in 0 ..< kernelSize {
                        var at = 0
                        var inside = true
                        for ax in 0 ..< d {
                            let pos = (o / outStrides[ax]) % g.output[ax] * window.strides[ax] - g.padBegin[ax]
                                + (k / kStrides[ax]) % kernel[ax] * window.dilations[ax]
                            if pos < 0 || pos >= g.input[ax] { inside = false; break }
                            at += pos * inStrides[ax]
                        }
                        guard inside else { continue }
                        for icg in 0 ..< cinG {
                            acc += xs[(n * channels + grp * cinG + icg) * spatialIn + at] * ws[(oc * cinG + icg) * kernelSize + k]
                        }
                    }
                    out[(n * outChannels + oc) * spatialOut + o] = Int32(truncatingIfNeeded: acc)
                }
            }
        }
        return NDArray(shape: shape, scalars: out)
    }

    /// `qlinear_conv`: the integer convolution plus the int32 bias, requantized by
    /// `x_scale · w_scale / y_scale` (w_scale per tensor or per output channel) to y's type.
    static func qlinearConv(_ i: [NDArray?], _ a: [String: AttributeValue]) throws -> NDArray {
        func at(_ k: Int) throws -> NDArray {
            guard k < i.count, let x = i[k] else { throw OpError("qlinear_conv needs input \(k)") }
            return x
        }
        let (x, xScale, xZero, w, wScale, wZero, yScale, yZero) = (try at(0), try at(1), try at(2), try at(3), try at(4), try at(5), try at(6), try at(7))
        let acc = try convInteger(x, w, xZero, wZero, a)
        let m = w.shape[0], spatial = acc.elementCount / max(acc.shape[0] * m, 1)
        let sx = try Elementwise.cast(xScale, to: .float32).scalars(as: Float.self)
        let sw = try Elementwise.cast(wScale, to: .float32).scalars(as: Float.self)
        let sy = try Elementwise.cast(yScale, to: .float32).scalars(as: Float.self)
        guard sx.count == 1, sy.count == 1, sw.count == 1 || sw.count == m, yZero.elementCount == 1 else {
            throw OpError("qlinear_conv needs per-tensor x and y scales and zero points, and w_scale per tensor or per output channel")
        }
        let bias = try (i.count > 8 ? i[8] : nil)?.intValues()
        if let bias, bias.count != m { throw OpError("qlinear_conv's bias must hold \(m) values") }
        let zy = try yZero.doubleValues()[0]
        let (lo, hi) = try range(yZero.scalarType)
        let values = try acc.values(Int32.self)
        let q = values.indices.map { j -> Double in
            let oc = (j / spatial) % m
            let multiplier = Double(sx[0]) * Double(sw[sw.count == 1 ? 0 : oc]) / Double(sy[0])
            let v = (Double(Int(values[j]) + (bias?[oc] ?? 0)) * multiplier).rounded(.toNearestOrEven) + zy
            return min(max(v, lo), hi)
        }
        return try Elementwise.cast(NDArray(shape: acc.shape, scalars: q), to: yZero.scalarType)
    }
}
