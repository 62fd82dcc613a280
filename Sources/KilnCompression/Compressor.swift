import Dispatch
import Foundation
import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Why a model could not be compressed as configured.
public struct CompressionError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var reason: String
    public var description: String { reason }
}

/// One weight's line of the compression report.
public struct CompressionRow: Sendable {
    /// The weight.
    public var weight: String
    /// Its consumer ops (`name (type)`).
    public var consumers: [String]
    /// `linear_symmetric`, `linear`, or `none` when left as it was.
    public var method: String
    /// Storage bits per element.
    public var bits: Int
    /// `per_tensor`, `per_channel`, `per_block(32)`, or why it was skipped.
    public var detail: String
    /// Bytes before and after.
    public var bytesBefore: Int
    public var bytesAfter: Int
    /// Reconstruction signal-to-noise ratio in dB (`nil` when not compressed; `+∞` when exact).
    public var snr: Double?
}

/// The result of compressing a model: the rows and the totals.
public struct CompressionReport: Sendable {
    /// One row per weight, in weight order.
    public var rows: [CompressionRow]
    /// Weight bytes before.
    public var bytesBefore: Int { rows.reduce(0) { $0 + $1.bytesBefore } }
    /// Weight bytes after.
    public var bytesAfter: Int { rows.reduce(0) { $0 + $1.bytesAfter } }
    /// Warnings (skipped weights the config asked to compress).
    public var warnings: [String]
}

/// Applies a per-layer compression config to a portable model.
public enum Compressor {
    /// A consumer of a weight: the op and which of its inputs the weight is.
    struct Use {
        var op: KilnFormat.Operation
        var input: Int
    }

    /// Compresses every weight the config selects, weights in parallel.
    /// - Parameters:
    ///   - config: The per-layer config.
    ///   - model: A validated portable model.
    /// - Returns: The compressed model and the report.
    /// - Throws: ``CompressionError`` when consumers of one weight resolve to different settings, or
    ///   a weight to palettize by k-means holds NaN or infinity.
    public static func apply(_ config: CompressionConfig, to model: PortableModel,
                             progress: (@Sendable (_ done: Int, _ total: Int, _ weight: String) -> Void)? = nil) throws -> (PortableModel, CompressionReport) {
        var uses: [String: [Use]] = [:]
        for f in model.functions {
            for op in f.operations {
                for (i, input) in op.inputs.enumerated() where !input.isEmpty {
                    uses[input, default: []].append(Use(op: op, input: i))
                }
            }
        }
        // Resolve settings first, so configuration errors come before any work.
        var plans: [(CompressionSetting?, String)] = []
        for w in model.weights {
            let users = uses[w.name] ?? []
            let entries = users.map { config.resolve(weight: w.name, op: $0.op) }
            var distinct: [CompressionConfig.Entry?] = []
            for e in entries where !distinct.contains(where: { $0 == e }) { distinct.append(e) }
            guard distinct.count <= 1 else {
                throw CompressionError(reason: "weight '\(w.name)': its consumers resolve to different settings: "
                    + users.map { "\($0.op.name) (\($0.op.opType))" }.joined(separator: ", "))
            }
            let entry: CompressionConfig.Entry? = distinct.isEmpty ? config.resolve(weight: w.name, op: nil) : distinct[0]
            switch entry {
            case .compress(let s)?: plans.append((s, ""))
            case .skip?: plans.append((nil, "config: null"))
            case nil: plans.append((nil, "no setting"))
            }
        }
        let (allUses, allPlans) = (uses, plans)
        let counter = ProgressCounter()
        var weights = model.weights
        var rows = [CompressionRow?](repeating: nil, count: weights.count)
        var warnings = [String?](repeating: nil, count: weights.count)
        var failures = [CompressionError?](repeating: nil, count: weights.count)
        weights.withUnsafeMutableBufferPointer { ws in
            rows.withUnsafeMutableBufferPointer { rs in
                warnings.withUnsafeMutableBufferPointer { warn in failures.withUnsafeMutableBufferPointer { fail in
                    nonisolated(unsafe) let (wp, rp, xp, fp) = (ws, rs, warn, fail)
                    DispatchQueue.concurrentPerform(iterations: wp.count) { i in
                        let users = allUses[wp[i].name] ?? []
                        let (row, weight, warning, failure) = compress(wp[i], users: users, plan: allPlans[i])
                        rp[i] = row
                        wp[i] = weight
                        xp[i] = warning
                        fp[i] = failure
                        if let progress { progress(counter.increment(), wp.count, row.weight) }
                    }
                } }
            }
        }
        if let failure = failures.lazy.compactMap({ $0 }).first { throw failure }
        var out = model
        out.weights = weights
        return (out, CompressionReport(rows: rows.map { $0! }, warnings: warnings.compactMap { $0 }))
    }

    /// Output- and input-channel axes of a weight for one consumer (coremltools' rule).
    static func axes(_ use: Use, rank: Int) -> (Int, Int) {
        switch (use.op.opType, use.input) {
        case ("conv_transpose", 1): return (1, 0)
        case ("matmul", 1): return (rank - 1, rank - 2)
        case ("matmul", 0): return (rank - 2, rank - 1)
        case ("gemm", 1):
            if case .int(let t)? = use.op.attributes["trans_b"], t != 0 { return (0, 1) }
            return (1, 0)
        default: return (0, 1)
        }
    }

