import CKilnKernels
import KilnFormat

/// Chooses the kernel of every operation for the target arch (a ``KernelID`` of the family
/// that fits the op and its element types, in the variant the arch runs) and packs GEMM
/// weights in that arch's panel layout.
///
/// Before: `y = linear(x, W[N, K], b)` — after: `y = linear(x, W@packed[K, N], b)` run by
/// `f32_gemm_6x16__avx2`, where `W@packed` holds Wᵀ's panels of 16 columns (the step config
/// says `transposedPanels`). Operations no family fits (rare ops, unusual element types) run
/// the portable op set's `reference` kernel.
public struct Lowering: CompilerPass {
    /// `lowering`.
    public static let name = "lowering"

    /// Creates the pass.
    public init() {}

    /// The registry's groups that lower to one family each.
    static let arithmetic = OpSet.ops(in: .arithmetic), comparisons = OpSet.ops(in: .comparison), logic = OpSet.ops(in: .logical)
    /// Reductions the compiled reduce kernel runs (kiln_reduce.inc; the others of the op set run the reference kernel).
    static let reduceKernels = Set(OpSet.reduceNames.filter { kiln_reduce_code($0) != 0 })
    /// Reductions the reduce family runs on int64 and int32 too (wrapping as two's complement, as onnxruntime's do).
    package static let integerReductions: Set<String> = ["reduce_min", "reduce_max", "reduce_sum", "reduce_prod"]
    static let copies = OpSet.ops(in: .copy), views = OpSet.ops(in: .view), generators = OpSet.ops(in: .generator)
    static let castable: Set<DataType> = [.float32, .float64, .int64, .int32, .int8, .uint8, .bool]

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be packed.
    public func apply(to unit: inout CompilationUnit) throws {
        let arch = unit.arch
        var packed: [String: String] = [:] // (weight + orientation) -> packed name
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var types: [String: TensorType] = [:]
            for a in f.inputs { types[a.name] = a.type }
            for op in f.operations { for o in op.outputs { types[o.name] = o.type } }
            func type(_ v: String) -> TensorType? { types[v] ?? unit.weight(v)?.type }
            var kernels: [KernelID] = []
            for (i, op) in f.operations.enumerated() {
                let config = unit.config(of: op, in: f.name)
                var family = family(op, config, unit, type)
                // A family newer than the oldest runtime allowed to load the artifact: the reference kernel.
                if family.sinceRuntime > unit.minimumRuntime { family = .reference }
                /// Makes input 1 the weight packed by `make` in `layout`, once per `key` for the whole model.
                func repack(_ w: Weight, key: String, _ layout: StepConfig.WeightLayout, window: [Int] = [], _ make: (String) throws -> Weight) throws {
                    unit.configure(op, in: f.name) {
                        $0.weightLayout = layout
                        $0.window = window
                    }
                    if let existing = packed[key] {
                        f.operations[i].inputs[1] = existing
                        return
                    }
                    let name = unit.freshWeightName("\(w.name)@packed")
                    do {
                        unit.model.weights.append(try make(name))
                    } catch let e as CompileError {
                        throw CompileError("op '\(op.name)': \(e.reason)")
                    }
                    packed[key] = name
                    f.operations[i].inputs[1] = name
                }
                let nr = arch.gemm.tile.nr
                if family == .conv2dWinograd, let w = unit.weight(op.inputs[1]) {
                    // U = G g Gᵀ per channel pair, as 16 B operands [16, panels, C, nr].
                    try repack(w, key: "\(w.name)|winograd|\(nr)", .winograd, window: [3, 3]) { try WeightPacking.packWinograd(w, name: $0, nr: nr) }
                } else if family == .depthwiseNHWC, let w = unit.weight(op.inputs[1]) {
                    // Taps outer, channels inner: [kh, kw, C], the vector kernel's order.
                    try repack(w, key: "\(w.name)|taps", .taps) { try WeightPacking.packTaps(w, name: $0) }
                } else if family == .conv2dNHWC, let w = unit.weight(op.inputs[1]), let groups = try? op.attributes.int("group", 1), groups > 1 {
                    // Per group the channels-last GEMM's B: [groups, panels, K, nr].
                    try repack(w, key: "\(w.name)|groups\(groups)|\(nr)", .groupPanels, window: Array(w.shape[2...])) {
                        try WeightPacking.packGroups(w, name: $0, groups: groups, nr: nr)
                    }
                } else if family == .gemm || family == .conv2d || family == .conv2dNHWC, let w = unit.weight(op.inputs[1]),
                          let o = orientation(op, w, config.layout) {
                    let window = op.opType == "conv" ? Array(w.shape[2...]) : []
                    try repack(w, key: "\(w.name)|\(o.layout.rawValue)|\(nr)", o.layout, window: window) { try WeightPacking.pack(w, name: $0, o.orientation, nr: nr) }
                } else if family == .gemm || family == .conv2d || family == .conv2dNHWC {
                    family = .reference
                } else if family == .integerGEMM, let w = unit.weight(op.inputs[1]) {
                    // int8 panels of four k per column entry, the column sums and zero points before them.
                    let zero = op.inputs.count > 3 && !op.inputs[3].isEmpty ? unit.weight(op.inputs[3]) : nil
                    try repack(w, key: "\(w.name)|s8|\(zero?.name ?? "")", .s8Panels) { try WeightPacking.packS8Panels(w, zero: zero, name: $0) }
                } else if family == .conv2dNCHW, let w = unit.weight(op.inputs[1]) {
                    // The weight is the GEMM's A: packed once, in row tiles of the arch's microkernel.
                    let groups = (try? op.attributes.int("group", 1)) ?? 1, mr = arch.gemm.tile.mr
                    try repack(w, key: "\(w.name)|rows\(groups)|\(mr)", .rowTiles) { try WeightPacking.packRows(w, name: $0, groups: groups, mr: mr) }
                }
                kernels.append(arch.kernel(family))
            }
            unit.model.functions[fi] = f
            unit.kernels[f.name] = kernels
        }
    }

    /// Whether a channels-last convolution runs as Winograd F(2×2, 3×3): a dense float weight of a
    /// 3×3 window at stride 1 without dilation, at least 16 input and output channels and 48 of
    /// both together (below that the transforms cost what the products save), and, when the
    /// output's spatial size is known, at least 32 tiles of 2×2 pixels. Measured on one core with
    /// AVX-512 against the direct indirect-GEMM kernel running at about 95% of FMA peak: 1.2×
    /// faster at 16→32 and 24→24 channels, 1.5× at 32→32 (80×80), 1.6× at 56×56×64, 1.9–2.0× at
    /// 128 and 256 channels; 16→16 is no faster. On a 7×7 map (16 tiles) the transformed weight,
    /// 16/9 of the direct one, is streamed from memory for few rows: a ResNet's 512-channel 7×7
    /// layers ran slower on 2 threads, so such maps stay direct.
    func winograd(_ op: Operation, _ w: Weight, _ x: TensorType?, _ y: TensorType) -> Bool {
        guard case .dense = w.encoding, w.dtype == .float32, w.shape.count == 4, w.shape[2] == 3, w.shape[3] == 3,
              w.shape[0] >= 16, w.shape[1] >= 16, w.shape[0] + w.shape[1] >= 48, x?.rank == 4, y.rank == 4,
              let window = try? OpSet.Window(op.attributes, kernel: [3, 3]), window.strides == [1, 1], window.dilations == [1, 1],
              (try? op.attributes.int("group", 1)) == 1 else { return false }
        if case .size(let oh) = y.shape[1], case .size(let ow) = y.shape[2] { return (oh + 1) / 2 * ((ow + 1) / 2) >= 32 }
        return true
    }

    /// The kernel family that runs `op` on this unit, `reference` when none fits.
    func family(_ op: Operation, _ config: StepConfig, _ unit: CompilationUnit, _ type: (String) -> TensorType?) -> KernelFamily {
        let outputs = op.outputs.map(\.type)
        let float = outputs.count == 1 && outputs[0].dtype == .float32
        let inputTypes = op.inputs.map { $0.isEmpty ? nil : type($0) }
        func input(_ i: Int) -> TensorType? { i < inputTypes.count ? inputTypes[i] : nil }
        let notSubByte = (inputTypes.compactMap { $0 } + outputs).allSatisfy { !$0.dtype.isSubByte }
        if let family = indexingFamily(op, input, outputs: outputs, notSubByte: notSubByte) { return family }
        switch op.opType {
        case "conv":
            guard float, op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4,
                  input(0)?.dtype == .float32, let group = try? op.attributes.int("group", 1) else { return .reference }
            if config.layout.output {
                let layout = config.layout
                if depthwise(op, unit, multiplier: true) { return layout.input ? .depthwiseNHWC : .reference }
                if group == 1, layout.input, winograd(op, w, input(0), outputs[0]) { return .conv2dWinograd }
                if group == 1 { return .conv2dNHWC }
                guard layout.input, case .dense = w.encoding, unit.arch.kernel(.conv2dNHWC).hasIndirectMicrokernel else { return .reference }
                return .conv2dNHWC
            }
            if depthwise(op, unit) { return .depthwise }
            if case .dense = w.encoding { return .conv2dNCHW }
            return group == 1 ? .conv2d : .reference
        case "linear", "matmul":
            guard float, op.inputs.count >= 2, input(0)?.dtype == .float32 else { return .reference }
            if let w = unit.weight(op.inputs[1]), orientation(op, w, config.layout) != nil { return .gemm }
            return op.opType == "matmul" && op.inputs.count == 2 && input(1)?.dtype == .float32 ? .matmul : .reference
        case _ where Lowering.arithmetic.contains(op.opType):
            guard op.inputs.count == 2, let x = input(0), input(1)?.dtype == x.dtype, [.float32, .int64, .int32].contains(x.dtype),
                  x.dtype == .float32 || op.opType != "pow" else { return .reference }
            // Mod: fmod semantics for floats (fmod = 1 required), floored for integers (fmod = 0).
            if op.opType == "mod", ((try? op.attributes.int("fmod", 0)) == 1) != (x.dtype == .float32) { return .reference }
            return .binary
        case _ where Lowering.comparisons.contains(op.opType):
            guard op.inputs.count == 2, let x = input(0), input(1)?.dtype == x.dtype,
                  [.float32, .int64, .int32].contains(x.dtype) || (x.dtype == .bool && op.opType == "equal") else { return .reference }
            return .binary
        case _ where Lowering.logic.contains(op.opType):
            return input(0)?.dtype == .bool && input(1)?.dtype == .bool ? .binary : .reference
        case "where":
            return notSubByte && input(0)?.dtype == .bool ? .select : .reference
        case "cast":
            guard let x = input(0), let to = outputs.first?.dtype else { return .reference }
            return (Lowering.castable.contains(x.dtype) || x.dtype == .float16 && to == .float32) && Lowering.castable.contains(to) ? .cast : .reference
        case "dft":
            // Along the axis before the complex dim (the default), its axis an attribute.
            let a = op.attributes
            guard float, input(0)?.dtype == .float32, let rank = input(0)?.rank, rank >= 2, op.inputs.count < 3 || op.inputs[2].isEmpty,
                  let axis = try? OpSet.normalize(axis: (try? a.int("axis", -2)) ?? -2, rank: rank), axis == rank - 2,
                  !((try? a.int("inverse", 0)) != 0 && (try? a.int("onesided", 0)) != 0) else { return .reference }
            return .dft
        case "stft":
            return float && input(0)?.dtype == .float32 ? .dft : .reference
        case "matmul_integer":
            return Lowering.integerGEMMFits(op, unit, type) ? .integerGEMM : .reference
        case "conv_transpose":
            guard float, op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4, input(0)?.rank == 4 else { return .reference }
            return .convTranspose
        case _ where KernelFamily.recurrent.ops?.contains(op.opType) == true:
            // Every weight, scale and zero point a constant (the quantized LSTM's at inputs 8–11).
            let weights = op.opType == "dynamic_quantize_lstm" ? [1, 2, 8, 9, 10, 11] : [1, 2]
            guard input(0)?.dtype == .float32, op.inputs.count > weights.last!, weights.allSatisfy({ unit.weight(op.inputs[$0]) != nil }),
                  Lowering.recurrentFits(op) else {
                return .reference
            }
            return .recurrent
        case "resize":
            return float && input(0)?.dtype == .float32 ? .resize : .reference
        case "batch_norm":
            return float && op.outputs.count == 1 ? .batchNorm : .reference
        case "instance_norm":
            return float ? .instanceNorm : .reference
        case "softmax", "log_softmax":
            return float && input(0)?.dtype == .float32 ? .softmax : .reference
        case "layer_norm":
            guard float, input(0)?.dtype == .float32, let rank = input(0)?.rank, let axis = try? op.attributes.int("axis", -1),
                  axis == -1 || axis == rank - 1, op.inputs.count >= 2, input(1)?.dtype == .float32 else { return .reference }
            return .layerNorm
        case "rotary_embedding":
            let ids = input(3)?.dtype
            return float && (0 ... 2).allSatisfy({ input($0)?.dtype == .float32 }) && (ids == nil || ids == .int64 || ids == .int32) ? .rotary : .reference
        case "attention":
            return Lowering.attentionFits(op, unit, float: float, input) ? .attention : .reference
        case _ where Lowering.reduceKernels.contains(op.opType):
            if let x = input(0), [.int64, .int32].contains(x.dtype), Lowering.integerReductions.contains(op.opType),
               outputs.count == 1, outputs[0].dtype == x.dtype {
                return .reduce
            }
            return float && input(0)?.dtype == .float32 ? .reduce : .reference
        case "argmax", "argmin":
            return input(0)?.dtype == .float32 ? .argReduce : .reference
        case "max_pool", "average_pool":
            guard float, input(0)?.rank == 4, op.outputs.count == 1 else { return .reference }
            return config.layout.output ? .pool2dNHWC : .pool2d
        case "global_average_pool", "global_max_pool":
            return float && (input(0)?.rank ?? 0) >= 3 ? .globalPool : .reference
        case "gather":
            return notSubByte && [.int64, .int32].contains(input(1)?.dtype) ? .gather : .reference
        case "pad":
            // Every mode: constant fills, reflect, edge and wrap copy borders from the interior.
            let mode = (try? op.attributes.string("mode", "constant")) ?? ""
            return notSubByte && OpSet.padModes.contains(mode) ? .copy : .reference
        case _ where Lowering.copies.contains(op.opType):
            return notSubByte ? .copy : .reference
        case _ where Lowering.views.contains(op.opType):
            return notSubByte ? .view : .reference
        case _ where Lowering.generators.contains(op.opType):
            return notSubByte ? .generate : .reference
        case "clip":
            return float && input(0)?.dtype == .float32 ? .unary : .reference
        case _ where input(0).map { op.inputs.count == 1 && outputs.count == 1 && mapRuns(op, on: $0.dtype) } ?? false:
            // Predicates (is_nan, is_inf) and integer or boolean maps; float32 abs, neg and sign stay unary.
            return float && UnaryFunction.of(op) != nil ? .unary : .map
        default:
            guard float, input(0)?.dtype == .float32, let unary = UnaryFunction.of(op) else { return .reference }
            return unary.function == .identity ? .view : .unary
        }
    }

    /// The family of ops that index, count or branch (top_k, gather_nd, scatter_nd, gather_elements,
    /// scatter_elements, cumsum, assume, non_max_suppression, non_zero, control flow); `nil` for other ops.
    func indexingFamily(_ op: Operation, _ input: (Int) -> TensorType?, outputs: [TensorType], notSubByte: Bool) -> KernelFamily? {
        switch op.opType {
        case "top_k":
            return input(0)?.dtype == .float32 && outputs.count == 2 ? .topK : .reference
        case "gather_nd":
            return notSubByte && [.int64, .int32].contains(input(1)?.dtype) ? .gatherND : .reference
        case "scatter_nd":
            return notSubByte && [.int64, .int32].contains(input(1)?.dtype) ? .scatterND : .reference
        case "gather_elements", "scatter_elements":
            return notSubByte && [.int64, .int32].contains(input(1)?.dtype) ? .elementIndex : .reference
        case "cumsum":
            let axisGiven = op.attributes["axis"] != nil || [.int64, .int32].contains(input(1)?.dtype)
            return [.float32, .int64, .int32].contains(input(0)?.dtype) && axisGiven ? .cumulative : .reference
        case "assume":
            return notSubByte && input(1)?.dtype == .bool ? .assume : .reference
        case "non_max_suppression":
            return input(0)?.dtype == .float32 && input(1)?.dtype == .float32 ? .nms : .reference
        case "dynamic_quantize_linear":
            return input(0)?.dtype == .float32 ? .dynamicQuantize : .reference
        case "non_zero":
            return notSubByte && (input(0)?.rank ?? 0) > 0 ? .nonZero : .reference
        case _ where op.hasSubgraphs:
            return .controlFlow
        default:
            return nil
        }
    }

    struct Layout {
        var layout: StepConfig.WeightLayout
        var orientation: WeightPacking.Orientation
    }

    /// How the op reads its weight as B (K × N), when a packed GEMM runs it.
    func orientation(_ op: Operation, _ w: Weight, _ tensors: StepConfig.Layout) -> Layout? {
        switch op.opType {
        case "linear" where w.shape.count == 2:
            let (n, k) = (w.shape[0], w.shape[1])
            return Layout(layout: .transposedPanels, orientation: .init(k: k, n: n, flat: { kk, nn in nn * k + kk }))
        case "matmul" where w.shape.count == 2:
            let (k, n) = (w.shape[0], w.shape[1])
            return Layout(layout: .panels, orientation: .init(k: k, n: n, flat: { kk, nn in kk * n + nn }))
        case "conv" where w.shape.count == 4 && tensors.input:
            // Rows of the channels-last im2col: K in (ky, kx, c) order.
            guard (try? op.attributes.int("group", 1)) == 1 else { return nil }
            let (n, c, kh, kw) = (w.shape[0], w.shape[1], w.shape[2], w.shape[3])
            return Layout(layout: .channelsLastRows, orientation: .init(k: c * kh * kw, n: n, flat: { kk, nn in
                let (tap, ch) = kk.quotientAndRemainder(dividingBy: c)
                return ((nn * c + ch) * kh + tap / kw) * kw + tap % kw
            }))
        case "conv" where w.shape.count == 4:
            guard (try? op.attributes.int("group", 1)) == 1 else { return nil }
            let n = w.shape[0], k = w.shape[1] * w.shape[2] * w.shape[3]
            return Layout(layout: .channelsFirstRows, orientation: .init(k: k, n: n, flat: { kk, nn in nn * k + kk }))
        default:
            return nil
        }
    }

    /// One filter per input channel (groups = input channels); with `multiplier`, also m > 1
    /// filters per input channel (output channels = m × groups), which the channels-last kernel
    /// runs on the input's channels repeated m times: a grouped GEMM of one input channel per
    /// group ran those at 0.3–10 GFLOP/s.
    func depthwise(_ op: Operation, _ unit: CompilationUnit, multiplier: Bool = false) -> Bool {
        guard op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4, w.shape[1] == 1,
              let group = try? op.attributes.int("group", 1), group > 1 else { return false }
        return group == w.shape[0] || (multiplier && w.shape[0] % group == 0)
    }
}

