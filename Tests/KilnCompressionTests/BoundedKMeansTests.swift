import Foundation
@testable import KilnCompression
import KilnFormat
import XCTest

/// The bounded k-means against the plain exact dynamic programming over every distinct value:
/// the same centers, bit for bit, on random and adversarial inputs.
final class BoundedKMeansTests: XCTestCase {
    struct Generator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 11
        }
        mutating func uniform() -> Double { Double(next() & ((1 << 53) - 1)) / Double(1 << 53) }
        mutating func normal() -> Double {
            let u = max(uniform(), 1e-300), v = uniform()
            return (-2 * log(u)).squareRoot() * cos(2 * .pi * v)
        }
    }

    func bounded(_ values: [Float], k: Int) throws -> [Float] {
        try values.withUnsafeBytes { raw in
            let source = GroupElements(base: raw.baseAddress!, isHalf: false, runs: 1, channels: 1, inner: values.count,
                                       runStride: values.count, offset: 0, scales: nil)
            return try BoundedKMeans.centers(of: source, k: k)
        }
    }

    func check(_ values: [Float], k: Int, _ label: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let want = KMeans1D.centers(values, k: k)
        let got = try bounded(values, k: k)
        XCTAssertEqual(got, want, "\(label): n \(values.count) k \(k)", file: file, line: line)
    }

    func testSameCentersAsThePlainDynamicProgramming() throws {
        var g = Generator(state: 7)
        for n in [1, 2, 17, 1000, 40_000] {
            for k in [1, 2, 4, 16, 64] {
                try check((0 ..< n).map { _ in Float(g.normal() * 0.02) }, k: k, "normal")
                try check((0 ..< n).map { _ in Float(g.uniform() * 2 - 1) }, k: k, "uniform")
            }
        }
        for k in [2, 8, 16, 64, 256] {
            // Heavy tails: a Cauchy-like spread over many binades, with outliers.
            try check((0 ..< 30_000).map { _ in Float(tan((g.uniform() - 0.5) * 3.1)) * 0.01 }, k: k, "heavy tails")
            // Many duplicates: a few hundred distinct values.
            try check((0 ..< 30_000).map { _ in Float(Int(g.normal() * 40)) / 64 }, k: k, "duplicates")
            // Every value in one 16-bit bin (1.0 ..< 1.0078125).
            try check((0 ..< 30_000).map { _ in 1 + Float(g.uniform()) / 128 }, k: k, "one bin")
            // Zeros of both signs, subnormals and normals of both signs.
            try check((0 ..< 30_000).map { i in
                switch i % 5 {
                case 0: return 0
                case 1: return -0.0
                case 2: return Float(bitPattern: UInt32(g.next() % 0x7F_FFFF)) * (i % 2 == 0 ? 1 : -1)
                default: return Float(g.normal())
                }
            }, k: k, "zeros and subnormals")
            // Values of float16 precision.
            try check((0 ..< 30_000).map { _ in Float(Float16(g.normal() * 0.05)) }, k: k, "float16 values")
        }
        // Float16 weights, counted by bit pattern (with both zeros).
        for k in [2, 16, 64] {
            let halves = (0 ..< 40_000).map { i in i % 50 == 0 ? Float16(-0.0) : Float16(g.normal() * 0.03) }
            let got = try halves.withUnsafeBytes { raw in
                try BoundedKMeans.centers(of: GroupElements(base: raw.baseAddress!, isHalf: true, runs: 1, channels: 1, inner: halves.count,
                                                            runStride: halves.count, offset: 0, scales: nil), k: k)
            }
            XCTAssertEqual(got, KMeans1D.centers(halves.map { Float($0) }, k: k), "float16 k \(k)")
        }
        // Ties: equally spaced equal-count values, where several clusterings are equally good.
        try check((0 ..< 20_000).map { Float($0 % 10) }, k: 3, "ties")
        try check((0 ..< 20_000).map { Float($0 % 7) }, k: 4, "ties")
        // Constant, two values, fewer distinct values than clusters.
        try check([Float](repeating: 0.25, count: 5000), k: 16, "constant")
        try check((0 ..< 5000).map { Float($0 % 2) }, k: 16, "two values")
        try check((0 ..< 5000).map { Float($0 % 2) }, k: 2, "two values")
        try check((0 ..< 5000).map { Float($0 % 20) }, k: 16, "twenty values")
    }

    func testNonFiniteValuesAreRefused() {
        for bad in [Float.nan, .infinity, -.infinity] {
            XCTAssertThrowsError(try bounded([1, 2, bad, 3], k: 2)) { XCTAssertTrue($0 is BoundedKMeans.NonFiniteValue) }
        }
    }
}

