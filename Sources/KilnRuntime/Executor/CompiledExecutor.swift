import CKilnKernels
import Dispatch
import Foundation
import KilnFormat
import KilnReference

/// Runs one function of a compiled artifact: each step's kernel was resolved when the
/// function was loaded (no lookups by name at run time); values live in slots and are
/// released after their last reader (the plan's lifetimes). Runs may overlap.
final class CompiledExecutor: FunctionRunner, @unchecked Sendable {
    enum Kind {
        case gemm(PackedGEMM, kiln_epilogue)
        case conv(PackedGEMM, kiln_epilogue, OpSet.Window)
        case convNCHW(NDArray, kiln_epilogue, OpSet.Window, ukernel: kiln_f32_gemm_ukernel, mr: Int, nr: Int)
        case depthwise(NDArray, kiln_epilogue, OpSet.Window, avx2: Bool)
        case matmul(ukernel: kiln_f32_gemm_ukernel, mr: Int, nr: Int)
        case binary(Int32)
        case unary(Int32, Float, Float, avx2: Bool)
        case softmax(axis: Int)
        case layerNorm(axis: Int, epsilon: Float)
        case globalAveragePool
        case gatherRows
        case reference
    }

    struct Step {
        var name: String
        var kind: Kind
        var reference: ReferenceKernel?
        var inputs: [Int]
        var outputs: [Int]
        var release: [Int]
        var kernelName: String
    }

    let function: Function
    private let steps: [Step]
    private let slotCount: Int
    private let constants: [(Int, NDArray)]
    private let inputSlots: [Int]
    private let outputSlots: [Int]
    private let threads: Int

    /// Per-step time totals, kept when the `KILN_PROFILE` environment variable is set and
    /// printed to stderr when the function is released.
    private let profile: StepProfile?

    deinit { profile?.report(steps.map { "\($0.name) [\($0.kernelName)]" }) }

    init(plan: CompiledPlan, function index: Int, threads: Int) throws {
        let f = plan.model.functions[index], fp = plan.functions[index]
        function = f
        self.threads = max(1, threads)
        slotCount = fp.slotCount
        inputSlots = fp.inputSlots
        outputSlots = fp.outputSlots
        var constants: [(Int, NDArray)] = []
        var weightBySlot: [Int: Weight] = [:]
        let packedSlots = Set(fp.steps.filter { $0.inputs.count > 1 && CompiledExecutor.isPacked($0.kernel) }.map { $0.inputs[1] })
        for (slot, wi) in fp.weights {
            let w = plan.model.weights[wi]
            weightBySlot[slot] = w
            // Weights no kernel reads packed are decoded once (dense float32 ones are views of the mapping).
            if !packedSlots.contains(slot) {
                do {
                    constants.append((slot, try WeightDecoding.dense(w)))
                } catch let e as OpError {
                    throw InferenceError(function: f.name, reason: "weight '\(w.name)': \(e.reason)")
                }
            }
        }
        self.constants = constants
        let constantBySlot = Dictionary(constants, uniquingKeysWith: { a, _ in a })
        var release = [[Int]](repeating: [], count: fp.steps.count)
        let kept = Set(fp.outputSlots)
        for l in fp.lifetimes where !kept.contains(l.slot) && l.lastStep < fp.steps.count { release[l.lastStep].append(l.slot) }
        var steps: [Step] = []
        for (i, (s, op)) in zip(fp.steps, f.operations).enumerated() {
            do {
                let kind = try CompiledExecutor.kind(s, op, weightBySlot, constantBySlot)
                let reference: ReferenceKernel? = CompiledExecutor.isPacked(s.kernel) ? nil : try ReferenceKernel(op)
                steps.append(Step(name: op.name, kind: kind, reference: reference, inputs: s.inputs, outputs: s.outputs, release: release[i],
                                  kernelName: s.kernel))
            } catch let e as OpError {
                throw InferenceError(function: f.name, op: op.name, reason: e.reason)
            }
        }
        self.steps = steps
        profile = getenv("KILN_PROFILE") != nil ? StepProfile(steps.count) : nil
        _ = CompiledExecutor.keepFreedMemory
    }

