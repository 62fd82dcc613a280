import KilnFormat

/// ONNX `Resize`: nearest (four rounding modes), linear and cubic interpolation with
/// every coordinate transformation mode, applied one axis at a time.
package enum Resize {
    package struct Options {
        package var mode: String
        package var transform: String
        var nearest: String
        var cubicA: Double
        var excludeOutside: Bool
        var extrapolation: Float
        var policy: String
        /// Linear and cubic downsampling widen the filter by 1 / scale (an antialiasing filter).
        var antialias: Bool
    }

    package static func options(_ a: [String: AttributeValue]) throws -> Options {
        let o = Options(
            mode: try a.string("mode", "nearest"),
            transform: try a.string("coordinate_transformation_mode", "half_pixel"),
            nearest: try a.string("nearest_mode", "round_prefer_floor"),
            cubicA: try a.float("cubic_coeff_a", -0.75),
            excludeOutside: try a.int("exclude_outside", 0) != 0,
            extrapolation: Float(try a.float("extrapolation_value", 0)),
            policy: try a.string("keep_aspect_ratio_policy", "stretch"),
            antialias: try a.int("antialias", 0) != 0)
        guard OpSet.resizeModes.contains(o.mode) else { throw OpError("unknown resize mode '\(o.mode)'") }
        guard ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"].contains(o.transform) else {
            throw OpError("unknown coordinate_transformation_mode '\(o.transform)'")
        }
        guard ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"].contains(o.nearest) else {
            throw OpError("unknown nearest_mode '\(o.nearest)'")
        }
        guard ["stretch", "not_larger", "not_smaller"].contains(o.policy) else {
            throw OpError("unknown keep_aspect_ratio_policy '\(o.policy)'")
        }
        return o
    }

    /// The output shape, per-axis scale and region of interest of a resize of `shape`.
    package struct Geometry {
        package var output: [Int]
        package var scale: [Double]
        package var roiStart: [Double]
        package var roiEnd: [Double]

        /// Whether axis `a` is interpolated (the reference resizes exactly these, in order).
        package func resizes(_ a: Int, input: [Int], _ o: Options) -> Bool {
            output[a] != input[a] || scale[a] != 1 || o.transform == "tf_crop_and_resize"
        }
    }

    /// Works out a resize's geometry; exactly one of `scales` and `sizes` is given (over `axes`).
    package static func geometry(_ shape: [Int], scales: [Double]?, sizes: [Int]?, roi: [Double]?, axes: [Int]?, _ o: Options) throws -> Geometry {
        let x = (rank: shape.count, shape: shape)
        let axes = try (axes ?? Array(0 ..< x.rank)).map { try OpSet.normalize(axis: $0, rank: x.rank) }
        var scale = [Double](repeating: 1, count: x.rank)
        var outShape = x.shape
        if let sizes {
            guard sizes.count == axes.count, sizes.allSatisfy({ $0 >= 0 }) else { throw OpError("sizes must have \(axes.count) non-negative entries") }
            if o.policy == "stretch" {
                for (k, a) in axes.enumerated() {
                    outShape[a] = sizes[k]
                    scale[a] = Double(sizes[k]) / Double(max(x.shape[a], 1))
                }
            } else {
                let ratios = axes.enumerated().map { Double(sizes[$0.offset]) / Double(max(x.shape[$0.element], 1)) }
                let s = o.policy == "not_larger" ? ratios.min() ?? 1 : ratios.max() ?? 1
                for a in axes {
                    scale[a] = s
                    let size = (s * Double(x.shape[a])).rounded(.toNearestOrAwayFromZero)
                    guard size.isFinite, size <= Double(maximumElements) else { throw OpError("sizes are too large") }
                    outShape[a] = Int(size)
                }
            }
        } else if let scales {
            guard scales.count == axes.count, scales.allSatisfy({ $0 > 0 }) else { throw OpError("scales must have \(axes.count) positive entries") }
            for (k, a) in axes.enumerated() {
                scale[a] = scales[k]
                let size = (Double(x.shape[a]) * scales[k]).rounded(.down)
                guard size.isFinite, size <= Double(maximumElements) else { throw OpError("scale \(scales[k]) is too large") }
                outShape[a] = Int(size)
            }
        } else {
            throw OpError("resize needs scales or sizes")
        }
        guard scale.allSatisfy({ $0.isFinite && $0 > 0 }) else { throw OpError("resize scales must be positive") }
        // An antialiased downsample's filter spans 1/scale pixels.
        if o.antialias, o.mode != "nearest", scale.contains(where: { $0 < 1.0 / 65536 }) { throw OpError("antialiased resize scales must be at least 1/65536") }
        _ = try checkedShape(outShape)
        var roiStart = [Double](repeating: 0, count: x.rank), roiEnd = [Double](repeating: 1, count: x.rank)
        if o.transform == "tf_crop_and_resize" {
            guard let roi, roi.count == 2 * axes.count else { throw OpError("tf_crop_and_resize needs an roi of \(2 * axes.count) values") }
            for (k, a) in axes.enumerated() {
                roiStart[a] = roi[k]
                roiEnd[a] = roi[k + axes.count]
            }
        }
        return Geometry(output: outShape, scale: scale, roiStart: roiStart, roiEnd: roiEnd)
    }

    /// Resizes `x`; exactly one of `scales` and `sizes` is given (over `axes`).
    static func resize(_ x: NDArray, scales: [Double]?, sizes: [Int]?, roi: [Double]?, axes: [Int]?, _ o: Options) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("resize needs float32 input") }
        let g = try geometry(x.shape, scales: scales, sizes: sizes, roi: roi, axes: axes, o)
        var current = x
        var outside = [[Bool]](repeating: [], count: x.rank)
        for a in 0 ..< x.rank where g.resizes(a, input: x.shape, o) {
            let (taps, out) = weights(input: x.shape[a], output: g.output[a], scale: g.scale[a], roi: (g.roiStart[a], g.roiEnd[a]), o)
            outside[a] = out
            current = try apply(current, axis: a, taps: taps)
        }
        if o.transform == "tf_crop_and_resize" {
            // Elements whose source coordinate falls outside the input take the extrapolation value.
            var r = current
            let shape = current.shape
            r.mutableView(as: Float.self) { p in
                var index = [Int](repeating: 0, count: shape.count)
                for i in 0 ..< p.count {
                    if index.enumerated().contains(where: { !outside[$0.offset].isEmpty && outside[$0.offset][$0.element] }) {
                        p[i] = o.extrapolation
                    }
                    var d = shape.count - 1
                    while d >= 0 {
                        index[d] += 1
                        if index[d] < shape[d] { break }
                        index[d] = 0
                        d -= 1
                    }
                }
            }
            current = r
        }
        return current
    }

    /// Source taps (index, weight) of each output coordinate along one axis.
    package static func weights(input n: Int, output m: Int, scale: Double, roi: (Double, Double), _ o: Options) -> ([[(Int, Float)]], [Bool]) {
        var taps: [[(Int, Float)]] = []
        var outside: [Bool] = []
        taps.reserveCapacity(m)
        for i in 0 ..< m {
            let xr = Double(i)
            var xo: Double
            switch o.transform {
            case "asymmetric": xo = xr / scale
            case "pytorch_half_pixel": xo = m > 1 ? (xr + 0.5) / scale - 0.5 : 0
            case "align_corners":
                // The resized length is the unrounded `n · scale` of the ONNX reference (so a
                // downsample by scales maps the last output short of the input's last pixel);
                // given sizes, it is the size.
                let length = abs(Double(n) * scale - Double(m)) < 1e-9 * Double(max(m, 1)) ? Double(m) : Double(n) * scale
                xo = length == 1 ? 0 : xr * Double(n - 1) / (length - 1)
            case "half_pixel_symmetric":
                let adjustment = Double(m) / (scale * Double(n))
                let offset = Double(n) * (1 - adjustment) / 2
                xo = offset + (xr + 0.5) / scale - 0.5
            case "tf_crop_and_resize":
                xo = m > 1 ? roi.0 * Double(n - 1) + xr * (roi.1 - roi.0) * Double(n - 1) / Double(m - 1)
                    : 0.5 * (roi.0 + roi.1) * Double(n - 1)
            default: xo = (xr + 0.5) / scale - 0.5
            }
            outside.append(o.transform == "tf_crop_and_resize" && (xo < 0 || xo > Double(n - 1)))
            func clamp(_ j: Int) -> Int { min(max(j, 0), n - 1) }
            if o.antialias, scale < 1, o.mode != "nearest" {
                taps.append(antialiased(xo, input: n, scale: scale, o))
                continue
            }
            switch o.mode {
            case "nearest":
                var j: Int
                switch o.nearest {
                case "floor": j = Int(xo.rounded(.down))
                case "ceil": j = Int(xo.rounded(.up))
                case "round_prefer_ceil": j = Int((xo + 0.5).rounded(.down))
                default: j = xo == xo.rounded(.down) + 0.5 ? Int(xo.rounded(.down)) : Int(xo.rounded())
                }
                taps.append([(clamp(j), 1)])
            case "linear":
                let j = Int(xo.rounded(.down))
                let w = Float(xo - Double(j))
                taps.append([(clamp(j), 1 - w), (clamp(j + 1), w)])
            default:
                let j = Int(xo.rounded(.down))
                let t = xo - Double(j)
                let a = o.cubicA
                func kernel(_ s: Double) -> Double {
                    let s = abs(s)
                    if s <= 1 { return ((a + 2) * s - (a + 3)) * s * s + 1 }
                    if s < 2 { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a }
                    return 0
                }
                var tap: [(Int, Double)] = (-1 ... 2).map { k in (j + k, kernel(t - Double(k))) }
                if o.excludeOutside {
                    tap = tap.map { ($0.0, $0.0 < 0 || $0.0 >= n ? 0 : $0.1) }
                    let sum = tap.reduce(0) { $0 + $1.1 }
                    if sum != 0 { tap = tap.map { ($0.0, $0.1 / sum) } }
                }
                taps.append(tap.map { (clamp($0.0), Float($0.1)) })
            }
        }
        return (taps, outside)
    }

    /// The taps of an antialiased downsample at source coordinate `x`: the linear (triangle) or
    /// cubic kernel stretched by 1 / scale over the pixels it covers, normalized to sum to 1. The
    /// window starts left of x (an exact integer x counts as the right end of the pixel before),
    /// as the ONNX reference places it; pixels beyond the edges repeat the edge (or, with
    /// exclude_outside, drop out and the rest are renormalized).
    static func antialiased(_ x: Double, input n: Int, scale: Double, _ o: Options) -> [(Int, Float)] {
        let floor = x.rounded(.down)
        let left = Int(floor) - (x == floor ? 1 : 0)
        let linear = o.mode == "linear"
        let start = Int((-(linear ? 1 : 2) / scale).rounded(.down)) + 1
        let a = o.cubicA
        func kernel(_ s: Double) -> Double {
            let s = abs(s)
            if linear { return max(0, 1 - s) }
            if s <= 1 { return ((a + 2) * s - (a + 3)) * s * s + 1 }
            if s < 2 { return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a }
            return 0
        }
        var tap: [(Int, Double)] = (start ..< 2 - start).map { i in (left + i, kernel(scale * (Double(left + i) - x))) }
        var sum = tap.reduce(0) { $0 + $1.1 }
        if sum != 0 { tap = tap.map { ($0.0, $0.1 / sum) } }
        if o.excludeOutside {
            tap = tap.map { ($0.0, $0.0 < 0 || $0.0 >= n ? 0 : $0.1) }
            sum = tap.reduce(0) { $0 + $1.1 }
            if sum != 0 { tap = tap.map { ($0.0, $0.1 / sum) } }
        }
        return tap.map { (min(max($0.0, 0), n - 1), Float($0.1)) }
    }

    /// Interpolates along one axis with per-output taps.
    static func apply(_ x: NDArray, axis: Int, taps: [[(Int, Float)]]) throws -> NDArray {
        let n = x.shape[axis], m = taps.count
        let inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.shape[..<axis].reduce(1, *)
        var shape = x.shape
        shape[axis] = m
        let p = try x.f32
        return NDArray.make(shape, Float.self) { out in
            for o in 0 ..< outer {
                for i in 0 ..< m {
                    let dst = (o * m + i) * inner
                    for (j, w) in taps[i] where w != 0 {
                        let src = (o * n + j) * inner
                        for k in 0 ..< inner { out[dst + k] += w * p[src + k] }
                    }
                }
            }
        }
    }
}
