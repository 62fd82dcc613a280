import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Signal kernels: `dft`, `stft`, window functions, `mel_weight_matrix`.
extension Vision {
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
        // A rank-2 signal is real: [batch, length] read as [batch, length, 1].
        if x.rank == 2 { return try stft(x.reshaped([x.shape[0], x.shape[1], 1]), step: step, window: window, frameLength: frameLength, onesided: onesided) }
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
