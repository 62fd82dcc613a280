import CKilnKernels
import Foundation
import KilnCompiler
import KilnFormat
@testable import KilnRuntime
import XCTest

/// Every GEMM microkernel against the scalar reference at sizes around its tile; skipped
/// when the CPU lacks the ISA. Elementwise kernels against plain Swift.
final class KernelTests: XCTestCase {
    struct Rng {
        var bits: SplitMix64
        init(state: UInt64) { bits = SplitMix64(seed: state) }
        /// Multiples of 1/1000 in [-1, 1], so sums stay exact enough to compare.
        mutating func next() -> Float { Float(bits.below(2001) - 1000) / 1000 }
    }

    func reference(_ m: Int, _ n: Int, _ k: Int, _ a: [Float], _ b: [Float]) -> [Float] {
        var c = [Float](repeating: 0, count: m * n)
        for i in 0 ..< m { for j in 0 ..< n { var s: Float = 0; for p in 0 ..< k { s += a[i * k + p] * b[p * n + j] }; c[i * n + j] = s } }
        return c
    }

    func testGEMMMicrokernelsAgainstScalar() throws {
        var tested = 0
        for name in KernelID.microkernels.map({ KernelID(family: .gemm, tile: $0.tile, isa: $0.isa).description }) {
            var mr = 0, nr = 0
            guard let uk = name.withCString({ kiln_f32_gemm_ukernel_named($0, &mr, &nr) }) else { continue } // ISA absent
            tested += 1
            var rng = Rng(state: 42)
            // Every row count of a tile (each runs its own body), then several tiles with a remainder.
            for m in Array(1 ... mr) + [mr + 1, 2 * mr, 3 * mr + 2] {
                for n in [1, nr - 1, nr, nr + 1, 2 * nr + 3] where n > 0 {
                    for k in [1, 7, 64] {
                        let a = (0 ..< m * k).map { _ in rng.next() }, bm = (0 ..< k * n).map { _ in rng.next() }
                        let panels = (n + nr - 1) / nr
                        var packed = [Float](repeating: 0, count: panels * k * nr)
                        kiln_f32_pack_b(k, n, nr, bm, n, 1, &packed)
                        var c = [Float](repeating: .nan, count: m * n)
                        packed.withUnsafeBufferPointer { pb in
                            var b = kiln_packed_b()
                            b.kind = Int32(KILN_B_F32); b.k = k; b.n = n; b.nr = nr; b.data = UnsafeRawPointer(pb.baseAddress!)
                            var e = kiln_epilogue()
                            kiln_f32_gemm(uk, mr, &b, a, k, &c, n, 0, m, 0, panels, &e, nil)
                        }
                        let want = reference(m, n, k, a, bm)
                        for i in 0 ..< m * n where abs(c[i] - want[i]) > 1e-4 * Float(k) {
                            XCTFail("\(name) m=\(m) n=\(n) k=\(k): index \(i) got \(c[i]) want \(want[i])")
                            break
                        }
                        // The microkernel alone on one panel whose rows are further apart than NR.
                        let ldb = nr + 5, rows = min(m, mr), cols = min(n, nr)
                        var strided = [Float](repeating: .nan, count: k * ldb)
                        for p in 0 ..< k { for j in 0 ..< nr { strided[p * ldb + j] = j < n ? bm[p * n + j] : 0 } }
                        var tile = [Float](repeating: .nan, count: rows * cols)
                        uk(rows, cols, k, a, k, strided, ldb, &tile, cols, nil)
                        for i in 0 ..< rows { for j in 0 ..< cols where abs(tile[i * cols + j] - want[i * n + j]) > 1e-4 * Float(k) {
                            XCTFail("\(name) strided m=\(m) n=\(n) k=\(k): (\(i), \(j)) got \(tile[i * cols + j]) want \(want[i * n + j])")
                        } }
                    }
                }
            }
        }
        XCTAssertGreaterThanOrEqual(tested, 2)
    }

