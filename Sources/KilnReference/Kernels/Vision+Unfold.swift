import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Unfolding kernels: `col2im`, `deform_conv`, `max_unpool`.
extension Vision {
    // MARK: Unfolding

    /// `col2im`: sums the columns x [N, C·∏block, L] back into images [N, C, image…].
    static func col2im(_ x: NDArray, image: [Int], block: [Int], dilations: [Int]?, pads: [Int]?, strides: [Int]?) throws -> NDArray {
        let r = image.count
        guard x.rank == 3, block.count == r, r >= 1 else { throw OpError("col2im needs x [N, C·∏block, L] and matching image and block shapes") }
        let dil = dilations ?? Array(repeating: 1, count: r), st = strides ?? Array(repeating: 1, count: r)
        let pd = pads ?? Array(repeating: 0, count: 2 * r)
        guard dil.count == r, st.count == r, pd.count == 2 * r, block.allSatisfy({ $0 >= 1 }), st.allSatisfy({ $0 >= 1 }) else {
            throw OpError("col2im's dilations, strides and pads do not fit the image rank \(r)")
        }
        let kernel = block.reduce(1, *)
        guard x.shape[1] % kernel == 0 else { throw OpError("col2im: \(x.shape[1]) channels do not divide by the block size \(kernel)") }
        let blocks = (0 ..< r).map { a -> Int in
            let span: Int = dil[a] * (block[a] - 1) + 1
            let padded: Int = image[a] + pd[a] + pd[a + r]
            return (padded - span) / st[a] + 1
        }
        let length = blocks.reduce(1, *)
        guard blocks.allSatisfy({ $0 >= 1 }), length == x.shape[2] else {
            throw OpError("col2im: \(x.shape[2]) columns, but the image and block give \(blocks)")
        }
        let (n, c) = (x.shape[0], x.shape[1] / kernel), pixels = image.reduce(1, *)
        let xs = try x.contiguous().values(Float.self)
        let kStrides = stridesOf(block), bStrides = stridesOf(blocks), iStrides = stridesOf(image)
        return NDArray.make(try checkedShape([n, c] + image), Float.self) { out in
            for plane in 0 ..< n * c {
                for k in 0 ..< kernel {
                    for col in 0 ..< length {
                        var at = 0
                        var inside = true
                        for a in 0 ..< r {
                            let pos = (col / bStrides[a]) % blocks[a] * st[a] - pd[a] + (k / kStrides[a]) % block[a] * dil[a]
                            if pos < 0 || pos >= image[a] { inside = false; break }
                            at += pos * iStrides[a]
                        }
                        if inside { out[plane * pixels + at] += xs[(plane * kernel + k) * length + col] }
                    }
                }
            }
        }
    }

