import KilnFormat

/// Compiles portable models into per-architecture artifacts.
public enum Compiler {
    /// The passes, by name. Pipelines list these names.
    public static let passes: [String: any CompilerPass] = [
        DeadCodeElimination.name: DeadCodeElimination(),
        ConstantFolding.name: ConstantFolding(),
        IntegerLowering.name: IntegerLowering(),
        GemmCanonicalization.name: GemmCanonicalization(),
        GeluFusion.name: GeluFusion(),
        HardSwishFusion.name: HardSwishFusion(),
        AttentionFusion.name: AttentionFusion(),
        BatchNormFolding.name: BatchNormFolding(),
        ScaleFolding.name: ScaleFolding(),
        SpatialLifting.name: SpatialLifting(),
        DeadTapPruning.name: DeadTapPruning(),
        EpilogueFusion.name: EpilogueFusion(),
        ProjectionFusion.name: ProjectionFusion(),
        ChannelsLastLayout.name: ChannelsLastLayout(),
        PadFolding.name: PadFolding(),
        ResidualFusion.name: ResidualFusion(),
        Lowering.name: Lowering(),
    ]

    /// The default pipeline: clean up, fold, run integer convolutions and matmuls on the float32
    /// kernels, make every `gemm` a `linear` or `matmul`, recognize GELU, hard swish and attention, fold batch norms and scalar scales into convolutions, run 1-D convolutions as
    /// 2-D ones, drop window taps that read only padding, fuse epilogues, merge
    /// projections of one input, choose the layout, fold pads, fuse residuals and the activations
    /// the layout made adjacent (once the ops the layout left without readers are gone), lower.
    public static let defaultPipeline = [
        DeadCodeElimination.name, ConstantFolding.name, IntegerLowering.name, GemmCanonicalization.name, GeluFusion.name, HardSwishFusion.name, AttentionFusion.name, BatchNormFolding.name, ScaleFolding.name, SpatialLifting.name, DeadTapPruning.name,
        EpilogueFusion.name, ProjectionFusion.name, ChannelsLastLayout.name, PadFolding.name, ResidualFusion.name, DeadCodeElimination.name, EpilogueFusion.name, DeadCodeElimination.name, Lowering.name,
    ]

    /// What to compile for.
    public struct Options: Sendable {
        /// The target.
        public var arch: Architecture
        /// The oldest runtime allowed to load the artifact.
        public var minimumRuntime: RuntimeVersion = CompiledFormat.runtimeVersion
        /// Pass names, in order; must end with lowering.
        public var pipeline: [String] = Compiler.defaultPipeline

        /// Options for `arch` with the defaults.
        /// - Parameter arch: The target.
        public init(arch: Architecture) { self.arch = arch }

        /// SHA-256 of the options, as recorded in the artifact header.
        public var digest: [UInt8] {
            let text = "arch=\(arch.name);min_runtime=\(minimumRuntime);pipeline=\(pipeline.joined(separator: ","))"
            return Array(text.utf8).withUnsafeBytes { SHA256.hash($0) }
        }
    }

    /// Compiles `model`.
    /// - Parameters:
    ///   - model: A validated portable model.
    ///   - options: Target and pipeline.
    ///   - sourceDigest: SHA-256 of the source package.
    /// - Returns: The artifact's header and plan.
    /// - Throws: ``CompileError`` for an unknown pass or a model that cannot be compiled.
    public static func compile(_ model: PortableModel, options: Options, sourceDigest: [UInt8]) throws -> (ArtifactHeader, CompiledPlan) {
        let unknown = options.pipeline.filter { passes[$0] == nil }
        guard unknown.isEmpty else { throw CompileError("unknown pass \(unknown.map { "'\($0)'" }.joined(separator: ", ")); passes: \(passes.keys.sorted().joined(separator: ", "))") }
        guard options.pipeline.last == Lowering.name else { throw CompileError("a pipeline must end with '\(Lowering.name)'") }
        guard options.minimumRuntime >= CompiledFormat.oldestCompatibleRuntime else {
            throw CompileError("minimum runtime version must be at least \(CompiledFormat.oldestCompatibleRuntime): older runtimes cannot read this compiler's plans (format \(CompiledFormat.currentVersion))")
        }
        var unit = CompilationUnit(model: model, arch: options.arch)
        unit.minimumRuntime = options.minimumRuntime
        for name in options.pipeline { try passes[name]!.apply(to: &unit) }
        var plan = try MemoryPlanning.plan(unit)
        plan.source = SourceSummary(model)
        let header = ArtifactHeader(arch: options.arch.name, minimumRuntime: options.minimumRuntime,
                                    compilerVersion: CompiledFormat.compilerVersion, sourceDigest: sourceDigest,
                                    optionsDigest: options.digest)
        return (header, plan)
    }
}