    static func compress(_ w: Weight, users: [Use], plan: (CompressionSetting?, String)) -> (CompressionRow, Weight, String?, CompressionError?) {
        let consumers = users.map { "\($0.op.name) (\($0.op.opType))" }
        var row = CompressionRow(weight: w.name, consumers: consumers, method: "none", bits: w.dtype.bitWidth, detail: plan.1,
                                 bytesBefore: w.storedBytes, bytesAfter: w.storedBytes, snr: nil)
        guard let s = plan.0 else { return (row, w, nil, nil) }
        guard case .dense(let blob) = w.encoding else { row.detail = "already compressed"; return (row, w, nil, nil) }
        guard w.dtype == .float32 || w.dtype == .float16 else { row.detail = "not float32 or float16"; return (row, w, nil, nil) }
        guard w.shape.count > 1 else { row.detail = "rank ≤ 1"; return (row, w, nil, nil) }
        guard w.elementCount > s.weightThreshold else { row.detail = "\(w.elementCount) ≤ weight_threshold \(s.weightThreshold)"; return (row, w, nil, nil) }
        // Channel axes: the config's, else the consumers' (which must agree).
        let rank = w.shape.count
        var outAxis: Int, inAxis: Int
        if let a = s.channelAxis {
            outAxis = a < 0 ? a + rank : a
            inAxis = outAxis == 0 ? 1 : 0
        } else {
            let all = Set(users.map { axes($0, rank: rank).0 })
            guard all.count <= 1 else {
                row.detail = "consumers disagree on the output-channel axis"
                return (row, w, "weight '\(w.name)': consumers disagree on the output-channel axis; set channel_axis", nil)
            }
            (outAxis, inAxis) = users.first.map { axes($0, rank: rank) } ?? (0, 1)
        }
        guard outAxis >= 0, outAxis < rank else { row.detail = "channel_axis out of range"; return (row, w, "weight '\(w.name)': channel_axis out of range", nil) }
        if !s.isLinear {
            do {
                let result = try Palettizer.palettize(blob.data.bytes, shape: w.shape, weightType: w.dtype, setting: s, axis: outAxis,
                                                      grouped: s.granularity == "per_grouped_channel", storage: blob.data)
                var out = w
                out.encoding = .palettized(result.weight)
                row.method = s.mode
                row.bits = result.weight.indices.dtype.bitWidth
                row.detail = s.granularity == "per_grouped_channel" ? "per_grouped_channel(\(s.groupSize))" : "per_tensor"
                if s.enablePerChannelScale { row.detail += " + channel scale" }
                row.bytesAfter = out.storedBytes
                row.snr = result.snr
                return (row, out, nil, nil)
            } catch Palettizer.Refusal.skip(let reason) {
                row.detail = reason
                return (row, w, "weight '\(w.name)': \(reason); left uncompressed", nil)
            } catch is Palettizer.NonFiniteWeight {
                return (row, w, nil, CompressionError(reason: "weight '\(w.name)': holds NaN or infinite values; k-means palettization needs finite values"))
            } catch {
                row.detail = "\(error)"
                return (row, w, "weight '\(w.name)': \(error)", nil)
            }
        }
        var blocks = [Int](repeating: 1, count: rank)
        var detail = s.granularity
        switch s.granularity {
        case "per_channel":
            blocks[outAxis] = w.shape[outAxis]
        case "per_block":
            guard w.shape[inAxis] % s.blockSize == 0 else {
                row.detail = "block_size \(s.blockSize) does not divide dim \(inAxis) (\(w.shape[inAxis]))"
                return (row, w, "weight '\(w.name)': block_size \(s.blockSize) does not divide its input dim \(w.shape[inAxis]); left uncompressed", nil)
            }
            blocks[outAxis] = w.shape[outAxis]
            blocks[inAxis] = w.shape[inAxis] / s.blockSize
            detail = "per_block(\(s.blockSize))"
        default: break
        }
        let symmetric = s.mode == "linear_symmetric"
        let result = w.dtype == .float32
            ? LinearQuantizer.quantize(blob.data.bytes.bindMemory(to: Float.self), shape: w.shape, blocks: blocks, dtype: s.dtype, symmetric: symmetric)
            : LinearQuantizer.quantize(blob.data.bytes.bindMemory(to: Float16.self), shape: w.shape, blocks: blocks, dtype: s.dtype, symmetric: symmetric)
        var out = w
        out.encoding = .quantized(result.weight)
        row.method = s.mode
        row.bits = result.weight.data.dtype.bitWidth
        row.detail = "\(s.dtype) \(detail)"
        row.bytesAfter = out.storedBytes
        row.snr = result.snr
        return (row, out, nil, nil)
    }

    /// 10·log10(Σw² / Σ(w − w′)²).
    static func snr(_ a: [Float], _ b: [Float]) -> Double {
        var signal = 0.0, noise = 0.0
        for i in a.indices {
            let x = Double(a[i]), d = x - Double(b[i])
            signal += x * x
            noise += d * d
        }
        if noise == 0 { return .infinity }
        return 10 * log10(signal / noise)
    }
}

/// A thread-safe count of finished weights, for progress reports.
final class ProgressCounter: @unchecked Sendable {
    private var count = 0
    private let lock = NSLock()

    func increment() -> Int {
        lock.lock()
        defer { lock.unlock() }
        count += 1
        return count
    }
}

extension CompressionError: KilnError {
    public var errorKind: KilnErrorKind { .unsupported }
    public var errorPath: String? { nil }
    public var errorField: String? { nil }
}
