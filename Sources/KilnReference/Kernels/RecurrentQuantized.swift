import KilnFormat

/// `dynamic_quantize_lstm`: an LSTM whose W and R are 8-bit integers, each matrix product taking
/// its other operand quantized to uint8 when it runs (onnxruntime's `DynamicQuantizeLSTM`):
/// every step's inputs at once for W, one step's hidden states of all sequences for R. The
/// products are exact integer sums scaled by `a_scale · b_scale[col]`, then the gates are the
/// LSTM's.
extension Recurrent {
    /// `a` quantized to uint8 over its whole range widened to hold 0: the scale and each value's
    /// `q − zero point`.
    static func dynamicallyQuantized(_ a: [Float]) -> (scale: Float, centered: [Int32]) {
        let low = min(a.min() ?? 0, 0), high = max(a.max() ?? 0, 0)
        let scale: Float = high == low ? 1 : (high - low) / 255
        let zero = max(0, min(255, 0 - low / scale)).rounded(.toNearestOrEven)
        return (scale, a.map { Int32(max(0, min(255, ($0 / scale).rounded(.toNearestOrEven) + zero)) - zero) })
    }

    /// One direction's 8-bit matrix `[k, n]` with its per-column scales and zero points.
    struct QuantizedMatrix {
        var values: [Int32]
        var k: Int, n: Int
        var scale: [Float]
        var zero: [Int32]

        init(_ m: NDArray, _ scale: NDArray, _ zero: NDArray, direction d: Int, name: String) throws {
            let (k, n) = (m.shape[1], m.shape[2])
            (self.k, self.n) = (k, n)
            guard scale.scalarType == .float32, zero.scalarType == m.scalarType, scale.shape == zero.shape,
                  scale.shape == [m.shape[0]] || scale.shape == [m.shape[0], n] else {
                throw OpError("\(name)_scale and \(name)_zero_point must be float32 and \(m.scalarType.rawValue) of shape [\(m.shape[0])] or [\(m.shape[0]), \(n)], got \(scale.scalarType.rawValue)\(scale.shape) and \(zero.scalarType.rawValue)\(zero.shape)")
            }
            let all = try m.intValues(), scales = try scale.f32, zeros = try zero.intValues()
            values = all[d * k * n ..< (d + 1) * k * n].map { Int32($0) }
            let perColumn = scale.rank == 2
            self.scale = (0 ..< n).map { scales[perColumn ? d * n + $0 : d] }
            self.zero = (0 ..< n).map { Int32(zeros[perColumn ? d * n + $0 : d]) }
        }

        /// `A · B` for `rows` rows of A, A quantized as a whole first.
        func product(_ a: [Float], rows: Int) -> [Float] {
            let (aScale, q) = Recurrent.dynamicallyQuantized(a)
            var out = [Float](repeating: 0, count: rows * n)
            for i in 0 ..< rows {
                for j in 0 ..< n {
                    var s: Int32 = 0
                    for p in 0 ..< k { s &+= q[i * k + p] * (values[p * n + j] - zero[j]) }
                    out[i * n + j] = Float(s) * (aScale * scale[j])
                }
            }
            return out
        }

        /// The dequantized matrix transposed to `[n, k]` (the float LSTM's layout).
        var dequantizedTransposed: [Float] {
            (0 ..< n * k).map { i in let (j, p) = (i / k, i % k); return Float(values[p * n + j] - zero[j]) * scale[j] }
        }
    }

