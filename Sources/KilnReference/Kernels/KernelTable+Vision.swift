import KilnFormat

extension KernelTable {
    /// Kernels of the sampling, detection, signal and sequence ops (OpSet+Vision, OpSet+Sequence);
    /// `nil` for other ops.
    static func visionKernel(for op: Operation) throws -> Kernel? {
        try samplingKernel(for: op) ?? signalKernel(for: op) ?? sequenceKernel(for: op)
    }

    /// Input `i`'s first value, or `nil` when it is absent or empty.
    static func scalar(_ inputs: [NDArray?], _ i: Int) throws -> Double? {
        guard i < inputs.count, let t = inputs[i], t.elementCount > 0 else { return nil }
        return try t.doubleValues()[0]
    }

    /// Input `i`'s one value as an integer: an error, not a trap, for NaN or out-of-range values.
    static func integer(_ inputs: [NDArray?], _ i: Int) throws -> Int? {
        guard let v = try scalar(inputs, i) else { return nil }
        guard v.isFinite, abs(v) < 0x1p53 else { throw OpError("input \(i) is \(v), not a usable integer") }
        return Int(v.rounded(.towardZero))
    }

    /// Kernels of the image ops: integer and deformable convolutions, sampling, unfolding, unpooling,
    /// detection, cropping and the local and group normalizations; `nil` for other ops.
    static func samplingKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "conv_integer":
            return { inputs in
                [try Quantization.convInteger(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                              inputs.count > 3 ? inputs[3] : nil, a)]
            }
        case "qlinear_conv":
            return { inputs in [try Quantization.qlinearConv(inputs, a)] }
        case "grid_sample":
            let s = try Vision.Sampling(a)
            return { inputs in [try Vision.gridSample(try present(inputs, 0), try present(inputs, 1), s)] }
        case "affine_grid":
            let align = try a.int("align_corners", 0) != 0
            return { inputs in [try Vision.affineGrid(try present(inputs, 0), size: try present(inputs, 1).intValues(), alignCorners: align)] }
        case "col2im":
            let (d, p, s) = (try a.ints("dilations"), try a.ints("pads"), try a.ints("strides"))
            return { inputs in
                [try Vision.col2im(try present(inputs, 0), image: try present(inputs, 1).intValues(), block: try present(inputs, 2).intValues(),
                                   dilations: d, pads: p, strides: s)]
            }
        case "deform_conv":
            return { inputs in
                [try Vision.deformConv(try present(inputs, 0), try present(inputs, 1), offset: try present(inputs, 2),
                                       bias: inputs.count > 3 ? inputs[3] : nil, mask: inputs.count > 4 ? inputs[4] : nil, a)]
            }
        case "max_unpool":
            return { inputs in
                [try Vision.maxUnpool(try present(inputs, 0), try present(inputs, 1), outputShape: try (inputs.count > 2 ? inputs[2] : nil)?.intValues(), a)]
            }
        case "non_max_suppression":
            let center = try a.int("center_point_box", 0) != 0
            return { inputs in
                // A count past any box count (int64's maximum, as exporters write "no limit") is no limit.
                let limit = try scalar(inputs, 2).map { $0 >= 0x1p53 ? Int.max : max(0, try integer(inputs, 2)!) } ?? 0
                return [try Vision.nonMaxSuppression(try present(inputs, 0), try present(inputs, 1), maxPerClass: limit,
                                                     iou: Float(try scalar(inputs, 3) ?? 0), scoreThreshold: try scalar(inputs, 4).map(Float.init),
                                                     centerPoint: center)]
            }
        case "roi_align":
            let o = try Vision.RoiAlignOptions(a)
            return { inputs in [try Vision.roiAlign(try present(inputs, 0), rois: try present(inputs, 1), batch: try present(inputs, 2).intValues(), o)] }
        case "center_crop_pad":
            let axes = try a.ints("axes")
            return { inputs in [try Vision.centerCropPad(try present(inputs, 0), shape: try present(inputs, 1).intValues(), axes: axes)] }
        case "lrn":
            let size = try a.int("size", 1), alpha = Float(try a.float("alpha", 0.0001)), beta = Float(try a.float("beta", 0.75))
            let bias = Float(try a.float("bias", 1))
            return { inputs in [try Vision.lrn(try present(inputs, 0), size: size, alpha: alpha, beta: beta, bias: bias)] }
        case "group_norm":
            let groups = try a.int("num_groups", 1), epsilon = Float(try a.float("epsilon", 1e-5))
            return { inputs in
                [try Vision.groupNorm(try present(inputs, 0), scale: try present(inputs, 1), bias: try present(inputs, 2), groups: groups, epsilon: epsilon)]
            }
        case "mean_variance_normalization":
            let axes = try a.ints("axes") ?? [0, 2, 3]
            return { inputs in [try SequenceKernels.meanVarianceNormalization(try present(inputs, 0), axes: axes)] }
        default:
            return nil
        }
    }

    /// Kernels of the signal ops: Fourier transforms, windows and mel filter banks; `nil` for other ops.
    static func signalKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "dft":
            let fixedAxis = a["axis"] != nil ? try a.int("axis", -2) : nil, fixedLength = a["dft_length"] != nil ? try a.int("dft_length", 0) : nil
            let inverse = try a.int("inverse", 0) != 0, onesided = try a.int("onesided", 0) != 0
            return { inputs in
                let length = try fixedLength ?? integer(inputs, 1)
                let axis = try fixedAxis ?? integer(inputs, 2) ?? -2
                return [try Vision.dft(try present(inputs, 0), length: length, axis: axis, inverse: inverse, onesided: onesided)]
            }
        case "stft":
            let onesided = try a.int("onesided", 1) != 0
            return { inputs in
                guard let step = try integer(inputs, 1) else { throw OpError("stft needs frame_step") }
                return [try Vision.stft(try present(inputs, 0), step: step, window: inputs.count > 2 ? inputs[2] : nil,
                                        frameLength: try integer(inputs, 3), onesided: onesided)]
            }
        case "window":
            let kind = try a.string("kind", "hann"), periodic = try a.int("periodic", 1) != 0
            var dtype = DataType.float32
            if case .dtype(let d)? = a["dtype"] { dtype = d }
            let to = dtype
            return { inputs in
                guard let size = try integer(inputs, 0) else { throw OpError("window needs a size") }
                let w = try Vision.window(kind: kind, size: size, periodic: periodic)
                return [to.isFloatingPoint ? w : try Elementwise.cast(w, to: to)]
            }
        case "mel_weight_matrix":
            var dtype = DataType.float32
            if case .dtype(let d)? = a["dtype"] { dtype = d }
            let to = dtype
            return { inputs in
                let counts = try (0 ..< 3).map { i -> Int in
                    guard let v = try integer(inputs, i) else { throw OpError("mel_weight_matrix needs input \(i)") }
                    return v
                }
                guard let lower = try scalar(inputs, 3), let upper = try scalar(inputs, 4), lower.isFinite, upper.isFinite else {
                    throw OpError("mel_weight_matrix needs finite lower and upper edges")
                }
                let m = try Vision.melWeightMatrix(bins: counts[0], dftLength: counts[1], sampleRate: counts[2], lower: lower, upper: upper)
                return [to.isFloatingPoint ? m : try Elementwise.cast(m, to: to)]
            }
        default:
            return nil
        }
    }

    /// Kernels of the sequence ops: linear attention, stateful causal convolution, scatters into caches,
    /// reversal, unique and nonzero elements, checks, bit casts, determinants and n-gram counts; `nil` for
    /// other ops.
    static func sequenceKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        let outputs = op.outputs.count
        switch op.opType {
        case "linear_attention":
            let o = try SequenceKernels.LinearAttentionOptions(a)
            return { inputs in try SequenceKernels.linearAttention(inputs, o, outputs: outputs) }
        case "causal_conv_with_state":
            let silu = try a.string("activation", "none") != "none"
            return { inputs in try SequenceKernels.causalConv(inputs, silu: silu, outputs: outputs) }
        case "tensor_scatter":
            let axis = try a.int("axis", -2), circular = try a.string("mode", "linear") == "circular"
            return { inputs in
                [try SequenceKernels.tensorScatter(try present(inputs, 0), try present(inputs, 1), writeIndices: inputs.count > 2 ? inputs[2] : nil,
                                                   axis: axis, circular: circular)]
            }
        case "reverse_sequence":
            let batch = try a.int("batch_axis", 1), time = try a.int("time_axis", 0)
            return { inputs in
                [try SequenceKernels.reverseSequence(try present(inputs, 0), lengths: try present(inputs, 1).intValues(), batchAxis: batch, timeAxis: time)]
            }
        case "unique":
            let axis = a["axis"] != nil ? try a.int("axis", 0) : nil, sorted = try a.int("sorted", 1) != 0
            return { inputs in Array(try SequenceKernels.unique(try present(inputs, 0), axis: axis, sorted: sorted).prefix(outputs)) }
        case "assume":
            let message = try a.string("message", "a convert-time assumption does not hold for this input")
            return { inputs in
                let x = try present(inputs, 0), cond = try present(inputs, 1)
                guard try cond.contiguous().values(Bool.self).allSatisfy({ $0 }) else { throw OpError(message) }
                return [x]
            }
        case "non_zero":
            return { inputs in [try SequenceKernels.nonZero(try present(inputs, 0))] }
        case "bit_cast":
            guard case .dtype(let to)? = a["to"] else { throw OpError("bit_cast needs 'to'") }
            return { inputs in [try SequenceKernels.bitCast(try present(inputs, 0), to: to)] }
        case "det":
            return { inputs in [try SequenceKernels.det(try present(inputs, 0))] }
        case "tfidf_vectorizer":
            let g = try SequenceKernels.NGrams(a)
            return { inputs in [try SequenceKernels.tfidf(try present(inputs, 0), g)] }
        default:
            return nil
        }
    }
}
