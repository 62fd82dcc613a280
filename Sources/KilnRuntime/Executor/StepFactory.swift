@preconcurrency import CKilnKernels
import KilnCompiler
import KilnFormat
import KilnReference

/// Prepares the step a plan names: the kernel's family decides the step type, which checks
/// once that the op, its config (layout, epilogue, packed weight), its weights and this host
/// fit it. A mismatch fails loading.
enum StepFactory {
    /// The layouts and packed-weight layouts each family runs (families not listed: channels-first, weights as stored).
    static let layouts: [KernelFamily: (tensors: Set<StepConfig.Layout>, weights: Set<StepConfig.WeightLayout>)] = [
        .reference: (Set(StepConfig.Layout.allCases), [.asStored]),
        .gemm: ([.channelsFirst], [.panels, .transposedPanels]),
        .conv2d: ([.channelsFirst], [.channelsFirstRows]),
        .conv2dNCHW: ([.channelsFirst], [.rowTiles]),
        .conv2dNHWC: ([.channelsLast, .planesToChannelsLast], [.channelsLastRows, .channelsFirstRows, .groupPanels]),
        .conv2dWinograd: ([.channelsLast], [.winograd]),
        .depthwiseNHWC: ([.channelsLast], [.taps]),
        .pool2dNHWC: ([.channelsLast], [.asStored]),
        .integerGEMM: ([.channelsFirst], [.s8Panels]),
    ]

    /// Families whose kernels apply a fused activation.
    static let epilogues: Set<KernelFamily> = [.reference, .gemm, .conv2d, .conv2dNCHW, .conv2dNHWC, .conv2dWinograd, .depthwiseNHWC, .depthwise]