    /// Step results and scratch buffers are allocated per run; glibc would hand large ones
    /// back to the kernel on free and fault fresh zeroed pages on the next run. Keeping freed
    /// memory in the heap (up to 1 GiB blocks) makes the next run reuse it. Set once.
    static let keepFreedMemory: Bool = {
        kiln_memory_keep_freed()
        return true
    }()

    /// Whether an `__avx2` kernel was chosen; refused on a host without AVX2 and FMA.
    static func avx2(_ kernel: String) throws -> Bool {
        guard kernel.hasSuffix("__avx2") else { return false }
        guard kiln_cpu_features() & UInt32(KILN_CPU_X86_V3) != 0 else { throw OpError("kernel \(kernel) needs AVX2 and FMA") }
        return true
    }

    static func isPacked(_ kernel: String) -> Bool {
        kernel.hasPrefix("f32_gemm_") || (kernel.hasPrefix("f32_conv2d_") && !kernel.hasPrefix("f32_conv2d_nchw_"))
    }

    static func ukernel<S: StringProtocol>(named name: S) throws -> (kiln_f32_gemm_ukernel, Int, Int) {
        var mr = 0, nr = 0
        guard let uk = String(name).withCString({ kiln_f32_gemm_ukernel_named($0, &mr, &nr) }) else {
            throw OpError("kernel \(name) is not available on this host")
        }
        return (uk, mr, nr)
    }

    static let unaryCodes: [String: Int32] = [
        "relu": Int32(KILN_UNARY_RELU), "hard_swish": Int32(KILN_UNARY_HARD_SWISH), "hard_sigmoid": Int32(KILN_UNARY_HARD_SIGMOID),
        "sigmoid": Int32(KILN_UNARY_SIGMOID), "tanh": Int32(KILN_UNARY_TANH), "exp": Int32(KILN_UNARY_EXP),
        "log": Int32(KILN_UNARY_LOG), "erf": Int32(KILN_UNARY_ERF), "sqrt": Int32(KILN_UNARY_SQRT),
        "reciprocal": Int32(KILN_UNARY_RECIPROCAL), "neg": Int32(KILN_UNARY_NEG), "abs": Int32(KILN_UNARY_ABS),
        "clip": Int32(KILN_UNARY_CLIP),
    ]
    static let binaryCodes: [String: Int32] = [
        "add": Int32(KILN_BINARY_ADD), "sub": Int32(KILN_BINARY_SUB), "mul": Int32(KILN_BINARY_MUL), "div": Int32(KILN_BINARY_DIV),
    ]

