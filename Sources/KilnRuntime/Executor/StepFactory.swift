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
    ]

    /// Families whose kernels apply a fused activation.
    static let epilogues: Set<KernelFamily> = [.reference, .gemm, .conv2d, .conv2dNCHW, .conv2dNHWC, .conv2dWinograd, .depthwiseNHWC, .depthwise]

    static func make(_ id: KernelID, _ op: KilnFormat.Operation, _ config: StepConfig, inputs: [Int], weights: [Int: Weight],
                     constants: [Int: NDArray], threads: Int) throws -> any StepKernel {
        guard id.family == .reference || id.isa.isRunnableOnHost else { throw OpError("this host cannot run \(id.isa.rawValue) kernels") }
        let fits = layouts[id.family] ?? ([.channelsFirst], [.asStored])
        guard fits.tensors.contains(config.layout), fits.weights.contains(config.weightLayout),
              config.activation == nil || epilogues.contains(id.family) else {
            throw OpError("the step's config (\(config.isPortable ? "portable: channels-first, no epilogue, weight as stored" : config.description)) does not fit kernel \(id); compile the package again")
        }
        func epilogue(_ op: KilnFormat.Operation) throws -> kiln_epilogue { try KilnRuntime.epilogue(config) }
        func expect(_ ops: Set<String>) throws {
            guard ops.contains(op.opType) else { throw OpError("cannot run \(op.opType)") }
        }
        func weight(_ i: Int) throws -> Weight {
            guard i < inputs.count, let w = weights[inputs[i]] else { throw OpError("needs a weight as input \(i)") }
            return w
        }
        func constant(_ i: Int) throws -> NDArray {
            guard i < inputs.count, let c = constants[inputs[i]], c.scalarType == .float32 else { throw OpError("needs a float32 weight as input \(i)") }
            return c
        }
        switch id.family {
        case .reference:
            return ReferenceStep(kernel: try LoweredReference(op, config), fallback: nil)
        case .gemm:
            try expect(["linear", "matmul"])
            return GEMMStep(id: id, op: op, gemm: try PackedGEMM(weight: try weight(1), kernel: id), epilogue: try epilogue(op))
        case .conv2d:
            try expect(["conv"])
            // The packed weight is [K, N]; the window's size is the step config's.
            guard config.window.count == 2 else { throw OpError("needs a 2-D window in its config") }
            return PackedConvStep(id: id, op: op, gemm: try PackedGEMM(weight: try weight(1), kernel: id), epilogue: try epilogue(op),
                                  window: try OpSet.Window(op.attributes, kernel: config.window))
        case .conv2dNHWC:
            try expect(["conv"])
            // The packed weight is [K, N]; the window's size is the step config's.
            guard config.window.count == 2 else { throw OpError("needs a 2-D window in its config") }
            let shape = config.window
            let groups = try op.attributes.int("group", 1)
            guard (groups > 1) == (config.weightLayout == .groupPanels) else {
                throw OpError("a conv of \(groups) group\(groups == 1 ? "" : "s") with weight layout \(config.weightLayout.name); compile the package again")
            }
            if groups > 1 {
                // Every group's panels in one blob [groups, panels, K, nr]: one packed B per group.
                let w = try weight(1)
                let stacked = try WeightDecoding.dense(w)
                guard let uk = id.microkernel, let tile = id.tile, w.shape.count == 4, w.shape[0] % groups == 0 else {
                    throw OpError("needs a 4-D weight and this host's microkernel")
                }
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
                return try ConvNHWCStep(id: id, op: op, groups: gemms, weight: stacked, epilogue: try epilogue(op),
                                        window: try OpSet.Window(op.attributes, kernel: shape), layout: config.layout)
            }
            return try ConvNHWCStep(id: id, op: op, gemm: try PackedGEMM(weight: try weight(1), kernel: id), epilogue: try epilogue(op),
                                    window: try OpSet.Window(op.attributes, kernel: shape), layout: config.layout)
        case .conv2dWinograd:
            try expect(["conv"])
            let w = try weight(1)
            return try WinogradNHWCStep(id: id, op: op, weight: w, stacked: try WeightDecoding.dense(w), epilogue: try epilogue(op))
        case .depthwiseNHWC:
            try expect(["conv"])
            return try DepthwiseNHWCStep(id: id, op: op, weight: try constant(1), epilogue: try epilogue(op))
        case .pool2dNHWC:
            try expect(["max_pool", "average_pool"])
            return try Pool2DNHWCStep(id: id, op: op)
        case .conv2dNCHW:
            try expect(["conv"])
            let (w, packed) = (try weight(1), try constant(1))
            let groups = try op.attributes.int("group", 1)
            guard w.shape.count == 4, let uk = id.microkernel, let tile = id.tile else { throw OpError("needs a 4-D weight and this host's microkernel") }
            guard groups >= 1, w.shape[0] % groups == 0,
                  packed.shape == [groups, (w.shape[0] / groups + tile.mr - 1) / tile.mr, w.shape[1] * w.shape[2] * w.shape[3], tile.mr] else {
                throw OpError("weight '\(w.name)' is not packed in row tiles of \(tile.mr) for \(groups) groups (blob \(packed.shape)); compile the package again")
            }
            return ConvNCHWStep(id: id, op: op, weight: packed, weightShape: w.shape, epilogue: try epilogue(op),
                                window: try OpSet.Window(op.attributes, kernel: Array(w.shape[2...])), ukernel: uk, tile: tile)
        case .matmul:
            try expect(["matmul"])
            guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available") }
            return MatMulStep(id: id, ukernel: uk, tile: tile)
        case .depthwise:
            try expect(["conv"])
            let w = try constant(1)
            guard w.rank == 4 else { throw OpError("needs a 4-D weight") }
            return DepthwiseStep(id: id, op: op, weight: w, epilogue: try epilogue(op), window: try OpSet.Window(op.attributes, kernel: Array(w.shape[2...])))
        case .unary:
            return try UnaryStep(id: id, op: op)
        case .binary:
            return try BinaryStep(id: id, op: op)
        case .select:
            try expect(["where"])
            return SelectStep(id: id, op: op)
        case .cast:
            try expect(["cast"])
            return CastStep(id: id, op: op)
        case .softmax:
            try expect(["softmax", "log_softmax"])
            return SoftmaxStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .layerNorm:
            try expect(["layer_norm"])
            return LayerNormStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .attention:
            try expect(["attention"])
            return try AttentionStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .reduce:
            try expect(Set(ReduceStep.codes.keys))
            return ReduceStep(id: id, op: op, kernels: NormalizationKernels(id.isa))
        case .argReduce:
            try expect(["argmax", "argmin"])
            return ArgReduceStep(id: id, op: op)
        case .pool2d:
            try expect(["max_pool", "average_pool"])
            return try Pool2DStep(id: id, op: op)
        case .globalPool:
            try expect(["global_average_pool", "global_max_pool"])
            return GlobalPoolStep(id: id, op: op)
        case .gather:
            try expect(["gather"])
            return GatherStep(id: id, op: op)
        case .copy:
            try expect(OpSet.ops(in: .copy))
            return CopyStep(id: id, op: op)
        case .view:
            try expect(OpSet.ops(in: .view))
            return ViewStep(id: id)
        case .resize:
            try expect(["resize"])
            return try ResizeStep(id: id, op: op)
        case .convTranspose:
            try expect(["conv_transpose"])
            guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available") }
            return try ConvTransposeStep(id: id, op: op, weight: try constant(1), ukernel: uk, tile: tile)
        case .recurrent:
            try expect(["lstm", "gru"])
            guard let uk = id.microkernel, let tile = id.tile else { throw OpError("microkernel \(id) is not available") }
            return try RecurrentStep(id: id, op: op, constants: constants, inputs: inputs, ukernel: uk, tile: tile)
        case .batchNorm:
            try expect(["batch_norm"])
            return BatchNormStep(id: id, op: op)
        case .instanceNorm:
            try expect(["instance_norm"])
            return InstanceNormStep(id: id, op: op)
        case .topK:
            try expect(["top_k"])
            return TopKStep(id: id, op: op)
        case .gatherND:
            try expect(["gather_nd"])
            return GatherNDStep(id: id, op: op)
        case .scatterND:
            try expect(["scatter_nd"])
            return ScatterNDStep(id: id, op: op)
        case .generate:
            try expect(OpSet.ops(in: .generator))
            return GenerateStep(id: id, routine: ReferenceStep(kernel: try LoweredReference(op, config), fallback: nil))
        }
    }
}
