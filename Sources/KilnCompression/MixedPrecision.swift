import Dispatch
import Foundation
import KilnFormat

/// What a mixed-precision plan must keep.
public enum PrecisionTarget: Sendable, Equatable {
    /// The SNR in dB of all compressed weights together: 10·log10(Σw² / Σ(w − w′)²).
    case snr(Double)
    /// The cosine similarity of a function's outputs (float outputs, flattened and concatenated)
    /// to the uncompressed model's, on given inputs.
    case cosine(Double)
}

/// One weight's chosen setting in a mixed-precision plan.
public struct PrecisionChoice: Sendable {
    /// The weight.
    public var weight: String
    /// The candidate chosen (`none` when left as it was).
    public var candidate: String
    /// The weight's predicted share of the error (noise energy, or 1 − cosine).
    public var predictedError: Double
}

/// The result of choosing settings per layer for an accuracy target.
public struct PrecisionPlan: Sendable {
    /// The target.
    public var target: PrecisionTarget
    /// The compressed model.
    public var model: PortableModel
    /// The report of the chosen settings (one row per weight).
    public var report: CompressionReport
    /// The choice per compressible weight, in weight order.
    public var choices: [PrecisionChoice]
    /// The result predicted from per-layer measurements (dB, or cosine).
    public var predicted: Double
    /// The result measured on the compressed model (dB, or cosine).
    public var measured: Double
}

/// Mixed precision by accuracy budget: each compressible weight gets the smallest of a list of
/// candidate settings such that the whole model meets a target (specs/compression.md, "Mixed
/// precision").
///
/// Every candidate is tried on every weight (its size and reconstruction error measured). For a
/// cosine target, each weight's sensitivity is measured by running the function with that weight
/// alone at its smallest candidate; a weight's error at another setting is predicted as that
/// sensitivity times the setting's noise energy, and errors of different weights add. Settings are
/// then chosen greedily, most error removed per byte added first, until the predicted total meets
/// the target; the mix is measured, and when it misses, chosen again for a smaller budget.
public enum MixedPrecision {
    /// The default candidates, smallest first.
    public static let defaultCandidates = ["kmeans4", "kmeans6", "kmeans8", "int8"]

    /// The setting of a candidate name: `kmeans1` … `kmeans8` (per-tensor k-means palettization),
    /// `int8` (per-channel symmetric), `int4` (symmetric, blocks of 32 input elements).
    /// - Parameter name: The candidate's name.
    /// - Returns: Its setting.
    /// - Throws: ``CompressionError`` for an unknown name.
    public static func setting(named name: String) throws -> CompressionSetting {
        var json: [String: Any]
        switch name {
        case "int8": json = ["mode": "linear_symmetric", "dtype": "int8", "granularity": "per_channel"]
        case "int4": json = ["mode": "linear_symmetric", "dtype": "int4", "granularity": "per_block", "block_size": 32]
        default:
            guard name.hasPrefix("kmeans"), let bits = Int(name.dropFirst(6)), [1, 2, 3, 4, 6, 8].contains(bits) else {
                throw CompressionError(reason: "unknown candidate '\(name)' (expected kmeans1, kmeans2, kmeans3, kmeans4, kmeans6, kmeans8, int4 or int8)")
            }
            json = ["mode": "kmeans", "nbits": bits]
        }
        do {
            return try CompressionSetting(json: json, path: "candidate", at: "$")
        } catch {
            throw CompressionError(reason: "candidate '\(name)': \(error)")
        }
    }