    /// Every microkernel with A row-major and packed in row tiles (lda 0), with column and row bias
    /// and each activation, over one and several K blocks: those applied in registers and those
    /// applied to the stored tile agree with the plain GEMM followed by the scalar epilogue, NaN
    /// rows included; the narrow path for packed A agrees too.
    func testMicrokernelEpiloguesAndPackedA() throws {
        let activations: [(Int32, Float, Float)] = [
            (Int32(KILN_UNARY_NONE), 0, 0), (Int32(KILN_UNARY_RELU), 0, 0), (Int32(KILN_UNARY_HARD_SWISH), 0, 0),
            (Int32(KILN_UNARY_HARD_SIGMOID), 0.2, 0.5), (Int32(KILN_UNARY_CLIP), -0.5, 0.75), (Int32(KILN_UNARY_CLIP), 1, -1),
            (Int32(KILN_UNARY_LEAKY_RELU), 0.1, 0), (Int32(KILN_UNARY_GELU), 0, 0), (Int32(KILN_UNARY_SIGMOID), 0, 0),
            (Int32(KILN_UNARY_SILU), 0, 0), (Int32(KILN_UNARY_TANH), 0, 0),
        ]
        var tested = 0
        for name in KernelID.microkernels.map({ KernelID(family: .gemm, tile: $0.tile, isa: $0.isa).description }) {
            var mr = 0, nr = 0
            guard let uk = name.withCString({ kiln_f32_gemm_ukernel_named($0, &mr, &nr) }) else {
                print("skipped: \(name) (this CPU lacks its ISA)")
                continue
            }
            tested += 1
            var rng = Rng(state: 7)
            // (mr + 1, nr + 3, 4500) spans several K blocks of the driver for every panel width but 8;
            // (300, 2 nr + 5, 300) has an A too large for L2 beside panels that fit: row tiles outer.
            for (m, n, k) in [(1, 1, 1), (mr - 1, nr - 1, 5), (mr, nr, 17), (2 * mr + 3, 2 * nr + 5, 64), (3, 3, 300), (mr + 1, nr + 3, 4500),
                              (300, 2 * nr + 5, 300), (mr + 2, 6, 33)]
                where m > 0 {
                var a = (0 ..< m * k).map { _ in rng.next() }
                if m > 2 { a[2 * k] = .nan } // row 2 is NaN throughout
                let bm = (0 ..< k * n).map { _ in rng.next() }
                let colBias = (0 ..< n).map { _ in rng.next() }, rowBias = (0 ..< m).map { _ in rng.next() }
                let tiles = (m + mr - 1) / mr, panels = (n + nr - 1) / nr
                var packedA = [Float](repeating: 0, count: tiles * k * mr)
                for i in 0 ..< m { for p in 0 ..< k { packedA[(i / mr) * k * mr + p * mr + i % mr] = a[i * k + p] } }
                var packedB = [Float](repeating: 0, count: panels * k * nr)
                kiln_f32_pack_b(k, n, nr, bm, n, 1, &packedB)
                let plain = reference(m, n, k, a, bm)
                for (code, alpha, beta) in activations {
                    var want = plain
                    for i in 0 ..< m { for j in 0 ..< n { want[i * n + j] = (want[i * n + j] + colBias[j]) + rowBias[i] } }
                    var e = kiln_epilogue()
                    e.activation = code; e.alpha = alpha; e.beta = beta
                    kiln_f32_epilogue(m, n, &want, n, nil, &e)
                    for (label, lda, aOperand) in [("row-major", k, a), ("packed", 0, packedA)] {
                        var c = [Float](repeating: .nan, count: m * n)
                        colBias.withUnsafeBufferPointer { cb in rowBias.withUnsafeBufferPointer { rb in packedB.withUnsafeBufferPointer { pb in
                            var b = kiln_packed_b()
                            b.kind = Int32(KILN_B_F32); b.k = k; b.n = n; b.nr = nr; b.data = UnsafeRawPointer(pb.baseAddress!)
                            var ep = e
                            ep.bias = cb.baseAddress; ep.row_bias = rb.baseAddress
                            kiln_f32_gemm(uk, mr, &b, aOperand, lda, &c, n, 0, m, 0, panels, &ep, nil)
                        } } }
                        for i in 0 ..< m * n where !(abs(c[i] - want[i]) <= 1e-4 * Float(k) || c[i].isNaN && want[i].isNaN) {
                            XCTFail("\(name) \(label) activation \(code) (\(alpha), \(beta)) m=\(m) n=\(n) k=\(k): index \(i) got \(c[i]) want \(want[i])")
                            break
                        }
                    }
                    guard n <= 12 else { continue }
                    // The narrow path over packed A: B transposed, the row bias from row 0.
                    var bt = [Float](repeating: 0, count: n * k)
                    for p in 0 ..< k { for j in 0 ..< n { bt[j * k + p] = bm[p * n + j] } }
                    var c = [Float](repeating: .nan, count: m * n)
                    colBias.withUnsafeBufferPointer { cb in rowBias.withUnsafeBufferPointer { rb in
                        var ep = e
                        ep.bias = cb.baseAddress; ep.row_bias = rb.baseAddress
                        kiln_f32_gemm_narrow_packed(mr, m, n, k, packedA, bt, &c, n, &ep)
                    } }
                    for i in 0 ..< m * n where !(abs(c[i] - want[i]) <= 1e-4 * Float(k) || c[i].isNaN && want[i].isNaN) {
                        XCTFail("narrow packed mr \(mr) activation \(code) m=\(m) n=\(n) k=\(k): index \(i) got \(c[i]) want \(want[i])")
                        break
                    }
                }
            }
        }
        XCTAssertGreaterThanOrEqual(tested, 2)
    }