    static func kind(_ s: CompiledPlan.Step, _ op: KilnFormat.Operation, _ weights: [Int: Weight], _ constants: [Int: NDArray]) throws -> Kind {
        let a = op.attributes
        func packedWeight() throws -> Weight {
            guard s.inputs.count >= 2, let w = weights[s.inputs[1]] else { throw OpError("kernel \(s.kernel) needs a packed weight as input 1") }
            return w
        }
        switch s.kernel {
        case let k where k.hasPrefix("f32_gemm_"):
            guard ["linear", "matmul"].contains(op.opType) else { throw OpError("kernel \(k) cannot run \(op.opType)") }
            return .gemm(try PackedGEMM(weight: try packedWeight(), kernel: k), try epilogue(op))
        case let k where k.hasPrefix("f32_conv2d_nchw_"):
            guard op.opType == "conv", s.inputs.count >= 2, let w = constants[s.inputs[1]], w.rank == 4, w.scalarType == .float32 else {
                throw OpError("kernel \(k) needs a float32 conv weight")
            }
            let (uk, mr, nr) = try ukernel(named: "f32_gemm" + k.dropFirst("f32_conv2d_nchw".count))
            return .convNCHW(w, try epilogue(op), try OpSet.Window(a, kernel: Array(w.shape[2...])), ukernel: uk, mr: mr, nr: nr)
        case let k where k.hasPrefix("f32_conv2d_"):
            guard op.opType == "conv" else { throw OpError("kernel \(k) cannot run \(op.opType)") }
            let w = try packedWeight()
            let g = try PackedGEMM(weight: w, kernel: k)
            let shape = try a.ints("kernel_shape") ?? []
            return .conv(g, try epilogue(op), try OpSet.Window(a, kernel: shape.count == 2 ? shape : [1, 1]))
        case "f32_dwconv2d__scalar", "f32_dwconv2d__avx2":
            guard op.opType == "conv", s.inputs.count >= 2, let w = constants[s.inputs[1]], w.rank == 4, w.scalarType == .float32 else {
                throw OpError("kernel \(s.kernel) needs a float32 weight")
            }
            return .depthwise(w, try epilogue(op), try OpSet.Window(a, kernel: Array(w.shape[2...])), avx2: try avx2(s.kernel))
        case let k where k.hasPrefix("f32_matmul_"):
            let (uk, mr, nr) = try ukernel(named: "f32_gemm" + k.dropFirst("f32_matmul".count))
            return .matmul(ukernel: uk, mr: mr, nr: nr)
        case "f32_binary__scalar":
            guard let code = binaryCodes[op.opType] else { throw OpError("kernel \(s.kernel) cannot run \(op.opType)") }
            return .binary(code)
        case "f32_unary__scalar", "f32_unary__avx2":
            let vector = try avx2(s.kernel)
            if op.opType == "gelu" {
                return .unary(Int32(try a.string("approximate", "none") == "tanh" ? KILN_UNARY_GELU_TANH : KILN_UNARY_GELU), 0, 0, avx2: vector)
            }
            guard let code = unaryCodes[op.opType] else { throw OpError("kernel \(s.kernel) cannot run \(op.opType)") }
            switch op.opType {
            case "hard_sigmoid": return .unary(code, Float(try a.float("alpha", 0.2)), Float(try a.float("beta", 0.5)), avx2: vector)
            case "clip":
                return .unary(code, a["min"] != nil ? Float(try a.float("min", 0)) : -.infinity,
                              a["max"] != nil ? Float(try a.float("max", 0)) : .infinity, avx2: vector)
            default: return .unary(code, 0, 0, avx2: vector)
            }
        case "f32_softmax__scalar":
            guard op.opType == "softmax" else { throw OpError("kernel \(s.kernel) cannot run \(op.opType)") }
            return .softmax(axis: try a.int("axis", -1))
        case "f32_layer_norm__scalar":
            guard op.opType == "layer_norm" else { throw OpError("kernel \(s.kernel) cannot run \(op.opType)") }
            return .layerNorm(axis: try a.int("axis", -1), epsilon: Float(try a.float("epsilon", 1e-5)))
        case "f32_global_average_pool__scalar":
            return .globalAveragePool
        case "gather_rows":
            guard op.opType == "gather" else { throw OpError("kernel \(s.kernel) cannot run \(op.opType)") }
            return .gatherRows
        case "reference":
            return .reference
        default:
            throw OpError("unknown kernel '\(s.kernel)'")
        }
    }

