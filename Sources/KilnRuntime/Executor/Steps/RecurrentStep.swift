@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat

/// `lstm`, `gru` and `dynamic_quantize_lstm` with the default activations, layout 0, no clipping:
/// per direction one GEMM projects every timestep's input (biases in its epilogue), then each step
/// runs the recurrent GEMM for all sequences and one fused gate kernel per sequence. The quantized
/// LSTM's weights are kept as float32 copies of their centered integers (`q − zero point`, exact)
/// and its GEMM operands quantized and centered the same way before each product, so the float32
/// GEMM sums integers (exactly while the sums stay below 2^24); the per-column scales follow.
struct RecurrentStep: StepKernel, @unchecked Sendable {
    let id: KernelID
    let op: KilnFormat.Operation
    let gates: Int
    let hidden: Int
    let directions: Int
    let reverseOnly: Bool
    let linearBeforeReset: Bool
    let ukernel: kiln_f32_gemm_ukernel
    let tile: GEMMTile
    /// Per direction, packed Wᵀ [input, gates·h], Rᵀ [h, gates·h] and (GRU without linear-before-reset) R_hᵀ [h, h].
    let packedW: [[Float]], packedR: [[Float]], packedRh: [[Float]]
    /// Per direction, the input projection's bias and the recurrent projection's bias.
    let biasX: [[Float]], biasR: [[Float]]
    let peepholes: [[Float]]?
    let inputSize: Int
    /// `dynamic_quantize_lstm`: per direction, W and R packed as 8-bit panels of `q − zero point`
    /// (scale 1), and their per-column scales.
    let quantized: QuantizedWeights?

    init(id: KernelID, op: KilnFormat.Operation, constants: [Int: NDArray], inputs: [Int], ukernel: kiln_f32_gemm_ukernel, tile: GEMMTile) throws {
        self.id = id
        self.op = op
        self.ukernel = ukernel
        self.tile = tile
        gates = op.opType == "gru" ? 3 : 4
        let a = op.attributes
        hidden = try a.int("hidden_size", 0)
        let direction = try a.string("direction", "forward")
        directions = direction == "bidirectional" ? 2 : 1
        reverseOnly = direction == "reverse"
        linearBeforeReset = try a.int("linear_before_reset", 0) != 0
        let defaults = gates == 4 ? ["sigmoid", "tanh", "tanh"] : ["sigmoid", "tanh"]
        if let names = try a.strings("activations"), names.map({ $0.lowercased() }) != Array((0 ..< directions).map { _ in defaults }.joined()) {
            throw OpError("only the default activations have a kernel")
        }
        guard a["clip"] == nil, try a.int("input_forget", 0) == 0, try a.int("layout", 0) == 0 else {
            throw OpError("clip, input_forget and layout 1 have no kernel")
        }
        func constant(_ i: Int) -> NDArray? { i < inputs.count && inputs[i] >= 0 ? constants[inputs[i]] : nil }
        let (h, g, nr) = (hidden, gates, tile.nr)
        func pack(_ base: UnsafePointer<Float>, k: Int, n: Int, columnStride: Int) -> [Float] {
            var out = [Float](repeating: 0, count: (n + nr - 1) / nr * k * nr)
            out.withUnsafeMutableBufferPointer { kiln_f32_pack_b(k, n, nr, base, 1, columnStride, $0.baseAddress) }
            return out
        }
        var packedW: [[Float]] = [], packedR: [[Float]] = [], packedRh: [[Float]] = []
        if op.opType == "dynamic_quantize_lstm" {
            let q = try RecurrentStep.quantized(constant, directions: directions, hidden: hidden, kernel: id)
            quantized = q
            inputSize = q.w[0].k
        } else {
            quantized = nil
            guard let w = constant(1), let r = constant(2), w.scalarType == .float32, r.scalarType == .float32, w.rank == 3,
                  w.shape[0] == directions, w.shape[1] == gates * hidden, r.shape == [directions, gates * hidden, hidden] else {
                throw OpError("W and R must be float32 weights of \(directions) direction(s) and hidden size \(hidden)")
            }
            inputSize = w.shape[2]
            let pw = w.unsafeBase.assumingMemoryBound(to: Float.self), pr = r.unsafeBase.assumingMemoryBound(to: Float.self)
            for d in 0 ..< directions {
                packedW.append(pack(pw + d * g * h * inputSize, k: inputSize, n: g * h, columnStride: inputSize))
                packedR.append(pack(pr + d * g * h * h, k: h, n: g * h, columnStride: h))
                packedRh.append(g == 3 && !linearBeforeReset ? pack(pr + d * g * h * h + 2 * h * h, k: h, n: h, columnStride: h) : [])
            }
        }
        let b = constant(3)
        if inputs.count > 3, inputs[3] >= 0, b == nil { throw OpError("B must be a weight") }
        if let b, b.shape != [directions, 2 * gates * hidden] || b.scalarType != .float32 { throw OpError("B is \(b.scalarType.rawValue)\(b.shape)") }
        let p = gates == 4 ? constant(7) : nil
        if gates == 4, inputs.count > 7, inputs[7] >= 0, p == nil { throw OpError("P must be a weight") }
        let pb = b?.unsafeBase.assumingMemoryBound(to: Float.self)
        var biasX: [[Float]] = [], biasR: [[Float]] = []
        for d in 0 ..< directions {
            let wb = (0 ..< g * h).map { pb?[d * 2 * g * h + $0] ?? 0 }, rb = (0 ..< g * h).map { pb?[d * 2 * g * h + g * h + $0] ?? 0 }
            // LSTM: both biases on the input projection; GRU: the recurrent bias stays with R (the reset gate scales it).
            biasX.append(g == 4 ? zip(wb, rb).map { $0 + $1 } : wb)
            biasR.append(g == 4 ? [Float](repeating: 0, count: g * h) : rb)
        }
        self.packedW = packedW
        self.packedR = packedR
        self.packedRh = packedRh
        self.biasX = biasX
        self.biasR = biasR
        let dirs = directions
        peepholes = p.map { p in
            let dense = p.contiguous()
            return withExtendedLifetime(dense) {
                let c = dense.unsafeBase.assumingMemoryBound(to: Float.self)
                return (0 ..< dirs).map { d in (0 ..< 3 * h).map { c[d * 3 * h + $0] } }
            }
        }
    }