    /// The indirect microkernels (implicit im2col) through `kiln_f32_igemm`: a padded NHWC image,
    /// windows with stride and dilation, pixel ranges that start inside a row and end past tile
    /// edges, panel ranges, column bias, activations in registers and on the stored tile, and a
    /// residual already in C; against the same GEMM over explicit im2col rows.
    func testIndirectMicrokernels() throws {
        let kernels: [(String, kiln_f32_igemm_ukernel, Int, Int, ISA)] = {
            var all: [(String, kiln_f32_igemm_ukernel, Int, Int, ISA)] = [("f32_igemm_4x8__scalar", kiln_f32_igemm_4x8__scalar, 4, 8, .scalar)]
            #if arch(x86_64)
            all += [("f32_igemm_6x16__avx2", kiln_f32_igemm_6x16__avx2, 6, 16, .avx2), ("f32_igemm_8x32__avx512", kiln_f32_igemm_8x32__avx512, 8, 32, .avx512)]
            #endif
            return all
        }()
        var rng = Rng(state: 11)
        for (name, uk, mr, nr, isa) in kernels {
            guard isa.isRunnableOnHost else {
                print("skipped: \(name) (this CPU lacks \(isa.rawValue))")
                continue
            }
            // Image h × w × c, window kh × kw, stride s, dilation d, zero padding p on every side.
            for (h, w, c, kh, kw, s, d, p, n) in [(5, 7, 3, 3, 3, 1, 1, 1, 5), (9, 8, 4, 3, 2, 2, 1, 1, 2 * nr + 3), (6, 6, 1, 1, 1, 1, 1, 0, nr),
                                                  (7, 9, 5, 3, 3, 1, 2, 2, nr - 1), (4, 13, 2, 5, 5, 2, 1, 2, 1)] {
                let (hp, wp) = (h + 2 * p, w + 2 * p)
                let oh = (hp - (kh - 1) * d - 1) / s + 1, ow = (wp - (kw - 1) * d - 1) / s + 1
                let image = (0 ..< h * w * c).map { _ in rng.next() }
                var padded = [Float](repeating: 0, count: hp * wp * c)
                kiln_f32_pad_planes(1, h, w, c, image, p, p, hp, wp, &padded)
                let k = kh * kw * c
                var offsets: [Int32] = []
                for ky in 0 ..< kh { for kx in 0 ..< kw { offsets.append(Int32((ky * d * wp + kx * d) * c)) } }
                // Explicit im2col rows of the padded image (runs of c channels per tap).
                var a = [Float](repeating: 0, count: oh * ow * k)
                for r in 0 ..< oh * ow { for q in 0 ..< k { a[r * k + q] = padded[((r / ow) * s * wp + (r % ow) * s) * c + Int(offsets[q / c]) + q % c] } }
                let bm = (0 ..< k * n).map { _ in rng.next() }, bias = (0 ..< n).map { _ in rng.next() }
                let residual = (0 ..< oh * ow * n).map { _ in rng.next() }
                let panels = (n + nr - 1) / nr
                var packed = [Float](repeating: 0, count: panels * k * nr)
                kiln_f32_pack_b(k, n, nr, bm, n, 1, &packed)
                let plain = reference(oh * ow, n, k, a, bm)
                let m = oh * ow
                // Pixel ranges starting at each offset of a tile: every remainder tile size is run.
                for begin in Set((1 ... mr).map { min($0, m - 1) }).sorted() {
                    for (code, alpha, beta) in [(Int32(KILN_UNARY_NONE), Float(0), Float(0)), (Int32(KILN_UNARY_HARD_SWISH), 0, 0), (Int32(KILN_UNARY_SIGMOID), 0, 0)] {
                        for accumulate in [false, true] {
                            var want = plain
                            for i in 0 ..< m { for j in 0 ..< n { want[i * n + j] += bias[j] + (accumulate ? residual[i * n + j] : 0) } }
                            var e = kiln_epilogue()
                            e.activation = code; e.alpha = alpha; e.beta = beta
                            kiln_f32_epilogue(m, n, &want, n, nil, &e)
                            var out = accumulate ? residual : [Float](repeating: .nan, count: m * n)
                            bias.withUnsafeBufferPointer { cb in packed.withUnsafeBufferPointer { pb in padded.withUnsafeBufferPointer { xp in
                                var b = kiln_packed_b()
                                b.kind = Int32(KILN_B_F32); b.k = k; b.n = n; b.nr = nr; b.data = UnsafeRawPointer(pb.baseAddress!)
                                var ep = e
                                ep.bias = cb.baseAddress; ep.accumulate = accumulate ? 1 : 0
                                // Rows [0, begin) over every panel, then [begin, m) split in two panel ranges.
                                kiln_f32_igemm(uk, mr, &b, xp.baseAddress, s * wp * c, s * c, ow, offsets, c, &out, n, 0, begin, 0, panels, &ep, nil)
                                kiln_f32_igemm(uk, mr, &b, xp.baseAddress, s * wp * c, s * c, ow, offsets, c, &out, n, begin, m, 0, 1, &ep, nil)
                                kiln_f32_igemm(uk, mr, &b, xp.baseAddress, s * wp * c, s * c, ow, offsets, c, &out, n, begin, m, 1, panels, &ep, nil)
                            } } }
                            for i in 0 ..< m * n where !(abs(out[i] - want[i]) <= 1e-4 * Float(k)) {
                                XCTFail("\(name) \(h)x\(w)x\(c) k\(kh)x\(kw) s\(s) d\(d) p\(p) n=\(n) activation \(code) residual \(accumulate) from \(begin): index \(i) got \(out[i]) want \(want[i])")
                                break
                            }
                        }
                    }
                }
                // Undilated rows read as one run of kw · c floats per kernel row (one offset per row).
                if d == 1 {
                    let rowOffsets = (0 ..< kh).map { Int32($0 * wp * c) }
                    var out = [Float](repeating: .nan, count: m * n)
                    packed.withUnsafeBufferPointer { pb in padded.withUnsafeBufferPointer { xp in
                        var b = kiln_packed_b()
                        b.kind = Int32(KILN_B_F32); b.k = k; b.n = n; b.nr = nr; b.data = UnsafeRawPointer(pb.baseAddress!)
                        var e = kiln_epilogue()
                        kiln_f32_igemm(uk, mr, &b, xp.baseAddress, s * wp * c, s * c, ow, rowOffsets, kw * c, &out, n, 0, m, 0, panels, &e, nil)
                    } }
                    for i in 0 ..< m * n where !(abs(out[i] - plain[i]) <= 1e-4 * Float(k)) {
                        XCTFail("\(name) \(h)x\(w)x\(c) k\(kh)x\(kw) s\(s) p\(p) n=\(n) kernel-row runs: index \(i) got \(out[i]) want \(plain[i])")
                        break
                    }
                }
            }
        }
    }

