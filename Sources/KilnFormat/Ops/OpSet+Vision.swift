/// Sampling, detection and signal ops: grids, unfolding, deformable convolution, box selection,
/// window functions.
extension OpSet {
    static let samplingModes: Set<String> = ["linear", "bilinear", "nearest", "cubic", "bicubic"]
    static let samplingPads: Set<String> = ["zeros", "border", "reflection"]

    static var visionOps: [OpSchema] {
        [
            // X [N, C, D1…Dr], grid [N, O1…Or, r] of normalized coordinates (x first) → [N, C, O1…Or].
            op("grid_sample", ["x", "grid"], ["mode": .string, "padding_mode": .string, "align_corners": .int]) { ctx in
                let (x, g) = (try ctx.input(0), try ctx.input(1))
                try requireFloat(x, "grid_sample")
                guard x.rank >= 3, g.rank == x.rank else { throw OpError("grid_sample needs x [N, C, …] and a grid of the same rank") }
                if let r = g.shape[g.rank - 1].size, r != x.rank - 2 { throw OpError("grid's last dim must be \(x.rank - 2), got \(r)") }
                guard samplingModes.contains(try ctx.attributes.string("mode", "linear")) else { throw OpError("unknown mode") }
                guard samplingPads.contains(try ctx.attributes.string("padding_mode", "zeros")) else { throw OpError("unknown padding_mode") }
                return [TensorType(x.dtype, [x.shape[0], x.shape[1]] + Array(g.shape[1 ..< g.rank - 1]))]
            },
            // theta [N, r, r+1], size [N, C, D1…Dr] → grid [N, D1…Dr, r].
            op("affine_grid", ["theta", "size"], ["align_corners": .int]) { ctx in
                let (t, s) = (try ctx.input(0), try ctx.input(1))
                try requireFloat(t, "affine_grid")
                guard t.rank == 3, s.rank == 1 else { throw OpError("affine_grid needs theta [N, r, r + 1] and a 1-D size") }
                guard let n = staticLength(s) else { return [nil] }
                guard n == 4 || n == 5 else { throw OpError("size must have 4 or 5 entries") }
                return [TensorType(t.dtype, unknownDims(n - 1) + [.size(n - 2)])]
            },
            // x [N, C·∏block, L], image_shape, block_shape → [N, C, image…].
            op("col2im", ["x", "image_shape", "block_shape"], ["dilations": .ints, "pads": .ints, "strides": .ints]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "col2im")
                guard x.rank == 3 else { throw OpError("col2im needs x [N, C·∏block, L]") }
                guard let n = staticLength(ctx.optionalInput(1)) else { return [nil] }
                return [TensorType(x.dtype, [x.shape[0], .unknown] + unknownDims(n))]
            },
            op("deform_conv", ["x", "w", "offset", "b?", "mask?"],
               ["dilations": .ints, "group": .int, "kernel_shape": .ints, "offset_group": .int, "pads": .ints, "strides": .ints]) { ctx in
                let (x, w, offset) = (try ctx.input(0), try ctx.input(1), try ctx.input(2))
                try requireFloat(x, "deform_conv")
                guard x.rank >= 3, w.rank == x.rank, offset.rank == x.rank else { throw OpError("deform_conv needs x, w and offset of one rank ≥ 3") }
                return [TensorType(x.dtype, [x.shape[0], w.shape[0]] + Array(offset.shape[2...]))]
            },
            op("max_unpool", ["x", "indices", "output_shape?"], ["kernel_shape!": .ints, "pads": .ints, "strides": .ints]) { ctx in
                let (x, i) = (try ctx.input(0), try ctx.input(1))
                guard x.rank >= 3, i.dtype == .int64 else { throw OpError("max_unpool needs x [N, C, …] and int64 indices") }
                let kernel = try ctx.attributes.ints("kernel_shape") ?? []
                guard kernel.count == x.rank - 2 else { throw OpError("kernel_shape must have \(x.rank - 2) entries") }
                if ctx.optionalInput(2) != nil { return [TensorType(x.dtype, unknownDims(x.rank))] }
                let strides = try ctx.attributes.ints("strides") ?? kernel.map { _ in 1 }
                let pads = try ctx.attributes.ints("pads") ?? [Int](repeating: 0, count: 2 * kernel.count)
                guard strides.count == kernel.count, pads.count == 2 * kernel.count else { throw OpError("strides and pads do not fit kernel_shape") }
                let spatial = kernel.indices.map { a -> Dimension in
                    x.shape[a + 2].size.map { .size(($0 - 1) * strides[a] + kernel[a] - pads[a] - pads[a + kernel.count]) } ?? .unknown
                }
                return [TensorType(x.dtype, [x.shape[0], x.shape[1]] + spatial)]
            },
            // boxes [B, S, 4], scores [B, K, S] → selected [M, 3] (batch, class, box).
            op("non_max_suppression", ["boxes", "scores", "max_output_boxes_per_class?", "iou_threshold?", "score_threshold?"],
               ["center_point_box": .int]) { ctx in
                let (b, s) = (try ctx.input(0), try ctx.input(1))
                guard b.rank == 3, s.rank == 3 else { throw OpError("non_max_suppression needs boxes [B, S, 4] and scores [B, K, S]") }
                return [TensorType(.int64, [.unknown, .size(3)])]
            },
            // x [N, C, H, W], rois [R, 4] (x1, y1, x2, y2), batch_indices [R] → [R, C, output_height, output_width].
            op("roi_align", ["x", "rois", "batch_indices"], ["coordinate_transformation_mode": .string, "mode": .string, "output_height": .int,
                                                             "output_width": .int, "sampling_ratio": .int, "spatial_scale": .float]) { ctx in
                let (x, rois) = (try ctx.input(0), try ctx.input(1))
                try requireFloat(x, "roi_align")
                guard x.rank == 4, rois.rank == 2 else { throw OpError("roi_align needs x [N, C, H, W] and rois [R, 4]") }
                guard ["avg", "max"].contains(try ctx.attributes.string("mode", "avg")) else { throw OpError("mode must be avg or max") }
                guard ["half_pixel", "output_half_pixel"].contains(try ctx.attributes.string("coordinate_transformation_mode", "half_pixel")) else {
                    throw OpError("coordinate_transformation_mode must be half_pixel or output_half_pixel")
                }
                let (h, w) = (try ctx.attributes.int("output_height", 1), try ctx.attributes.int("output_width", 1))
                guard h >= 1, w >= 1 else { throw OpError("output_height and output_width must be ≥ 1") }
                return [TensorType(x.dtype, [rois.shape[0], x.shape[1], .size(h), .size(w)])]
            },
            op("center_crop_pad", ["x", "shape"], ["axes": .ints]) { ctx in
                let x = try ctx.input(0)
                return [TensorType(x.dtype, unknownDims(x.rank))]
            },
            op("lrn", ["x"], ["alpha": .float, "beta": .float, "bias": .float, "size!": .int]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "lrn")
                guard x.rank >= 3 else { throw OpError("lrn needs x [N, C, …]") }
                guard try ctx.attributes.int("size", 1) >= 1 else { throw OpError("size must be ≥ 1") }
                return [x]
            },
            // scale and bias hold one value per channel, or one per group.
            op("group_norm", ["x", "scale", "bias"], ["epsilon": .float, "num_groups!": .int]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "group_norm")
                guard x.rank >= 2, try ctx.attributes.int("num_groups", 1) >= 1 else { throw OpError("group_norm needs x [N, C, …] and num_groups ≥ 1") }
                return [x]
            },
            // (x − mean) / (std + 1e-9) over `axes`.
            op("mean_variance_normalization", ["x"], ["axes": .ints]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "mean_variance_normalization")
                return [x]
            },
            op("window", ["size"], ["kind!": .string, "periodic": .int, "dtype": .dtype]) { ctx in
                let s = try ctx.input(0)
                try requireInteger(s, "window")
                guard ["hann", "hamming", "blackman"].contains(try ctx.attributes.string("kind", "")) else { throw OpError("kind must be hann, hamming or blackman") }
                var dtype = DataType.float32
                if case .dtype(let d)? = ctx.attributes["dtype"] { dtype = d }
                return [TensorType(dtype, [.unknown])]
            },
            // x [..., n, 1 (real) or 2 (complex)] transformed along `axis` (not the last).
            op("dft", ["x", "dft_length?", "axis?"], ["axis": .int, "dft_length": .int, "inverse": .int, "onesided": .int]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "dft")
                guard x.rank >= 2 else { throw OpError("dft needs x [..., n, 1 or 2]") }
                if let c = x.shape[x.rank - 1].size, c != 1 && c != 2 { throw OpError("dft's last dim must be 1 (real) or 2 (complex), got \(c)") }
                var dims = x.shape
                guard ctx.optionalInput(2) == nil, ctx.attributes["axis"] != nil || ctx.optionalInput(2) == nil else { return [TensorType(x.dtype, unknownDims(x.rank))] }
                let axis = try normalize(axis: try ctx.attributes.int("axis", -2), rank: x.rank)
                guard axis != x.rank - 1 else { throw OpError("dft's axis cannot be the complex dim") }
                let inverse = try ctx.attributes.int("inverse", 0) != 0, onesided = try ctx.attributes.int("onesided", 0) != 0
                var n: Dimension = x.shape[axis]
                if let l = ctx.attributes["dft_length"], case .int(let v) = l {
                    guard v >= 1 else { throw OpError("dft_length must be ≥ 1") }
                    n = .size(v)
                } else if ctx.optionalInput(1) != nil {
                    n = .unknown
                } else if inverse && onesided {
                    n = x.shape[axis].size.map { .size(2 * ($0 - 1)) } ?? .unknown
                }
                dims[axis] = inverse || !onesided ? n : (n.size.map { .size($0 / 2 + 1) } ?? .unknown)
                dims[x.rank - 1] = .size(inverse && onesided ? 1 : 2)
                return [TensorType(x.dtype, dims)]
            },
            // signal [batch, length, 1 or 2] (or [batch, length], real) → [batch, frames, bins, 2].
            op("stft", ["signal", "frame_step", "window?", "frame_length?"], ["onesided": .int]) { ctx in
                let x = try ctx.input(0)
                try requireFloat(x, "stft")
                guard x.rank == 3 || x.rank == 2 else { throw OpError("stft needs signal [batch, length, 1 or 2] or [batch, length]") }
                return [TensorType(x.dtype, [x.shape[0], .unknown, .unknown, .size(2)])]
            },
            op("mel_weight_matrix", ["num_mel_bins", "dft_length", "sample_rate", "lower_edge_hertz", "upper_edge_hertz"], ["dtype": .dtype]) { ctx in
                var dtype = DataType.float32
                if case .dtype(let d)? = ctx.attributes["dtype"] { dtype = d }
                return [TensorType(dtype, [.unknown, .unknown])]
            },
        ]
    }
}
