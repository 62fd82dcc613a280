import CKilnKernels
import KilnCompiler
import XCTest

/// The configs of kiln_vector.inc's rows for this host's runnable ISAs, for tests that check
/// every variant of a family: the scalar config first, then each ISA with its own row of
/// `family` (a `KILN_VECTOR_*`), skipped with a message when this CPU cannot run it.
func vectorVariants(_ family: Int32, _ name: String) -> [(isa: ISA, config: VectorConfig)] {
    var variants: [(isa: ISA, config: VectorConfig)] = [(.scalar, VectorConfig(.scalar))]
    for isa in ISA.allCases where isa != .scalar && kiln_vector_built(family, isa.code) != 0 {
        if isa.isRunnableOnHost { variants.append((isa, VectorConfig(isa))) } else { print("skipped: \(name)__\(isa.rawValue) (this CPU lacks \(isa.rawValue))") }
    }
    return variants
}

final class VectorConfigTests: XCTestCase {
    /// The catalog's ISAs for each vector family are the rows of kiln_vector.inc, and every row
    /// this build has replaces the scalar entry in its ISA's config (and only there).
    func testConfigsFollowTheRows() {
        let scalar = VectorConfig(.scalar)
        for family in KernelFamily.allCases {
            guard let library = VectorConfig.library(of: family) else { continue }
            XCTAssertEqual(family.isas, VectorConfig.isas(ofLibrary: library), "\(family)")
            XCTAssertEqual(family.isas.first, .scalar, "\(family): every vector family has a scalar row")
        }
        for isa in ISA.allCases {
            let c = VectorConfig(isa)
            func differs<T>(_ a: T, _ b: T) -> Bool { unsafeBitCast(a, to: UInt.self) != unsafeBitCast(b, to: UInt.self) }
            let own = [
                (Int32(KILN_VECTOR_UNARY), differs(c.unary, scalar.unary)),
                (Int32(KILN_VECTOR_BINARY), differs(c.binaryND, scalar.binaryND)),
                (Int32(KILN_VECTOR_NORMALIZATION), differs(c.softmax, scalar.softmax)),
                (Int32(KILN_VECTOR_POOL2D), differs(c.pool2d, scalar.pool2d)),
                (Int32(KILN_VECTOR_POOL2D_NHWC), differs(c.pool2dNHWC, scalar.pool2dNHWC)),
                (Int32(KILN_VECTOR_DWCONV2D), differs(c.dwconv2d, scalar.dwconv2d)),
                (Int32(KILN_VECTOR_DWCONV2D_NHWC), differs(c.dwconv2dNHWC, scalar.dwconv2dNHWC)),
                (Int32(KILN_VECTOR_RECURRENT), differs(c.lstmGates, scalar.lstmGates)),
                (Int32(KILN_VECTOR_WINOGRAD), differs(c.winograd, scalar.winograd)),
                (Int32(KILN_VECTOR_INTEGER), differs(c.u8s8GEMM, scalar.u8s8GEMM)),
            ]
            XCTAssertEqual(own.count, Int(KILN_VECTOR_FAMILY_COUNT), "a family without a check here")
            for (family, replaced) in own {
                XCTAssertEqual(replaced, isa != .scalar && kiln_vector_built(family, isa.code) != 0, "family \(family), \(isa)")
            }
        }
        // An unknown ISA code gets the scalar config.
        XCTAssertEqual(kiln_vector_config_of(99), kiln_vector_config_of(ISA.scalar.code))
    }
}
