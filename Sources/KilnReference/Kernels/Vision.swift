import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Sampling, unfolding, detection and signal kernels (ONNX GridSample, AffineGrid, Col2Im,
/// DeformConv, MaxUnpool, NonMaxSuppression, RoiAlign, CenterCropPad, LRN, GroupNormalization,
/// DFT, STFT, window functions, MelWeightMatrix): grid sampling here, the others in
/// Vision+Unfold, Vision+Detection, Vision+Normalization and Vision+Signal.
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
}