    /// The padded copy cut into row ranges (as threads share it) equals the whole copy, for NHWC
    /// cells and for planes, ranges that cross planes and padding rows included.
    func testPaddedCopyInRowRanges() {
        var rng = Rng(state: 5)
        for (planes, h, w, inner, pt, pl, pb, pr) in [(1, 5, 4, 3, 1, 2, 1, 0), (3, 4, 6, 1, 3, 3, 2, 3), (2, 1, 1, 8, 0, 0, 1, 1)] {
            let (hp, wp) = (h + pt + pb, w + pl + pr)
            let x = (0 ..< planes * h * w * inner).map { _ in rng.next() }
            var whole = [Float](repeating: .nan, count: planes * hp * wp * inner)
            kiln_f32_pad_planes(planes, h, w, inner, x, pt, pl, hp, wp, &whole)
            for parts in [1, 2, 3, 7] {
                var split = [Float](repeating: .nan, count: whole.count)
                let rows = planes * hp
                for i in 0 ..< parts { kiln_f32_pad_rows(planes, h, w, inner, x, pt, pl, hp, wp, &split, rows * i / parts, rows * (i + 1) / parts) }
                XCTAssertEqual(split, whole, "planes \(planes) \(h)x\(w)x\(inner) pads \(pt),\(pl),\(pb),\(pr) in \(parts) parts")
            }
            // Planes gathered into cells: cell (r, x) channel ch is plane ch's padded (r, x).
            if inner == 1 {
                var cells = [Float](repeating: .nan, count: hp * wp * planes)
                for i in 0 ..< 3 { kiln_f32_pad_planes_to_cells(planes, h, w, x, pt, pl, hp, wp, &cells, hp * i / 3, hp * (i + 1) / 3) }
                for r in 0 ..< hp { for col in 0 ..< wp { for ch in 0 ..< planes {
                    XCTAssertEqual(cells[(r * wp + col) * planes + ch], whole[(ch * hp + r) * wp + col], "cell (\(r), \(col)) channel \(ch)")
                } } }
            }
            // A cell inside the image lands at its padded place; the borders are zeros.
            XCTAssertEqual(whole[((planes - 1) * hp + pt) * wp * inner + pl * inner], x[(planes - 1) * h * w * inner])
            XCTAssertEqual(whole[0], pt + pl > 0 ? 0 : x[0])
        }
    }

