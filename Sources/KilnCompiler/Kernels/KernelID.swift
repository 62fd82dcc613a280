import CKilnKernels
import KilnFormat

/// An instruction set a kernel variant is built for: a case of CKilnKernels' `KILN_ISAS` list,
/// mapped once by name (a test checks both lists agree).
public enum ISA: String, Sendable, Hashable, CaseIterable, Comparable {
    case scalar, avx2, avx512, neon

    /// The C code (`KILN_ISA_*`).
    package var code: Int32 { ISA.codes[self]! }

    private static let codes: [ISA: Int32] = Dictionary(uniqueKeysWithValues: (0 ..< Int32(KILN_ISA_COUNT)).compactMap { c in ISA(code: c).map { ($0, c) } })

    /// The ISA of a C code, or `nil`.
    package init?(code: Int32) {
        guard let name = kiln_isa_name(code) else { return nil }
        self.init(rawValue: String(cString: name))
    }

    /// Feature bits (`KILN_CPU_*`) a host needs to run this ISA's kernels.
    package var requiredFeatures: UInt32 { kiln_isa_features(code) }

    /// Whether this host runs the ISA's kernels (CPUID and OS-enabled state, detected once).
    public var isRunnableOnHost: Bool {
        switch self {
        case .scalar: return true
        case .avx2, .avx512:
            #if arch(x86_64)
            return kiln_cpu_features() & requiredFeatures == requiredFeatures
            #else
            return false
            #endif
        case .neon:
            #if arch(arm64)
            return kiln_cpu_features() & requiredFeatures == requiredFeatures
            #else
            return false
            #endif
        }
    }

    public static func < (a: ISA, b: ISA) -> Bool {
        allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
}

/// Rows × columns of a GEMM microkernel's output tile.
public struct GEMMTile: Sendable, Hashable, CustomStringConvertible {
    /// Rows of A per microkernel call.
    public let mr: Int
    /// Columns per packed panel of B.
    public let nr: Int

