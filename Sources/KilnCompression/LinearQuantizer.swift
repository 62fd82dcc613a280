import Dispatch
import Foundation
import KilnFormat

/// Linear quantization with coremltools' arithmetic (specs/compression.md): the same
/// ranges, scales, zero points and rounding, computed in the weight's own float type.
enum LinearQuantizer {
    /// Integer range of a storage type in a mode.
    static func range(_ dtype: String, symmetric: Bool) -> (min: Int, max: Int, bits: Int, signed: Bool) {
        let bits = dtype.hasSuffix("8") ? 8 : 4
        let signed = dtype.hasPrefix("int")
        let levels = 1 << bits
        var (lo, hi) = signed ? (-levels / 2, levels / 2 - 1) : (0, levels - 1)
        if symmetric { if signed { lo += 1 } else { hi -= 1 } }
        return (lo, hi, bits, signed)
    }

    struct Result {
        var weight: QuantizedWeight
        /// Reconstruction SNR in dB (`+∞` when exact).
        var snr: Double
    }

    /// Quantizes `values` (C order, `shape`) with one scale (and zero point) per block of `blockShape`,
    /// where `blockShape[d]` divides `shape[d]` and gives the number of blocks along dim `d`.
    /// Rows of the last dim are quantized on all cores into a byte per element (the int8/uint8
    /// encoding itself, or 4-bit values packed after), with the SNR summed per chunk in order.
    static func quantize<T: QuantizableFloat>(_ values: UnsafeBufferPointer<T>, shape: [Int], blocks: [Int],
                                                               dtype: String, symmetric: Bool) -> Result {
        let r = range(dtype, symmetric: symmetric)
        let rows = RowBlocks(shape, blocks)
        let blockCount = blocks.reduce(1, *)
        var lo = [T](repeating: .infinity, count: blockCount), hi = [T](repeating: -.infinity, count: blockCount)
        for row in 0 ..< rows.count {
            let base = row * rows.length, first = rows.firstBlock(row)
            for j in 0 ..< rows.length {
                let b = first + rows.offset(j), v = values[base + j]
                if v < lo[b] { lo[b] = v }
                if v > hi[b] { hi[b] = v }
            }
        }
        var scale = [T](repeating: 0, count: blockCount), zero = [T](repeating: 0, count: blockCount)
        let span = T(r.max - r.min)
        for b in 0 ..< blockCount {
            var (vmin, vmax) = (lo[b], hi[b])
            if symmetric {
                let m = max(abs(vmin), abs(vmax))
                (vmin, vmax) = (-m, m)
            } else {
                vmin = min(0, vmin)
                vmax = max(0, vmax)
            }
            scale[b] = (vmax - vmin) / span
            if symmetric {
                zero[b] = r.signed ? 0 : T(r.max / 2)
            } else if vmax - vmin > 0 {
                let z = (T(r.min) * vmax - T(r.max) * vmin) / (vmax - vmin)
                zero[b] = min(max(z.rounded(.toNearestOrEven), T(r.min)), T(r.max))
            } else {
                zero[b] = min(max(0, T(r.min)), T(r.max))
            }
        }
        let storage: DataType = dtype == "int8" ? .int8 : dtype == "uint8" ? .uint8 : dtype == "int4" ? .int4 : .uint4
        let parts = max(1, min(64, rows.count, values.count >> 16))
        var signal = [Double](repeating: 0, count: parts), noise = signal
        let (qmin, qmax) = (T(r.min), T(r.max))
        let bytes = ByteStorage(byteCount: values.count) { out in
            nonisolated(unsafe) let (q, src) = (out.baseAddress!.assumingMemoryBound(to: UInt8.self), values)
            scale.withUnsafeBufferPointer { sp in zero.withUnsafeBufferPointer { zp in
                signal.withUnsafeMutableBufferPointer { sig in noise.withUnsafeMutableBufferPointer { noi in
                    nonisolated(unsafe) let (scales, zeros, sigp, noip) = (sp, zp, sig, noi)
                    DispatchQueue.concurrentPerform(iterations: parts) { part in
                        var s2 = 0.0, n2 = 0.0
                        for row in rows.count * part / parts ..< rows.count * (part + 1) / parts {
                            let base = row * rows.length, first = rows.firstBlock(row)
                            for j in 0 ..< rows.length {
                                let b = first + rows.offset(j)
                                let s = scales[b], z = zeros[b], x = src[base + j]
                                var v = s == 0 ? z : (x / s).rounded(.toNearestOrEven) + z
                                v = min(max(v, qmin), qmax)
                                let qi = Int(v.float)
                                q[base + j] = UInt8(truncatingIfNeeded: qi)
                                let xf = Double(x.float)
                                let d = xf - Double(s.float * Float(qi - Int(z.float)))
                                s2 += xf * xf
                                n2 += d * d
                            }
                        }
                        sigp[part] = s2
                        noip[part] = n2
                    }
                } }
            } }
        }
        let totalSignal = signal.reduce(0, +), totalNoise = noise.reduce(0, +)
        let data = r.bits == 8 ? bytes : ByteStorage(byteCount: (values.count + 1) / 2) { out in
            let q = bytes.bytes.bindMemory(to: UInt8.self)
            for i in 0 ..< values.count { out[i / 2] |= (q[i] & 0xF) << UInt8(4 * (i % 2)) }
        }
        let zeroInts = zero.map { Int($0) }
        let zeroPoint: WeightBlob? = symmetric && r.signed ? nil
            : WeightBlob(dtype: storage, shape: blocks, data: ByteStorage(pack(zeroInts, storage)))
        let scaleBytes = scale.withUnsafeBytes { Array($0) }
        return Result(
            weight: QuantizedWeight(
                data: WeightBlob(dtype: storage, shape: shape, data: data),
                scale: WeightBlob(dtype: T.scalarType, shape: blocks, data: ByteStorage(scaleBytes)),
                zeroPoint: zeroPoint),
            snr: totalNoise == 0 ? .infinity : 10 * log10(totalSignal / totalNoise))
    }