    /// Runs `dynamic_quantize_lstm`. With sequences of different lengths, a sequence's hidden state
    /// still joins the quantization of the step after its last one, and counts as zeros after
    /// that (as onnxruntime does when the full output is read).
    static func runDynamicQuantized(_ inputs: [NDArray?], _ attributes: [String: AttributeValue]) throws -> [NDArray] {
        let c = try Config(attributes, gates: 4)
        guard !c.batchFirst else { throw OpError("layout 1 is not defined for dynamic_quantize_lstm") }
        guard inputs.count == 12, let w = inputs[1], let r = inputs[2], let ws = inputs[8], let wz = inputs[9], let rs = inputs[10], let rz = inputs[11],
              let x = inputs[0] else { throw OpError("X, W, R and the four scales and zero points are required") }
        let (h, dirs) = (c.hidden, c.directions)
        guard x.scalarType == .float32, x.rank == 3 else { throw OpError("X must be float32 of rank 3") }
        let (seq, batch, inputSize) = (x.shape[0], x.shape[1], x.shape[2])
        guard [.int8, .uint8].contains(w.scalarType), r.scalarType == w.scalarType, w.shape == [dirs, inputSize, 4 * h],
              r.shape == [dirs, h, 4 * h] else {
            throw OpError("W \(w.scalarType.rawValue)\(w.shape) and R \(r.scalarType.rawValue)\(r.shape) must be 8-bit of shapes [\(dirs), \(inputSize), \(4 * h)] and [\(dirs), \(h), \(4 * h)]")
        }
        // The float LSTM's checks of B, lengths, initial states and peepholes, on stand-in W and R of its layout.
        var floatInputs = Array(inputs[0 ..< 8])
        floatInputs[1] = NDArray(shape: [dirs, 4 * h, inputSize], scalars: [Float](repeating: 0, count: dirs * 4 * h * inputSize))
        floatInputs[2] = NDArray(shape: [dirs, 4 * h, h], scalars: [Float](repeating: 0, count: dirs * 4 * h * h))
        let operands = try Operands(floatInputs, c, gates: 4)
        let lens = operands.lens, longest = lens.max() ?? 0
        let px = try operands.x.f32, pb = try operands.b?.f32, pp = try operands.p?.f32
        let ph0 = try operands.initialH?.f32, pc0 = try operands.initialC?.f32
        var y = [Float](repeating: 0, count: seq * dirs * batch * h)
        var finalH = [Float](repeating: 0, count: dirs * batch * h), finalC = finalH
        for d in 0 ..< dirs {
            let wq = try QuantizedMatrix(w, ws, wz, direction: d, name: "w"), rq = try QuantizedMatrix(r, rs, rz, direction: d, name: "r")
            let reverse = c.reverseOnly || d == 1
            let xw = wq.product(Array(px[0 ..< longest * batch * inputSize]), rows: longest * batch)
            // The gates only: W and R are the dequantized weights, never multiplied here.
            let (wd, rd) = (wq.dequantizedTransposed, rq.dequantizedTransposed)
            wd.withUnsafeBufferPointer { wp in
                rd.withUnsafeBufferPointer { rp in
                    let cell = Cell(gates: 4, hidden: h, inputSize: inputSize, direction: d, w: wp.baseAddress!, r: rp.baseAddress!, bias: pb,
                                    peepholes: pp, f: c.activations[d * 3], g: c.activations[d * 3 + 1], hAct: c.activations[d * 3 + 2],
                                    clip: c.clip, linearBeforeReset: false)
                    var hs = (0 ..< batch * h).map { ph0?[d * batch * h + $0] ?? 0 }
                    var cs = (0 ..< batch * h).map { pc0?[d * batch * h + $0] ?? 0 }
                    for step in 0 ..< longest {
                        let a = (0 ..< batch * h).map { i in step == 0 || step <= lens[i / h] ? hs[i] : 0 }
                        let hr = rq.product(a, rows: batch)
                        for n in 0 ..< batch where step < lens[n] {
                            let t = reverse ? lens[n] - 1 - step : step
                            let pre = (0 ..< 4 * h).map { j in
                                (xw[(t * batch + n) * 4 * h + j] + hr[n * 4 * h + j]) + ((pb?[d * 8 * h + j] ?? 0) + (pb?[d * 8 * h + 4 * h + j] ?? 0))
                            }
                            var (hn, cn) = (Array(hs[n * h ..< (n + 1) * h]), Array(cs[n * h ..< (n + 1) * h]))
                            cell.lstmGates(&hn, &cn, pre)
                            for j in 0 ..< h {
                                (hs[n * h + j], cs[n * h + j]) = (hn[j], cn[j])
                                y[((t * dirs + d) * batch + n) * h + j] = hn[j]
                            }
                        }
                    }
                    for n in 0 ..< batch where lens[n] > 0 {
                        for j in 0 ..< h {
                            finalH[(d * batch + n) * h + j] = hs[n * h + j]
                            finalC[(d * batch + n) * h + j] = cs[n * h + j]
                        }
                    }
                }
            }
        }
        let stateShape = [dirs, batch, h]
        return withExtendedLifetime(operands) {
            [NDArray(shape: [seq, dirs, batch, h], scalars: y), NDArray(shape: stateShape, scalars: finalH),
             NDArray(shape: stateShape, scalars: finalC)]
        }
    }
}
