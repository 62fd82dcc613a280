import CKilnKernels
import Dispatch
import Foundation
import KilnFormat

extension Palettizer {
    /// Groups of at most this many elements are clustered by the plain dynamic programming over
    /// their sorted values; larger ones by ``BoundedKMeans`` in place.
    static let plainKMeansLimit = 4096

    /// k-means palettization read in place from the weight's bytes: per-channel scales (one pass),
    /// exact k-means per group (groups across cores), then one pass that assigns every element
    /// its nearest entry, packs the index and sums the reconstruction error. Nothing the size of
    /// the weight is allocated but the packed indices.
    static func palettizeKMeans(_ bytes: UnsafeRawBufferPointer, shape: [Int], weightType: DataType, setting s: CompressionSetting,
                                axis: Int, grouped: Bool, storage: ByteStorage? = nil) throws -> Result {
        let entries = 1 << s.nbits
        let (channels, groupSize, groups, inner, outer) = try layout(shape, axis: axis, groupSize: grouped ? s.groupSize : nil)
        let count = outer * channels * inner
        let isHalf = weightType == .float16
        let base = bytes.baseAddress!
        // The whole weight, element by element.
        let tensor = GroupElements(base: base, isHalf: isHalf, runs: 1, channels: count, inner: 1, runStride: count, offset: 0, scales: nil)
        // Optional per-channel scale: each output channel divided by its largest magnitude.
        let scales = s.enablePerChannelScale ? channelScales(tensor, outer: outer, channels: channels, inner: inner) : nil
        let lutType: DataType = s.lutDtype.flatMap { DataType(rawValue: $0) } ?? weightType
        let centers = try centersOfGroups(tensor, groups: groups, groupSize: groupSize, outer: outer, channels: channels, inner: inner,
                                          scales: scales, storage: storage, entries: entries)
        let (lut, mids) = lookupTables(centers, entries: entries, lutType: lutType)
        let span = entries
        // Where few groups share the work, each 16-bit bin of keys whose values all take one entry
        // has it looked up instead of searched.
        let binIndex: [Int16] = groups <= 8 && !(isHalf && scales == nil) ? (0 ..< groups).flatMap { g in
            entryOfBins(mids: Array(mids[g * span ..< (g + 1) * span]), span: span)
        } : []
        // Unscaled float16 weights (of few groups): the entry of each of the 65536 bit patterns, per group.
        let halfTable: [UInt8] = isHalf && scales == nil && groups <= 64 ? entryOfHalfPatterns(mids: mids, groups: groups, span: span) : []
        let halfValues: [Float] = halfTable.isEmpty ? [] : (0 ..< 65536).map { Float(Float16(bitPattern: UInt16($0))) }
        let assignment = KMeansAssignment(tensor: tensor, count: count, bits: s.nbits, entries: entries, span: span, channels: channels,
                                          groupSize: groupSize, inner: inner, isHalf: isHalf, whole: groups == 1 && scales == nil,
                                          scales: scales, lut: lut, mids: mids, binIndex: binIndex, halfTable: halfTable,
                                          halfValues: halfValues, storage: storage)
        let (indexStorage, totalSignal, totalNoise) = assignment.pack()
        var lutShape = [Int](repeating: 1, count: shape.count)
        lutShape[axis] = groups
        var scaleShape = [Int](repeating: 1, count: shape.count)
        scaleShape[axis] = channels
        let indexType: DataType = [1: .uint1, 2: .uint2, 3: .uint3, 4: .uint4, 6: .uint6, 8: .uint8][s.nbits]!
        let weight = PalettizedWeight(
            indices: WeightBlob(dtype: indexType, shape: shape, data: indexStorage),
            lut: WeightBlob(dtype: lutType, shape: lutShape + [entries], data: ByteStorage(floatBytes(lut, lutType))),
            scale: scales.map { WeightBlob(dtype: weightType, shape: scaleShape, data: ByteStorage(floatBytes($0, weightType))) })
        return Result(weight: weight, snr: totalNoise == 0 ? .infinity : 10 * log10(totalSignal / totalNoise))
    }

    /// Each output channel's largest magnitude (1 for a channel of zeros), rounded to float16 for
    /// a float16 weight: the per-channel scales of `tensor` (`outer` runs of `channels × inner`).
    static func channelScales(_ tensor: GroupElements, outer: Int, channels: Int, inner: Int) -> [Float] {
        var sc = [Float](repeating: 0, count: channels)
        for o in 0 ..< outer { for c in 0 ..< channels {
            let start = (o * channels + c) * inner
            var m = sc[c]
            for i in 0 ..< inner { m = max(m, abs(tensor.raw(start + i))) }
            sc[c] = m
        } }
        for c in 0 ..< channels where sc[c] == 0 { sc[c] = 1 }
        if tensor.isHalf { sc = sc.map { Float(Float16($0)) } }
        return sc
    }

