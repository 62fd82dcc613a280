import CKilnKernels
import KilnFormat

/// A CPU family: the instruction set architecture an artifact's code is for.
public enum CPUFamily: String, Sendable, Hashable {
    case x86_64, arm64

    /// This host's family, or `nil` on another CPU.
    public static var host: CPUFamily? {
        #if arch(x86_64)
        return .x86_64
        #elseif arch(arm64)
        return .arm64
        #else
        return nil
        #endif
    }
}

/// A CPU architecture name an artifact is compiled for (specs/architectures.md): which
/// features its kernels may use, which variant of each kernel family it runs, and how it
/// wants weights packed.
public struct Architecture: Sendable, Hashable, CustomStringConvertible {
    /// The name used in `Name.<arch>.compiled`.
    public let name: String
    /// The CPU family.
    public let family: CPUFamily
    /// Rank within its family: a host runs every arch of its family with a lower or equal rank that it supports.
    public let level: Int
    /// Feature bits (`KILN_CPU_*`) the artifact's kernels need.
    let features: UInt32
    /// The GEMM microkernel's tile and ISA (decides the weight panel width).
    public let gemm: (tile: GEMMTile, isa: ISA)
    /// The ISA of the vectorized elementwise, normalization and pooling families.
    public let vectorISA: ISA

    /// The name.
    public var description: String { name }

    public static func == (a: Architecture, b: Architecture) -> Bool { a.name == b.name }
    public func hash(into h: inout Hasher) { h.combine(name) }

    /// The kernel this arch runs for a family: the GEMM tile for tiled families, else the
    /// best ISA the family is built for that the arch allows.
    /// - Parameter family: A kernel family.
    /// - Returns: The kernel.
    public func kernel(_ family: KernelFamily) -> KernelID {
        if family == .reference { return .reference }
        if family.isTiled { return KernelID(family: family, tile: gemm.tile, isa: gemm.isa) }
        // The widest ISA the family is built for: the GEMM's (AVX-512 on v4) where it has it, else the vector ISA.
        let isa = [gemm.isa, vectorISA].first { $0 != .scalar && family.isas.contains($0) } ?? .scalar
        return KernelID(family: family, isa: isa)
    }

    /// Each ISA's GEMM tile: the first row of kiln_gemm.inc for it.
    static let x86Tile = GEMMConfig.preferredTile(.scalar), avx2Tile = GEMMConfig.preferredTile(.avx2),
        avx512Tile = GEMMConfig.preferredTile(.avx512), neonTile = GEMMConfig.preferredTile(.neon)

    /// Every architecture, best last within each family.
    public static let all: [Architecture] = [
        Architecture(name: "x86_64", family: .x86_64, level: 1, features: UInt32(KILN_CPU_SSE2),
                     gemm: (x86Tile, .scalar), vectorISA: .scalar),
        Architecture(name: "x86_64_v2", family: .x86_64, level: 2, features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2),
                     gemm: (x86Tile, .scalar), vectorISA: .scalar),
        Architecture(name: "x86_64_v3", family: .x86_64, level: 3,
                     features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2 | KILN_CPU_X86_V3),
                     gemm: (avx2Tile, .avx2), vectorISA: .avx2),
        Architecture(name: "x86_64_v4", family: .x86_64, level: 4,
                     features: UInt32(KILN_CPU_SSE2 | KILN_CPU_X86_V2 | KILN_CPU_X86_V3 | KILN_CPU_X86_V4),
                     gemm: (avx512Tile, .avx512), vectorISA: .avx2),
        Architecture(name: "arm64", family: .arm64, level: 1, features: UInt32(KILN_CPU_NEON),
                     gemm: (neonTile, .neon), vectorISA: .scalar),
        Architecture(name: "arm64_dotprod", family: .arm64, level: 2,
                     features: UInt32(KILN_CPU_NEON | KILN_CPU_ARM_DOTPROD),
                     gemm: (neonTile, .neon), vectorISA: .scalar),
    ]

    /// The architecture of this name.
    /// - Parameter name: An arch name.
    /// - Returns: The architecture, or `nil` for an unknown name.
    public static func named(_ name: String) -> Architecture? { all.first { $0.name == name } }

    /// Whether this host can run artifacts for this architecture (CPUID and OS state, detected once).
    public var isRunnableOnHost: Bool {
        family == CPUFamily.host && kiln_cpu_features() & features == features
    }

    /// The best architecture this host can run.
    public static let host: Architecture? = all.filter(\.isRunnableOnHost).max { $0.level < $1.level }

    /// The CPU features the host reports (CPUID and XCR0 on x86-64, HWCAP on arm64), in a fixed order.
    public static var hostFeatures: [(name: String, present: Bool)] {
        var flags = [kiln_cpu_flag](repeating: kiln_cpu_flag(), count: 64)
        let n = Int(kiln_cpu_flag_list(&flags, 64))
        return flags.prefix(n).map { (String(cString: $0.name), $0.present != 0) }
    }

    /// Every architecture this host can run, best first.
    public static var runnableOnHost: [Architecture] { all.filter(\.isRunnableOnHost).sorted { $0.level > $1.level } }

    /// The best architecture this host runs at or below `cap` (`nil`: no cap).
    /// - Parameter cap: An arch name of the host's family, for example `x86_64_v3` to keep a
    ///   `x86_64_v4` host off AVX-512.
    /// - Returns: The architecture.
    /// - Throws: ``ArchitectureCapError`` for an unknown name, another family, or a CPU without one.
    public static func host(cappedAt cap: String?) throws -> Architecture {
        guard let host else { throw ArchitectureCapError(reason: "this CPU has no Kiln architecture") }
        guard let cap else { return host }
        guard let limit = named(cap) else {
            throw ArchitectureCapError(reason: "unknown architecture '\(cap)'; known: \(all.map(\.name).joined(separator: ", "))")
        }
        guard limit.family == host.family else {
            throw ArchitectureCapError(reason: "cannot cap a \(host.family) host at \(limit.name), an arch of the \(limit.family) family")
        }
        return runnableOnHost.first { $0.level <= limit.level } ?? host
    }
}

/// A `--max-arch` / `maxArchitecture` that names no usable cap.
public struct ArchitectureCapError: Error, Sendable, CustomStringConvertible {
    /// A sentence.
    public var reason: String
    /// The sentence.
    public var description: String { reason }
}

extension ArchitectureCapError: KilnError {
    public var errorKind: KilnErrorKind { .invalidInput }
    public var errorPath: String? { nil }
    public var errorField: String? { nil }
}