    /// Chooses a setting per weight so that the model meets `target`.
    /// - Parameters:
    ///   - model: A validated portable model.
    ///   - candidates: Candidate names (see ``setting(named:)``); leaving a weight as it is is always
    ///     a candidate.
    ///   - target: What the result must keep.
    ///   - only: When given, only the weights this config would compress are considered.
    ///   - evaluate: For a cosine target: the function's float outputs, flattened, on the inputs.
    ///   - progress: Called with a line describing each step as it starts.
    /// - Returns: The plan, with the compressed model and its measured result.
    /// - Throws: ``CompressionError`` for a bad candidate, a cosine target without `evaluate`, or a
    ///   weight that cannot be compressed; what `evaluate` throws.
    public static func plan(_ model: PortableModel, candidates: [String], target: PrecisionTarget, only: CompressionConfig? = nil,
                            evaluate: (@Sendable (PortableModel) throws -> [Float])? = nil,
                            progress: (@Sendable (String) -> Void)? = nil) throws -> PrecisionPlan {
        let settings = try candidates.map(setting(named:))
        // Every candidate on every weight.
        var trials: [Trial] = []
        for (c, s) in settings.enumerated() {
            progress?("trying \(candidates[c]) on every weight (\(c + 1)/\(settings.count))")
            trials.append(try Compressor.apply(CompressionConfig(global: .compress(s)), to: model))
        }
        let allowed: Set<String>? = try only.map { config in
            let (_, report) = try Compressor.apply(config, to: model)
            return Set(report.rows.filter { $0.method != "none" }.map(\.weight))
        }
        let (options, signal) = frontiers(model, trials: trials, allowed: allowed)
        // The error each option adds: noise energy, or (cosine) sensitivity × noise energy.
        var weightOfNoise = [Double](repeating: 1, count: model.weights.count)
        var budget: Double
        var baseline: [Float] = []
        switch target {
        case .snr(let db):
            let compressible = options.indices.filter { options[$0].count > 1 }
            budget = compressible.reduce(0) { $0 + signal[$1] } / pow(10, db / 10)
        case .cosine(let c):
            guard let evaluate else { throw CompressionError(reason: "a cosine target needs inputs to run the model on") }
            progress?("running the model as it is")
            baseline = try evaluate(model)
            budget = 1 - c
            weightOfNoise = try sensitivities(model, options: options, trials: trials.map(\.model), baseline: baseline, evaluate: evaluate,
                                              progress: progress)
        }
        let search = Search(options: options, weightOfNoise: weightOfNoise)
        func build(_ at: [Int]) -> (PortableModel, [CompressionRow]) { mix(at, of: model, options: options, trials: trials, candidates: candidates) }
        var at = search.choose(budget)
        var (mixed, rows) = build(at)
        var predicted = search.error(at)
        var measured: Double
        switch target {
        case .snr:
            measured = 0
            let noise = options.indices.filter { options[$0].count > 1 }.reduce(0.0) { $0 + options[$1][at[$1]].noise }
            let total = options.indices.filter { options[$0].count > 1 }.reduce(0.0) { $0 + signal[$1] }
            measured = noise == 0 ? .infinity : 10 * log10(total / noise)
            predicted = measured
        case .cosine(let c):
            progress?("measuring the mix")
            measured = cosine(baseline, try evaluate!(mixed))
            // Missed: choose again for a smaller budget, by the measured to predicted ratio.
            var tries = 0
            while !(measured >= c), tries < 8, predicted > 0 {
                tries += 1
                let observed = measured.isNaN ? 2 : 1 - measured
                budget = min(budget / 2, budget * budget / max(observed, 1e-300))
                at = search.choose(budget)
                (mixed, rows) = build(at)
                predicted = search.error(at)
                progress?(String(format: "missed (%.6f); measuring a mix for a smaller budget", measured))
                measured = cosine(baseline, try evaluate!(mixed))
            }
            predicted = 1 - predicted
        }
        let choices = options.indices.filter { options[$0].count > 1 }.map { i in
            PrecisionChoice(weight: model.weights[i].name, candidate: options[i][at[i]].candidate.map { candidates[$0] } ?? "none",
                            predictedError: weightOfNoise[i] * options[i][at[i]].noise)
        }
        let warnings = trials.first?.report.warnings ?? []
        return PrecisionPlan(target: target, model: mixed, report: CompressionReport(rows: rows, warnings: warnings), choices: choices,
                             predicted: predicted, measured: measured)
    }

    /// One candidate applied to every weight: the compressed model and its report.
    typealias Trial = (model: PortableModel, report: CompressionReport)

    /// One way to keep a weight: a candidate's index (nil: as it is), its stored bytes and its
    /// noise energy.
    struct Option { var candidate: Int?; var bytes: Int; var noise: Double }

    /// Each weight's options that no other beats on both size and error, smallest first (only
    /// keeping it as it is for a weight outside `allowed`), and each weight's signal energy.
    static func frontiers(_ model: PortableModel, trials: [Trial], allowed: Set<String>?) -> (options: [[Option]], signal: [Double]) {
        var options: [[Option]] = []
        var signal: [Double] = []
        for (i, w) in model.weights.enumerated() {
            let energy = Self.energy(w)
            signal.append(energy)
            var list = [Option(candidate: nil, bytes: w.storedBytes, noise: 0)]
            if allowed?.contains(w.name) ?? true {
                for (c, trial) in trials.enumerated() where trial.report.rows[i].method != "none" {
                    let row = trial.report.rows[i]
                    let snr = row.snr ?? 0
                    list.append(Option(candidate: c, bytes: row.bytesAfter, noise: snr.isInfinite ? 0 : energy / pow(10, snr / 10)))
                }
            }
            // Keep the options no other beats on both size and error, by size.
            list.sort { ($0.bytes, $0.noise) < ($1.bytes, $1.noise) }
            var frontier: [Option] = []
            for o in list where frontier.last.map({ o.noise < $0.noise }) ?? true { frontier.append(o) }
            options.append(frontier)
        }
        return (options, signal)
    }

