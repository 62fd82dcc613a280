import CKilnKernels
@testable import KilnCompiler
import KilnFormat
import XCTest

/// The C kernel tables (KILN_ISAS, kiln_gemm.inc) against what the compiler derives from them.
final class KernelTableTests: XCTestCase {
    func testISAsAreOneList() {
        let c = (0 ..< Int32(KILN_ISA_COUNT)).map { String(cString: kiln_isa_name($0)!) }
        XCTAssertEqual(c, ISA.allCases.map(\.rawValue))
        XCTAssertEqual(ISA.avx2.requiredFeatures, UInt32(KILN_CPU_X86_V3))
        XCTAssertEqual(ISA.avx512.requiredFeatures, UInt32(KILN_CPU_X86_V4))
        XCTAssertEqual(ISA.neon.requiredFeatures, UInt32(KILN_CPU_NEON))
        XCTAssertEqual(ISA.scalar.requiredFeatures, 0)
    }

    func testEveryGEMMRowIsInTheCatalogAndEveryArchUsesARow() {
        XCTAssertEqual(GEMMConfig.all.count, Int(kiln_gemm_config_count()))
        for row in GEMMConfig.all {
            let id = KernelID(family: .gemm, tile: row.tile, isa: row.isa)
            XCTAssertEqual(String(cString: row.row.pointee.name), id.description)
            XCTAssertNotNil(KernelID(wireName: id.description), "\(id) is not in the catalog")
            // Built rows expose their entry points where this host runs them.
            if row.isa.isRunnableOnHost { XCTAssertNotNil(id.microkernel, "\(id)") }
            XCTAssertEqual(id.indirectMicrokernel != nil, row.hasIndirect && row.isa.isRunnableOnHost, "\(id)")
        }
        for arch in Architecture.all {
            XCTAssertNotNil(GEMMConfig.of(arch.gemm.tile, arch.gemm.isa), "\(arch.name) uses a tile kiln_gemm.inc lacks")
        }
    }
}

extension KernelTableTests {
    /// kiln_binary.inc and the registry's binary groups name the same ops.
    func testBinaryOpsAreOneList() {
        let c = Set((0...).lazy.map { kiln_binary_name_at($0) }.prefix { $0 != nil }.map { String(cString: $0!) })
        let registry = OpSet.ops(in: .arithmetic).union(OpSet.ops(in: .comparison)).union(OpSet.ops(in: .logical))
        XCTAssertEqual(c.sorted(), registry.sorted())
        XCTAssertTrue(OpSet.ops(in: .layoutAgnostic).isSubset(of: registry))
    }
}

extension KernelTableTests {
    /// Every reduction of kiln_reduce.inc is a registry op, and the compiler lowers exactly those.
    func testReductionsAreOneList() {
        let compiled = OpSet.reduceNames.filter { kiln_reduce_code($0) != 0 }
        XCTAssertEqual(compiled.count, 7)
        XCTAssertEqual(Set(compiled), Lowering.reduceKernels)
        XCTAssertEqual(kiln_reduce_code("reduce_sum_square"), Int32(KILN_REDUCE_SUM_SQUARE))
    }
}
