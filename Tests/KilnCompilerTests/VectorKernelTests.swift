import CKilnKernels
import Foundation
import KilnCompiler
import KilnFormat
@testable import KilnRuntime
import XCTest

/// Every non-scalar variant of the vectorized families (`KILN_VECTOR_ISAS`) against the scalar
/// one at sizes below, at and above the vector width, with broadcast and strided operands; a
/// variant this CPU cannot run is skipped with a message.
final class VectorKernelTests: XCTestCase {
    static let sizes = [0, 1, 7, 8, 9, 31, 64, 65, 1000]

    /// The variants to compare with scalar: every ISA the families are built for beyond scalar.
    func variants(_ family: KernelFamily) -> [ISA] {
        family.isas.filter { $0 != .scalar && $0 != .neon }.filter { isa in
            if isa.isRunnableOnHost { return true }
            print("skipped: \(family.rawValue)__\(isa.rawValue) (this CPU lacks \(isa.rawValue))")
            return false
        }
    }

    func values(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.731 + seed) * 4) } }

    func assertClose(_ got: [Float], _ want: [Float], _ label: String, tolerance: Float = 2e-6) {
        XCTAssertEqual(got.count, want.count, label)
        for (i, (g, w)) in zip(got, want).enumerated() where !(g == w || abs(g - w) <= tolerance * max(1, abs(w)) || (g.isNaN && w.isNaN)) {
            XCTFail("\(label): index \(i) got \(g) want \(w)")
            return
        }
    }

    func testUnaryVariants() {
        for isa in variants(.unary) {
            let (scalar, vector) = (VectorConfig(.scalar).unary, VectorConfig(isa).unary)
            for f in UnaryFunction.all {
                for n in Self.sizes {
                    let x = values(n, Double(n))
                    var a = [Float](repeating: 0, count: n), b = a
                    scalar(f.code, n, x, &a, 0.2, 0.5)
                    vector(f.code, n, x, &b, 0.2, 0.5)
                    assertClose(b, a, "\(isa) \(f) n=\(n)")
                }
            }
        }
    }

    func testBinaryVariants() {
        for isa in variants(.binary) {
            let (scalar, vector) = (VectorConfig(.scalar).binaryND, VectorConfig(isa).binaryND)
            for (name, code) in BinaryStep.codes.sorted(by: { $0.key < $1.key }) where !["and", "or", "xor"].contains(name) {
                for n in Self.sizes {
                    // [3, n] against [n] (row broadcast), [3, 1] (column) and itself read with stride 2.
                    let x = values(3 * n, 1), z = values(2 * 3 * n + 1, 2)
                    let shape = [3, n]
                    for (label, zs) in [("row", [0, 1]), ("column", [1, 0]), ("strided", [2 * n, 2])] {
                        let outBytes = BinaryStep.codes[name]! >= Int32(KILN_BINARY_EQUAL) ? 1 : 4
                        var a = [UInt8](repeating: 0, count: max(3 * n * outBytes, 1)), b = a
                        scalar(code, Int32(KILN_DT_F32), 2, shape, x, [n, 1], z, zs, &a)
                        vector(code, Int32(KILN_DT_F32), 2, shape, x, [n, 1], z, zs, &b)
                        if outBytes == 1 {
                            XCTAssertEqual(a, b, "\(isa) \(name) \(label) n=\(n)")
                        } else {
                            assertClose(b.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) }, a.withUnsafeBytes { Array($0.bindMemory(to: Float.self)) },
                                        "\(isa) \(name) \(label) n=\(n)")
                        }
                    }
                }
            }
        }
    }

    /// Sums, means, L2 norms and sums of squares along a row (inner 1: sixteen float64 partial
    /// sums) and along the middle axis (blocks of columns in registers), on every ISA including
    /// scalar, against float64 sums in order: lengths on both sides of the blocks.
    func testReductionsAgainstFloat64() {
        for isa in [ISA.scalar] + variants(.reduce) {
            let kernels = NormalizationKernels(isa)
            for (outer, n, inner) in [(3, 1, 1), (2, 15, 1), (2, 16, 1), (1, 17, 1), (1, 16001, 1), (2, 9, 3), (1, 500, 31), (2, 7, 32),
                                      (1, 300, 33), (1, 1000, 64), (3, 5, 70)] {
                let x = values(outer * n * inner, Double(n + inner))
                for op in [KILN_REDUCE_SUM, KILN_REDUCE_MEAN, KILN_REDUCE_L2, KILN_REDUCE_SUM_SQUARE] {
                    var got = [Float](repeating: .nan, count: outer * inner)
                    kernels.reduce(Int32(op), outer, n, inner, x, &got)
                    var want = [Float](repeating: 0, count: outer * inner)
                    for o in 0 ..< outer {
                        for i in 0 ..< inner {
                            var s = 0.0
                            for r in 0 ..< n {
                                let v = Double(x[(o * n + r) * inner + i])
                                s += op == KILN_REDUCE_SUM || op == KILN_REDUCE_MEAN ? v : v * v
                            }
                            want[o * inner + i] = Float(op == KILN_REDUCE_MEAN ? s / Double(n) : op == KILN_REDUCE_L2 ? s.squareRoot() : s)
                        }
                    }
                    assertClose(got, want, "\(isa) reduce \(op) \(outer)x\(n)x\(inner)", tolerance: 1e-5)
                }
            }
        }
    }

    func testNormalizationVariants() {
        for isa in variants(.softmax) {
            let (scalar, vector) = (NormalizationKernels(.scalar), NormalizationKernels(isa))
            for (outer, n, inner) in [(1, 1, 1), (3, 7, 1), (2, 65, 1), (2, 9, 3), (1, 1000, 1), (4, 8, 300)] {
                let x = values(outer * n * inner, Double(n))
                for op in [Int32(KILN_SOFTMAX), Int32(KILN_LOG_SOFTMAX)] {
                    var a = [Float](repeating: 0, count: x.count), b = a
                    scalar.softmax(op, outer, n, inner, x, &a)
                    vector.softmax(op, outer, n, inner, x, &b)
                    assertClose(b, a, "\(isa) softmax \(op) \(outer)x\(n)x\(inner)", tolerance: 1e-5)
                }
                for op in 1 ... 6 {
                    var a = [Float](repeating: 0, count: outer * inner), b = a
                    scalar.reduce(Int32(op), outer, n, inner, x, &a)
                    vector.reduce(Int32(op), outer, n, inner, x, &b)
                    assertClose(b, a, "\(isa) reduce \(op) \(outer)x\(n)x\(inner)", tolerance: 1e-4)
                }
                let rows = outer * inner
                let gamma = values(n, 3), beta = values(n, 4)
                var a = [Float](repeating: 0, count: x.count), b = a
                scalar.layerNorm(rows, n, x, gamma, beta, 1e-5, &a)
                vector.layerNorm(rows, n, x, gamma, beta, 1e-5, &b)
                assertClose(b, a, "\(isa) layer_norm \(rows)x\(n)", tolerance: 1e-4)
            }
        }
    }

    // (channels, h, w, kernel, stride, dilation, pad)
    static let windows = [(2, 7, 9, 3, 1, 1, 1), (3, 14, 14, 5, 1, 1, 2), (2, 15, 17, 3, 2, 1, 1), (1, 9, 9, 3, 2, 2, 2), (2, 1, 1, 1, 1, 1, 0),
                      (1, 40, 70, 3, 1, 1, 1)]

    func testPoolVariants() {
        let shapes = Self.windows
        for isa in variants(.pool2d) {
            let (scalar, vector) = (VectorConfig(.scalar).pool2d, VectorConfig(isa).pool2d)
            for (c, h, w, k, s, d, p) in shapes {
                let oh = (h + 2 * p - (k - 1) * d - 1) / s + 1, ow = (w + 2 * p - (k - 1) * d - 1) / s + 1
                let x = values(c * h * w, 1)
                for (isMax, countPad) in [(Int32(1), Int32(0)), (0, 0), (0, 1)] {
                    var a = [Float](repeating: 0, count: c * oh * ow), b = a
                    scalar(isMax, countPad, c, h, w, x, k, k, s, s, d, d, p, p, p, p, oh, ow, &a)
                    vector(isMax, countPad, c, h, w, x, k, k, s, s, d, d, p, p, p, p, oh, ow, &b)
                    assertClose(b, a, "\(isa) pool max=\(isMax) \(c)x\(h)x\(w) k\(k) s\(s) d\(d)")
                }
            }
        }
    }

    /// Depthwise shapes beyond the pooling windows: widths around 16 and 32 lanes, 5×5 and 7×7 taps,
    /// stride 2 with odd sizes, padding wider than the plane, a plane too wide for the zero row.
    static let depthwiseWindows = [(3, 16, 16, 3, 1, 1, 1), (2, 17, 33, 5, 1, 1, 2), (2, 14, 14, 5, 2, 1, 2), (1, 7, 7, 7, 1, 1, 3),
                                   (2, 31, 47, 3, 2, 1, 1), (1, 3, 2, 5, 1, 1, 3), (1, 2, 4100, 3, 1, 1, 1), (2, 12, 12, 3, 1, 3, 3)]

    func testDepthwiseVariants() {
        let shapes = Self.windows + Self.depthwiseWindows
        for isa in variants(.depthwise) {
            let (scalar, vector) = (VectorConfig(.scalar).dwconv2d, VectorConfig(isa).dwconv2d)
            for (c, h, w, k, s, d, p) in shapes {
                let oh = (h + 2 * p - (k - 1) * d - 1) / s + 1, ow = (w + 2 * p - (k - 1) * d - 1) / s + 1
                let x = values(c * h * w, 2), weight = values(c * k * k, 3), bias = values(c, 4)
                var e = kiln_epilogue()
                e.activation = UnaryFunction(named: "hard_swish")!.code
                let scratchCount = kiln_f32_dwconv2d_scratch_floats(k, k, s, s, d, d, oh, ow)
                var scratch = [Float](repeating: 0, count: max(scratchCount, 1))
                var a = [Float](repeating: 0, count: c * oh * ow), b = a, generic = a
                bias.withUnsafeBufferPointer { bp in
                    e.bias = bp.baseAddress
                    scalar(c, h, w, x, k, k, weight, s, s, d, d, p, p, oh, ow, &a, &e, &scratch)
                    vector(c, h, w, x, k, k, weight, s, s, d, d, p, p, oh, ow, &b, &e, &scratch)
                    scalar(c, h, w, x, k, k, weight, s, s, d, d, p, p, oh, ow, &generic, &e, nil)
                }
                assertClose(b, a, "\(isa) depthwise \(c)x\(h)x\(w) k\(k) s\(s) d\(d)", tolerance: 1e-5)
                assertClose(generic, a, "padded-plane vs general depthwise \(c)x\(h)x\(w) k\(k) s\(s) d\(d)", tolerance: 1e-5)
            }
        }
    }

    /// im2col straight into panels: the host's widest variant against the scalar one, strides 1–3,
    /// padding, dilation, panels that cross output rows and end past the last pixel.
    func testIm2colPackVariants() {
        for (c, h, w, k, s, d, p) in Self.windows + Self.depthwiseWindows.filter({ $0.2 < 100 })
            + [(3, 224, 224, 3, 2, 1, 1), (2, 9, 11, 3, 3, 1, 1), (1, 3, 40, 3, 2, 1, 0), (1, 2, 33, 1, 2, 1, 0)] {
            let oh = (h + 2 * p - (k - 1) * d - 1) / s + 1, ow = (w + 2 * p - (k - 1) * d - 1) / s + 1
            let x = values(c * h * w, 5)
            for nr in [16, 32] {
                let panels = (oh * ow + nr - 1) / nr, count = panels * c * k * k * nr
                var a = [Float](repeating: .nan, count: count), b = a
                kiln_f32_im2col_pack__scalar(c, h, w, x, k, k, s, s, d, d, p, p, oh, ow, nr, 0, panels, &a)
                kiln_f32_im2col_pack(c, h, w, x, k, k, s, s, d, d, p, p, oh, ow, nr, 0, panels, &b)
                XCTAssertEqual(a, b, "im2col pack \(c)x\(h)x\(w) k\(k) s\(s) d\(d) p\(p) nr \(nr)")
                #if arch(x86_64)
                for isa in [ISA.avx2, .avx512] where isa.isRunnableOnHost {
                    var v = [Float](repeating: .nan, count: count)
                    if isa == .avx2 { kiln_f32_im2col_pack__avx2(c, h, w, x, k, k, s, s, d, d, p, p, oh, ow, nr, 0, panels, &v) }
                    else { kiln_f32_im2col_pack__avx512(c, h, w, x, k, k, s, s, d, d, p, p, oh, ow, nr, 0, panels, &v) }
                    XCTAssertEqual(a, v, "\(isa) im2col pack \(c)x\(h)x\(w) k\(k) s\(s) d\(d) p\(p) nr \(nr)")
                }
                #endif
            }
        }
    }
}
