import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// RNN, LSTM and GRU over a sequence, forward, reverse or both (ONNX semantics: gate order
/// i, o, f, c for LSTM and z, r, h for GRU; biases W then R; optional peepholes,
/// sequence lengths, initial states, clipping and activations).
enum Recurrent {
    struct Activation {
        var f: (Float) -> Float
    }

    static func activation(_ name: String, alpha: Float?, beta: Float?) throws -> Activation {
        switch name.lowercased() {
        case "sigmoid": return Activation { Elementwise.sigmoid($0) }
        case "tanh": return Activation { tanhf($0) }
        case "relu": return Activation { max(0, $0) }
        case "hardsigmoid":
            let a = alpha ?? 0.2, b = beta ?? 0.5
            return Activation { max(0, min(1, a * $0 + b)) }
        case "leakyrelu":
            let a = alpha ?? 0.01
            return Activation { $0 >= 0 ? $0 : a * $0 }
        case "affine":
            let a = alpha ?? 1, b = beta ?? 0
            return Activation { a * $0 + b }
        case "scaledtanh":
            let a = alpha ?? 1, b = beta ?? 1
            return Activation { a * tanhf(b * $0) }
        default: throw OpError("activation '\(name)' is not supported")
        }
    }

    struct Config {
        var hidden: Int
        var directions: Int
        var reverseOnly: Bool
        var clip: Float?
        var batchFirst: Bool
        var activations: [Activation]
        var linearBeforeReset: Bool

        init(_ a: [String: AttributeValue], gates: Int) throws {
            hidden = try a.int("hidden_size", 0)
            let direction = try a.string("direction", "forward")
            directions = direction == "bidirectional" ? 2 : 1
            reverseOnly = direction == "reverse"
            clip = a["clip"] != nil ? Float(try a.float("clip", 0)) : nil
            batchFirst = try a.int("layout", 0) != 0
            linearBeforeReset = try a.int("linear_before_reset", 0) != 0
            if try a.int("input_forget", 0) != 0 { throw OpError("input_forget is not supported") }
            let perDirection = gates == 4 ? ["Sigmoid", "Tanh", "Tanh"] : gates == 3 ? ["Sigmoid", "Tanh"] : ["Tanh"]
            let names = try a.strings("activations") ?? Array((0 ..< directions).map { _ in perDirection }.joined())
            guard names.count == perDirection.count * directions else {
                throw OpError("activations needs \(perDirection.count * directions) names, got \(names.count)")
            }
            let alphas = try a.floats("activation_alpha"), betas = try a.floats("activation_beta")
            activations = try names.enumerated().map { i, n in
                try activation(n, alpha: alphas.flatMap { i < $0.count ? Float($0[i]) : nil }, beta: betas.flatMap { i < $0.count ? Float($0[i]) : nil })
            }
        }
    }

    /// The inputs of one run, checked against each other and the config: X time-major, the
    /// initial states direction-major.
    struct Operands {
        var x: NDArray
        var w: NDArray
        var r: NDArray
        var b: NDArray?
        var p: NDArray?
        var initialH: NDArray?
        var initialC: NDArray?
        /// Each batch entry's sequence length.
        var lens: [Int]
        var seq: Int
        var batch: Int
        var inputSize: Int

        init(_ inputs: [NDArray?], _ c: Config, gates: Int) throws {
            guard inputs.count >= 3, let x0 = inputs[0], let w = inputs[1], let r = inputs[2] else { throw OpError("X, W and R are required") }
            guard x0.scalarType == .float32, x0.rank == 3 else { throw OpError("X must be float32 of rank 3") }
            let x = c.batchFirst ? x0.transposed([1, 0, 2]).contiguous() : x0
            let (seq, batch, inputSize) = (x.shape[0], x.shape[1], x.shape[2])
            let h = c.hidden, dirs = c.directions
            guard w.shape == [dirs, gates * h, inputSize], r.shape == [dirs, gates * h, h] else {
                throw OpError("W \(w.shape) or R \(r.shape) does not fit \(dirs) direction(s), hidden \(h), input \(inputSize)")
            }
            let b = inputs.count > 3 ? inputs[3] : nil
            if let b, b.shape != [dirs, 2 * gates * h] { throw OpError("B must be [\(dirs), \(2 * gates * h)], got \(b.shape)") }
            let lens = try (inputs.count > 4 ? inputs[4] : nil).map { try $0.intValues() } ?? Array(repeating: seq, count: batch)
            guard lens.count == batch, lens.allSatisfy({ $0 >= 0 && $0 <= seq }) else { throw OpError("sequence_lens must hold \(batch) lengths ≤ \(seq)") }
            let stateShape = [dirs, batch, h]
            let h0 = inputs.count > 5 ? inputs[5] : nil, c0 = gates == 4 && inputs.count > 6 ? inputs[6] : nil
            let p = gates == 4 && inputs.count > 7 ? inputs[7] : nil
            for (t, name) in [(h0, "initial_h"), (c0, "initial_c")] {
                if let t, t.shape != (c.batchFirst ? [batch, dirs, h] : stateShape) { throw OpError("\(name) has shape \(t.shape)") }
            }
            if let p, p.shape != [dirs, 3 * h] { throw OpError("P must be [\(dirs), \(3 * h)]") }
            for (t, name) in [(w, "W"), (r, "R"), (b, "B"), (h0, "initial_h"), (c0, "initial_c"), (p, "P")] {
                if let t, t.scalarType != .float32 { throw OpError("\(name) must be float32, got \(t.scalarType.rawValue)") }
            }
            (self.x, self.w, self.r, self.b, self.p, self.lens) = (x, w, r, b, p, lens)
            (self.seq, self.batch, self.inputSize) = (seq, batch, inputSize)
            initialH = h0.map { c.batchFirst ? $0.transposed([1, 0, 2]).contiguous() : $0 }
            initialC = c0.map { c.batchFirst ? $0.transposed([1, 0, 2]).contiguous() : $0 }
        }
    }

