@preconcurrency import CKilnKernels
import KilnFormat

/// Convolutions whose windows mostly read padding — dilated (atrous) heads on small feature
/// maps, such as a DeepLab head's rate-12/24/36 3×3 convs on a 14×14 map, where most taps of
/// most pixels fall outside the image — skip those taps instead of multiplying zeros.
///
/// A tap (ky, kx) lands inside the image for a range of output rows and a range of output
/// columns. Threads own panels of output channels; per panel the output is zeroed, each tap
/// adds its product over just its rectangle of pixels (the indirect microkernel on the tap's
/// c rows of the packed weight, whose K is ordered kernel row, column, channel), and the bias
/// and activation follow. Used when under half of all the pixels' taps are valid.
extension ConvNHWCStep {
    /// Valid kernel indices [lo, hi) per output position along one axis.
    static func validTaps(out: Int, size: Int, kernel: Int, stride: Int, dilation: Int, pad: Int) -> [(Int, Int)] {
        (0 ..< out).map { o in
            let origin = o * stride - pad
            var (lo, hi) = (0, 0)
            while lo < kernel, origin + lo * dilation < 0 { lo += 1 }
            hi = lo
            while hi < kernel, origin + hi * dilation < size { hi += 1 }
            return (lo, hi)
        }
    }

    func bindSparseTaps(_ ukernel: kiln_f32_igemm_ukernel, x: Operand, y: Operand, bias: Operand?,
                        context: inout BindContext) throws -> BoundStep? {
        guard groups.count == 1, !planarInput, gemm.b.kind == Int32(KILN_B_F32), gemm.b.ldb == 0 else { return nil }
        let (batch, h, w, c) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (kh, kw) = (window.kernel[0], window.kernel[1])
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
        let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
        guard oh > 0, ow > 0, c > 0, kh * kw > 1 else { return nil }
        let rowTaps = Self.validTaps(out: oh, size: h, kernel: kh, stride: sh, dilation: dh, pad: pt)
        let colTaps = Self.validTaps(out: ow, size: w, kernel: kw, stride: sw, dilation: dw, pad: pl)
        let valid = rowTaps.reduce(0) { $0 + $1.1 - $1.0 } * colTaps.reduce(0) { $0 + $1.1 - $1.0 }
        guard 2 * valid < oh * ow * kh * kw else { return nil }
        // Per tap (ky, kx): the output rows and columns where it lands inside the image (ranges).
        func span(_ taps: [(Int, Int)], _ t: Int) -> Range<Int> {
            let inside = taps.indices.filter { taps[$0].0 <= t && t < taps[$0].1 }
            return inside.isEmpty ? 0 ..< 0 : inside.first! ..< inside.last! + 1
        }
        let rowSpans = (0 ..< kh).map { span(rowTaps, $0) }, colSpans = (0 ..< kw).map { span(colTaps, $0) }
        // The padded image, as the indirect path reads it; one offset per tap (K in runs of c).
        let pb = max(0, (oh - 1) * sh + (kh - 1) * dh + 1 - h - pt), pr = max(0, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pl)
        let (hp, wp) = (h + pt + pb, w + pl + pr)
        var offsets: [Int32] = []
        for ky in 0 ..< kh { for kx in 0 ..< kw { offsets.append(Int32((ky * dh * wp + kx * dw) * c)) } }
        let (rowStep, pixelStep) = (sh * wp * c, sw * c)
        let (n, nr, k, mr, threads) = (outChannels, gemm.b.nr, gemm.k, gemm.mr, context.threads)
        let panels = gemm.panels
        guard (h + 2 * kh * dh) * (w + 2 * kw * dw) * c < Int(Int32.max) else { return nil }
        let padBytes = (hp * wp * c * 4 + 63) / 64 * 64
        context.scratch(padBytes)
        let ldc = y.rowStride ?? n
        let (base, scratchSlot, data) = (epilogue, context.scratchSlot, gemm.b.data.map { $0.assumingMemoryBound(to: Float.self) })
        guard let data else { return nil }
        let panelParts = splitRanges(panels, parts: valid * n * c < 1 << 15 ? 1 : threads)
        return BoundStep { slots in
            let py = y.floats(slots)
            let e = ConvNHWCStep.epilogue(base, bias: bias, residual: nil, output: y, slots)
            let pad = slots[scratchSlot].assumingMemoryBound(to: Float.self)
            offsets.withUnsafeBufferPointer { offsets in
                for image in 0 ..< batch {
                    let xi = x.floats(slots) + image * h * w * c, yi = py + image * oh * ow * ldc
                    parallelFor(threads, threads: threads) { i in
                        kiln_f32_pad_rows(1, h, w, c, xi, pt, pl, hp, wp, pad, hp * i / threads, hp * (i + 1) / threads)
                    }
                    // Threads own panels (output columns); per panel, taps outer so each tap's slice
                    // of the panel is read once for all the pixels it reaches.
                    parallelFor(panelParts.count, threads: threads) { part in
                        for p in panelParts[part] {
                            let (n0, nc) = (p * nr, min(nr, n - p * nr))
                            for pixel in 0 ..< oh * ow { (yi + pixel * ldc + n0).initialize(repeating: 0, count: nc) }
                            for ky in 0 ..< kh where !rowSpans[ky].isEmpty {
                                for kx in 0 ..< kw where !colSpans[kx].isEmpty {
                                    let (rows, cols, tap) = (rowSpans[ky], colSpans[kx], ky * kw + kx)
                                    var b = kiln_packed_b()
                                    b.kind = Int32(KILN_B_F32)
                                    (b.k, b.n, b.nr) = (c, nc, nr)
                                    b.data = UnsafeRawPointer(data + p * k * nr + tap * c * nr)
                                    var add = kiln_epilogue()
                                    add.accumulate = 1
                                    // Whole rows are contiguous pixels: one call; else one per row.
                                    let whole = cols.count == ow
                                    let width = whole ? rows.count * ow : cols.count
                                    for oy in rows.lowerBound ..< (whole ? rows.lowerBound + 1 : rows.upperBound) {
                                        let src = UnsafePointer(pad) + oy * rowStep + cols.lowerBound * pixelStep
                                        kiln_f32_igemm(ukernel, mr, &b, src, rowStep, pixelStep, cols.count, offsets.baseAddress! + tap, c,
                                                       yi + (oy * ow + cols.lowerBound) * ldc + n0, ldc, 0, width, 0, 1, &add, nil)
                                    }
                                }
                            }
                            var last = e
                            last.bias = e.bias.map { $0 + n0 }
                            kiln_f32_epilogue(oh * ow, nc, yi + n0, ldc, last.bias, &last)
                        }
                    }
                }
            }
        }
    }
}
