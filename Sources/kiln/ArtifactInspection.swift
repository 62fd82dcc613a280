import KilnCompiler
import KilnFormat

/// What `kiln inspect` shows for a compiled artifact: header, functions, steps per kernel,
/// arena size and weight bytes.
enum ArtifactInspection {
    struct FunctionSummary {
        var name: String
        var inputs: [Argument]
        var outputs: [Argument]
        var kernels: [(String, Int)]
        var steps: Int
        /// Each step's op name, op type, kernel and config, in plan order, each control-flow op
        /// followed by its bodies' steps (compiled for the artifact's arch as the runtime does).
        var stepKernels: [ControlFlowBodies.PlannedKernel]
        /// Peak bytes of live op results, every symbol taken as 1.
        var arenaBytes: Int
        var symbols: [String]
    }

    static func summaries(_ a: CompiledArtifact) -> [FunctionSummary] {
        // Bodies compile only for an arch this build knows; otherwise the plan's own steps are listed.
        let walked = Architecture.named(a.plan.arch).map { ControlFlowBodies.steps(a.plan, arch: $0) }
        return zip(a.plan.functions, a.plan.model.functions).enumerated().map { index, pair in
            let (plan, f) = pair
            var counts: [String: Int] = [:]
            for s in plan.steps { counts[s.kernel, default: 0] += 1 }
            var bytes: [Int: Int] = [:]
            var symbols = Set<String>()
            for (step, op) in zip(plan.steps, f.operations) {
                for (slot, v) in zip(step.outputs, op.outputs) {
                    let elements = v.type.shape.reduce(1) { acc, d -> Int in
                        if case .size(let n) = d { return acc * n }
                        guard case .symbol(let s) = d else { return acc }
                        // Every symbol is 1, so a dim written as an expression of them is its value there.
                        guard let e = DimExpression(parsing: s), !e.symbols.isEmpty else {
                            symbols.insert(s.isEmpty ? "?" : s)
                            return acc
                        }
                        symbols.formUnion(e.symbols)
                        return acc * max(e.evaluate(Dictionary(uniqueKeysWithValues: e.symbols.map { ($0, 1) })) ?? 1, 0)
                    }
                    bytes[slot] = elements * max(v.type.dtype.bitWidth, 8) / 8
                }
            }
            var peak = 0
            for i in 0 ..< plan.steps.count {
                let live = plan.lifetimes.filter { $0.firstStep <= i && i <= $0.lastStep }.reduce(0) { $0 + (bytes[$1.slot] ?? 0) }
                peak = max(peak, live)
            }
            return FunctionSummary(name: f.name, inputs: f.inputs, outputs: f.outputs,
                                   kernels: counts.sorted { ($0.value, $1.key) > ($1.value, $0.key) }, steps: plan.steps.count,
                                   stepKernels: walked?[index] ?? zip(f.operations, plan.steps).map {
                                       ControlFlowBodies.PlannedKernel(op: $0.name, opType: $0.opType, kernel: $1.kernel, config: $1.config, inputTypes: [], body: "")
                                   },
                                   arenaBytes: peak, symbols: symbols.sorted())
        }
    }

    /// The artifact-only rows: header, digests, plan and weight bytes, and per function its
    /// arena, steps by kernel and the steps the reference interpreter runs.
    static func text(_ a: CompiledArtifact, path: String, weightsIntact: Bool?) -> String {
        let h = a.header
        let rows: [(String, String)] = [
            ("path", path), ("format", "Kiln compiled artifact, format version \(h.formatVersion)"
                + (a.encryptionKeyID.map { ", encrypted (AES-256-GCM, key \($0))" } ?? "")),
            ("arch", h.arch), ("minimum runtime", h.minimumRuntime.description), ("compiler", h.compilerVersion),
            ("source digest", SHA256.hex(h.sourceDigest)), ("options digest", SHA256.hex(h.optionsDigest)),
            ("header CRC-32", hex8(a.headerChecksum)),
            ("weights CRC-32", hex8(a.weightsChecksum) + (weightsIntact.map { $0 ? " (verified)" : " (MISMATCH: the weights are damaged)" } ?? "")),
            ("plan", "\(grouped(a.planBytes)) bytes"),
            ("weights", "\(a.plan.model.weights.count) blobs, \(grouped(a.weightBytes)) bytes (\(humanBytes(a.weightBytes)))"),
        ]
        var s = table(rows)
        let functions = summaries(a)
        s += "  plans\n"
        for f in functions {
            s += "    \(f.name)\n"
            let note = f.symbols.isEmpty ? "" : " (with \(f.symbols.joined(separator: ", ")) = 1)"
            s += "      arena  \(grouped(f.arenaBytes)) bytes\(note)\n"
            s += "      steps  \(f.steps)\n"
            for (k, n) in f.kernels { s += "        \(k)  \(n)\n" }
            let reference = f.stepKernels.filter { $0.kernel == "reference" || $0.kernel.hasPrefix("unavailable") }
            if !reference.isEmpty {
                s += "      run by the reference interpreter\n"
                for r in reference { s += "        \(r.op)  (\(r.opType)\(r.body.isEmpty ? "" : ", in \(r.body)"))\n" }
            }
        }
        return s
    }

    static func hex8(_ v: UInt32) -> String {
        let h = String(v, radix: 16)
        return String(repeating: "0", count: 8 - h.count) + h
    }

    static func json(_ a: CompiledArtifact, path: String, weightsIntact: Bool?) -> JSON {
        let h = a.header
        return .object([
            ("path", .string(path)),
            ("formatVersion", .int(h.formatVersion)), ("arch", .string(h.arch)),
            ("encryptionKeyID", a.encryptionKeyID.map { .string($0) } ?? .null),
            ("minimumRuntimeVersion", .string(h.minimumRuntime.description)), ("compilerVersion", .string(h.compilerVersion)),
            ("digests", .object([
                ("source", .string(SHA256.hex(h.sourceDigest))), ("options", .string(SHA256.hex(h.optionsDigest))),
                ("headerCRC32", .string(hex8(a.headerChecksum))), ("weightsCRC32", .string(hex8(a.weightsChecksum))),
                ("weightsIntact", weightsIntact.map { .bool($0) } ?? .null),
            ])),
            ("planBytes", .int(a.planBytes)), ("weightBytes", .int(a.weightBytes)),
            ("functions", .array(summaries(a).map { f in
                .object([
                    ("name", .string(f.name)),
                    ("steps", .int(f.steps)),
                    ("kernels", .array(f.kernels.map { .object([("kernel", .string($0.0)), ("count", .int($0.1))]) })),
                    ("stepKernels", .array(f.stepKernels.map {
                        .object([("op", .string($0.op)), ("opType", .string($0.opType)), ("kernel", .string($0.kernel))]
                            + ($0.config.isPortable ? [] : [("config", .string($0.config.description))])
                            + ($0.body.isEmpty ? [] : [("body", .string($0.body))]))
                    })),
                    ("arenaBytes", .int(f.arenaBytes)), ("arenaSymbolsTakenAsOne", .array(f.symbols.map { .string($0) })),
                ])
            })),
        ])
    }
}
