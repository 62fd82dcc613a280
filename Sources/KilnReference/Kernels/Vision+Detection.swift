import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Box kernels: `non_max_suppression`, `roi_align`.
extension Vision {
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
}
