import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Sampling, unfolding, detection and window kernels (ONNX GridSample, AffineGrid, Col2Im,
/// DeformConv, MaxUnpool, NonMaxSuppression, CenterCropPad, LRN, GroupNormalization,
/// MeanVarianceNormalization, window functions, MelWeightMatrix).
enum Vision {
    // MARK: Grid sampling

    /// How `grid_sample` reads between and beyond pixels.
    struct Sampling: Sendable {
        enum Mode: Sendable { case nearest, linear, cubic }
        enum Padding: Sendable { case zeros, border, reflection }
        var mode: Mode
        var padding: Padding
        var alignCorners: Bool

        init(_ a: [String: AttributeValue]) throws {
            switch try a.string("mode", "linear") {
            case "nearest": mode = .nearest
            case "linear", "bilinear": mode = .linear
            case "cubic", "bicubic": mode = .cubic
            case let m: throw OpError("unknown grid_sample mode '\(m)'")
            }
            switch try a.string("padding_mode", "zeros") {
            case "zeros": padding = .zeros
            case "border": padding = .border
            case "reflection": padding = .reflection
            case let p: throw OpError("unknown padding_mode '\(p)'")
            }
            alignCorners = try a.int("align_corners", 0) != 0
        }

        init(mode: Mode, padding: Padding, alignCorners: Bool) {
            (self.mode, self.padding, self.alignCorners) = (mode, padding, alignCorners)
        }
    }

    /// Reflects `x` into [lo, hi] by folding at the nearer border until it lies inside.
    static func reflect(_ x: Double, _ lo: Double, _ hi: Double) -> Double {
        let range = hi - lo
        guard range > 0 else { return lo }
        if x < lo {
            let d = lo - x, n = (d / range).rounded(.towardZero), r = d - n * range
            return n.truncatingRemainder(dividingBy: 2) == 0 ? lo + r : hi - r
        }
        if x > hi {
            let d = x - hi, n = (d / range).rounded(.towardZero), r = d - n * range
            return n.truncatingRemainder(dividingBy: 2) == 0 ? hi - r : lo + r
        }
        return x
    }

    /// Keys' cubic convolution weights (a = −0.75) of the four taps around a fraction `t`.
    static func cubicWeights(_ t: Float) -> [Float] {
        let a: Float = -0.75
        func near(_ x: Float) -> Float { ((a + 2) * x - (a + 3)) * x * x + 1 }
        func far(_ x: Float) -> Float { ((a * x - 5 * a) * x + 8 * a) * x - 4 * a }
        return [far(t + 1), near(t), near(1 - t), far(2 - t)]
    }

    /// Samples one plane (`dims`, row-major) at pixel coordinates `coord` (one per dim).
    static func sample(_ plane: UnsafePointer<Float>, dims: [Int], strides: [Int], at coord: [Float], _ s: Sampling) -> Float {
        let r = dims.count
        // Borders the coordinates are reflected into.
        func border(_ i: Int) -> (Double, Double) {
            s.alignCorners ? (0, Double(dims[i] - 1)) : (-0.5, Double(dims[i]) - 0.5)
        }
        var x = coord
        // Coordinates far outside (or not finite) brought near without changing what they read:
        // zeros read nothing there, border clamps, reflection repeats every two ranges.
        for i in 0 ..< r {
            let (lo, hi) = border(i)
            let (far, period) = (Float(dims[i] + 4), Float(2 * (hi - lo)))
            if x[i].isNaN { x[i] = -far; continue }
            guard abs(x[i]) > far else { continue }
            if s.padding == .reflection, period > 0, x[i].isFinite {
                x[i] = Float(lo) + (x[i] - Float(lo)).truncatingRemainder(dividingBy: period)
            } else {
                x[i] = x[i] > 0 ? far : -far
            }
        }
        if s.mode == .nearest { x = x.map { $0.rounded(.toNearestOrEven) } }
        // Linear and nearest sampling move an outside coordinate in first; cubic sampling keeps it
        // and moves each of its taps (as PyTorch's bicubic grid sampler and onnxruntime do).
        for i in 0 ..< r where s.mode != .cubic {
            let (lo, hi) = border(i)
            let v = Double(x[i])
            if v < lo || v > hi {
                if s.padding == .border { x[i] = min(max(x[i], 0), Float(dims[i] - 1)) }
                if s.padding == .reflection { x[i] = Float(reflect(v, lo, hi)) }
            }
        }
        // The taps per dim: index and weight.
        var taps: [[(Int, Float)]] = []
        for i in 0 ..< r {
            switch s.mode {
            case .nearest: taps.append([(Int(x[i]), 1)])
            case .linear:
                let f = x[i].rounded(.down), t = x[i] - f
                taps.append([(Int(f), 1 - t), (Int(f) + 1, t)])
            case .cubic:
                let f = x[i].rounded(.down), w = cubicWeights(x[i] - f)
                taps.append((0 ..< 4).map { (Int(f) - 1 + $0, w[$0]) })
            }
        }
        // Maps a tap index into the plane by the padding mode; nil reads zero.
        func place(_ j: Int, _ i: Int) -> Int? {
            if j >= 0 && j < dims[i] { return j }
            switch s.padding {
            case .zeros: return nil
            case .border: return min(max(j, 0), dims[i] - 1)
            case .reflection:
                let (lo, hi) = border(i)
                return min(max(Int(reflect(Double(j), lo, hi)), 0), dims[i] - 1)
            }
        }
        var total: Float = 0
        var pick = [Int](repeating: 0, count: r)
        while true {
            var w: Float = 1
            var offset = 0
            var inside = true
            for i in 0 ..< r {
                let (j, weight) = taps[i][pick[i]]
                w *= weight
                if let p = place(j, i) { offset += p * strides[i] } else { inside = false }
            }
            if inside { total += w * plane[offset] }
            var d = r - 1
            while d >= 0 {
                pick[d] += 1
                if pick[d] < taps[d].count { break }
                pick[d] = 0
                d -= 1
            }
            if d < 0 { break }
        }
        return total
    }

    /// `grid_sample`: x [N, C, D1…Dr], grid [N, O1…Or, r] with (x, y, …) normalized to [−1, 1].
    static func gridSample(_ x: NDArray, _ grid: NDArray, _ s: Sampling) throws -> NDArray {
        guard x.rank >= 3, grid.rank == x.rank, grid.shape[0] == x.shape[0], grid.shape[grid.rank - 1] == x.rank - 2 else {
            throw OpError("grid_sample needs x [N, C, …] and grid [N, …, \(x.rank - 2)]")
        }
        let (n, c) = (x.shape[0], x.shape[1])
        let dims = Array(x.shape[2...]), r = dims.count
        let outSpatial = Array(grid.shape[1 ..< grid.rank - 1])
        let points = outSpatial.reduce(1, *), planeSize = dims.reduce(1, *)
        guard planeSize > 0 || n * c * points == 0 else { throw OpError("grid_sample cannot sample an empty image \(x.shape)") }
        let xs = try x.contiguous().values(Float.self), gs = try grid.contiguous().values(Float.self)
        let strides = stridesOf(dims)
        return NDArray.make(try checkedShape([n, c] + outSpatial), Float.self) { out in
            xs.withUnsafeBufferPointer { px in
                for b in 0 ..< n {
                    for p in 0 ..< points {
                        // The grid's last dim runs from the innermost spatial dim outwards.
                        let g = (b * points + p) * r
                        let coord = (0 ..< r).map { i -> Float in
                            let v = gs[g + r - 1 - i], len = Float(dims[i])
                            return s.alignCorners ? (v + 1) / 2 * (len - 1) : ((v + 1) * len - 1) / 2
                        }
                        for ch in 0 ..< c {
                            let plane = px.baseAddress! + (b * c + ch) * planeSize
                            out[(b * c + ch) * points + p] = sample(plane, dims: dims, strides: strides, at: coord, s)
                        }
                    }
                }
            }
        }
    }

    /// `affine_grid`: theta [N, r, r+1] applied to the normalized coordinates of size [N, C, D1…Dr].
    static func affineGrid(_ theta: NDArray, size: [Int], alignCorners: Bool) throws -> NDArray {
        guard size.count == 4 || size.count == 5 else { throw OpError("affine_grid's size must have 4 or 5 entries") }
        let r = size.count - 2
        guard theta.rank == 3, theta.shape[0] == size[0], theta.shape[1] == r, theta.shape[2] == r + 1 else {
            throw OpError("theta must be [\(size[0]), \(r), \(r + 1)], got \(theta.shape)")
        }
        let dims = Array(size[2...]), n = size[0], points = dims.reduce(1, *)
        let t = try theta.contiguous().values(Float.self)
        func coordinate(_ i: Int, _ len: Int) -> Float {
            alignCorners ? (len == 1 ? 0 : -1 + Float(2 * i) / Float(len - 1)) : -1 + Float(2 * i + 1) / Float(len)
        }
        let strides = stridesOf(dims)
        return NDArray.make(try checkedShape([n] + dims + [r]), Float.self) { out in
            for b in 0 ..< n {
                for p in 0 ..< points {
                    // Homogeneous point (x, y[, z], 1): x runs along the innermost dim.
                    var h = [Float](repeating: 1, count: r + 1)
                    for i in 0 ..< r {
                        let d = r - 1 - i
                        h[i] = coordinate((p / strides[d]) % dims[d], dims[d])
                    }
                    for row in 0 ..< r {
                        var acc: Float = 0
                        for k in 0 ... r { acc += t[(b * r + row) * (r + 1) + k] * h[k] }
                        out[(b * points + p) * r + row] = acc
                    }
                }
            }
        }
    }

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

    // MARK: Boxes

    /// `non_max_suppression`: per batch and class, boxes by descending score (ties by index),
    /// each kept unless its IoU with a kept box exceeds the threshold.
    static func nonMaxSuppression(_ boxes: NDArray, _ scores: NDArray, maxPerClass: Int, iou: Float, scoreThreshold: Float?,
                                  centerPoint: Bool) throws -> NDArray {
        guard boxes.rank == 3, boxes.shape[2] == 4, scores.rank == 3, scores.shape[0] == boxes.shape[0], scores.shape[2] == boxes.shape[1] else {
            throw OpError("non_max_suppression needs boxes [B, S, 4] and scores [B, K, S], got \(boxes.shape) and \(scores.shape)")
        }
        let (batches, classes, count) = (boxes.shape[0], scores.shape[1], boxes.shape[1])
        let bx = try boxes.contiguous().values(Float.self), sc = try scores.contiguous().values(Float.self)
        // Corners (y1, x1, y2, x2) ordered min to max.
        func corners(_ b: Int, _ i: Int) -> (Float, Float, Float, Float) {
            let p = (b * count + i) * 4
            if centerPoint {
                let (cx, cy, w, h) = (bx[p], bx[p + 1], bx[p + 2], bx[p + 3])
                return (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)
            }
            return (min(bx[p], bx[p + 2]), min(bx[p + 1], bx[p + 3]), max(bx[p], bx[p + 2]), max(bx[p + 1], bx[p + 3]))
        }
        func suppresses(_ b: Int, _ i: Int, _ j: Int) -> Bool {
            let (ay1, ax1, ay2, ax2) = corners(b, i), (by1, bx1, by2, bx2) = corners(b, j)
            let ix = min(ax2, bx2) - max(ax1, bx1), iy = min(ay2, by2) - max(ay1, by1)
            guard ix > 0, iy > 0 else { return false }
            let inter = ix * iy, a1 = (ax2 - ax1) * (ay2 - ay1), a2 = (bx2 - bx1) * (by2 - by1)
            let union = a1 + a2 - inter
            guard a1 > 0, a2 > 0, union > 0 else { return false }
            return inter / union > iou
        }
        var selected: [Int64] = []
        for b in 0 ..< batches {
            for k in 0 ..< classes {
                let base = (b * classes + k) * count
                var order = (0 ..< count).filter { scoreThreshold == nil || sc[base + $0] > scoreThreshold! }
                order.sort { sc[base + $0] > sc[base + $1] || (sc[base + $0] == sc[base + $1] && $0 < $1) }
                var kept: [Int] = []
                for i in order where kept.count < maxPerClass {
                    if !kept.contains(where: { suppresses(b, i, $0) }) { kept.append(i) }
                }
                for i in kept { selected += [Int64(b), Int64(k), Int64(i)] }
            }
        }
        return NDArray(shape: [selected.count / 3, 3], scalars: selected)
    }

    /// ONNX RoiAlign's parameters.
    struct RoiAlignOptions: Sendable {
        var halfPixel: Bool
        var max: Bool
        var height: Int
        var width: Int
        var samplingRatio: Int
        var spatialScale: Float

        init(_ a: [String: AttributeValue]) throws {
            halfPixel = try a.string("coordinate_transformation_mode", "half_pixel") == "half_pixel"
            max = try a.string("mode", "avg") == "max"
            height = try a.int("output_height", 1)
            width = try a.int("output_width", 1)
            samplingRatio = try a.int("sampling_ratio", 0)
            spatialScale = Float(try a.float("spatial_scale", 1))
            guard height >= 1, width >= 1, height <= 1 << 12, width <= 1 << 12, samplingRatio >= 0 else {
                throw OpError("roi_align needs output sizes 1…4096 and sampling_ratio ≥ 0")
            }
        }
    }

    /// `roi_align`: each region (x1, y1, x2, y2, scaled) split into output bins, each bin the
    /// average (or max) of a grid of bilinear samples (sampling_ratio per side, or ⌈bin size⌉).
    /// As ONNX and onnxruntime define max mode, the max is over the samples' weighted corners.
    static func roiAlign(_ x: NDArray, rois: NDArray, batch: [Int], _ o: RoiAlignOptions) throws -> NDArray {
        guard x.rank == 4, rois.rank == 2, rois.shape[1] == 4, batch.count == rois.shape[0] else {
            throw OpError("roi_align needs x [N, C, H, W], rois [R, 4] and batch_indices [R], got \(x.shape), \(rois.shape), \(batch.count)")
        }
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let xs = try x.contiguous().values(Float.self), rs = try rois.contiguous().values(Float.self)
        guard rs.allSatisfy(\.isFinite), o.spatialScale.isFinite else { throw OpError("roi_align needs finite rois and spatial_scale") }
        let (ph, pw) = (o.height, o.width)
        return try NDArray.make(try checkedShape([batch.count, c, ph, pw]), Float.self) { out in
            for r in 0 ..< batch.count {
                guard batch[r] >= 0, batch[r] < n else { throw OpError("batch index \(batch[r]) is outside 0..<\(n)") }
                let offset: Float = o.halfPixel ? 0.5 : 0
                let (x1, y1) = (rs[r * 4] * o.spatialScale - offset, rs[r * 4 + 1] * o.spatialScale - offset)
                var (rw, rh) = (rs[r * 4 + 2] * o.spatialScale - offset - x1, rs[r * 4 + 3] * o.spatialScale - offset - y1)
                if !o.halfPixel { (rw, rh) = (Swift.max(rw, 1), Swift.max(rh, 1)) }
                let (bh, bw) = (rh / Float(ph), rw / Float(pw))
                let (fh, fw) = ((rh / Float(ph)).rounded(.up), (rw / Float(pw)).rounded(.up))
                guard o.samplingRatio > 0 || (fh.isFinite && fw.isFinite && fh <= 4096 && fw <= 4096) else { throw OpError("roi \(r) is too large to sample") }
                let gh = o.samplingRatio > 0 ? o.samplingRatio : Swift.max(Int(fh), 0)
                let gw = o.samplingRatio > 0 ? o.samplingRatio : Swift.max(Int(fw), 0)
                guard gh <= 1 << 12, gw <= 1 << 12 else { throw OpError("roi \(r) is too large to sample") }
                let count = Float(Swift.max(gh * gw, 1))
                // The four corners and weights of each sample, shared by every channel.
                var samples: [(Int, Int, Int, Int, Float, Float, Float, Float)] = []
                for i in 0 ..< ph {
                    for j in 0 ..< pw {
                        for iy in 0 ..< gh {
                            let yy = y1 + Float(i) * bh + (Float(iy) + 0.5) * bh / Float(gh)
                            for ix in 0 ..< gw {
                                let xx = x1 + Float(j) * bw + (Float(ix) + 0.5) * bw / Float(gw)
                                if yy < -1 || yy > Float(h) || xx < -1 || xx > Float(w) {
                                    samples.append((0, 0, 0, 0, 0, 0, 0, 0))
                                    continue
                                }
                                var (y, xv) = (Swift.max(yy, 0), Swift.max(xx, 0))
                                var (yl, xl) = (Int(y), Int(xv))
                                var (yh, xh) = (yl + 1, xl + 1)
                                if yl >= h - 1 { (yl, yh) = (h - 1, h - 1); y = Float(yl) }
                                if xl >= w - 1 { (xl, xh) = (w - 1, w - 1); xv = Float(xl) }
                                let (ly, lx) = (y - Float(yl), xv - Float(xl))
                                let (hy, hx) = (1 - ly, 1 - lx)
                                samples.append((yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh, hy * hx, hy * lx, ly * hx, ly * lx))
                            }
                        }
                    }
                }
                for ch in 0 ..< c {
                    let base = (batch[r] * c + ch) * h * w
                    var k = 0
                    for bin in 0 ..< ph * pw {
                        var value: Float = 0
                        for s in 0 ..< gh * gw {
                            let p = samples[k + s]
                            if o.max {
                                let v = Swift.max(p.4 * xs[base + p.0], p.5 * xs[base + p.1], p.6 * xs[base + p.2], p.7 * xs[base + p.3])
                                value = s == 0 ? v : Swift.max(value, v)
                            } else {
                                value += p.4 * xs[base + p.0] + p.5 * xs[base + p.1] + p.6 * xs[base + p.2] + p.7 * xs[base + p.3]
                            }
                        }
                        k += gh * gw
                        out[(r * c + ch) * ph * pw + bin] = o.max ? value : value / count
                    }
                }
            }
        }
    }

    // MARK: Cropping and normalization

    /// `center_crop_pad`: each listed axis cropped or zero-padded to its target, centered (the
    /// odd element goes to the end).
    static func centerCropPad(_ x: NDArray, shape target: [Int], axes: [Int]?) throws -> NDArray {
        let list = try (axes ?? Array(0 ..< x.rank)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
        guard list.count == target.count, target.allSatisfy({ $0 >= 0 }) else {
            throw OpError("center_crop_pad's shape has \(target.count) entries for \(list.count) axes")
        }
        var outShape = x.shape
        // Per axis: where the input's kept part starts in the input and in the output, and its length.
        var from = [Int](repeating: 0, count: x.rank), to = [Int](repeating: 0, count: x.rank), length = x.shape
        for (a, t) in zip(list, target) {
            let d = x.shape[a]
            outShape[a] = t
            if t < d { from[a] = (d - t) / 2; length[a] = t } else if t > d { to[a] = (t - d) / 2 }
        }
        let inStrides = stridesOf(x.shape), outStrides = stridesOf(outShape)
        let total = try checkedShape(outShape).reduce(1, *)
        // Each output element's source index, or the appended zero.
        var map = [Int](repeating: x.elementCount, count: total)
        var index = [Int](repeating: 0, count: x.rank)
        let count = length.reduce(1, *)
        for _ in 0 ..< count {
            var src = 0, dst = 0
            for a in 0 ..< x.rank {
                src += (index[a] + from[a]) * inStrides[a]
                dst += (index[a] + to[a]) * outStrides[a]
            }
            map[dst] = src
            var d = x.rank - 1
            while d >= 0 {
                index[d] += 1
                if index[d] < length[d] { break }
                index[d] = 0
                d -= 1
            }
        }
        let zero = NDArray(shape: [1], scalarType: x.scalarType)
        let combined = try Movement.concat([x.reshaped([x.elementCount]), zero], axis: 0)
        return gatherFlat(combined, map, shape: outShape)
    }

    /// `lrn`: x / (bias + alpha/size · Σ x² over the channel window)^beta.
    static func lrn(_ x: NDArray, size: Int, alpha: Float, beta: Float, bias: Float) throws -> NDArray {
        guard x.rank >= 3, size >= 1 else { throw OpError("lrn needs x [N, C, …] and size ≥ 1") }
        let (n, c) = (x.shape[0], x.shape[1]), inner = x.shape[2...].reduce(1, *)
        let xs = try x.contiguous().values(Float.self)
        let before = (size - 1) / 2, after = size - 1 - before
        return NDArray.make(x.shape, Float.self) { out in
            for b in 0 ..< n {
                for ch in 0 ..< c {
                    let lo = max(0, ch - before), hi = min(c - 1, ch + after)
                    for i in 0 ..< inner {
                        var sum: Float = 0
                        for k in lo ... hi { let v = xs[(b * c + k) * inner + i]; sum += v * v }
                        let at = (b * c + ch) * inner + i
                        out[at] = xs[at] / powf(bias + alpha / Float(size) * sum, beta)
                    }
                }
            }
        }
    }

    /// `group_norm`: each of `groups` channel groups normalized by its own mean and variance,
    /// then scaled and shifted per channel (or per group when scale holds one value per group).
    static func groupNorm(_ x: NDArray, scale: NDArray, bias: NDArray, groups: Int, epsilon: Float) throws -> NDArray {
        guard x.rank >= 2, groups >= 1, x.shape[1] % groups == 0 else { throw OpError("group_norm needs x [N, C, …] with C divisible by num_groups \(groups)") }
        let (n, c) = (x.shape[0], x.shape[1]), inner = x.shape[2...].reduce(1, *), per = c / groups
        let xs = try x.contiguous().values(Float.self), s = try scale.contiguous().values(Float.self), bs = try bias.contiguous().values(Float.self)
        guard (s.count == c || s.count == groups), bs.count == s.count else { throw OpError("group_norm's scale and bias must hold \(c) or \(groups) values") }
        let perChannel = s.count == c
        return NDArray.make(x.shape, Float.self) { out in
            for b in 0 ..< n {
                for g in 0 ..< groups {
                    let start = (b * c + g * per) * inner, count = per * inner
                    var mean: Double = 0
                    for i in 0 ..< count { mean += Double(xs[start + i]) }
                    mean /= Double(max(count, 1))
                    var variance: Double = 0
                    for i in 0 ..< count { let d = Double(xs[start + i]) - mean; variance += d * d }
                    variance /= Double(max(count, 1))
                    let inv = 1 / (Float(variance) + epsilon).squareRoot()
                    for i in 0 ..< count {
                        let ch = g * per + i / inner, k = perChannel ? ch : g
                        out[start + i] = (xs[start + i] - Float(mean)) * inv * s[k] + bs[k]
                    }
                }
            }
        }
    }

    // MARK: Signals

    /// `dft` along `axis` of x [..., n, 1 or 2]: the forward transform (all n bins, or the first
    /// n/2 + 1 when onesided), the inverse (scaled by 1/n), or with both inverse and onesided the
    /// real signal of a one-sided spectrum (Hermitian symmetry, real output [..., n, 1]). The
    /// signal is zero-padded or cut to `length`. A direct transform with a twiddle table, summed
    /// in double precision: O(n²), the reference's concern being exactness, not speed.
    static func dft(_ x: NDArray, length: Int?, axis rawAxis: Int, inverse: Bool, onesided: Bool) throws -> NDArray {
        guard x.rank >= 2, x.shape[x.rank - 1] == 1 || x.shape[x.rank - 1] == 2 else { throw OpError("dft needs x [..., n, 1 or 2], got \(x.shape)") }
        let axis = try OpSet.normalize(axis: rawAxis, rank: x.rank)
        guard axis != x.rank - 1 else { throw OpError("dft's axis cannot be the complex dim") }
        let complex = x.shape[x.rank - 1] == 2, m = x.shape[axis]
        let n = length ?? (inverse && onesided ? 2 * (m - 1) : m)
        guard n >= 1, n <= 1 << 20 else { throw OpError("dft length \(n) is outside 1…2^20") }
        let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1) ..< (x.rank - 1)].reduce(1, *)
        let bins = inverse ? n : (onesided ? n / 2 + 1 : n)
        let width = inverse && onesided ? 1 : 2
        var shape = x.shape
        shape[axis] = bins
        shape[x.rank - 1] = width
        let xs = try x.contiguous().values(Float.self)
        let c = complex ? 2 : 1
        let cosT = (0 ..< n).map { cos(2 * Double.pi * Double($0) / Double(n)) }
        let sinT = (0 ..< n).map { sin(2 * Double.pi * Double($0) / Double(n)) }
        let sign: Double = inverse ? 1 : -1
        return NDArray.make(try checkedShape(shape), Float.self) { out in
            var re = [Double](repeating: 0, count: n), im = [Double](repeating: 0, count: n)
            for o in 0 ..< outer {
                for i in 0 ..< inner {
                    for t in 0 ..< n { (re[t], im[t]) = (0, 0) }
                    if inverse && onesided {
                        // The full spectrum of a real signal from its first n/2 + 1 bins (imaginary
                        // parts of bin 0 and, for even n, bin n/2 ignored).
                        for k in 0 ..< min(m, n / 2 + 1) {
                            let at = ((o * m + k) * inner + i) * c
                            re[k] = Double(xs[at])
                            im[k] = complex && k != 0 && !(n % 2 == 0 && k == n / 2) ? Double(xs[at + 1]) : 0
                        }
                        for k in 1 ..< max(1, (n + 1) / 2) where k < n { (re[n - k], im[n - k]) = (re[k], -im[k]) }
                    } else {
                        for t in 0 ..< min(m, n) {
                            let at = ((o * m + t) * inner + i) * c
                            re[t] = Double(xs[at])
                            im[t] = complex ? Double(xs[at + 1]) : 0
                        }
                    }
                    for k in 0 ..< bins {
                        var (sr, si) = (0.0, 0.0)
                        var phase = 0
                        for t in 0 ..< n {
                            let (cr, ci) = (cosT[phase], sign * sinT[phase])
                            sr += re[t] * cr - im[t] * ci
                            si += re[t] * ci + im[t] * cr
                            phase += k
                            if phase >= n { phase -= n }
                        }
                        if inverse { (sr, si) = (sr / Double(n), si / Double(n)) }
                        let dst = ((o * bins + k) * inner + i) * width
                        out[dst] = Float(sr)
                        if width == 2 { out[dst + 1] = Float(si) }
                    }
                }
            }
        }
    }

    /// `stft`: frames of `frameLength` samples every `step`, each weighted by the window and
    /// transformed (one-sided for real signals when asked): [batch, frames, bins, 2].
    static func stft(_ x: NDArray, step: Int, window: NDArray?, frameLength: Int?, onesided: Bool) throws -> NDArray {
        guard x.rank == 3, x.shape[2] == 1 || x.shape[2] == 2 else { throw OpError("stft needs signal [batch, length, 1 or 2], got \(x.shape)") }
        let (batch, length, c) = (x.shape[0], x.shape[1], x.shape[2])
        let w = try window.map { try $0.contiguous().values(Float.self) }
        let frame = frameLength ?? w?.count ?? length
        guard step >= 1, frame >= 1, frame <= length, w == nil || w!.count == frame else {
            throw OpError("stft needs frame_step ≥ 1, a frame length in 1…\(length) and a window of that length")
        }
        let frames = 1 + (length - frame) / step
        let xs = try x.contiguous().values(Float.self)
        // The windowed frames [batch, frames, frame, c], then one transform along the frame axis.
        var framed = [Float](repeating: 0, count: batch * frames * frame * c)
        for b in 0 ..< batch {
            for f in 0 ..< frames {
                for t in 0 ..< frame {
                    for k in 0 ..< c {
                        framed[((b * frames + f) * frame + t) * c + k] = xs[(b * length + f * step + t) * c + k] * (w?[t] ?? 1)
                    }
                }
            }
        }
        return try dft(NDArray(shape: [batch, frames, frame, c], scalars: framed), length: frame, axis: 2, inverse: false, onesided: onesided && c == 1)
    }

    /// Hann, Hamming or Blackman window of `size` points (periodic: a period of `size`).
    static func window(kind: String, size: Int, periodic: Bool) throws -> NDArray {
        guard size >= 0, size <= maximumElements else { throw OpError("window size \(size) is invalid") }
        let n = Double(periodic ? size : size - 1)
        let values = (0 ..< size).map { i -> Float in
            let t = n == 0 ? 0 : 2 * Double.pi * Double(i) / n
            switch kind {
            case "hann": return Float(0.5 - 0.5 * cos(t))
            case "hamming": return Float(25.0 / 46.0 - (1 - 25.0 / 46.0) * cos(t))
            default: return Float(0.42 - 0.5 * cos(t) + 0.08 * cos(2 * t))
            }
        }
        return NDArray(shape: [size], scalars: values)
    }

    /// The triangular mel filter bank [dft_length/2 + 1, num_mel_bins] (ONNX MelWeightMatrix: mel
    /// points spaced by the range over bins + 2, bins located by floor((dft_length + 1)·f / rate)).
    static func melWeightMatrix(bins: Int, dftLength: Int, sampleRate: Int, lower: Double, upper: Double) throws -> NDArray {
        guard bins >= 1, dftLength >= 1, sampleRate >= 1, bins <= 1 << 16, dftLength <= 1 << 24 else {
            throw OpError("mel_weight_matrix needs positive num_mel_bins, dft_length and sample_rate")
        }
        let spectrum = dftLength / 2 + 1
        let lowMel = 2595 * log1p(lower / 700) / log(10.0), highMel = 2595 * log1p(upper / 700) / log(10.0)
        let step = (highMel - lowMel) / Double(bins + 2)
        let positions = (0 ..< bins + 2).map { i -> Double in
            let hz = 700 * expm1((Double(i) * step + lowMel) / 2595 * log(10.0))
            return (Double(dftLength + 1) * hz / Double(sampleRate)).rounded(.down)
        }
        guard positions.allSatisfy({ $0 >= 0 && $0 < Double(spectrum) }) else { throw OpError("mel_weight_matrix: the hertz range lies outside the spectrum") }
        let points = positions.map { Int($0) }
        return NDArray.make(try checkedShape([spectrum, bins]), Float.self) { out in
            for i in 0 ..< bins {
                let (left, center, right) = (points[i], points[i + 1], points[i + 2])
                if center == left {
                    out[center * bins + i] = 1
                } else {
                    for j in left ... center { out[j * bins + i] = Float(Double(j - left) / Double(center - left)) }
                }
                if right > center {
                    for j in center ..< right { out[j * bins + i] = Float(Double(right - j) / Double(right - center)) }
                }
            }
        }
    }
}
