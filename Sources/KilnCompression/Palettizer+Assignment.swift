import CKilnCompression
import CKilnKernels
import Dispatch
import KilnFormat

extension Palettizer {
    /// The last pass of k-means palettization: every element of the weight assigned its group's
    /// nearest entry, the indices packed, and the reconstruction error summed, in parts across the
    /// cores. Built by ``palettizeKMeans(_:shape:weightType:setting:axis:grouped:storage:)``.
    struct KMeansAssignment: @unchecked Sendable {
        /// The whole weight, element by element.
        let tensor: GroupElements
        let count: Int
        /// Bits per index.
        let bits: Int
        /// Entries per group's table, and midpoints per group.
        let entries: Int
        let span: Int
        let channels: Int
        let groupSize: Int
        let inner: Int
        let isHalf: Bool
        /// One group and no scales: the elements are read as one stretch.
        let whole: Bool
        let scales: [Float]?
        /// Each group's table and the midpoints between its entries.
        let lut: [Float]
        let mids: [Double]
        /// The entry of each 16-bit bin of keys, per group (-1: search), or empty.
        let binIndex: [Int16]
        /// The entry of each float16 bit pattern, per group, or empty; and each pattern's value.
        let halfTable: [UInt8]
        let halfValues: [Float]
        /// The weight's storage, whose pages are let go as each part is read.
        let storage: ByteStorage?

        /// The tables in memory, as the threads of the pass read them, and the packed indices.
        struct Tables: @unchecked Sendable {
            let table: UnsafeBufferPointer<Float>
            let cut: UnsafeBufferPointer<Double>
            let sc: UnsafeBufferPointer<Float>
            let known: UnsafeBufferPointer<Int16>
            let halfIndex: UnsafeBufferPointer<UInt8>?
            let halfValue: UnsafePointer<Float>?
            let dst: UnsafeMutablePointer<UInt8>
        }

        /// Assigns, packs and measures, in chunks of whole bytes of indices.
        /// - Returns: The packed indices, and the sums of squared values and squared errors.
        func pack() -> (indices: ByteStorage, signal: Double, noise: Double) {
            let parts = max(1, min(256, count >> 16))
            let bounds = (0 ... parts).map { i in i == parts ? count : (count * i / parts) & ~7 }
            var signal = [Double](repeating: 0, count: parts), noise = signal
            let indexBytes = (count * bits + 7) / 8
            let scaleCopy = scales ?? []
            let indexStorage = ByteStorage(byteCount: indexBytes) { out in
                let dst = out.baseAddress!.assumingMemoryBound(to: UInt8.self)
                lut.withUnsafeBufferPointer { lutp in mids.withUnsafeBufferPointer { midp in scaleCopy.withUnsafeBufferPointer { scp in binIndex.withUnsafeBufferPointer { bip in halfTable.withUnsafeBufferPointer { htp in halfValues.withUnsafeBufferPointer { hvp in
                    signal.withUnsafeMutableBufferPointer { sigp in noise.withUnsafeMutableBufferPointer { noip in
                        let tables = Tables(table: lutp, cut: midp, sc: scp, known: bip, halfIndex: htp.isEmpty ? nil : Optional(htp),
                                            halfValue: hvp.baseAddress, dst: dst)
                        nonisolated(unsafe) let (sig, noi) = (sigp, noip)
                        DispatchQueue.concurrentPerform(iterations: parts) { part in
                            guard bounds[part] < bounds[part + 1] else { return }
                            let sums = assign(bounds[part] ..< bounds[part + 1], tables)
                            sig[part] = sums.signal
                            noi[part] = sums.noise
                        }
                    } }
                } } } } } }
            }
            return (indexStorage, signal.reduce(0, +), noise.reduce(0, +))
        }

        /// One part: the elements at tensor positions `range` (starting on a whole byte of
        /// indices) assigned, packed into `t.dst`, and their pages let go.
        /// - Returns: The part's sums of squared values and squared errors.
        func assign(_ range: Range<Int>, _ t: Tables) -> (signal: Double, noise: Double) {
            let (table, cut, sc, known, halfIndex, halfValue, dst) = (t.table, t.cut, t.sc, t.known, t.halfIndex, t.halfValue, t.dst)
            let hasScale = scales != nil
            var p = range.lowerBound
            let end = range.upperBound
            let block = 1 << 16
            return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: block) { idx in
                withUnsafeTemporaryAllocation(of: Float.self, capacity: 4096) { conv in
                    var c = (p / inner) % channels, i = p % inner
                    var packed = p, filled = 0
                    var sumSignal = 0.0, sumNoise = 0.0
                    while p < end {
                        let g = c / groupSize
                        let scale: Float = hasScale ? sc[c] : 1
                        let n = whole ? end - p : min(inner - i, end - p)
                        var done = 0
                        while done < n {
                            let m = min(n - done, 4096, block - filled)
                            if let halfIndex {
                                // Unscaled float16: every bit pattern's entry is known.
                                kiln_palettize_assign_half(tensor.base.advanced(by: 2 * p).assumingMemoryBound(to: UInt16.self), m,
                                                           halfValue, halfIndex.baseAddress! + g * 65536, table.baseAddress! + g * entries,
                                                           idx.baseAddress! + filled, &sumSignal, &sumNoise)
                            } else {
                                let x: UnsafePointer<Float>
                                if isHalf {
                                    let h = tensor.base.advanced(by: 2 * p).assumingMemoryBound(to: Float16.self)
                                    for e in 0 ..< m { conv[e] = Float(h[e]) }
                                    x = UnsafePointer(conv.baseAddress!)
                                } else {
                                    x = tensor.base.advanced(by: 4 * p).assumingMemoryBound(to: Float.self)
                                }
                                kiln_palettize_assign(x, m, scale, hasScale ? 1 : 0, cut.baseAddress! + g * span, span,
                                                      table.baseAddress! + g * entries, known.isEmpty ? nil : known.baseAddress! + g * 65536,
                                                      idx.baseAddress! + filled, &sumSignal, &sumNoise)
                            }
                            filled += m
                            done += m
                            p += m
                            if filled == block {
                                kiln_pack_bits(idx.baseAddress, filled, UInt32(bits), dst + packed * bits / 8)
                                packed += filled
                                filled = 0
                            }
                        }
                        if !whole {
                            i += n
                            if i == inner { i = 0; c = c + 1 == channels ? 0 : c + 1 }
                        }
                    }
                    if filled > 0 { kiln_pack_bits(idx.baseAddress, filled, UInt32(bits), dst + packed * bits / 8) }
                    let size = isHalf ? 2 : 4
                    storage?.releaseResidentPages(size * range.lowerBound ..< size * end)
                    return (sumSignal, sumNoise)
                }
            }
        }
    }
}