    /// `6x16`.
    public var description: String { "\(mr)x\(nr)" }
}

/// What a kernel computes. The raw value is the family's stem in wire names.
public enum KernelFamily: String, Sendable, Hashable, CaseIterable {
    /// `linear`/`matmul` on a weight packed in panels (tiled).
    case gemm = "f32_gemm"
    /// `conv` with a packed (possibly compressed) weight: im2col, then the GEMM (tiled).
    case conv2d = "f32_conv2d"
    /// Dense `conv`: the weight rows times the image's (im2col) panels (tiled).
    case conv2dNCHW = "f32_conv2d_nchw"
    /// Channels-last `conv` (one group): the image (im2col rows for windows wider than one pixel)
    /// times the weight packed in panels (tiled).
    case conv2dNHWC = "f32_conv2d_nhwc"
    /// Channels-last 3×3 stride-1 `conv` (one group) by Winograd F(2×2, 3×3): 16 GEMMs per block of
    /// 2×2 output tiles on the weight transformed and packed at compile time (tiled).
    case conv2dWinograd = "f32_conv2d_winograd"
    /// Channels-last depthwise `conv`: vectors along channels.
    case depthwiseNHWC = "f32_dwconv2d_nhwc"
    /// Channels-last `max_pool`/`average_pool` in 2-D: vectors along channels.
    case pool2dNHWC = "f32_pool2d_nhwc"
    /// `matmul` of two activations, B packed per run (tiled).
    case matmul = "f32_matmul"
    /// Depthwise `conv`.
    case depthwise = "f32_dwconv2d"
    /// Elementwise float32 functions (``UnaryFunction``).
    case unary = "f32_unary"
    /// Broadcasting arithmetic, comparisons and logic on float32, int64, int32 and bool.
    case binary = "binary"
    /// `where` with broadcasting.
    case select = "where"
    /// `cast` between numeric types.
    case cast = "cast"
    /// Predicates on floats and maps on integers and booleans (kiln_map.inc: is_nan, not, integer abs…).
    case map = "map"
    /// `softmax` and `log_softmax` on any axis.
    case softmax = "f32_softmax"
    /// `layer_norm` over the last axis.
    case layerNorm = "f32_layer_norm"
    /// `attention` over 3-D `[B, S, H·D]` or (runtime 0.8) 4-D `[B, H, S, D]` inputs with an
    /// additive float mask: per head, scores, softmax and the weighted values a block of query
    /// rows at a time on the GEMM microkernel, nothing else transposed.
    case attention = "f32_attention"
    /// `rotary_embedding` on float32: pairs of each head's features rotated by the cache row of
    /// the token's position (runtime 0.8).
    case rotary = "f32_rotary"
    /// `reduce_*` over contiguous axes.
    case reduce = "f32_reduce"
    /// `argmax`/`argmin`.
    case argReduce = "f32_arg_reduce"
    /// `max_pool`/`average_pool` in 2-D.
    case pool2d = "f32_pool2d"
    /// `global_average_pool`/`global_max_pool`.
    case globalPool = "f32_global_pool"
    /// `gather` along one axis.
    case gather = "gather"
    /// Strided copies: `transpose`, `slice`, `concat`, `split`, `pad` (constant), `expand`, `tile`.
    case copy = "copy"
    /// Zero-copy `reshape`, `flatten`, `squeeze`, `unsqueeze`, `identity`.
    case view = "view"
    /// `shape`, `size`, `constant`, `constant_of_shape`, `range`: values made from shapes,
    /// scalars and attributes (folded into constants by a shape-specialized plan).
    case generate = "generate"
    /// `resize` (nearest, linear, cubic) as separable passes.
    case resize = "f32_resize"
    /// `conv_transpose` in 2-D: GEMM into columns, then col2im (tiled).
    case convTranspose = "f32_conv_transpose"
    /// `lstm`/`gru`: one GEMM for all input projections, a recurrent GEMM and fused gates per step (tiled).
    case recurrent = "f32_recurrent"
    /// `batch_norm` left unfolded: a per-channel affine map.
    case batchNorm = "f32_batch_norm"
    /// `instance_norm`.
    case instanceNorm = "f32_instance_norm"
    /// `top_k`.
    case topK = "f32_top_k"
    /// `gather_nd`.
    case gatherND = "gather_nd"
    /// `scatter_nd` without reduction.
    case scatterND = "scatter_nd"
    /// `gather_elements` and `scatter_elements` (any element type; reductions on float32, int64, int32).
    case elementIndex = "element_index"
    /// `cumsum` on float32, int64 and int32.
    case cumulative = "cumsum"
    /// `assume`: a convert-time assumption checked at run time.
    case assume = "assume"
    /// `non_zero`, its count checked against the shape plan's.
    case nonZero = "non_zero"
    /// `non_max_suppression` on float32 boxes and scores, its count checked against the shape plan's.
    case nms = "f32_nms"
    /// `if`, `loop` and `scan`: bodies compiled for the artifact's arch when the function loads,
    /// run by executors of their own (shape plans included); the results' shapes are checked
    /// against the shape plan's.
    case controlFlow = "control_flow"
    /// `dft` along the signal axis and `stft`: a GEMM with a twiddle matrix made when bound.
    case dft = "f32_dft"
    /// `dynamic_quantize_linear` of float32.
    case dynamicQuantize = "f32_dynamic_quantize"
    /// `matmul_integer` of 8-bit activations by a stored 8-bit weight: int32 accumulation
    /// (`vpdpbusd` with AVX512-VNNI, pairs of int16 products with AVX2), the weight packed four k
    /// per column entry (runtime 0.8).
    case integerGEMM = "u8s8_gemm"
    /// The reference interpreter's kernel for the op.
    case reference = "reference"

    /// The first runtime version that has the family's kernels.
    public var sinceRuntime: RuntimeVersion {
        switch self {
        case .elementIndex, .cumulative, .assume, .nonZero, .nms, .controlFlow: RuntimeVersion(0, 7)
        case .dynamicQuantize, .integerGEMM, .rotary: RuntimeVersion(0, 8)
        default: RuntimeVersion(0, 6)
        }
    }

    /// Whether the family's kernels are named by a GEMM tile.
    public var isTiled: Bool {
        switch self {
        case .gemm, .conv2d, .conv2dNCHW, .conv2dNHWC, .conv2dWinograd, .matmul, .convTranspose, .recurrent, .dft: return true
        default: return false
        }
    }