    func run(_ inputs: [String: NDArray]) throws -> [String: NDArray] {
        _ = try function.bind(inputs)
        var values = [NDArray?](repeating: nil, count: slotCount)
        for (s, v) in constants { values[s] = v }
        for (arg, s) in zip(function.inputs, inputSlots) {
            let x = inputs[arg.name]!.contiguous()
            values[s] = x.scalarType == .float16 || x.scalarType == .bfloat16 || x.scalarType == .float64
                ? try ReferenceKernel.widen(x) : x
        }
        for (index, step) in steps.enumerated() {
            let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
            defer { profile?.add(index, DispatchTime.now().uptimeNanoseconds - started) }
            let args = step.inputs.map { $0 < 0 ? nil : values[$0] }
            let results: [NDArray]
            do {
                if let fast = try execute(step, args) {
                    results = fast
                } else if let reference = step.reference {
                    results = try reference(args)
                } else {
                    throw OpError("inputs \(args.map { $0.map { "\($0.scalarType.rawValue)\($0.shape)" } ?? "none" }) do not fit kernel")
                }
            } catch let e as OpError {
                throw InferenceError(function: function.name, op: step.name, reason: e.reason)
            }
            guard results.count == step.outputs.count else {
                throw InferenceError(function: function.name, op: step.name, reason: "produced \(results.count) outputs, declared \(step.outputs.count)")
            }
            for (k, r) in results.enumerated() { values[step.outputs[k]] = r }
            for s in step.release { values[s] = nil }
        }
        var out: [String: NDArray] = [:]
        for (arg, s) in zip(function.outputs, outputSlots) {
            guard let v = values[s] else { throw InferenceError(function: function.name, reason: "output '\(arg.name)' was not computed") }
            out[arg.name] = v
        }
        return out
    }

