import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Convolution, transposed convolution and pooling over any number of spatial dims.
enum Convolution {
    /// Spatial geometry of one conv or pool: input/output sizes and per-dim padding.
    struct Geometry {
        var input: [Int]
        var output: [Int]
        var padBegin: [Int]

        init(window: OpSet.Window, input: [Int]) {
            self.input = input
            output = input.indices.map { window.outputSize($0, size: input[$0]) }
            padBegin = input.indices.map { window.padding($0, size: input[$0]).0 }
        }
    }

    /// `y + residual` (same shape), or `y` when there is none: a convolution's fused residual input.
    static func adding(_ y: NDArray, _ residual: NDArray?) throws -> NDArray {
        guard let residual else { return y }
        guard residual.shape == y.shape, residual.scalarType == .float32 else { throw OpError("conv: residual \(residual.shape) does not fit the output \(y.shape)") }
        let r = try residual.contiguous().values(Float.self), v = try y.values(Float.self)
        return NDArray(shape: y.shape, scalars: zip(v, r).map { $0 + $1 })
    }

    static func conv(_ x: NDArray, _ w: NDArray, _ bias: NDArray?, _ attributes: [String: AttributeValue]) throws -> NDArray {
        guard x.scalarType == .float32, w.scalarType == .float32 else { throw OpError("conv needs float32 inputs") }
        guard x.rank >= 3, w.rank == x.rank else { throw OpError("conv: x \(x.shape) and weight \(w.shape) do not fit") }
        let group = try attributes.int("group", 1)
        let (batch, channels, outChannels) = (x.shape[0], x.shape[1], w.shape[0])
        guard group >= 1, channels % group == 0, outChannels % group == 0, w.shape[1] == channels / group else {
            throw OpError("conv: \(channels) input channels, weight \(w.shape) and group \(group) do not fit")
        }
        if let bias, bias.shape != [outChannels] { throw OpError("conv: bias \(bias.shape) does not fit \(outChannels) channels") }
        let kernel = Array(w.shape[2...])
        let window = try OpSet.Window(attributes, kernel: kernel)
        let g = Geometry(window: window, input: Array(x.shape[2...]))
        _ = try checkedShape([batch, outChannels] + g.output)
        let spatialIn = g.input.reduce(1, *), spatialOut = g.output.reduce(1, *), kernelSize = kernel.reduce(1, *)
        let cinG = channels / group, coutG = outChannels / group
        let px = try x.f32.baseAddress!, pw = try w.f32.baseAddress!, pb = try bias?.f32
        // Work in up to three spatial dims by padding the geometry with size-1 dims.
        let d = kernel.count
        func at(_ v: [Int], _ i: Int, _ fill: Int) -> Int { i < 3 - d ? fill : v[i - (3 - d)] }
        guard d <= 3 else { throw OpError("conv supports up to 3 spatial dims") }
        let inD = (0 ..< 3).map { at(g.input, $0, 1) }, outD = (0 ..< 3).map { at(g.output, $0, 1) }
        let kD = (0 ..< 3).map { at(kernel, $0, 1) }, sD = (0 ..< 3).map { at(window.strides, $0, 1) }
        let dD = (0 ..< 3).map { at(window.dilations, $0, 1) }, pD = (0 ..< 3).map { at(g.padBegin, $0, 0) }
        return NDArray.make([batch, outChannels] + g.output, Float.self) { out in
            guard let po = out.baseAddress else { return }
            for n in 0 ..< batch {
                for oc in 0 ..< outChannels {
                    let grp = oc / coutG
                    let dst = po + (n * outChannels + oc) * spatialOut
                    let b = pb?[oc] ?? 0
                    for i in 0 ..< spatialOut { dst[i] = b }
                    for icg in 0 ..< cinG {
                        let ic = grp * cinG + icg
                        let src = px + (n * channels + ic) * spatialIn
                        let wk = pw + (oc * cinG + icg) * kernelSize
                        for k0 in 0 ..< kD[0] {
                            for k1 in 0 ..< kD[1] {
                                for k2 in 0 ..< kD[2] {
                                    let wv = wk[(k0 * kD[1] + k1) * kD[2] + k2]
                                    if wv == 0 { continue }
                                    // Valid output range along the innermost dim for this tap.
                                    let off2 = k2 * dD[2] - pD[2]
                                    let lo2 = max(0, (-off2 + sD[2] - 1) / sD[2])
                                    let hi2 = min(outD[2], off2 >= inD[2] ? 0 : (inD[2] - 1 - off2) / sD[2] + 1)
                                    if lo2 >= hi2 { continue }
                                    for o0 in 0 ..< outD[0] {
                                        let i0 = o0 * sD[0] + k0 * dD[0] - pD[0]
                                        if i0 < 0 || i0 >= inD[0] { continue }
                                        for o1 in 0 ..< outD[1] {
                                            let i1 = o1 * sD[1] + k1 * dD[1] - pD[1]
                                            if i1 < 0 || i1 >= inD[1] { continue }
                                            let row = src + (i0 * inD[1] + i1) * inD[2] + off2
                                            let drow = dst + (o0 * outD[1] + o1) * outD[2]
                                            if sD[2] == 1 {
                                                for o2 in lo2 ..< hi2 { drow[o2] += wv * row[o2] }
                                            } else {
                                                for o2 in lo2 ..< hi2 { drow[o2] += wv * row[o2 * sD[2]] }
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    static func convTranspose(_ x: NDArray, _ w: NDArray, _ bias: NDArray?, _ attributes: [String: AttributeValue]) throws -> NDArray {
        guard x.scalarType == .float32, w.scalarType == .float32 else { throw OpError("conv_transpose needs float32 inputs") }
        guard x.rank >= 3, w.rank == x.rank, x.rank <= 5 else { throw OpError("conv_transpose: x \(x.shape) and weight \(w.shape) do not fit") }
        let group = try attributes.int("group", 1)
        let (batch, channels) = (x.shape[0], x.shape[1])
        guard group >= 1, channels % group == 0, w.shape[0] == channels else {
            throw OpError("conv_transpose: \(channels) input channels, weight \(w.shape) and group \(group) do not fit")
        }
        let coutG = w.shape[1], outChannels = coutG * group, cinG = channels / group
        let kernel = Array(w.shape[2...])
        let d = kernel.count
        let window = try OpSet.Window(attributes, kernel: kernel)
        let input = Array(x.shape[2...])
        let outPad = try attributes.ints("output_padding") ?? Array(repeating: 0, count: d)
        guard outPad.count == d, outPad.allSatisfy({ $0 >= 0 && $0 <= 1 << 24 }) else { throw OpError("output_padding must have \(d) small non-negative entries") }
        var padBegin = [Int](repeating: 0, count: d)
        var output = [Int](repeating: 0, count: d)
        let explicit = try attributes.ints("output_shape").map { Array($0.suffix(d)) }
        if let explicit, explicit.count != d || explicit.contains(where: { $0 < 0 }) { throw OpError("output_shape must end in \(d) sizes") }
        for i in 0 ..< d {
            let full = window.strides[i] * (input[i] - 1) + outPad[i] + (kernel[i] - 1) * window.dilations[i] + 1
            if let explicit {
                output[i] = explicit[i]
                let total = max(0, full - output[i])
                padBegin[i] = window.autoPad == "SAME_UPPER" ? total / 2 : total - total / 2
            } else if window.autoPad == "SAME_UPPER" || window.autoPad == "SAME_LOWER" {
                output[i] = input[i] * window.strides[i]
                let total = max(0, full - output[i])
                padBegin[i] = window.autoPad == "SAME_UPPER" ? total / 2 : total - total / 2
            } else {
                padBegin[i] = window.pads[i]
                output[i] = full - window.pads[i] - window.pads[i + d]
            }
        }
        if let bias, bias.shape != [outChannels] { throw OpError("conv_transpose: bias does not fit \(outChannels) channels") }
        _ = try checkedShape([batch, outChannels] + output)
        let spatialIn = input.reduce(1, *), spatialOut = output.reduce(1, *), kernelSize = kernel.reduce(1, *)
        let px = try x.f32, pw = try w.f32, pb = try bias?.f32
        let inStrides = stridesOf(input), outStrides = stridesOf(output), kStrides = stridesOf(kernel)
        return NDArray.make([batch, outChannels] + output, Float.self) { out in
            for n in 0 ..< batch {
                for oc in 0 ..< outChannels {
                    let base = (n * outChannels + oc) * spatialOut
                    for i in 0 ..< spatialOut { out[base + i] = pb?[oc] ?? 0 }
                }
                for ic in 0 ..< channels {
                    let grp = ic / cinG
                    for ocg in 0 ..< coutG {
                        let oc = grp * coutG + ocg
                        let wBase = (ic * coutG + ocg) * kernelSize
                        let outBase = (n * outChannels + oc) * spatialOut
                        for s in 0 ..< spatialIn {
                            let v = px[(n * channels + ic) * spatialIn + s]
                            if v == 0 { continue }
                            for k in 0 ..< kernelSize {
                                var o = 0
                                var inside = true
                                for a in 0 ..< d {
                                    let pos = (s / inStrides[a]) % input[a] * window.strides[a]
                                        + (k / kStrides[a]) % kernel[a] * window.dilations[a] - padBegin[a]
                                    if pos < 0 || pos >= output[a] { inside = false; break }
                                    o += pos * outStrides[a]
                                }
                                if inside { out[outBase + o] += v * pw[wBase + k] }
                            }
                        }
                    }
                }
            }
        }
    }

    /// Max or average pooling.
    /// Max, average or (with `lp`) Lp pooling: `(Σ |x|ᵖ)^(1/p)` over the window's inputs.
    static func pool(_ x: NDArray, _ attributes: [String: AttributeValue], max isMax: Bool, lp: Float? = nil) throws -> NDArray {
        try poolWithIndices(x, attributes, max: isMax, lp: lp).values
    }

    /// Pooling, plus for max pooling each output's flat input index (ONNX MaxPool's `Indices`:
    /// row-major over the whole input, or with `storage_order` 1 column-major over the spatial
    /// dims). Integer inputs pool through float32 and return in their type.
    static func poolWithIndices(_ x: NDArray, _ attributes: [String: AttributeValue], max isMax: Bool, lp: Float? = nil,
                                indices wantIndices: Bool = false) throws -> (values: NDArray, indices: NDArray?) {
        if x.scalarType != .float32, isMax, [.int8, .uint8, .int16, .uint16, .int32].contains(x.scalarType) {
            let r = try poolWithIndices(try Elementwise.cast(x, to: .float32), attributes, max: true, indices: wantIndices)
            return (try Elementwise.cast(r.values, to: x.scalarType), r.indices)
        }
        guard x.scalarType == .float32, x.rank >= 3 else { throw OpError("pooling needs float32 input [N, C, …]") }
        guard let kernel = try attributes.ints("kernel_shape"), kernel.count == x.rank - 2 else {
            throw OpError("kernel_shape must have \(x.rank - 2) entries")
        }
        let window = try OpSet.Window(attributes, kernel: kernel)
        let g = Geometry(window: window, input: Array(x.shape[2...]))
        _ = try checkedShape([x.shape[0], x.shape[1]] + g.output)
        let includePad = try attributes.int("count_include_pad", 0) != 0
        let planes = x.shape[0] * x.shape[1]
        let spatialIn = g.input.reduce(1, *), spatialOut = g.output.reduce(1, *)
        let d = kernel.count
        let inStrides = stridesOf(g.input), outStrides = stridesOf(g.output), kStrides = stridesOf(kernel)
        let kernelSize = kernel.reduce(1, *)
        let px = try x.f32
        // Padded extent (explicit pads only) bounds the window for count_include_pad.
        let padEnd = (0 ..< d).map { window.padding($0, size: g.input[$0]).1 }
        // Column-major spatial strides for storage_order 1.
        let columnMajor = try attributes.int("storage_order", 0) == 1
        var colStrides = [Int](repeating: 1, count: d)
        for a in 1 ..< max(d, 1) { colStrides[a] = colStrides[a - 1] * g.input[a - 1] }
        var argIndex = [Int64](repeating: 0, count: wantIndices ? planes * spatialOut : 0)
        let values = NDArray.make([x.shape[0], x.shape[1]] + g.output, Float.self) { out in
            for p in 0 ..< planes {
                for o in 0 ..< spatialOut {
                    var acc: Float = isMax ? -.infinity : 0
                    var best = -1
                    var count = 0
                    var padded = 1
                    for a in 0 ..< d {
                        let start = (o / outStrides[a]) % g.output[a] * window.strides[a] - g.padBegin[a]
                        let end = min(start + (kernel[a] - 1) * window.dilations[a] + 1, g.input[a] + padEnd[a])
                        padded *= (end - start + window.dilations[a] - 1) / window.dilations[a]
                    }
                    for k in 0 ..< kernelSize {
                        var i = 0, ci = 0
                        var inside = true
                        for a in 0 ..< d {
                            let pos = (o / outStrides[a]) % g.output[a] * window.strides[a] - g.padBegin[a]
                                + (k / kStrides[a]) % kernel[a] * window.dilations[a]
                            if pos < 0 || pos >= g.input[a] { inside = false; break }
                            i += pos * inStrides[a]
                            ci += pos * colStrides[a]
                        }
                        guard inside else { continue }
                        let v = px[p * spatialIn + i]
                        if isMax {
                            if v > acc || v.isNaN || best < 0 { acc = v; best = columnMajor ? ci : i }
                        } else if let lp { acc += powf(abs(v), lp) } else { acc += v }
                        count += 1
                    }
                    out[p * spatialOut + o] = isMax ? acc : lp.map { powf(acc, 1 / $0) } ?? acc / Float(max(includePad ? padded : count, 1))
                    if wantIndices { argIndex[p * spatialOut + o] = Int64(p * spatialIn + max(best, 0)) }
                }
            }
        }
        return (values, wantIndices ? NDArray(shape: values.shape, scalars: argIndex) : nil)
    }

    /// Global average or max over all spatial dims.
    static func globalPool(_ x: NDArray, max isMax: Bool) throws -> NDArray {
        guard x.scalarType == .float32, x.rank >= 3 else { throw OpError("global pooling needs float32 input [N, C, …]") }
        let planes = x.shape[0] * x.shape[1], spatial = x.shape[2...].reduce(1, *)
        let px = try x.f32
        return NDArray.make([x.shape[0], x.shape[1]] + Array(repeating: 1, count: x.rank - 2), Float.self) { out in
            for p in 0 ..< planes {
                let row = px.baseAddress! + p * spatial
                if isMax {
                    var m = -Float.infinity
                    for i in 0 ..< spatial where row[i] > m || row[i].isNaN { m = row[i] }
                    out[p] = m
                } else {
                    var s: Float = 0
                    for i in 0 ..< spatial { s += row[i] }
                    out[p] = s / Float(spatial)
                }
            }
        }
    }
}