    /// Y `[seq, directions, batch, hidden]`, Y_h and Y_c `[directions, batch, hidden]`, as many as
    /// the op has: a run that works shapes out step by step runs this kernel too, so its values
    /// are a planned run's.
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let x = inputs.first ?? nil, x.shape.count == 3 else { return nil }
        let (seq, batch) = (x.shape[0], x.shape[1])
        let shapes = [[seq, directions, batch, hidden], [directions, batch, hidden], [directions, batch, hidden]]
        return shapes.prefix(op.outputs.count).map { ($0, DataType.float32) }
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard let x = inputs.first ?? nil, x.dtype == .float32, x.shape.count == 3, x.shape[2] == inputSize else { throw OpError("X does not fit") }
        let (seq, batch, h, g, dirs) = (x.shape[0], x.shape[1], hidden, gates, directions)
        if let lens = try knownIntegers(inputs.count > 4 ? inputs[4] : nil, "sequence_lens"), lens.contains(where: { $0 != seq }) {
            throw OpError("sequences of different lengths have no kernel")
        }
        let h0 = inputs.count > 5 ? inputs[5] : nil, c0 = g == 4 && inputs.count > 6 ? inputs[6] : nil
        for s in [h0, c0] { if let s, s.shape != [dirs, batch, h] { throw OpError("initial state has shape \(s.shape)") } }
        let expected = [[seq, dirs, batch, h], [dirs, batch, h], [dirs, batch, h]]
        for (k, o) in outputs.enumerated() where o.shape != expected[k] { throw OpError("output \(k) has shape \(o.shape)") }
        // xw (every step's input projections), hr, h, c, the GRU's reset state r ⊙ h, and the
        // quantized LSTM's centered X and h.
        let quantized = quantized, inputs = x.shape[2]
        let decodeBytes = quantized.map { max($0.w[0].scratchBytes, $0.r[0].scratchBytes) } ?? 0
        let floats = [seq * batch * g * h, batch * g * h, batch * h, batch * h, batch * h]
            + (quantized == nil ? [] : [seq * batch * inputs, batch * h, (decodeBytes + 3) / 4])
        var offsets: [Int] = [], total = 0
        for f in floats { offsets.append(total); total += (f * 4 + 63) / 64 * 64 }
        // The directions of a bidirectional layer are independent until their outputs: each runs on
        // its own thread with its own scratch.
        let parallelDirections = dirs > 1 && context.threads > 1
        context.scratch(total * (parallelDirections ? dirs : 1))
        let threads = context.threads
        let nr = tile.nr
        func packed(_ k: Int, _ n: Int) -> kiln_packed_b {
            var b = kiln_packed_b()
            b.kind = Int32(KILN_B_F32); b.k = k; b.n = n; b.nr = nr
            return b
        }
        let (mr, ukernel, scratchSlot, reverseOnly, lbr) = (tile.mr, ukernel, context.scratchSlot, reverseOnly, linearBeforeReset)
        // The LSTM cell update and the GRU gates in the step's vector ISA.
        let vector = VectorConfig(id.isa)
        let (cellUpdate, gruGates, gruReset) = (vector.lstmGates, vector.gruGates, vector.gruReset)
        let (packedW, packedR, packedRh, biasX, biasR, peepholes) = (packedW, packedR, packedRh, biasX, biasR, peepholes)
        /// c[rows, n] = a · B (+ bias): B direction d's float32 panels, or its packed 8-bit weight (decoded through `decode`).
        func product(_ floatB: [[Float]], _ quantizedB: [PackedGEMM]?, _ d: Int, k: Int, n: Int, a: UnsafePointer<Float>, c: UnsafeMutablePointer<Float>,
                     ldc: Int, rows: Int, bias: UnsafePointer<Float>?, decode: UnsafeMutableRawPointer) {
            var e = kiln_epilogue()
            e.bias = bias
            if var b = quantizedB?[d].b {
                kiln_f32_gemm(ukernel, mr, &b, a, k, c, ldc, 0, rows, 0, (n + nr - 1) / nr, &e, decode.assumingMemoryBound(to: Float.self))
                return
            }
            floatB[d].withUnsafeBufferPointer { w in
                var b = packed(k, n)
                b.data = UnsafeRawPointer(w.baseAddress)
                kiln_f32_gemm(ukernel, mr, &b, a, k, c, ldc, 0, rows, 0, (n + nr - 1) / nr, &e, nil)
            }
        }
        return BoundStep { slots in
            let y = outputs.first.map { $0.floats(slots) }
            parallelFor(dirs, threads: parallelDirections ? threads : 1) { d in
                let s = slots[scratchSlot] + (parallelDirections ? d * total : 0)
                let xw = (s + offsets[0]).assumingMemoryBound(to: Float.self), hr = (s + offsets[1]).assumingMemoryBound(to: Float.self)
                let hs = (s + offsets[2]).assumingMemoryBound(to: Float.self), cs = (s + offsets[3]).assumingMemoryBound(to: Float.self)
                let rh = (s + offsets[4]).assumingMemoryBound(to: Float.self)
                let reverse = reverseOnly || d == 1
                // All timesteps' input projections at once (quantized: centered X, then scales and biases).
                let decode = quantized == nil ? s : s + offsets[7]
                let qx = quantized == nil ? nil : (s + offsets[5]).assumingMemoryBound(to: Float.self)
                let xScale = qx.map { kiln_f32_quantize_u8_centered__scalar(seq * batch * inputs, x.floats(slots), $0) }
                biasX[d].withUnsafeBufferPointer { bias in
                    product(packedW, quantized?.w, d, k: inputs, n: g * h, a: qx ?? x.floats(slots), c: xw, ldc: g * h, rows: seq * batch,
                            bias: qx == nil ? bias.baseAddress : nil, decode: decode)
                    if let xScale, let quantized {
                        quantized.wScale[d].withUnsafeBufferPointer { kiln_f32_scale_columns__scalar(seq * batch, g * h, xw, xScale, $0.baseAddress, bias.baseAddress) }
                    }
                }
                if let h0 { hs.update(from: h0.floats(slots) + d * batch * h, count: batch * h) } else { hs.initialize(repeating: 0, count: batch * h) }
                if let c0 { cs.update(from: c0.floats(slots) + d * batch * h, count: batch * h) } else { cs.initialize(repeating: 0, count: batch * h) }
                for step in 0 ..< seq {
                    let t = reverse ? seq - 1 - step : step
                    // Quantized: the hidden states of all sequences centered, the product scaled (R has no bias of its own).
                    let qh = quantized == nil ? nil : (s + offsets[6]).assumingMemoryBound(to: Float.self)
                    let hScale = qh.map { kiln_f32_quantize_u8_centered__scalar(batch * h, hs, $0) }
                    biasR[d].withUnsafeBufferPointer { bias in
                        product(packedR, quantized?.r, d, k: h, n: g * h, a: qh ?? hs, c: hr, ldc: g * h, rows: batch, bias: bias.baseAddress, decode: decode)
                    }
                    if let hScale, let quantized {
                        quantized.rScale[d].withUnsafeBufferPointer { kiln_f32_scale_columns__scalar(batch, g * h, hr, hScale, $0.baseAddress, nil) }
                    }
                    for n in 0 ..< batch {
                        let xwt = xw + (t * batch + n) * g * h, hrn = hr + n * g * h
                        if g == 4 {
                            if let peepholes {
                                peepholes[d].withUnsafeBufferPointer { cellUpdate(h, xwt, hrn, $0.baseAddress, cs + n * h, hs + n * h) }
                            } else {
                                cellUpdate(h, xwt, hrn, nil, cs + n * h, hs + n * h)
                            }
                        } else if lbr {
                            gruGates(h, 1, xwt, hrn, hs + n * h)
                        } else {
                            gruReset(h, xwt, hrn, hs + n * h, rh + n * h)
                        }
                    }
                    if g == 3 && !lbr {
                        // The candidate's recurrent term uses the reset state: R_h · (r ⊙ h) + Rb_h,
                        // written over hr's h part with the bias in the GEMM's epilogue.
                        biasR[d].withUnsafeBufferPointer { bias in
                            product(packedRh, nil, d, k: h, n: h, a: rh, c: hr + 2 * h, ldc: g * h, rows: batch, bias: bias.baseAddress.map { $0 + 2 * h },
                                    decode: decode)
                        }
                        for n in 0 ..< batch {
                            gruGates(h, 0, xw + (t * batch + n) * g * h, hr + n * g * h, hs + n * h)
                        }
                    }
                    if let y { (y + (t * dirs + d) * batch * h).update(from: hs, count: batch * h) }
                }
                if outputs.count > 1 { (outputs[1].floats(slots) + d * batch * h).update(from: hs, count: batch * h) }
                if outputs.count > 2 { (outputs[2].floats(slots) + d * batch * h).update(from: cs, count: batch * h) }
            }
        }
    }
}