    /// Runs a step's specialized kernel; `nil` when its inputs need the reference kernel.
    private func execute(_ step: Step, _ args: [NDArray?]) throws -> [NDArray]? {
        func float(_ i: Int) -> NDArray? {
            guard i < args.count, let x = args[i], x.scalarType == .float32 else { return nil }
            return x.contiguous()
        }
        func f32(_ x: NDArray) -> UnsafeMutablePointer<Float> { x.unsafeBase.assumingMemoryBound(to: Float.self) }
        switch step.kind {
        case .reference:
            return nil
        case .gemm(let g, var e):
            guard let x = float(0), let last = x.shape.last, last == g.k else {
                throw OpError("input \(args.first??.shape ?? []) does not fit the weight's \(g.k) inputs")
            }
            let bias = float(2)
            if let bias { guard bias.elementCount == g.n else { throw OpError("bias \(bias.shape) does not fit \(g.n) outputs") } }
            let m = x.elementCount / max(g.k, 1)
            let y = NDArray(uninitializedShape: Array(x.shape.dropLast()) + [g.n], scalarType: .float32)
            e.bias = bias.map { UnsafePointer(f32($0)) }
            if g.k == 0 { f32(y).initialize(repeating: 0, count: y.elementCount); kiln_f32_epilogue(m, g.n, f32(y), g.n, e.bias, &e); return [y] }
            g.run(a: f32(x), lda: g.k, m: m, c: f32(y), ldc: g.n, epilogue: e, threads: threads)
            return [y]
        case .conv(let g, var e, let window):
            guard let x = float(0), x.rank == 4 else { return nil }
            let (batch, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let (kh, kw) = (window.kernel[0], window.kernel[1])
            guard c * kh * kw == g.k else { throw OpError("input \(x.shape) does not fit the weight (K = \(g.k))") }
            let bias = float(2)
            e.bias = bias.map { UnsafePointer(f32($0)) }
            let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
            let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
            let pixels = oh * ow
            let y = NDArray(uninitializedShape: [batch, g.n, oh, ow], scalarType: .float32)
            let pointwise = kh == 1 && kw == 1 && window.strides == [1, 1] && pt == 0 && pl == 0 && oh == h && ow == w
            let cols = UnsafeMutablePointer<Float>.allocate(capacity: max(pixels * g.k, 1))
            let tmp = UnsafeMutablePointer<Float>.allocate(capacity: max(pixels * g.n, 1))
            defer { cols.deallocate(); tmp.deallocate() }
            for n in 0 ..< batch {
                let xi = f32(x) + n * c * h * w
                if pointwise {
                    kiln_f32_transpose__scalar(c, h * w, xi, cols)
                } else {
                    kiln_f32_im2col__scalar(c, h, w, xi, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                            window.dilations[1], pt, pl, oh, ow, cols)
                }
                g.run(a: cols, lda: g.k, m: pixels, c: tmp, ldc: g.n, epilogue: e, threads: threads)
                kiln_f32_transpose__scalar(pixels, g.n, tmp, f32(y) + n * g.n * pixels)
            }
            return [y]
        case .convNCHW(let weight, var e, let window, let uk, let mr, let nr):
            guard let x = float(0), x.rank == 4, x.shape[1] == weight.shape[1] else { return nil }
            let (batch, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let (m, kh, kw) = (weight.shape[0], weight.shape[2], weight.shape[3])
            let k = c * kh * kw
            let bias = float(2)
            if let bias { guard bias.elementCount == m else { throw OpError("bias \(bias.shape) does not fit \(m) channels") } }
            e.bias = bias.map { UnsafePointer(f32($0)) }
            let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
            let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
            let pixels = oh * ow
            let y = NDArray(uninitializedShape: [batch, m, oh, ow], scalarType: .float32)
            guard pixels > 0, m > 0 else { return [y] }
            let pointwise = kh == 1 && kw == 1 && window.strides == [1, 1] && pt == 0 && pl == 0 && oh == h && ow == w
            let cols = pointwise ? nil : UnsafeMutablePointer<Float>.allocate(capacity: max(k * pixels, 1))
            defer { cols?.deallocate() }
            // B (the image, or its im2col rows) is packed into panels once per image; then each
            // chunk of output channels (its weight rows stay in cache) sweeps every panel.
            let panels = (pixels + nr - 1) / nr
            let packed = UnsafeMutablePointer<Float>.allocate(capacity: max(panels * k * nr, 1))
            defer { packed.deallocate() }
            let small = m * pixels * k < 1 << 15
            let panelRanges = splitRanges(panels, parts: small ? 1 : threads)
            let rowChunks = splitRanges(m, parts: small ? 1 : max(threads, m / 64), align: mr)
            let pw = f32(weight)
            var b = kiln_packed_b()
            b.kind = Int32(KILN_B_F32); b.k = k; b.n = pixels; b.nr = nr; b.data = UnsafeRawPointer(packed)
            for n in 0 ..< batch {
                let xi = f32(x) + n * c * h * w
                if let cols {
                    kiln_f32_im2col_rows__scalar(c, h, w, xi, kh, kw, window.strides[0], window.strides[1], window.dilations[0],
                                                 window.dilations[1], pt, pl, oh, ow, cols)
                }
                let source = UnsafePointer(cols ?? xi), out = f32(y) + n * m * pixels
                parallelFor(panelRanges.count, threads: threads) { i in
                    let r = panelRanges[i]
                    let n0 = r.lowerBound * nr, width = min(pixels, r.upperBound * nr) - n0
                    kiln_f32_pack_b(k, width, nr, source + n0, pixels, 1, packed + r.lowerBound * k * nr)
                }
                parallelFor(rowChunks.count, threads: threads) { i in
                    let rows = rowChunks[i]
                    var packedB = b
                    kiln_f32_gemm(uk, mr, &packedB, pw, k, out, pixels, rows.lowerBound, rows.upperBound, 0, panels, nil, nil)
                    guard e.bias != nil || e.activation != Int32(KILN_ACT_NONE) else { return }
                    var rowEpilogue = e
                    for r in rows {
                        rowEpilogue.bias = nil
                        let row = out + r * pixels
                        if let bias = e.bias { let v = bias[r]; for j in 0 ..< pixels { row[j] += v } }
                        kiln_f32_epilogue(1, pixels, row, pixels, nil, &rowEpilogue)
                    }
                }
            }
            return [y]
        case .depthwise(let weight, var e, let window, let vector):
            guard let x = float(0), x.rank == 4, x.shape[1] == weight.shape[0] else { return nil }
            let (batch, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
            let bias = float(2)
            e.bias = bias.map { UnsafePointer(f32($0)) }
            let (pt, _) = window.padding(0, size: h), (pl, _) = window.padding(1, size: w)
            let oh = window.outputSize(0, size: h), ow = window.outputSize(1, size: w)
            let (kh, kw) = (weight.shape[2], weight.shape[3])
            let y = NDArray(uninitializedShape: [batch, c, oh, ow], scalarType: .float32)
            let px = f32(x), py = f32(y), pw = f32(weight)
            let ranges = splitRanges(batch * c, parts: c * oh * ow * kh * kw < 1 << 15 ? 1 : threads)
            parallelFor(ranges.count, threads: threads) { r in
                var part = e
                for bc in ranges[r] {
                    let ch = bc % c
                    part.bias = e.bias.map { $0 + ch }
                    CompiledExecutor.depthwise(vector, h, w, px + bc * h * w, kh, kw, pw + ch * kh * kw, window, pt, pl, oh, ow,
                                               py + bc * oh * ow, &part)
                }
            }
            return [y]
        case .matmul(let uk, let mr, let nr):
            guard let a = float(0), let b = float(1), a.rank >= 2, b.rank >= 2 else { return nil }
            let (m, k) = (a.shape[a.rank - 2], a.shape[a.rank - 1]), (k2, n) = (b.shape[b.rank - 2], b.shape[b.rank - 1])
            guard k == k2 else { return nil }
            let batchA = Array(a.shape.dropLast(2)), batchB = Array(b.shape.dropLast(2))
            guard batchA == batchB || batchB.isEmpty || batchB.allSatisfy({ $0 == 1 }) else { return nil }
            let batches = batchA.reduce(1, *), bBatches = batchB.reduce(1, *)
            let y = NDArray(uninitializedShape: batchA + [m, n], scalarType: .float32)
            let panels = (n + nr - 1) / nr
            let packed = UnsafeMutablePointer<Float>.allocate(capacity: max(panels * k * nr, 1))
            defer { packed.deallocate() }
            for i in 0 ..< batches {
                let bi = bBatches == 1 ? 0 : i
                kiln_f32_pack_b(k, n, nr, f32(b) + bi * k * n, n, 1, packed)
                var pb = kiln_packed_b()
                pb.kind = Int32(KILN_B_F32); pb.k = k; pb.n = n; pb.nr = nr; pb.data = UnsafeRawPointer(packed)
                let g = PackedGEMM(b: pb, ukernel: uk, mr: mr, storage: [])
                if k == 0 { (f32(y) + i * m * n).initialize(repeating: 0, count: m * n); continue }
                g.run(a: f32(a) + i * m * k, lda: k, m: m, c: f32(y) + i * m * n, ldc: n, epilogue: kiln_epilogue(), threads: threads)
            }
            return [y]
        case .binary(let code):
            guard let x = float(0), let z = float(1) else { return nil }
            return try binary(code, x, z).map { [$0] }
        case .unary(let code, let alpha, let beta, let vector):
            guard let x = float(0), args.count == 1 else { return nil }
            let y = NDArray(uninitializedShape: x.shape, scalarType: .float32)
            let count = x.elementCount
            let ranges = splitRanges(count, parts: count < 1 << 16 ? 1 : threads, align: 64)
            parallelFor(ranges.count, threads: threads) { r in
                let range = ranges[r]
                CompiledExecutor.unary(vector, code, range.count, f32(x) + range.lowerBound, f32(y) + range.lowerBound, alpha, beta)
            }
            return [y]
        case .softmax(let axis):
            guard let x = float(0), x.rank >= 1, axis == -1 || axis == x.rank - 1, let n = x.shape.last, n > 0 else { return nil }
            let y = NDArray(uninitializedShape: x.shape, scalarType: .float32)
            kiln_f32_softmax__scalar(x.elementCount / n, n, f32(x), f32(y))
            return [y]
        case .layerNorm(let axis, let eps):
            guard let x = float(0), x.rank >= 1, axis == -1 || axis == x.rank - 1, let n = x.shape.last, n > 0,
                  let gamma = float(1), gamma.elementCount == n else { return nil }
            let beta = float(2)
            if let beta, beta.elementCount != n { return nil }
            let y = NDArray(uninitializedShape: x.shape, scalarType: .float32)
            kiln_f32_layer_norm__scalar(x.elementCount / n, n, f32(x), f32(gamma), beta.map { UnsafePointer(f32($0)) }, eps, f32(y))
            return [y]
        case .gatherRows:
            guard let data = args[0], data.rank >= 1, data.isContiguous, !data.scalarType.isSubByte,
                  let indices = args.count > 1 ? args[1] : nil, indices.scalarType == .int64 || indices.scalarType == .int32 else { return nil }
            let rows = data.shape[0], rowBytes = data.shape[1...].reduce(1, *) * data.elementSize
            let idx = indices.contiguous()
            let y = NDArray(uninitializedShape: idx.shape + data.shape[1...], scalarType: data.scalarType)
            let count = idx.elementCount
            for i in 0 ..< count {
                var r = idx.scalarType == .int64 ? Int(idx.unsafeBase.load(fromByteOffset: i * 8, as: Int64.self))
                    : Int(idx.unsafeBase.load(fromByteOffset: i * 4, as: Int32.self))
                if r < 0 { r += rows }
                guard r >= 0, r < rows else { throw OpError("index \(r) is out of range for \(rows) rows") }
                (y.unsafeBase + i * rowBytes).copyMemory(from: data.unsafeBase + r * rowBytes, byteCount: rowBytes)
            }
            return [y]
        case .globalAveragePool:
            guard let x = float(0), x.rank >= 3 else { return nil }
            let spatial = x.shape[2...].reduce(1, *)
            guard spatial > 0 else { return nil }
            let y = NDArray(uninitializedShape: Array(x.shape[..<2]) + [Int](repeating: 1, count: x.rank - 2), scalarType: .float32)
            kiln_f32_global_average_pool__scalar(x.shape[0] * x.shape[1], spatial, f32(x), f32(y))
            return [y]
        }
    }

    static func unary(_ vector: Bool, _ code: Int32, _ n: Int, _ x: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>,
                      _ alpha: Float, _ beta: Float) {
        #if arch(x86_64)
        if vector { return kiln_f32_unary__avx2(code, n, x, y, alpha, beta) }
        #endif
        kiln_f32_unary__scalar(code, n, x, y, alpha, beta)
    }

    static func depthwise(_ vector: Bool, _ h: Int, _ w: Int, _ x: UnsafePointer<Float>, _ kh: Int, _ kw: Int,
                          _ weight: UnsafePointer<Float>, _ window: OpSet.Window, _ pt: Int, _ pl: Int, _ oh: Int, _ ow: Int,
                          _ y: UnsafeMutablePointer<Float>, _ e: UnsafePointer<kiln_epilogue>) {
        let (sh, sw, dh, dw) = (window.strides[0], window.strides[1], window.dilations[0], window.dilations[1])
        #if arch(x86_64)
        if vector { return kiln_f32_dwconv2d__avx2(1, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e) }
        #endif
        kiln_f32_dwconv2d__scalar(1, h, w, x, kh, kw, weight, sh, sw, dh, dw, pt, pl, oh, ow, y, e)
    }

    /// Broadcasting binary op: dims merged where both operands stay regular, then one kernel
    /// call per remaining outer index.
    private func binary(_ code: Int32, _ x: NDArray, _ z: NDArray) throws -> NDArray? {
        let rank = max(x.rank, z.rank)
        let xs = [Int](repeating: 1, count: rank - x.rank) + x.shape, zs = [Int](repeating: 1, count: rank - z.rank) + z.shape
        var shape: [Int] = []
        for (a, b) in zip(xs, zs) {
            guard a == b || a == 1 || b == 1 else { throw OpError("shapes \(x.shape) and \(z.shape) do not broadcast") }
            shape.append(a == 1 ? b : a)
        }
        func strides(_ s: [Int]) -> [Int] {
            var out = [Int](repeating: 0, count: rank), acc = 1
            for i in (0 ..< rank).reversed() {
                out[i] = s[i] == 1 ? 0 : acc
                acc *= s[i]
            }
            return out
        }
        var dims: [(size: Int, xs: Int, zs: Int)] = []
        for (i, (n, (a, b))) in zip(shape, zip(strides(xs), strides(zs))).enumerated() where n != 1 || i == rank - 1 {
            if n == 1 { dims.append((1, 0, 0)); continue }
            if let last = dims.last, last.size != 1, last.xs == a * n, last.zs == b * n {
                dims[dims.count - 1] = (last.size * n, a, b)
            } else {
                dims.append((n, a, b))
            }
        }
        if dims.isEmpty { dims = [(1, 0, 0)] }
        let y = NDArray(uninitializedShape: shape, scalarType: .float32)
        let count = y.elementCount
        guard count > 0 else { return y }
        let inner = dims[dims.count - 1]
        let outer = dims.count >= 2 ? dims[dims.count - 2] : (size: 1, xs: 0, zs: 0)
        let rest = Array(dims.dropLast(2))
        let restCount = rest.reduce(1) { $0 * $1.size }
        let px = x.unsafeBase.assumingMemoryBound(to: Float.self), pz = z.unsafeBase.assumingMemoryBound(to: Float.self)
        let py = y.unsafeBase.assumingMemoryBound(to: Float.self)
        let block = outer.size * inner.size
        for r in 0 ..< restCount {
            var rem = r, xo = 0, zo = 0
            for d in rest.reversed() {
                let i = rem % d.size
                rem /= d.size
                xo += i * d.xs
                zo += i * d.zs
            }
            kiln_f32_binary__scalar(code, outer.size, inner.size, px + xo, outer.xs, inner.xs, pz + zo, outer.zs, inner.zs, py + r * block)
        }
        return y
    }
}

extension PackedGEMM {
    init(b: kiln_packed_b, ukernel: kiln_f32_gemm_ukernel, mr: Int, storage: [ByteStorage]) {
        self.b = b
        self.ukernel = ukernel
        self.mr = mr
        self.storage = storage
    }
}

/// Accumulated nanoseconds per step, for `KILN_PROFILE`.
final class StepProfile: @unchecked Sendable {
    private var nanoseconds: [UInt64]
    private var runs = 0
    private let lock = NSLock()

    init(_ count: Int) { nanoseconds = [UInt64](repeating: 0, count: count) }

    func add(_ step: Int, _ ns: UInt64) {
        lock.lock()
        nanoseconds[step] += ns
        if step == 0 { runs += 1 }
        lock.unlock()
    }

    func report(_ names: [String]) {
        let total = max(nanoseconds.reduce(0, +), 1)
        var lines = "profile: \(runs) runs, \(String(format: "%.3f", Double(total) / 1e6 / Double(max(runs, 1)))) ms per run\n"
        for (i, ns) in nanoseconds.enumerated().sorted(by: { $0.1 > $1.1 }).prefix(25) {
            lines += String(format: "  %6.2f%%  %8.3f ms  ", Double(ns) * 100 / Double(total), Double(ns) / 1e6 / Double(max(runs, 1))) + names[i] + "\n"
        }
        FileHandle.standardError.write(Data(lines.utf8))
    }
}