    /// Runs LSTM (`gates` = 4), GRU (`gates` = 3) or RNN (`gates` = 1).
    static func run(_ inputs: [NDArray?], _ attributes: [String: AttributeValue], gates: Int) throws -> [NDArray] {
        let c = try Config(attributes, gates: gates)
        let operands = try Operands(inputs, c, gates: gates)
        let (seq, batch, inputSize, lens) = (operands.seq, operands.batch, operands.inputSize, operands.lens)
        let h = c.hidden, dirs = c.directions
        let stateShape = [dirs, batch, h]
        let px = try operands.x.f32, pw = try operands.w.f32, pr = try operands.r.f32, pb = try operands.b?.f32, pp = try operands.p?.f32
        let ph0 = try operands.initialH?.f32, pc0 = try operands.initialC?.f32
        var y = [Float](repeating: 0, count: seq * dirs * batch * h)
        var finalH = [Float](repeating: 0, count: dirs * batch * h), finalC = finalH
        var pre = [Float](repeating: 0, count: gates * h)
        for d in 0 ..< dirs {
            let reverse = c.reverseOnly || d == 1
            let perDirection = gates == 4 ? 3 : gates == 3 ? 2 : 1
            let f = c.activations[d * perDirection], g = c.activations[d * perDirection + (perDirection > 1 ? 1 : 0)]
            let hAct = gates == 4 ? c.activations[d * 3 + 2] : g
            let cell = Cell(gates: gates, hidden: h, inputSize: inputSize, direction: d,
                            w: pw.baseAddress! + d * gates * h * inputSize, r: pr.baseAddress! + d * gates * h * h, bias: pb, peepholes: pp,
                            f: f, g: g, hAct: hAct, clip: c.clip, linearBeforeReset: c.linearBeforeReset)
            for n in 0 ..< batch {
                var hs = (0 ..< h).map { ph0?[(d * batch + n) * h + $0] ?? 0 }
                var cs = (0 ..< h).map { pc0?[(d * batch + n) * h + $0] ?? 0 }
                for step in 0 ..< lens[n] {
                    let t = reverse ? lens[n] - 1 - step : step
                    cell.project(px.baseAddress! + (t * batch + n) * inputSize, into: &pre)
                    switch gates {
                    case 1: cell.rnnStep(&hs, pre)
                    case 4: cell.lstmStep(&hs, &cs, &pre)
                    default: cell.gruStep(&hs, pre)
                    }
                    for j in 0 ..< h { y[((t * dirs + d) * batch + n) * h + j] = hs[j] }
                }
                for j in 0 ..< h {
                    finalH[(d * batch + n) * h + j] = hs[j]
                    finalC[(d * batch + n) * h + j] = cs[j]
                }
            }
        }
        var outY = NDArray(shape: [seq, dirs, batch, h], scalars: y)
        var outH = NDArray(shape: stateShape, scalars: finalH), outC = NDArray(shape: stateShape, scalars: finalC)
        if c.batchFirst {
            outY = outY.transposed([2, 0, 1, 3]).contiguous()
            outH = outH.transposed([1, 0, 2]).contiguous()
            outC = outC.transposed([1, 0, 2]).contiguous()
        }
        return withExtendedLifetime(operands) { gates == 4 ? [outY, outH, outC] : [outY, outH] }
    }