    /// Each weight's loss of cosine similarity per unit of noise energy, measured by running the
    /// function with that weight alone at its smallest option (the runs spread over the cores); 0
    /// for the other weights with a choice, 1 for weights with none.
    /// - Throws: What `evaluate` throws.
    static func sensitivities(_ model: PortableModel, options: [[Option]], trials trialModels: [PortableModel], baseline reference: [Float],
                              evaluate: @escaping @Sendable (PortableModel) throws -> [Float],
                              progress: (@Sendable (String) -> Void)?) throws -> [Double] {
        var weightOfNoise = [Double](repeating: 1, count: options.count)
        // Each weight alone at its smallest option, the runs spread over the cores.
        let probed = options.indices.filter { options[$0].count > 1 && options[$0][0].candidate != nil && options[$0][0].noise > 0 }
        for i in options.indices where options[i].count > 1 { weightOfNoise[i] = 0 }
        var drops = [Result<Double, Error>](repeating: .success(0), count: probed.count)
        let frontier = options
        progress?("measuring the sensitivity of \(probed.count) weights")
        drops.withUnsafeMutableBufferPointer { out in
            nonisolated(unsafe) let results = out
            DispatchQueue.concurrentPerform(iterations: probed.count) { p in
                let i = probed[p]
                var alone = model
                alone.weights[i] = trialModels[frontier[i][0].candidate!].weights[i]
                results[p] = Result { 1 - cosine(reference, try evaluate(alone)) }
            }
        }
        for (p, i) in probed.enumerated() {
            let drop = try drops[p].get()
            weightOfNoise[i] = max(drop.isNaN ? .infinity : drop, 0) / options[i][0].noise
        }
        return weightOfNoise
    }

    /// The greedy choice of one option per weight, over each weight's options and the error a
    /// unit of its noise energy adds.
    struct Search {
        let options: [[Option]]
        let weightOfNoise: [Double]

        /// The option index per weight: from the smallest options, the step that removes the most
        /// error per byte added, until the predicted error is within `budget` (or no step helps).
        func choose(_ budget: Double) -> [Int] {
            var at = options.map { _ in 0 }
            var total = options.indices.reduce(0.0) { $0 + weightOfNoise[$1] * options[$1][0].noise }
            while total > budget {
                // The step that removes the most error per byte added.
                var best: (i: Int, j: Int, rate: Double)?
                for i in options.indices {
                    let from = options[i][at[i]]
                    for j in at[i] + 1 ..< options[i].count {
                        let gain = weightOfNoise[i] * (from.noise - options[i][j].noise)
                        let rate = gain / Double(max(options[i][j].bytes - from.bytes, 1))
                        if gain > 0, rate > (best?.rate ?? 0) { best = (i, j, rate) }
                    }
                }
                guard let step = best else { break }
                total -= weightOfNoise[step.i] * (options[step.i][at[step.i]].noise - options[step.i][step.j].noise)
                at[step.i] = step.j
            }
            return at
        }

        /// The predicted error of the options `at`.
        func error(_ at: [Int]) -> Double {
            options.indices.reduce(0.0) { $0 + weightOfNoise[$1] * options[$1][at[$1]].noise }
        }
    }

    /// The model with each weight at its option `at` (from the trials), and the report's rows.
    static func mix(_ at: [Int], of model: PortableModel, options: [[Option]], trials: [Trial],
                    candidates: [String]) -> (PortableModel, [CompressionRow]) {
        var out = model
        var rows: [CompressionRow] = []
        for i in options.indices {
            if let c = options[i][at[i]].candidate {
                out.weights[i] = trials[c].model.weights[i]
                var row = trials[c].report.rows[i]
                row.detail = candidates[c] + " " + row.detail
                rows.append(row)
            } else {
                let w = model.weights[i]
                rows.append(CompressionRow(weight: w.name, consumers: trials.first?.report.rows[i].consumers ?? [], method: "none",
                                           bits: w.dtype.bitWidth, detail: options[i].count > 1 ? "kept for accuracy" : "not compressible",
                                           bytesBefore: w.storedBytes, bytesAfter: w.storedBytes, snr: nil))
            }
        }
        return (out, rows)
    }

    /// Σw² of a dense float weight (0 for others).
    static func energy(_ w: Weight) -> Double {
        guard case .dense(let blob) = w.encoding else { return 0 }
        switch w.dtype {
        case .float32: return blob.data.bytes.bindMemory(to: Float.self).reduce(0) { $0 + Double($1) * Double($1) }
        case .float16: return blob.data.bytes.bindMemory(to: Float16.self).reduce(0) { $0 + Double(Float($1)) * Double(Float($1)) }
        default: return 0
        }
    }

    /// The cosine similarity of two vectors (NaN when either is zero or they differ in length).
    public static func cosine(_ a: [Float], _ b: [Float]) -> Double {
        guard a.count == b.count else { return .nan }
        var dot = 0.0, na = 0.0, nb = 0.0
        for i in a.indices {
            dot += Double(a[i]) * Double(b[i])
            na += Double(a[i]) * Double(a[i])
            nb += Double(b[i]) * Double(b[i])
        }
        return dot / (na.squareRoot() * nb.squareRoot())
    }
}