    /// The k-means centers of every group of `groupSize` output channels (values divided by their
    /// channel's scale, when there are scales), the groups spread over the cores.
    /// - Throws: ``NonFiniteWeight`` when a group holds a NaN or infinite value.
    static func centersOfGroups(_ tensor: GroupElements, groups: Int, groupSize: Int, outer: Int, channels: Int, inner: Int,
                                scales: [Float]?, storage: ByteStorage?, entries: Int) throws -> [[Float]] {
        let isHalf = tensor.isHalf
        var centers = [[Float]](repeating: [], count: groups)
        var failed = [Bool](repeating: false, count: groups)
        let scaleCopy = scales ?? []
        scaleCopy.withUnsafeBufferPointer { sp in
            centers.withUnsafeMutableBufferPointer { cp in
                failed.withUnsafeMutableBufferPointer { fp in
                    nonisolated(unsafe) let (out, bad) = (cp, fp)
                    nonisolated(unsafe) let scalePointer = scales == nil ? nil : sp.baseAddress
                    DispatchQueue.concurrentPerform(iterations: groups) { g in
                        var source = GroupElements(base: tensor.base, isHalf: isHalf, runs: outer, channels: groupSize, inner: inner,
                                                   runStride: channels * inner, offset: g * groupSize * inner,
                                                   scales: scalePointer.map { $0 + g * groupSize })
                        source.storage = storage
                        do {
                            out[g] = try groupCenters(source, k: entries)
                        } catch {
                            bad[g] = true
                        }
                    }
                }
            }
        }
        if failed.contains(true) { throw NonFiniteWeight() }
        return centers
    }

    /// Tables: centers rounded to the LUT type, padded with the last (never chosen), `entries` per
    /// group. Elements choose among the real centers by the midpoints between them (ties to the
    /// lower): `entries` per group, +∞ past the last.
    static func lookupTables(_ centers: [[Float]], entries: Int, lutType: DataType) -> (lut: [Float], mids: [Double]) {
        let groups = centers.count
        var lut = [Float](repeating: 0, count: groups * entries)
        let span = entries
        var mids = [Double](repeating: .infinity, count: groups * span)
        for g in 0 ..< groups {
            var rounded = centers[g].map { Precision.round($0, to: lutType) }
            let active = max(rounded.count, 1)
            rounded += [Float](repeating: rounded.last ?? 0, count: entries - rounded.count)
            for e in 0 ..< entries { lut[g * entries + e] = Precision.round(rounded[e], to: lutType) }
            for i in 0 ..< active - 1 { mids[g * span + i] = (Double(rounded[i]) + Double(rounded[i + 1])) / 2 }
        }
        return (lut, mids)
    }

    /// The entry of each of the 65536 float16 bit patterns (0 for those not finite), per group of
    /// `span` midpoints.
    static func entryOfHalfPatterns(mids: [Double], groups: Int, span: Int) -> [UInt8] {
        (0 ..< groups).flatMap { g in
            (0 ..< 65536).map { h -> UInt8 in
                let x = Double(Float(Float16(bitPattern: UInt16(h))))
                guard x.isFinite else { return 0 }
                var at = 0, step = span >> 1
                while step > 0 {
                    at += x > mids[g * span + at + step - 1] ? step : 0
                    step >>= 1
                }
                return UInt8(at)
            }
        }
    }

    /// For each 16-bit bin of keys, the entry all its values take (the number of midpoints below
    /// them), or -1 when a midpoint falls inside the bin.
    static func entryOfBins(mids: [Double], span: Int) -> [Int16] {
        func entry(_ x: Double) -> Int {
            var at = 0, step = span >> 1
            while step > 0 {
                at += x > mids[at + step - 1] ? step : 0
                step >>= 1
            }
            return at
        }
        return (0 ..< 65536).map { b -> Int16 in
            let lo = BoundedKMeans.value(UInt32(b) << 16), hi = BoundedKMeans.value(UInt32(b) << 16 | 0xFFFF)
            guard lo.isFinite, hi.isFinite else { return -1 }
            let a = entry(Double(lo))
            return a == entry(Double(hi)) ? Int16(a) : -1
        }
    }

    /// Exact k-means centers of one group (ascending; fewer when it has fewer distinct values).
    /// - Throws: ``BoundedKMeans/NonFiniteValue`` when a value is NaN or infinite.
    static func groupCenters(_ source: GroupElements, k: Int) throws -> [Float] {
        if source.count > plainKMeansLimit { return try BoundedKMeans.centers(of: source, k: k) }
        var values: [Float] = []
        values.reserveCapacity(source.count)
        source.forEachValue(in: 0 ..< source.count) { values.append($0) }
        guard values.allSatisfy(\.isFinite) else { throw BoundedKMeans.NonFiniteValue() }
        return KMeans1D.centers(values, k: k)
    }
}