    /// One direction's weights and activations: what a step of the cell reads.
    struct Cell {
        var gates: Int
        var hidden: Int
        var inputSize: Int
        var direction: Int
        /// This direction's W (`[gates·hidden, input]`) and R (`[gates·hidden, hidden]`).
        var w: UnsafePointer<Float>
        var r: UnsafePointer<Float>
        /// All of B (`[directions, 2·gates·hidden]`) and P (`[directions, 3·hidden]`), when given.
        var bias: UnsafeBufferPointer<Float>?
        var peepholes: UnsafeBufferPointer<Float>?
        var f: Activation
        var g: Activation
        var hAct: Activation
        var clip: Float?
        var linearBeforeReset: Bool

        /// `v` limited to ±clip, when there is a clip.
        func clipped(_ v: Float) -> Float { clip.map { max(-$0, min($0, v)) } ?? v }

        /// pre = W·x + Wb, per gate row (`xt`: one time step of one batch entry).
        func project(_ xt: UnsafePointer<Float>, into pre: inout [Float]) {
            let d = direction
            for row in 0 ..< gates * hidden {
                var s: Float = 0
                let wr = w + row * inputSize
                for k in 0 ..< inputSize { s += wr[k] * xt[k] }
                if let bias { s += bias[d * 2 * gates * hidden + row] }
                pre[row] = s
            }
        }

        /// RNN: h = f(W·x + R·h + Wb + Rb).
        func rnnStep(_ hs: inout [Float], _ pre: [Float]) {
            let h = hidden, d = direction
            var next = hs
            for j in 0 ..< h {
                var s: Float = 0
                let rr = r + j * h
                for k in 0 ..< h { s += rr[k] * hs[k] }
                if let bias { s += bias[d * 2 * h + h + j] }
                let v = pre[j] + s
                next[j] = f.f(clipped(v))
            }
            hs = next
        }

        /// LSTM: the gates from `pre` (W·x + Wb, R·h + Rb added here) and the peepholes, then the
        /// cell and hidden states.
        func lstmStep(_ hs: inout [Float], _ cs: inout [Float], _ pre: inout [Float]) {
            let h = hidden, d = direction
            for row in 0 ..< 4 * h {
                var s: Float = 0
                let rr = r + row * h
                for k in 0 ..< h { s += rr[k] * hs[k] }
                if let bias { s += bias[d * 8 * h + 4 * h + row] }
                pre[row] += s
            }
            lstmGates(&hs, &cs, pre)
        }

        /// The LSTM's gates, cell and hidden state from the pre-activations `pre` (W·x + R·h and
        /// both biases, gate order i, o, f, c) and the peepholes.
        func lstmGates(_ hs: inout [Float], _ cs: inout [Float], _ pre: [Float]) {
            let h = hidden, d = direction
            for j in 0 ..< h {
                let peep = { (k: Int) -> Float in peepholes.map { $0[d * 3 * h + k * h + j] } ?? 0 }
                let i = f.f(clipped(pre[j] + peep(0) * cs[j]))
                let fg = f.f(clipped(pre[2 * h + j] + peep(2) * cs[j]))
                let cand = g.f(clipped(pre[3 * h + j]))
                cs[j] = fg * cs[j] + i * cand
                let o = f.f(clipped(pre[h + j] + peep(1) * cs[j]))
                hs[j] = o * hAct.f(cs[j])
            }
        }

        /// GRU: update and reset gates, then the candidate with the reset applied before or after
        /// R (`linear_before_reset`).
        func gruStep(_ hs: inout [Float], _ pre: [Float]) {
            let h = hidden, d = direction
            var rh = [Float](repeating: 0, count: 3 * h)
            for row in 0 ..< 3 * h {
                var s: Float = 0
                let rr = r + row * h
                if row < 2 * h || linearBeforeReset {
                    for k in 0 ..< h { s += rr[k] * hs[k] }
                }
                if let bias { s += bias[d * 6 * h + 3 * h + row] }
                rh[row] = s
            }
            var next = hs
            let z = (0 ..< h).map { f.f(clipped(pre[$0] + rh[$0])) }
            let rg = (0 ..< h).map { f.f(clipped(pre[h + $0] + rh[h + $0])) }
            let gated = (0 ..< h).map { rg[$0] * hs[$0] }
            for j in 0 ..< h {
                var candidate: Float
                if linearBeforeReset {
                    candidate = pre[2 * h + j] + rg[j] * rh[2 * h + j]
                } else {
                    var s: Float = 0
                    let rr = r + (2 * h + j) * h
                    for k in 0 ..< h { s += rr[k] * gated[k] }
                    candidate = pre[2 * h + j] + s + rh[2 * h + j]
                }
                let hh = g.f(clipped(candidate))
                next[j] = (1 - z[j]) * hh + z[j] * hs[j]
            }
            hs = next
        }
    }
}
