import Dispatch
import KilnFormat

/// Palettization: each group of output channels gets a table of `2^nbits` values and
/// every element stores the index of its entry (specs/compression.md).
enum Palettizer {
    struct Result {
        var weight: PalettizedWeight
        /// Reconstruction SNR in dB (`+∞` when exact).
        var snr: Double
    }

    enum Refusal: Error {
        case skip(String)
    }

    /// A weight holding NaN or infinity, which k-means cannot cluster.
    struct NonFiniteWeight: Error {}

    /// Palettizes a weight's bytes (C order, `shape`, float32 or float16), one table per group of
    /// output channels along `axis` (or one for the tensor).
    static func palettize(_ bytes: UnsafeRawBufferPointer, shape: [Int], weightType: DataType, setting s: CompressionSetting,
                          axis: Int, grouped: Bool, storage: ByteStorage? = nil) throws -> Result {
        if s.mode == "uniform" || s.mode == "unique" {
            let values: [Float] = weightType == .float16 ? bytes.bindMemory(to: Float16.self).map { Float($0) }
                : Array(bytes.bindMemory(to: Float.self))
            let (result, decoded) = try palettizeInMemory(values, shape: shape, weightType: weightType, setting: s, axis: axis, grouped: grouped)
            return Result(weight: result, snr: Compressor.snr(values, decoded))
        }
        return try palettizeKMeans(bytes, shape: shape, weightType: weightType, setting: s, axis: axis, grouped: grouped, storage: storage)
    }

    /// Uniform and unique modes on the values in memory; returns the weight and its decoded values.
    static func palettizeInMemory(_ values: [Float], shape: [Int], weightType: DataType, setting s: CompressionSetting,
                                  axis: Int, grouped: Bool) throws -> (PalettizedWeight, [Float]) {
        var s = s
        if s.mode == "unique", !s.nbitsGiven {
            // As coremltools: the fewest supported bits that hold every group's distinct values.
            let distinct = Set(values).count
            s.nbits = [1, 2, 3, 4, 6, 8].first { 1 << $0 >= distinct } ?? 8
        }
        let entries = 1 << s.nbits
        let (channels, groupSize, groups, inner, outer) = try layout(shape, axis: axis, groupSize: grouped ? s.groupSize : nil)
        // Optional per-channel scale: each output channel divided by its largest magnitude.
        var scales: [Float]?
        var work = values
        if s.enablePerChannelScale {
            var sc = [Float](repeating: 0, count: channels)
            for o in 0 ..< outer { for c in 0 ..< channels { for i in 0 ..< inner {
                sc[c] = max(sc[c], abs(values[(o * channels + c) * inner + i]))
            } } }
            for c in 0 ..< channels where sc[c] == 0 { sc[c] = 1 }
            if weightType == .float16 { sc = sc.map { Float(Float16($0)) } }
            for o in 0 ..< outer { for c in 0 ..< channels { for i in 0 ..< inner {
                work[(o * channels + c) * inner + i] /= sc[c]
            } } }
            scales = sc
        }
        let lutType: DataType = s.lutDtype.flatMap { DataType(rawValue: $0) } ?? weightType
        var lut = [Float](repeating: 0, count: groups * entries)
        var indices = [Int](repeating: 0, count: values.count)
        for g in 0 ..< groups {
            // The group's elements, in C order.
            var positions: [Int] = []
            positions.reserveCapacity(values.count / groups)
            for o in 0 ..< outer { for c in g * groupSize ..< (g + 1) * groupSize { for i in 0 ..< inner {
                positions.append((o * channels + c) * inner + i)
            } } }
            let groupValues = positions.map { work[$0] }
            var table: [Float]
            var idx: [Int]
            switch s.mode {
            case "uniform":
                // coremltools' arithmetic: in the weight's own float type.
                (table, idx) = weightType == .float16
                    ? uniform(groupValues.map { Float16($0) }, entries: entries)
                    : uniform(groupValues, entries: entries)
            case "unique":
                let distinct = Array(Set(groupValues)).sorted()
                guard distinct.count <= entries else {
                    throw Refusal.skip("\(distinct.count) distinct values do not fit \(s.nbits) bits (unique mode)")
                }
                table = distinct + [Float](repeating: 0, count: entries - distinct.count)
                let position = Dictionary(uniqueKeysWithValues: distinct.enumerated().map { ($1, $0) })
                idx = groupValues.map { position[$0]! }
            default:
                preconditionFailure("k-means runs in palettizeKMeans")
            }
            table = table.map { Precision.round($0, to: lutType) }
            for (k, p) in positions.enumerated() { indices[p] = idx[k] }
            for e in 0 ..< entries { lut[g * entries + e] = table[e] }
        }
        var decoded = [Float](repeating: 0, count: values.count)
        for o in 0 ..< outer { for c in 0 ..< channels { for i in 0 ..< inner {
            let p = (o * channels + c) * inner + i
            decoded[p] = lut[(c / groupSize) * entries + indices[p]] * (scales?[c] ?? 1)
        } } }
        var lutShape = [Int](repeating: 1, count: shape.count)
        lutShape[axis] = groups
        var scaleShape = [Int](repeating: 1, count: shape.count)
        scaleShape[axis] = channels
        let indexType: DataType = [1: .uint1, 2: .uint2, 3: .uint3, 4: .uint4, 6: .uint6, 8: .uint8][s.nbits]!
        let indexBytes = s.nbits == 8 ? indices.map { UInt8($0) } : PackedBits.pack(indices, bits: s.nbits)
        return (PalettizedWeight(
            indices: WeightBlob(dtype: indexType, shape: shape, data: ByteStorage(indexBytes)),
            lut: WeightBlob(dtype: lutType, shape: lutShape + [entries], data: ByteStorage(floatBytes(lut, lutType))),
            scale: scales.map { WeightBlob(dtype: weightType, shape: scaleShape, data: ByteStorage(floatBytes($0, weightType))) }),
            decoded)
    }