    /// Blocks along the rows of the last dim: row `r`'s first element is in block `firstBlock(r)`,
    /// and element `j` of a row in that block plus `offset(j)`.
    struct RowBlocks {
        let count: Int
        let length: Int
        private let outer: [Int], outerBlocks: [Int], sizes: [Int], blockStrides: [Int]
        private let lastSize: Int, lastBlocks: Int

        init(_ shape: [Int], _ blocks: [Int]) {
            length = shape.last ?? 1
            count = shape.dropLast().reduce(1, *)
            outer = Array(shape.dropLast())
            outerBlocks = Array(blocks.dropLast())
            sizes = zip(shape, blocks).map { $0 / max($1, 1) }
            var strides = [Int](repeating: 1, count: blocks.count)
            for d in stride(from: blocks.count - 2, through: 0, by: -1) { strides[d] = strides[d + 1] * blocks[d + 1] }
            blockStrides = strides
            lastBlocks = blocks.last ?? 1
            lastSize = sizes.last ?? 1
        }

        func firstBlock(_ row: Int) -> Int {
            var rest = row, b = 0
            for d in stride(from: outer.count - 1, through: 0, by: -1) {
                let i = rest % outer[d]
                rest /= outer[d]
                if outerBlocks[d] > 1 { b += i / sizes[d] * blockStrides[d] }
            }
            return b
        }

        @inline(__always) func offset(_ j: Int) -> Int { lastBlocks > 1 ? j / lastSize : 0 }
    }

    static func pack(_ values: [Int], _ dtype: DataType) -> [UInt8] {
        switch dtype {
        case .int8: return values.map { UInt8(bitPattern: Int8($0)) }
        case .uint8: return values.map { UInt8($0) }
        default: return PackedBits.pack(values, bits: 4)
        }
    }
}

/// The weight types quantized, with a concrete conversion to `Float` (so the hot loop does not
/// go through generic integer conversion).
protocol QuantizableFloat: BinaryFloatingPoint, NDArrayScalar {
    var float: Float { get }
}

extension Float: QuantizableFloat {
    @inline(__always) var float: Float { self }
}

extension Float16: QuantizableFloat {
    @inline(__always) var float: Float { Float(self) }
}