    /// Channels-last pooling in every vector variant against a direct loop: max (NaN wins) and
    /// average (padding counted or not), channel counts around the 4-vector blocks and the tail.
    func testPool2DNHWCVariants() {
        let variants = vectorVariants(Int32(KILN_VECTOR_POOL2D_NHWC), "f32_pool2d_nhwc").map { ($0.isa.rawValue, $0.config.pool2dNHWC) }
        var rng = Rng(state: 9)
        for (h, w, c, k, s, p) in [(7, 6, 3, 3, 2, 1), (5, 5, 37, 3, 1, 1), (6, 7, 70, 5, 1, 2), (4, 4, 129, 2, 2, 0)] {
            let oh = (h + 2 * p - k) / s + 1, ow = (w + 2 * p - k) / s + 1
            var x = (0 ..< h * w * c).map { _ in rng.next() }
            x[5 * c / 2] = .nan
            for (isMax, countPad) in [(Int32(1), Int32(0)), (0, 0), (0, 1)] {
                var want = [Float](repeating: 0, count: oh * ow * c)
                for oy in 0 ..< oh { for ox in 0 ..< ow { for ch in 0 ..< c {
                    var acc: Float = isMax == 1 ? -.infinity : 0
                    var inside = 0, counted = 0
                    for ky in 0 ..< k { for kx in 0 ..< k {
                        let (iy, ix) = (oy * s - p + ky, ox * s - p + kx)
                        if iy < h + p, ix < w + p { counted += 1 }
                        guard iy >= 0, iy < h, ix >= 0, ix < w else { continue }
                        inside += 1
                        let v = x[(iy * w + ix) * c + ch]
                        if isMax == 1 { if v > acc || v.isNaN { acc = v } } else { acc += v }
                    } }
                    want[(oy * ow + ox) * c + ch] = isMax == 1 ? acc : acc / Float(countPad == 1 ? counted : inside)
                } } }
                for (name, pool) in variants {
                    var y = [Float](repeating: .nan, count: want.count)
                    pool(isMax, countPad, h, w, c, x, k, k, s, s, 1, 1, p, p, p, p, oh, ow, 0, oh, &y)
                    for i in want.indices where !(abs(y[i] - want[i]) <= 1e-5 || y[i].isNaN && want[i].isNaN) {
                        XCTFail("\(name) \(h)x\(w)x\(c) k\(k) s\(s) p\(p) max \(isMax) countPad \(countPad): index \(i) got \(y[i]) want \(want[i])")
                        break
                    }
                }
            }
        }
    }