    /// Output channels, channels per table, tables, and the element counts after and before the
    /// output axis.
    /// - Throws: ``Refusal/skip(_:)`` when the group size does not divide the channels.
    static func layout(_ shape: [Int], axis: Int, groupSize: Int?) throws -> (channels: Int, groupSize: Int, groups: Int, inner: Int, outer: Int) {
        let channels = shape[axis]
        let size = groupSize ?? channels
        guard size > 0, channels % size == 0 else {
            throw Refusal.skip("group_size \(size) does not divide the \(channels) output channels")
        }
        return (channels, size, channels / size, shape[(axis + 1)...].reduce(1, *), shape[..<axis].reduce(1, *))
    }

    /// Evenly spaced entries from min to max: `lo + i·(hi − lo)/(2^n − 1)`, indices
    /// `round((w − lo)/(hi − lo)·(2^n − 1))`, computed in `T` (entries in double, as coremltools).
    static func uniform<T: BinaryFloatingPoint>(_ values: [T], entries: Int) -> ([Float], [Int]) {
        let lo = values.min() ?? 0, hi = values.max() ?? 0
        let levels = T(entries - 1)
        let step = (hi - lo) / levels
        let table = (0 ..< entries).map { Float(Double($0) * Double(step) + Double(lo)) }
        let idx = values.map { v -> Int in
            guard hi > lo else { return 0 }
            return Int((((v - lo) / (hi - lo)) * levels).rounded(.toNearestOrEven))
        }
        return (table, idx)
    }

    static func floatBytes(_ values: [Float], _ type: DataType) -> [UInt8] {
        if type == .float16 { return values.map { Float16($0) }.withUnsafeBytes { Array($0) } }
        return values.withUnsafeBytes { Array($0) }
    }
}

/// Rounding to a narrower float type's precision.
enum Precision {
    static func round(_ v: Float, to type: DataType) -> Float {
        type == .float16 ? Float(Float16(v)) : v
    }
}
