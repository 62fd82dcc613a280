@preconcurrency import CKilnKernels
import Foundation
import KilnCompiler
import KilnFormat

/// `dft` along the signal axis (the one before the complex dim) and `stft`, as one GEMM with a
/// matrix of twiddles (the window folded in) made and packed when the step is bound: a frame of
/// `F` samples (× 1 real or 2 complex) times `[F·c, bins·2]` gives its bins as (re, im) pairs,
/// which is the output's layout. An STFT reads its overlapping frames in place (rows of A at
/// the hop's stride), so nothing is copied. For the lengths audio front-ends use (a few hundred
/// samples) the GEMM kernels at a large fraction of peak beat a scalar FFT.
struct DFTStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    let ukernel: kiln_f32_gemm_ukernel
    let tile: GEMMTile
    /// Matrices made by earlier bindings of this step (a function run without a shape plan binds
    /// every call), by transform geometry; the window is the op's own, so it is not in the key.
    let made = Made()

    final class Made: @unchecked Sendable {
        let lock = NSLock()
        var matrices: [[Int]: Matrix] = [:]
    }

    /// The packed twiddle matrix, owned by the bound step.
    final class Matrix: @unchecked Sendable {
        let packed: UnsafeMutablePointer<Float>
        init(count: Int) { packed = .allocate(capacity: max(count, 1)) }
        deinit { packed.deallocate() }
    }

    /// `[rows, bins·2]` twiddles for `rows` samples of `channels` (1 or 2) of a length-`length`
    /// transform, each sample weighted by `window` (forward: e^{−iθ}; inverse: e^{+iθ}/length).
    static func twiddles(rows: Int, channels: Int, length: Int, bins: Int, window: [Float]?, inverse: Bool) -> [Float] {
        var w = [Float](repeating: 0, count: rows * channels * bins * 2)
        let sign: Double = inverse ? 1 : -1, scale = inverse ? 1 / Double(length) : 1
        for t in 0 ..< rows {
            let g = Double(window?[t] ?? 1) * scale
            for k in 0 ..< bins {
                // θ reduced mod length in integers, so large t·k keeps its precision.
                let theta = 2 * Double.pi * Double((t * k) % length) / Double(length)
                let (c, s) = (cos(theta) * g, sin(theta) * g * sign)
                // (xr + i·xi)(c + i·s): re = xr·c − xi·s, im = xr·s + xi·c.
                let col = 2 * k
                w[(t * channels) * bins * 2 + col] = Float(c)
                w[(t * channels) * bins * 2 + col + 1] = Float(s)
                if channels == 2 {
                    w[(t * channels + 1) * bins * 2 + col] = Float(-s)
                    w[(t * channels + 1) * bins * 2 + col + 1] = Float(c)
                }
            }
        }
        return w
    }

    /// One transform's geometry: `batches` of `rows` frames, frame r of batch b at
    /// b·batchStride + r·rowStride floats; `frame` samples of `channels` each; a length-`length`
    /// transform giving `bins` (re, im) pairs per frame.
    struct Geometry {
        var batches = 1, rows = 1, batchStride = 0, rowStride = 0, frame = 0, channels = 1, length = 0, bins = 0
        var window: [Float]?
        var inverse = false
        var output: [Int] = []
    }

    func geometry(_ inputs: [Operand?]) throws -> Geometry {
        guard let x = inputs.first ?? nil, x.dtype == .float32 else { throw OpError("needs a float32 input") }
        let a = op.attributes
        var g = Geometry()
        var onesided = try a.int("onesided", op.opType == "stft" ? 1 : 0) != 0
        if op.opType == "stft" {
            g.channels = x.shape.count == 3 ? x.shape[2] : 1
            guard x.shape.count == 2 || x.shape.count == 3, g.channels == 1 || g.channels == 2 else { throw OpError("stft needs signal [batch, length, 1 or 2]") }
            guard let step = try knownIntegers(inputs.count > 1 ? inputs[1] : nil, "frame_step")?.first, step >= 1 else { throw OpError("frame_step must be known and ≥ 1") }
            if inputs.count > 2, let w = inputs[2] {
                guard let v = w.value, v.scalarType == .float32 else { throw OpError("the window must be a known float32 vector") }
                g.window = v.contiguous().scalars(as: Float.self)
            }
            let signal = x.shape[1]
            g.frame = try knownIntegers(inputs.count > 3 ? inputs[3] : nil, "frame_length")?.first ?? g.window?.count ?? signal
            guard g.frame >= 1, g.frame <= signal, g.window == nil || g.window!.count == g.frame else { throw OpError("frame length \(g.frame) does not fit") }
            (g.batches, g.rows) = (x.shape[0], 1 + (signal - g.frame) / step)
            (g.batchStride, g.rowStride, g.length) = (signal * g.channels, step * g.channels, g.frame)
        } else {
            let rank = x.shape.count
            guard rank >= 2, inputs.count < 3 || inputs[2] == nil else { throw OpError("dft's axis must be an attribute") }
            g.channels = x.shape[rank - 1]
            let axis = try OpSet.normalize(axis: try a.int("axis", -2), rank: rank)
            guard axis == rank - 2, g.channels == 1 || g.channels == 2 else { throw OpError("the compiled dft runs along the axis before the complex dim") }
            g.inverse = try a.int("inverse", 0) != 0
            guard !(g.inverse && onesided) else { throw OpError("an inverse one-sided dft runs on the reference kernel") }
            let n = x.shape[axis]
            g.length = try knownIntegers(inputs.count > 1 ? inputs[1] : nil, "dft_length")?.first ?? a.int("dft_length", n)
            guard g.length >= 1 else { throw OpError("dft_length must be ≥ 1") }
            g.frame = min(n, g.length)
            (g.batches, g.rows) = (1, x.shape.dropLast(2).reduce(1, *))
            (g.batchStride, g.rowStride) = (0, n * g.channels)
        }
        onesided = onesided && g.channels == 1
        g.bins = onesided ? g.length / 2 + 1 : g.length
        g.output = op.opType == "stft" ? [g.batches, g.rows, g.bins, 2] : Array(x.shape.dropLast(2)) + [g.bins, 2]
        return g
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { [(try geometry(inputs).output, .float32)] }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, outputs.count == 1 else { throw OpError("needs one input and one output") }
        let g = try geometry(inputs)
        let (batches, rows, batchStride, rowStride, frame, channels, length, bins) = (g.batches, g.rows, g.batchStride, g.rowStride, g.frame, g.channels, g.length, g.bins)
        let (window, inverse) = (g.window, g.inverse)
        let k = frame * channels, cols = bins * 2
        // The matrix is k × cols floats: transforms past 64Ki points run on the reference kernel.
        guard length <= 1 << 16, k.multipliedReportingOverflow(by: cols).partialValue <= 1 << 26 else {
            throw OpError("a \(length)-point transform is too long for the twiddle matrix")
        }
        try expectOutput(outputs, g.output)
        let nr = tile.nr, panels = (cols + nr - 1) / nr
        let key = [frame, channels, length, bins, inverse ? 1 : 0, nr]
        let matrix: Matrix = made.lock.withLock {
            if let m = made.matrices[key] { return m }
            let m = Matrix(count: panels * k * nr)
            let dense = Self.twiddles(rows: frame, channels: channels, length: length, bins: bins, window: window, inverse: inverse)
            dense.withUnsafeBufferPointer { kiln_f32_pack_b(k, cols, nr, $0.baseAddress, cols, 1, m.packed) }
            if made.matrices.count < 8 { made.matrices[key] = m }
            return m
        }
        var pb = kiln_packed_b()
        pb.kind = Int32(KILN_B_F32); pb.k = k; pb.n = cols; pb.nr = nr
        pb.data = UnsafeRawPointer(matrix.packed)
        let gemm = PackedGEMM(b: pb, ukernel: ukernel, mr: tile.mr)
        let chunks = gemm.chunks(m: rows, threads: context.threads)
        let (y, threads) = (outputs[0], context.threads)
        return BoundStep { slots in
            withExtendedLifetime(matrix) {
                for b in 0 ..< batches {
                    gemm.run(a: x.floats(slots) + b * batchStride, lda: rowStride, c: y.floats(slots) + b * rows * cols, ldc: cols,
                             chunks: chunks, epilogue: kiln_epilogue(), scratch: nil, threads: threads)
                }
            }
        }
    }
}