    /// The portable ops this family's kernels run, declared once for lowering's choices and the
    /// runtime's check when a step is made; `nil` for the reference kernel (every op) and the
    /// unary and binary families, whose steps check their function tables.
    public var ops: Set<String>? {
        switch self {
        case .gemm: ["linear", "matmul"]
        case .conv2d, .conv2dNCHW, .conv2dNHWC, .conv2dWinograd, .depthwiseNHWC, .depthwise: ["conv"]
        case .pool2dNHWC, .pool2d: ["max_pool", "average_pool"]
        case .matmul: ["matmul"]
        case .select: ["where"]
        case .cast: ["cast"]
        case .map: Set((0...).lazy.map { kiln_map_name_at($0) }.prefix { $0 != nil }.map { String(cString: $0!) })
        case .softmax: ["softmax", "log_softmax"]
        case .layerNorm: ["layer_norm"]
        case .attention: ["attention"]
        case .rotary: ["rotary_embedding"]
        case .reduce: Set(OpSet.reduceNames)
        case .argReduce: ["argmax", "argmin"]
        case .globalPool: ["global_average_pool", "global_max_pool"]
        case .gather: ["gather"]
        case .copy: OpSet.ops(in: .copy)
        case .view: OpSet.ops(in: .view)
        case .generate: OpSet.ops(in: .generator)
        case .resize: ["resize"]
        case .convTranspose: ["conv_transpose"]
        case .recurrent: ["lstm", "gru", "dynamic_quantize_lstm"]
        case .batchNorm: ["batch_norm"]
        case .instanceNorm: ["instance_norm"]
        case .topK: ["top_k"]
        case .gatherND: ["gather_nd"]
        case .scatterND: ["scatter_nd"]
        case .dft: ["dft", "stft"]
        case .elementIndex: ["gather_elements", "scatter_elements"]
        case .cumulative: ["cumsum"]
        case .assume: ["assume"]
        case .nonZero: ["non_zero"]
        case .nms: ["non_max_suppression"]
        case .dynamicQuantize: ["dynamic_quantize_linear"]
        case .integerGEMM: ["matmul_integer"]
        case .controlFlow: OpSet.ops(in: .controlFlow)
        case .unary, .binary, .reference: nil
        }
    }

    /// The ISAs this family is built for, on any host (C variants and their Swift bindings).
    /// Tiled families have a kernel per GEMM microkernel; vector families one per row of
    /// `kiln_vector.inc`; the others are scalar only.
    public var isas: [ISA] {
        if self == .reference { return [] }
        if isTiled { return ISA.allCases }
        if let library = VectorConfig.library(of: self) { return VectorConfig.isas(ofLibrary: library) }
        return [.scalar]
    }
}

/// One kernel of the catalog: family, tile (for GEMM families) and ISA. Its description is
/// the wire name stored in compiled plans (`f32_gemm_6x16__avx2`, `binary__avx2`,
/// `reference`); plans are read back by looking the name up in ``KernelID/catalog``, never
/// by parsing it.
public struct KernelID: Sendable, Hashable, CustomStringConvertible {
    /// What it computes.
    public let family: KernelFamily
    /// The GEMM tile, for tiled families.
    public let tile: GEMMTile?
    /// The instruction set.
    public let isa: ISA

    /// The reference interpreter's kernel.
    public static let reference = KernelID(family: .reference, tile: nil, isa: .scalar)

    package init(family: KernelFamily, tile: GEMMTile? = nil, isa: ISA) {
        self.family = family
        self.tile = tile
        self.isa = isa
    }

    /// The wire name.
    public var description: String {
        if family == .reference { return family.rawValue }
        if let tile { return "\(family.rawValue)_\(tile)__\(isa.rawValue)" }
        return "\(family.rawValue)__\(isa.rawValue)"
    }

    /// The GEMM microkernels of kiln_gemm.inc (built into this runtime, for any host): tile and ISA.
    public static let microkernels: [(tile: GEMMTile, isa: ISA)] = GEMMConfig.all.map { ($0.tile, $0.isa) }

    /// Every kernel a plan may name.
    public static let catalog: [KernelID] = KernelFamily.allCases.flatMap { family -> [KernelID] in
        if family == .reference { return [.reference] }
        if family.isTiled { return microkernels.map { KernelID(family: family, tile: $0.tile, isa: $0.isa) } }
        return family.isas.map { KernelID(family: family, isa: $0) }
    }

    private static let byWireName: [String: KernelID] = Dictionary(catalog.map { ($0.description, $0) }, uniquingKeysWith: { a, _ in a })