    /// The step for `id` running `op` as `config` says.
    /// - Parameters:
    ///   - id: The plan's kernel.
    ///   - op: The step's op.
    ///   - config: The step's configuration.
    ///   - inputs: The op's input slots (−1 for an omitted optional input).
    ///   - weights: The weight of each slot that holds one.
    ///   - constants: The decoded value of each slot that holds a weight.
    ///   - threads: The worker count.
    /// - Returns: The prepared step.
    /// - Throws: `OpError` when the kernel does not fit the op, its config, its weights or this host.
    static func make(_ id: KernelID, _ op: KilnFormat.Operation, _ config: StepConfig, inputs: [Int], weights: [Int: Weight],
                     constants: [Int: NDArray], threads: Int) throws -> any StepKernel {
        guard id.family == .reference || id.isa.isRunnableOnHost else { throw OpError("this host cannot run \(id.isa.rawValue) kernels") }
        let fits = layouts[id.family] ?? ([.channelsFirst], [.asStored])
        guard fits.tensors.contains(config.layout), fits.weights.contains(config.weightLayout),
              config.activation == nil || epilogues.contains(id.family) else {
            throw OpError("the step's config (\(config.isPortable ? "portable: channels-first, no epilogue, weight as stored" : config.description)) does not fit kernel \(id); compile the package again")
        }
        if let ops = id.family.ops, !ops.contains(op.opType) { throw OpError("cannot run \(op.opType)") }
        let step = StepOperands(id: id, op: op, config: config, inputs: inputs, weights: weights, constants: constants)
        switch id.family {
        case .reference: return ReferenceStep(kernel: try LoweredReference(op, config), fallback: nil)
        case .generate: return GenerateStep(id: id, routine: ReferenceStep(kernel: try LoweredReference(op, config), fallback: nil))
        case .gemm: return GEMMStep(id: id, op: op, gemm: try PackedGEMM(weight: try step.weight(1), kernel: id), epilogue: try step.epilogue())
        case .conv2d, .conv2dNHWC, .conv2dWinograd, .depthwiseNHWC, .conv2dNCHW, .depthwise: return try convolution(step)
        case .pool2dNHWC: return try Pool2DNHWCStep(id: id, op: op)
        case .matmul:
            let (uk, tile) = try step.microkernel()
            return MatMulStep(id: id, ukernel: uk, tile: tile)
        case .dft:
            let (uk, tile) = try step.microkernel()
            return DFTStep(id: id, op: op, ukernel: uk, tile: tile)
        case .unary: return try UnaryStep(id: id, op: op)
        case .binary: return try BinaryStep(id: id, op: op)
        case .select: return SelectStep(id: id, op: op)
        case .cast: return CastStep(id: id, op: op)
        case .map: return MapStep(id: id, op: op)
        case .softmax: return SoftmaxStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .layerNorm: return LayerNormStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .attention: return try AttentionStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .rotary: return RotaryStep(id: id, op: op)
        case .reduce:
            guard ReduceStep.codes[op.opType] != nil else { throw OpError("cannot run \(op.opType)") }
            return ReduceStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .argReduce: return ArgReduceStep(id: id, op: op)
        case .pool2d: return try Pool2DStep(id: id, op: op)
        case .globalPool: return GlobalPoolStep(id: id, op: op)
        case .gather: return GatherStep(id: id, op: op)
        case .copy: return CopyStep(id: id, op: op)
        case .view: return ViewStep(id: id)
        case .resize: return try ResizeStep(id: id, op: op)
        case .convTranspose:
            let (uk, tile) = try step.microkernel()
            return try ConvTransposeStep(id: id, op: op, weight: try step.constant(1), ukernel: uk, tile: tile)
        case .recurrent:
            let (uk, tile) = try step.microkernel()
            return try RecurrentStep(id: id, op: op, constants: constants, inputs: inputs, ukernel: uk, tile: tile)
        case .batchNorm: return BatchNormStep(id: id, op: op)
        case .instanceNorm: return InstanceNormStep(id: id, op: op)
        case .topK: return TopKStep(id: id, op: op)
        case .gatherND: return GatherNDStep(id: id, op: op)
        case .scatterND: return ScatterNDStep(id: id, op: op)
        case .elementIndex: return op.opType == "gather_elements" ? GatherElementsStep(id: id, op: op) : ScatterElementsStep(id: id, op: op)
        case .cumulative: return CumulativeStep(id: id, op: op)
        case .assume: return AssumeStep(id: id, op: op)
        case .nonZero: return NonZeroStep(id: id, op: op)
        case .nms: return try NonMaxSuppressionStep(id: id, op: op)
        case .dynamicQuantize: return DynamicQuantizeStep(id: id, op: op)
        case .integerGEMM: return try IntegerGEMMStep(id: id, op: op, weight: try step.weight(1))
        case .controlFlow: throw OpError("control flow is prepared with its bodies")
        }
    }

    /// The step of a convolution family: its packed or reordered weight checked against the config.
    static func convolution(_ step: StepOperands) throws -> any StepKernel {
        let (id, op, config) = (step.id, step.op, step.config)
        switch id.family {
        case .conv2d:
            // The packed weight is [K, N]; the window's size is the step config's.
            return PackedConvStep(id: id, op: op, gemm: try PackedGEMM(weight: try step.weight(1), kernel: id), epilogue: try step.epilogue(),
                                  window: try step.configuredWindow())
        case .conv2dNHWC:
            let groups = try op.attributes.int("group", 1)
            guard (groups > 1) == (config.weightLayout == .groupPanels) else {
                throw OpError("a conv of \(groups) group\(groups == 1 ? "" : "s") with weight layout \(config.weightLayout.name); compile the package again")
            }
            if groups > 1 {
                let (gemms, stacked) = try groupGEMMs(step, groups: groups)
                return try ConvNHWCStep(id: id, op: op, groups: gemms, weight: stacked, epilogue: try step.epilogue(),
                                        window: try step.configuredWindow(), layout: config.layout)
            }
            return try ConvNHWCStep(id: id, op: op, gemm: try PackedGEMM(weight: try step.weight(1), kernel: id), epilogue: try step.epilogue(),
                                    window: try step.configuredWindow(), layout: config.layout)
        case .conv2dWinograd:
            let w = try step.weight(1)
            return try WinogradNHWCStep(id: id, op: op, weight: w, stacked: try WeightDecoding.dense(w), epilogue: try step.epilogue())
        case .depthwiseNHWC:
            return try DepthwiseNHWCStep(id: id, op: op, weight: try step.constant(1), epilogue: try step.epilogue())
        case .conv2dNCHW:
            let (w, packed) = (try step.weight(1), try step.constant(1))
            let groups = try op.attributes.int("group", 1)
            guard w.shape.count == 4 else { throw OpError("needs a 4-D weight") }
            let (uk, tile) = try step.microkernel()
            guard groups >= 1, w.shape[0] % groups == 0,
                  packed.shape == [groups, (w.shape[0] / groups + tile.mr - 1) / tile.mr, w.shape[1] * w.shape[2] * w.shape[3], tile.mr] else {
                throw OpError("weight '\(w.name)' is not packed in row tiles of \(tile.mr) for \(groups) groups (blob \(packed.shape)); compile the package again")
            }
            return ConvNCHWStep(id: id, op: op, weight: packed, weightShape: w.shape, epilogue: try step.epilogue(),
                                window: try OpSet.Window(op.attributes, kernel: Array(w.shape[2...])), ukernel: uk, tile: tile)
        default:
            let w = try step.constant(1)
            guard w.rank == 4 else { throw OpError("needs a 4-D weight") }
            return DepthwiseStep(id: id, op: op, weight: w, epilogue: try step.epilogue(), window: try OpSet.Window(op.attributes, kernel: Array(w.shape[2...])))
        }
    }