/// The streaming k-means palettizer against the same steps done plainly in memory: per group,
/// the plain exact k-means of its (scaled) values, centers rounded to the LUT type, nearest
/// entries, decoded values and the SNR.
final class StreamingPalettizerTests: XCTestCase {
    func reference(_ values: [Float], shape: [Int], half: Bool, nbits: Int, groupSize: Int, scaled: Bool, lutHalf: Bool) -> (lut: [Float], indices: [Int], snr: Double) {
        let (channels, inner) = (shape[0], shape[1])
        let entries = 1 << nbits
        var scales = [Float](repeating: 1, count: channels)
        if scaled {
            for c in 0 ..< channels {
                let m = values[c * inner ..< (c + 1) * inner].map(abs).max()!
                scales[c] = m == 0 ? 1 : (half ? Float(Float16(m)) : m)
            }
        }
        var lut: [Float] = [], indices = [Int](repeating: 0, count: values.count)
        var decoded = [Float](repeating: 0, count: values.count)
        for g in 0 ..< channels / groupSize {
            let range = g * groupSize * inner ..< (g + 1) * groupSize * inner
            let group = range.map { scaled ? values[$0] / scales[$0 / inner] : values[$0] }
            let centers = KMeans1D.centers(group, k: entries).map { lutHalf ? Float(Float16($0)) : $0 }
            let table = centers + [Float](repeating: centers.last!, count: entries - centers.count)
            lut += table
            let idx = group.withUnsafeBufferPointer { KMeans1D.assign($0, centers: centers) }
            for (j, p) in range.enumerated() {
                indices[p] = idx[j]
                decoded[p] = table[idx[j]] * (scaled ? scales[p / inner] : 1)
            }
        }
        return (lut, indices, Compressor.snr(values, decoded))
    }

    func testMatchesThePlainStepsOnEveryPath() throws {
        var g = BoundedKMeansTests.Generator(state: 11)
        let shape = [64, 2048]
        let values32 = (0 ..< shape[0] * shape[1]).map { i in Float(g.normal() * 0.02 * (1 + Double(i / shape[1] % 7))) }
        for half in [false, true] {
            let values = half ? values32.map { Float(Float16($0)) } : values32
            for (nbits, groupSize, scaled) in [(4, 64, false), (3, 16, false), (6, 32, true), (2, 64, true), (8, 64, false)] {
                let bytes: [UInt8] = half ? values.map { Float16($0) }.withUnsafeBytes { Array($0) } : values.withUnsafeBytes { Array($0) }
                var json: [String: Any] = ["mode": "kmeans", "nbits": nbits, "weight_threshold": 0, "enable_per_channel_scale": scaled]
                if groupSize < shape[0] { json["granularity"] = "per_grouped_channel"; json["group_size"] = groupSize }
                let setting = try CompressionSetting(json: json, path: "test", at: "$")
                let result = try bytes.withUnsafeBytes {
                    try Palettizer.palettize($0, shape: shape, weightType: half ? .float16 : .float32, setting: setting, axis: 0,
                                             grouped: groupSize < shape[0])
                }
                let want = reference(values, shape: shape, half: half, nbits: nbits, groupSize: groupSize, scaled: scaled, lutHalf: half)
                let label = "half \(half) nbits \(nbits) group \(groupSize) scaled \(scaled)"
                let p = result.weight
                let lut: [Float] = p.lut.dtype == .float16 ? p.lut.data.bytes.bindMemory(to: Float16.self).map { Float($0) }
                    : Array(p.lut.data.bytes.bindMemory(to: Float.self))
                XCTAssertEqual(lut, want.lut, label)
                XCTAssertEqual(PackedBits.unpack(p.indices.data.bytes, bits: nbits, count: values.count, signed: false), want.indices, label)
                XCTAssertEqual(result.snr, want.snr, accuracy: 1e-9 * want.snr, label)
            }
        }
    }

    func testNonFiniteWeightsAreAClearError() throws {
        var values = (0 ..< 64 * 2048).map { Float($0 % 97) / 97 }
        values[5000] = .nan
        var b = ModelBuilder(name: "P")
        let w = try b.addWeight("w", shape: [64, 2048], values: values)
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [1, .size(2048)]))
        f.output("y", try f.apply1("linear", [x, f.use(w)]))
        try b.add(f)
        let config = try CompressionConfig(data: Data(#"{"global": {"mode": "kmeans", "nbits": 4, "weight_threshold": 0}}"#.utf8), path: "cfg")
        XCTAssertThrowsError(try Compressor.apply(config, to: try b.build())) { error in
            XCTAssertEqual("\(error)", "weight 'w': holds NaN or infinite values; k-means palettization needs finite values")
        }
    }
}
