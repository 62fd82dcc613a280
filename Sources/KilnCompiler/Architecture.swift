import CKilnKernels

/// A CPU architecture name an artifact is compiled for (specs/architectures.md): which
/// features its kernels may use and how they want weights packed.
public struct Architecture: Sendable, Hashable, CustomStringConvertible {
    /// The name used in `Name.<arch>.compiled`.
    public let name: String
    /// `x86_64` or `arm64`.
    public let family: String
    /// Rank within its family: a host runs every arch of its family with a lower or equal rank that it supports.
    public let level: Int
    /// Feature bits (`KILN_CPU_*`) the artifact's kernels need.
    let features: UInt32
    /// The GEMM microkernel: name, rows, panel width.
    let gemm: (name: String, mr: Int, nr: Int)

    /// The name.
    public var description: String { name }

    public static func == (a: Architecture, b: Architecture) -> Bool { a.name == b.name }
    public func hash(into h: inout Hasher) { h.combine(name) }

    /// Every architecture, best last within each family.
    public static let all: [Architecture] = [
        Architecture(name: "x86_64", family: "x86_64", level: 1, features: UInt32(KILN_CPU_SSE2),
                     gemm: ("f32_gemm_4x8__scalar", 4, 8)),
        Architecture(name: "x86_64_v2", family: "x86_64", level: 2, features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2),
                     gemm: ("f32_gemm_4x8__scalar", 4, 8)),
        Architecture(name: "x86_64_v3", family: "x86_64", level: 3,
                     features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2 | KILN_CPU_X86_V3),
                     gemm: ("f32_gemm_6x16__avx2", 6, 16)),
        Architecture(name: "x86_64_v4", family: "x86_64", level: 4,
                     features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2 | KILN_CPU_X86_V3 | KILN_CPU_X86_V4),
                     gemm: ("f32_gemm_8x16__avx512", 8, 16)),
        Architecture(name: "arm64", family: "arm64", level: 1, features: UInt32(KILN_CPU_NEON),
                     gemm: ("f32_gemm_4x8__neon", 4, 8)),
        Architecture(name: "arm64_dotprod", family: "arm64", level: 2,
                     features: UInt32(KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD),
                     gemm: ("f32_gemm_4x8__neon", 4, 8)),
    ]

    /// The architecture of this name.
    /// - Parameter name: An arch name.
    /// - Returns: The architecture, or `nil` for an unknown name.
    public static func named(_ name: String) -> Architecture? { all.first { $0.name == name } }

    /// Whether this host can run artifacts for this architecture (CPUID and OS state, detected once).
    public var isRunnableOnHost: Bool {
        #if arch(x86_64)
        let hostFamily = "x86_64"
        #elseif arch(arm64)
        let hostFamily = "arm64"
        #else
        let hostFamily = ""
        #endif
        return family == hostFamily && kiln_cpu_features() & features == features
    }

    /// The best architecture this host can run.
    public static let host: Architecture? = all.filter(\.isRunnableOnHost).max { $0.level < $1.level }
}