extension Lowering {
    /// The compiled attention kernel's forms: float32 q, k, v, 3-D with as many key as query heads
    /// or (from runtime 0.8) 4-D [B, H, S, D], an explicit scale, an optional float32 additive
    /// mask, one output; the op's other forms run the reference kernel.
    static func attentionFits(_ op: Operation, _ unit: CompilationUnit, float: Bool, _ input: (Int) -> TensorType?) -> Bool {
        let a = op.attributes
        let rank = input(0)?.rank ?? 0
        let (qHeads, kvHeads) = ((try? a.int("q_num_heads", 0)) ?? 0, (try? a.int("kv_num_heads", 0)) ?? 0)
        let heads3D = rank == 3 && qHeads > 0 && kvHeads == qHeads
        let heads4D = rank == 4 && a["q_num_heads"] == nil && a["kv_num_heads"] == nil && unit.minimumRuntime >= RuntimeVersion(0, 8)
        return float && op.outputs.count == 1 && (3 ... 4).contains(op.inputs.count)
            && (0 ..< 3).allSatisfy({ input($0)?.dtype == .float32 && input($0)?.rank == rank })
            && (heads3D || heads4D) && a["scale"] != nil && Set(a.keys).isSubset(of: ["q_num_heads", "kv_num_heads", "scale"])
            && (op.inputs.count == 3 || op.inputs[3].isEmpty || (input(3)?.dtype == .float32 && (1 ... 4).contains(input(3)?.rank ?? 0)))
    }

    /// The recurrent kernel's forms: the default activations (sigmoid, tanh, tanh for the LSTM;
    /// sigmoid, tanh for the GRU), no clip, no coupled input-forget gate, layout 0.
    static func recurrentFits(_ op: Operation) -> Bool {
        let a = op.attributes
        let directions = (try? a.string("direction", "forward")) == "bidirectional" ? 2 : 1
        let defaults = Array(repeating: op.opType == "gru" ? ["sigmoid", "tanh"] : ["sigmoid", "tanh", "tanh"], count: directions).flatMap { $0 }
        let names: [String]?
        do { names = try a.strings("activations") } catch { return false }
        let activationsFit = (names?.map { $0.lowercased() } ?? defaults) == defaults
        return activationsFit && a["clip"] == nil && (try? a.int("input_forget", 0)) == 0 && (try? a.int("layout", 0)) == 0
    }
}