    /// The catalog's kernel of this wire name.
    /// - Parameter wireName: A name from a compiled plan.
    /// - Returns: The kernel, or `nil` when this runtime has no such kernel.
    public init?(wireName: String) {
        guard let id = KernelID.byWireName[wireName] else { return nil }
        self = id
    }

    /// The kiln_gemm.inc row of a tiled kernel.
    var gemmConfig: GEMMConfig? { tile.flatMap { GEMMConfig.of($0, isa) } }

    /// Whether this runtime has an indirect microkernel for the tile and ISA (on any host).
    public var hasIndirectMicrokernel: Bool { gemmConfig?.hasIndirect ?? false }

    /// The indirect (implicit im2col) microkernel of a tiled kernel's tile, when this build and
    /// host have one.
    package var indirectMicrokernel: kiln_f32_igemm_ukernel? {
        isa.isRunnableOnHost ? gemmConfig?.row.pointee.igemm : nil
    }

    /// The compressed-weight microkernel of a tiled kernel's tile (decoding int8, int4 and table
    /// panels in its k loop), when this build and host have it.
    package var compressedMicrokernel: UnsafePointer<kiln_packed_b_ukernel>? {
        guard isa.isRunnableOnHost, let row = gemmConfig?.row, row.pointee.q.fn != nil else { return nil }
        return UnsafeRawPointer(row).advanced(by: MemoryLayout<kiln_gemm_config>.offset(of: \.q)!).assumingMemoryBound(to: kiln_packed_b_ukernel.self)
    }

    /// The C microkernel of a tiled kernel, when this build and host have it.
    package var microkernel: kiln_f32_gemm_ukernel? {
        isa.isRunnableOnHost ? gemmConfig?.row.pointee.f32 : nil
    }
}

/// One row of CKilnKernels' kiln_gemm.inc, read once: a GEMM microkernel's tile, ISA and entry points.
struct GEMMConfig: @unchecked Sendable {
    let tile: GEMMTile
    let isa: ISA
    let hasIndirect: Bool
    /// The C row (static storage).
    let row: UnsafePointer<kiln_gemm_config>

    /// Every row, in the list's order.
    static let all: [GEMMConfig] = (0 ..< kiln_gemm_config_count()).map { i in
        let row = kiln_gemm_config_at(i)!
        return GEMMConfig(tile: GEMMTile(mr: row.pointee.mr, nr: row.pointee.nr), isa: ISA(code: Int32(row.pointee.isa))!,
                          hasIndirect: row.pointee.has_igemm != 0, row: row)
    }

    /// The row of this tile and ISA.
    static func of(_ tile: GEMMTile, _ isa: ISA) -> GEMMConfig? { all.first { $0.tile == tile && $0.isa == isa } }

    /// The tile the compiler uses for an ISA: its first row.
    static func preferredTile(_ isa: ISA) -> GEMMTile { all.first { $0.isa == isa }!.tile }
}

/// Element type codes of the dtype-generic kernels (`KILN_DT_*`).
package func kernelDType(_ t: DataType) -> Int32? {
    switch t {
    case .float32: return Int32(KILN_DT_F32)
    case .int64: return Int32(KILN_DT_I64)
    case .int32: return Int32(KILN_DT_I32)
    case .bool: return Int32(KILN_DT_BOOL)
    case .float16: return Int32(KILN_DT_F16)
    case .float64: return Int32(KILN_DT_F64)
    case .uint8: return Int32(KILN_DT_U8)
    case .int8: return Int32(KILN_DT_I8)
    default: return nil
    }
}

/// The `map` kernels' code for `op` (is_inf's detected infinities or-ed in), when kiln_map.inc has a row for it.
package func mapCode(_ op: Operation) -> Int32? {
    let code = kiln_map_code(op.opType)
    guard code != 0 else { return nil }
    guard code == Int32(KILN_MAP_IS_INF) else { return code }
    let positive = ((try? op.attributes.int("detect_positive", 1)) ?? 1) != 0, negative = ((try? op.attributes.int("detect_negative", 1)) ?? 1) != 0
    return code | (positive ? Int32(KILN_MAP_POSITIVE) : 0) | (negative ? Int32(KILN_MAP_NEGATIVE) : 0)
}

/// Whether the `map` kernels run `op` on elements of `dtype`.
package func mapRuns(_ op: Operation, on dtype: DataType) -> Bool {
    guard let code = mapCode(op), let dt = kernelDType(dtype) else { return false }
    return kiln_map__scalar(code, dt, 0, nil, nil) != 0
}