    /// Matrix transposes (the channels-first ↔ channels-last copies) in every variant, over row
    /// ranges that start and end off the 8 × 8 blocks.
    func testTransposeRows() {
        var variants: [(String, (Int, Int, UnsafePointer<Float>?, UnsafeMutablePointer<Float>?, Int, Int) -> Void)] = [
            ("scalar", kiln_f32_transpose_rows__scalar), ("dispatch", kiln_f32_transpose_rows),
        ]
        #if arch(x86_64)
        if ISA.avx2.isRunnableOnHost { variants.append(("avx2", kiln_f32_transpose_rows__avx2)) } else { print("skipped: transpose_rows__avx2 (this CPU lacks avx2)") }
        #endif
        for (name, f) in variants {
            for rows in [1, 7, 8, 9, 17, 40] { for cols in [1, 3, 8, 13, 24] {
                let x = (0 ..< rows * cols).map { Float($0) }
                var y = [Float](repeating: .nan, count: rows * cols)
                let split = min(rows, 3)
                f(rows, cols, x, &y, 0, split)
                f(rows, cols, x, &y, split, rows)
                for r in 0 ..< rows { for c in 0 ..< cols where y[c * rows + r] != x[r * cols + c] {
                    XCTFail("\(name) \(rows)x\(cols): (\(r), \(c)) got \(y[c * rows + r])")
                    return
                } }
            } }
        }
    }

    /// Global pools against plain Swift at sizes around the vector width; a NaN never wins the max.
    func testGlobalPools() {
        for n in [1, 7, 8, 15, 16, 17, 33, 508] {
            var x = (0 ..< 3 * n).map { Float(sin(Double($0) * 0.77)) * 5 }
            x[n / 2] = .nan // in the first plane
            var maxes = [Float](repeating: 0, count: 3), means = maxes
            kiln_f32_global_max_pool__scalar(3, n, x, &maxes)
            kiln_f32_global_average_pool__scalar(3, n, x, &means)
            for c in 0 ..< 3 {
                let plane = x[c * n ..< (c + 1) * n]
                XCTAssertEqual(maxes[c], plane.filter { !$0.isNaN }.max() ?? -.infinity, "max of \(n)")
                if c > 0 { XCTAssertEqual(means[c], plane.reduce(0, +) / Float(n), accuracy: 1e-5, "mean of \(n)") }
            }
        }
    }

    func testEpilogueActivations() {
        let x: [Float] = [-4, -1, -0.25, 0, 0.5, 2, 7]
        let cases: [(Int32, Float, Float, (Float) -> Float)] = [
            (Int32(KILN_UNARY_RELU), 0, 0, { max(0, $0) }),
            (Int32(KILN_UNARY_HARD_SWISH), 0, 0, { $0 * max(0, min(1, $0 / 6 + 0.5)) }),
            (Int32(KILN_UNARY_HARD_SIGMOID), 0.2, 0.5, { max(0, min(1, 0.2 * $0 + 0.5)) }),
            (Int32(KILN_UNARY_GELU), 0, 0, { 0.5 * $0 * (1 + erff($0 / 2.0.squareRoot().float)) }),
            (Int32(KILN_UNARY_CLIP), -1, 6, { min(6, max(-1, $0)) }),
            (Int32(KILN_UNARY_SIGMOID), 0, 0, { 1 / (1 + expf(-$0)) }),
            (Int32(KILN_UNARY_TANH), 0, 0, { tanhf($0) }),
        ]
        let bias: [Float] = [0.5]
        for (code, alpha, beta, f) in cases {
            var c = x
            var e = kiln_epilogue()
            e.activation = code; e.alpha = alpha; e.beta = beta
            kiln_f32_epilogue(x.count, 1, &c, 1, bias, &e)
            for (got, v) in zip(c, x) { XCTAssertEqual(got, f(v + 0.5), accuracy: 1e-6, "activation \(code) at \(v)") }
        }
    }