    /// `deform_conv` in 2-D: each tap reads x bilinearly at its offset position (zero outside),
    /// scaled by the mask.
    static func deformConv(_ x: NDArray, _ w: NDArray, offset: NDArray, bias: NDArray?, mask: NDArray?,
                           _ a: [String: AttributeValue]) throws -> NDArray {
        guard x.rank == 4, w.rank == 4, offset.rank == 4 else { throw OpError("deform_conv supports 2-D convolutions (rank-4 x, w and offset)") }
        let (n, ic, ih, iw) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (oc, icg, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3])
        let (oh, ow) = (offset.shape[2], offset.shape[3])
        let group = try a.int("group", 1), og = try a.int("offset_group", 1)
        let st = try a.ints("strides") ?? [1, 1], dl = try a.ints("dilations") ?? [1, 1], pd = try a.ints("pads") ?? [0, 0, 0, 0]
        guard group >= 1, og >= 1, ic == icg * group, oc % group == 0, ic % og == 0, st.count == 2, dl.count == 2, pd.count == 4,
              offset.shape[0] == n, offset.shape[1] == og * kh * kw * 2 else {
            throw OpError("deform_conv: x \(x.shape), w \(w.shape), offset \(offset.shape) and group \(group)/offset_group \(og) do not fit")
        }
        guard ih * iw > 0 || n * ic * oh * ow == 0 else { throw OpError("deform_conv cannot sample an empty image \(x.shape)") }
        if let mask, mask.shape != [n, og * kh * kw, oh, ow] { throw OpError("deform_conv's mask must be [\(n), \(og * kh * kw), \(oh), \(ow)]") }
        if let bias, bias.elementCount != oc { throw OpError("deform_conv's bias must hold \(oc) values") }
        let xs = try x.contiguous().values(Float.self), ws = try w.contiguous().values(Float.self)
        let os = try offset.contiguous().values(Float.self), ms = try mask?.contiguous().values(Float.self)
        let bs = try bias?.contiguous().values(Float.self)
        let (ocg, icPerOffset) = (oc / group, ic / og)
        let linear = Sampling(mode: .linear, padding: .zeros, alignCorners: true)
        return NDArray.make(try checkedShape([n, oc, oh, ow]), Float.self) { out in
            // Sampled columns [ic, kh·kw] for one output position, then a dot with each filter.
            var columns = [Float](repeating: 0, count: ic * kh * kw)
            xs.withUnsafeBufferPointer { px in
                for b in 0 ..< n {
                    for i in 0 ..< oh {
                        for j in 0 ..< ow {
                            for ch in 0 ..< ic {
                                let g = ch / icPerOffset
                                let plane = px.baseAddress! + (b * ic + ch) * ih * iw
                                for u in 0 ..< kh {
                                    for v in 0 ..< kw {
                                        let tap = u * kw + v
                                        let oBase = ((b * og + g) * kh * kw + tap) * 2
                                        let dy = os[(oBase * oh + i) * ow + j], dx = os[((oBase + 1) * oh + i) * ow + j]
                                        let y = Float(i * st[0] - pd[0] + u * dl[0]) + dy, xx = Float(j * st[1] - pd[1] + v * dl[1]) + dx
                                        var value = sample(plane, dims: [ih, iw], strides: [iw, 1], at: [y, xx], linear)
                                        if let ms { value *= ms[(((b * og + g) * kh * kw + tap) * oh + i) * ow + j] }
                                        columns[ch * kh * kw + tap] = value
                                    }
                                }
                            }
                            for o in 0 ..< oc {
                                let g = o / ocg
                                var acc = bs?[o] ?? 0
                                for ci in 0 ..< icg {
                                    let ch = g * icg + ci
                                    for t in 0 ..< kh * kw { acc += ws[(o * icg + ci) * kh * kw + t] * columns[ch * kh * kw + t] }
                                }
                                out[((b * oc + o) * oh + i) * ow + j] = acc
                            }
                        }
                    }
                }
            }
        }
    }

    /// `max_unpool`: scatters x into zeros at the flat positions `indices` of the output.
    static func maxUnpool(_ x: NDArray, _ indices: NDArray, outputShape: [Int]?, _ a: [String: AttributeValue]) throws -> NDArray {
        guard x.rank >= 3, indices.shape == x.shape else { throw OpError("max_unpool needs x [N, C, …] and indices of its shape") }
        let kernel = try a.ints("kernel_shape") ?? []
        let r = x.rank - 2
        guard kernel.count == r else { throw OpError("kernel_shape must have \(r) entries") }
        let st = try a.ints("strides") ?? Array(repeating: 1, count: r), pd = try a.ints("pads") ?? Array(repeating: 0, count: 2 * r)
        guard st.count == r, pd.count == 2 * r else { throw OpError("strides and pads do not fit kernel_shape") }
        // Indices are flat positions in the output (of output_shape when given), as MaxPool's
        // indices of the pooled input are: the convention of PyTorch's exports and onnxruntime.
        // (The ONNX reference instead fills the inferred shape and pads it at its origin.)
        let inferred = [x.shape[0], x.shape[1]] + (0 ..< r).map { (x.shape[$0 + 2] - 1) * st[$0] + kernel[$0] - pd[$0] - pd[$0 + r] }
        let shape = outputShape ?? inferred
        guard shape.count == x.rank else { throw OpError("output_shape must have \(x.rank) entries") }
        let total = try checkedShape(shape).reduce(1, *)
        let xs = try x.contiguous().values(Float.self), idx = try indices.intValues()
        return try NDArray.make(shape, Float.self) { out in
            for (v, i) in zip(xs, idx) {
                guard i >= 0, i < total else { throw OpError("max_unpool index \(i) is outside the output's \(total) elements") }
                out[i] = v
            }
        }
    }
}