    /// Every group's panels in one blob `[groups, panels, K, nr]`: one packed B per group.
    static func groupGEMMs(_ step: StepOperands, groups: Int) throws -> (gemms: [PackedGEMM], stacked: NDArray) {
        let w = try step.weight(1)
        let stacked = try WeightDecoding.dense(w)
        let (uk, tile) = try step.microkernel()
        guard w.shape.count == 4, w.shape[0] % groups == 0 else { throw OpError("needs a 4-D weight") }
        let (m, k) = (w.shape[0] / groups, w.shape[1] * w.shape[2] * w.shape[3])
        let panels = (m + tile.nr - 1) / tile.nr
        guard stacked.scalarType == .float32, stacked.shape == [groups, panels, k, tile.nr] else {
            throw OpError("weight '\(w.name)' is not packed per group in panels of \(tile.nr) (blob \(stacked.shape)); compile the package again")
        }
        let gemms = (0 ..< groups).map { g -> PackedGEMM in
            var b = kiln_packed_b()
            b.kind = Int32(KILN_B_F32); b.k = k; b.n = m; b.nr = tile.nr
            b.data = UnsafeRawPointer(stacked.unsafeBase + g * panels * k * tile.nr * 4)
            return PackedGEMM(b: b, ukernel: uk, mr: tile.mr)
        }
        return (gemms, stacked)
    }
}

/// What a step is made from: its kernel, op, config and the weights among its inputs.
struct StepOperands {
    let id: KernelID
    let op: KilnFormat.Operation
    let config: StepConfig
    let inputs: [Int]
    let weights: [Int: Weight]
    let constants: [Int: NDArray]

    /// The weight at input `i`.
    func weight(_ i: Int) throws -> Weight {
        guard i < inputs.count, let w = weights[inputs[i]] else { throw OpError("needs a weight as input \(i)") }
        return w
    }

    /// The decoded float32 weight at input `i`.
    func constant(_ i: Int) throws -> NDArray {
        guard i < inputs.count, let c = constants[inputs[i]], c.scalarType == .float32 else { throw OpError("needs a float32 weight as input \(i)") }
        return c
    }

    /// The C epilogue of the config's fused activation.
    func epilogue() throws -> kiln_epilogue { try KilnRuntime.epilogue(config) }

    /// The window of a convolution whose packed weight no longer shows it (the config's).
    func configuredWindow() throws -> OpSet.Window {
        guard config.window.count == 2 else { throw OpError("needs a 2-D window in its config") }
        return try OpSet.Window(op.attributes, kernel: config.window)
    }

    /// This host's microkernel of the kernel's tile.
    func microkernel() throws -> (ukernel: kiln_f32_gemm_ukernel, tile: GEMMTile) {
        guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available") }
        return (uk, tile)
    }
}