    /// The normalization family's variants this host runs, each against the formulas.
    func testSoftmaxAndLayerNorm() {
        let x: [Float] = (0 ..< 24).map { Float($0 % 7) - 3 }
        for isa in [ISA.scalar, .avx2] where isa.isRunnableOnHost {
            let k = NormalizationKernels(isa)
            var y = [Float](repeating: 0, count: 24)
            k.softmax(Int32(KILN_SOFTMAX), 3, 8, 1, x, &y)
            for r in 0 ..< 3 {
                let row = x[r * 8 ..< r * 8 + 8], m = row.max()!
                let e = row.map { expf($0 - m) }, s = e.reduce(0, +)
                for i in 0 ..< 8 { XCTAssertEqual(y[r * 8 + i], e[i] / s, accuracy: 1e-6, "\(isa)") }
            }
            // Softmax over the middle axis of [2, 3, 4].
            k.softmax(Int32(KILN_SOFTMAX), 2, 3, 4, x, &y)
            for o in 0 ..< 2 { for i in 0 ..< 4 {
                let col = (0 ..< 3).map { x[o * 12 + $0 * 4 + i] }, m = col.max()!
                let e = col.map { expf($0 - m) }, s = e.reduce(0, +)
                for r in 0 ..< 3 { XCTAssertEqual(y[o * 12 + r * 4 + i], e[r] / s, accuracy: 1e-6, "\(isa) strided") }
            } }
            let gamma: [Float] = (0 ..< 8).map { 1 + Float($0) / 10 }, beta: [Float] = (0 ..< 8).map { Float($0) / 100 }
            k.layerNorm(3, 8, x, gamma, beta, 1e-5, &y)
            for r in 0 ..< 3 {
                let row = Array(x[r * 8 ..< r * 8 + 8])
                let mean = row.reduce(0, +) / 8, variance = row.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / 8
                for i in 0 ..< 8 {
                    XCTAssertEqual(y[r * 8 + i], (row[i] - mean) / (variance + 1e-5).squareRoot() * gamma[i] + beta[i], accuracy: 1e-5, "\(isa)")
                }
            }
        }
    }

    func testBinaryBroadcastStrides() {
        let x: [Float] = (0 ..< 12).map(Float.init), z: [Float] = [10, 20, 30, 40]
        var y = [Float](repeating: 0, count: 12)
        let shape = [3, 4]
        kiln_binary_nd__scalar(Int32(KILN_BINARY_ADD), Int32(KILN_DT_F32), 2, shape, x, [4, 1], z, [0, 1], &y) // row broadcast
        XCTAssertEqual(y, (0 ..< 12).map { Float($0) + z[$0 % 4] })
        kiln_binary_nd__scalar(Int32(KILN_BINARY_DIV), Int32(KILN_DT_F32), 2, shape, x, [4, 1], z, [1, 0], &y) // column broadcast
        XCTAssertEqual(y, (0 ..< 12).map { Float($0) / z[$0 / 4] })
        var flags = [UInt8](repeating: 9, count: 12)
        kiln_binary_nd__scalar(Int32(KILN_BINARY_GREATER), Int32(KILN_DT_F32), 2, shape, x, [4, 1], [Float(5)], [0, 0], &flags)
        XCTAssertEqual(flags, (0 ..< 12).map { $0 > 5 ? 1 : 0 })
    }

    /// The host's arch agrees with the CPU flags Linux reports (which already account for XCR0).
    func testHostArchitectureMatchesCPUFlags() throws {
        #if arch(x86_64)
        let info = try String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)
        guard let line = info.split(separator: "\n").first(where: { $0.hasPrefix("flags") }) else { throw XCTSkip("no flags line") }
        let flags = Set(line.split(separator: ":")[1].split(separator: " ").map(String.init))
        let v3 = ["avx2", "fma", "f16c", "bmi1", "bmi2", "movbe"].allSatisfy(flags.contains)
        let v4 = v3 && ["avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"].allSatisfy(flags.contains)
        let expected = v4 ? "x86_64_v4" : v3 ? "x86_64_v3" : flags.contains("sse4_2") ? "x86_64_v2" : "x86_64"
        XCTAssertEqual(Architecture.host?.name, expected)
        XCTAssertEqual(kiln_cpu_features(), kiln_cpu_detect())
        #endif
    }
}

private extension Double {
    var float: Float { Float(self) }
}
