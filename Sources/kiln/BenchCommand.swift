import Foundation
import KilnFormat
import KilnRuntime

/// `kiln bench PATH …`: load time, first-run time and latency statistics of one function.
enum BenchCommand {
    static let spec = CommandSpec(
        name: "bench",
        abstract: "Measure load time, latency and throughput of a model's function.",
        usage: "kiln bench PATH [--function NAME] [--input NAME=FILE.npy…] [--dim SYMBOL=N…] [--threads N] [--warmup N] [--repeat N | --time SECONDS] [--frequent-reshapes] [--cold] [--load] [--model NAME] [--cache-dir DIR] [--max-arch NAME] [--no-verify] [--key FILE] [--json]",
        arguments: [("PATH", "A package (Name.kiln), a compiled artifact (Name.<arch>.compiled) or a directory of them.")],
        options: [
            OptionSpec(names: ["--function"], valueName: "NAME", help: "The function (default: the only one, or main)."),
            OptionSpec(names: ["--input"], valueName: "NAME=FILE", help: "An input from a .npy file; inputs not given are generated (seeded)."),
            OptionSpec(names: ["--dim"], valueName: "SYMBOL=N", help: "Size of a symbolic dim for generated inputs ('?' for anonymous dims)."),
            OptionSpec(names: ["--threads"], valueName: "N", help: "Threads per run (default: the number of cores)."),
            OptionSpec(names: ["--warmup"], valueName: "N", help: "Untimed runs after the first (default 3)."),
            OptionSpec(names: ["--repeat"], valueName: "N", help: "Timed runs (default 20)."),
            OptionSpec(names: ["--time"], valueName: "SECONDS", help: "Run for this long instead of a fixed count."),
            OptionSpec(names: ["--frequent-reshapes"], valueName: nil, help: "Input sizes change on most runs: plans derived for new sizes are not cached."),
            OptionSpec(names: ["--cold"], valueName: nil, help: "Also measure a cold load (file pages dropped from the cache first)."),
            OptionSpec(names: ["--load"], valueName: nil, help: "Measure loading only: verified (memo empty), unverified, and warm (memo hit)."),
            OptionSpec(names: ["--json"], valueName: nil, help: "Print JSON instead of a table."),
        ] + LoadFlags.options,
        discussion: """
            Generated inputs: floats uniform in [-1, 1); integers in 0..<V where V is the model's
            'vocabulary' metadata, else 0..<2. Latency is measured around run(inputs:) only.
            """)

    static func positiveInt(_ args: ParsedArguments, _ name: String, _ fallback: Int, allowZero: Bool = false) throws -> Int {
        guard let text = args.value(name) else { return fallback }
        guard let n = Int(text), n > 0 || (allowZero && n == 0) else {
            throw UsageError(message: "\(name) '\(text)' is not a \(allowZero ? "non-negative" : "positive") integer", command: spec)
        }
        return n
    }

    /// The `--dim SYMBOL=N` sizes; an expression's text names its dim however it is spaced.
    static func dimSizes(_ args: ParsedArguments) throws -> [String: Int] {
        var dims: [String: Int] = [:]
        for pair in args.values["--dim"] ?? [] {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, let n = Int(parts[1]), n >= 0 else {
                throw UsageError(message: "'\(pair)' is not SYMBOL=N", command: spec)
            }
            let e = DimExpression(parsing: parts[0])
            dims[e.map { $0.symbols.isEmpty ? parts[0] : $0.description } ?? parts[0]] = n
        }
        return dims
    }

    /// The shape of a generated input: its sizes, each symbol's `--dim`, and a dim written as an
    /// expression of symbols from theirs.
    static func generatedShape(_ d: TensorDescriptor, _ dims: [String: Int]) throws -> [Int] {
        try d.shape.map { dim in
            guard case .symbol(let s) = dim else { return dim.size! }
            let key = s.isEmpty ? "?" : s
            let e = s.isEmpty ? nil : DimExpression(parsing: s)
            guard let n = dims[key] ?? e?.evaluate(dims) else {
                let missing = e?.symbols.filter { dims[$0] == nil } ?? [key]
                let flags = missing.map { "--dim \($0)=N" }.joined(separator: " ")
                throw UsageError(message: "input '\(d.name)' has symbolic dim '\(key)'; bind it with \(flags) or give --input \(d.name)=FILE.npy", command: spec)
            }
            guard n >= 0 else { throw UsageError(message: "input '\(d.name)' dim '\(key)' is \(n) with the sizes given", command: spec) }
            return n
        }
    }

    static func run(_ args: ParsedArguments) async throws {
        guard args.positionals.count == 1 else {
            throw UsageError(message: args.positionals.isEmpty ? "missing PATH" : "expected one PATH", command: spec)
        }
        let path = args.positionals[0]
        var options = try LoadFlags.loadOptions(args)
        options.threads = try positiveInt(args, "--threads", options.threads)
        options.expectFrequentReshapes = args.has("--frequent-reshapes")
        let warmup = try positiveInt(args, "--warmup", 3, allowZero: true)
        let repeatCount = try positiveInt(args, "--repeat", 20)
        var seconds: Double?
        if let t = args.value("--time") {
            guard let s = Double(t), s > 0, s.isFinite else { throw UsageError(message: "--time '\(t)' is not a positive number of seconds", command: spec) }
            seconds = s
        }
        let dims = try dimSizes(args)
        var files: [String: String] = [:]
        for pair in args.values["--input"] ?? [] {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { throw UsageError(message: "'\(pair)' is not NAME=FILE.npy", command: spec) }
            files[parts[0]] = parts[1]
        }
        let url = URL(fileURLWithPath: path)
        if args.has("--load") { return try await measureLoads(path, options, repeatCount: try positiveInt(args, "--repeat", 7), json: args.has("--json")) }
        var coldLoad: Double?
        if args.has("--cold") { coldLoad = try await measureColdLoad(path, options) }
        let loadStart = DispatchTime.now()
        let model = try await Model.load(contentsOf: url, options: options)
        let loadedModelSeconds = elapsed(since: loadStart)
        let names = model.functionNames
        let functionName = try chooseFunction(args.value("--function"), among: names, path: path, command: spec)
        guard let function = try await model.loadFunction(named: functionName) else {
            throw UsageError(message: "\(path) has no function '\(functionName)'; it has \(names.map { "'\($0)'" }.joined(separator: ", "))", command: spec)
        }
        let loadSeconds = elapsed(since: loadStart)
        let descriptor = function.descriptor
        if let unknown = files.keys.sorted().first(where: { descriptor.inputDescriptor(of: $0) == nil }) {
            throw UsageError(message: "function '\(functionName)' has no input '\(unknown)'", command: spec)
        }
        let vocabulary = Int(model.metadata.user["vocabulary"] ?? "") ?? 2
        var inputs: [String: NDArray] = [:]
        var rng = SplitMix64(seed: 0)
        for d in descriptor.inputs {
            if let file = files[d.name] {
                inputs[d.name] = try NDArray(npyFile: file)
                continue
            }
            let shape = try generatedShape(d, dims)
            inputs[d.name] = try generated(shape, d.scalarType, vocabulary: max(vocabulary, 1), &rng)
        }
        let firstStart = DispatchTime.now()
        _ = try await function.run(inputs: inputs)
        let firstSeconds = elapsed(since: firstStart)
        for _ in 0 ..< warmup { _ = try await function.run(inputs: inputs) }
        var samples: [Double] = []
        let timedStart = DispatchTime.now()
        while true {
            let t = DispatchTime.now()
            _ = try await function.run(inputs: inputs)
            samples.append(elapsed(since: t))
            if let seconds { if elapsed(since: timedStart) >= seconds { break } } else if samples.count >= repeatCount { break }
        }
        let total = elapsed(since: timedStart)
        let sorted = samples.sorted()
        func pct(_ p: Double) -> Double { sorted[min(sorted.count - 1, Int((p * Double(sorted.count - 1)).rounded(.up)))] }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        let source = model.architecture.map { "compiled artifact for \($0)" } ?? "portable package, reference interpreter"
        let why = model.explanation.specialization ?? model.explanation.chosen.map { "loaded \($0)" } ?? ""
        let stats: [(String, Double)] = [("min", sorted[0]), ("median", pct(0.5)), ("p90", pct(0.9)), ("p99", pct(0.99)), ("max", sorted.last!)]
        if args.has("--json") {
            var fields: [(String, JSON)] = [
                ("path", .string(path)), ("function", .string(functionName)), ("ran", .string(source)),
                ("architecture", model.architecture.map { .string($0) } ?? .null),
                ("artifact", model.explanation.chosen.map { .string($0) } ?? .null),
                ("specialization", model.explanation.specialization.map { .string($0) } ?? .null),
                ("threads", .int(options.threads)), ("frequentReshapes", .bool(options.expectFrequentReshapes)),
                ("loadSeconds", .number(loadSeconds)), ("modelLoadSeconds", .number(loadedModelSeconds)), ("firstRunSeconds", .number(firstSeconds)), ("runs", .int(samples.count)),
            ]
            if let coldLoad { fields.append(("coldLoadSeconds", .number(coldLoad))) }
            fields.append(("latencySeconds", .object(stats.map { ($0.0, .number($0.1)) })))
            fields.append(("throughputPerSecond", .number(Double(samples.count) / total)))
            fields.append(("peakResidentBytes", .int(usage.ru_maxrss * 1024)))
            Console.out(JSON.object(fields).rendered() + "\n")
            return
        }
        var rows: [(String, String)] = [("model", path), ("function", functionName), ("ran", source)]
        if !why.isEmpty { rows.append(("because", why)) }
        rows.append(("threads", String(options.threads)))
        if let coldLoad { rows.append(("load (cold)", ms(coldLoad))) }
        rows.append(("load", ms(loadSeconds)))
        rows.append(("first run", ms(firstSeconds)))
        rows.append(("runs", String(samples.count)))
        for (label, v) in stats { rows.append((label, ms(v))) }
        rows.append(("throughput", String(format: "%.1f runs/s", Double(samples.count) / total)))
        rows.append(("peak memory", humanBytes(usage.ru_maxrss * 1024)))
        Console.out(table(rows))
    }

    static func ms(_ s: Double) -> String { String(format: "%.3f ms", s * 1000) }

    static func elapsed(since t: DispatchTime) -> Double { Double(DispatchTime.now().uptimeNanoseconds - t.uptimeNanoseconds) / 1e9 }

    /// Load time after the files' pages are dropped from the page cache; for a directory, also
    /// into an empty specialization cache (so a package beside the artifacts is specialized).
    static func measureColdLoad(_ path: String, _ options: ModelLoadOptions) async throws -> Double {
        var options = options
        var files = [path]
        let isPackage = ModelFile(path: path)?.isPackage ?? false
        if isPackage { files = [PackageFormat.manifestFileName, PackageFormat.weightsFileName].map { "\(path)/\($0)" } }
        var isDirectory: ObjCBool = false
        var emptyCache: String?
        if !isPackage, FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            let directory = ModelDirectory(path: path)
            files = directory.artifacts(of: nil).map(directory.path(of:))
            for p in directory.files(of: nil) where ModelFile(fileName: p)?.isPackage ?? false {
                files += [PackageFormat.manifestFileName, PackageFormat.weightsFileName].map { "\(path)/\(p)/\($0)" }
            }
            let dir = NSTemporaryDirectory() + "kiln-bench-cold-\(ProcessInfo.processInfo.processIdentifier)"
            emptyCache = dir
            options.cache = SpecializationCache(directory: dir)
        }
        defer { if let emptyCache { try? FileManager.default.removeItem(atPath: emptyCache) } }
        for f in files {
            let fd = open(f, O_RDONLY)
            if fd >= 0 { _ = fdatasync(fd); _ = posix_fadvise(fd, 0, 0, Int32(POSIX_FADV_DONTNEED)); close(fd) }
        }
        let t = DispatchTime.now()
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options)
        for name in model.functionNames { _ = try await model.loadFunction(named: name) }
        return elapsed(since: t)
    }

    /// `--load`: the median of `repeatCount` loads each way — verified with an empty memo,
    /// unverified, and verified with the memo holding the file (a warm load).
    static func measureLoads(_ path: String, _ options: ModelLoadOptions, repeatCount: Int, json: Bool) async throws {
        let root = NSTemporaryDirectory() + "kiln-bench-load-\(ProcessInfo.processInfo.processIdentifier)"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func once(_ o: ModelLoadOptions) async throws -> (Double, Model) {
            let t = DispatchTime.now()
            let model = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: o)
            return (elapsed(since: t), model)
        }
        var cold: [Double] = [], plain: [Double] = [], warm: [Double] = []
        var weightBytes = 0
        var note = ""
        var warmOptions = options
        warmOptions.cache = SpecializationCache(directory: "\(root)/warm")
        _ = try await once(warmOptions) // fills the memo
        for i in 0 ..< repeatCount {
            var o = options
            o.cache = SpecializationCache(directory: "\(root)/cold-\(i)")
            let (t, model) = try await once(o)
            cold.append(t)
            weightBytes = model.weightSectionBytes
            note = model.explanation.verification ?? ""
            var u = options
            u.verifyChecksums = false
            plain.append(try await once(u).0)
            warm.append(try await once(warmOptions).0)
        }
        func median(_ v: [Double]) -> Double { v.sorted()[v.count / 2] }
        let extra = median(cold) - median(plain)
        let rate = extra > 0 ? Double(weightBytes) / extra / 1e9 : .infinity
        if json {
            Console.out(JSON.object([
                ("path", .string(path)), ("weightBytes", .int(weightBytes)),
                ("verifiedLoadSeconds", .number(median(cold))), ("unverifiedLoadSeconds", .number(median(plain))),
                ("warmLoadSeconds", .number(median(warm))), ("verificationGBPerSecond", rate.isFinite ? .number(rate) : .null),
                ("verification", .string(note)),
            ]).rendered() + "\n")
            return
        }
        Console.out(table([
            ("model", path), ("weights", "\(grouped(weightBytes)) bytes"),
            ("load, verified", ms(median(cold))), ("load, unverified", ms(median(plain))),
            ("load, warm (memo)", ms(median(warm))),
            ("verification", rate.isFinite ? String(format: "%.1f GB/s (load difference)", rate) : "within noise"),
            ("", note),
        ]))
    }

    static func generated(_ shape: [Int], _ type: DataType, vocabulary: Int, _ rng: inout SplitMix64) throws -> NDArray {
        let n = shape.reduce(1, *)
        switch type {
        case .float32, .float16, .bfloat16, .float64:
            return NDArray(shape: shape, scalars: (0 ..< n).map { _ in Float(rng.unit() * 2 - 1) })
        case .int64: return NDArray(shape: shape, scalars: (0 ..< n).map { _ in Int64(rng.below(vocabulary)) })
        case .int32: return NDArray(shape: shape, scalars: (0 ..< n).map { _ in Int32(rng.below(vocabulary)) })
        case .bool: return NDArray(shape: shape, scalars: (0 ..< n).map { _ in rng.below(2) == 1 })
        default:
            throw Failure(message: "cannot generate \(type.rawValue) inputs; give them with --input")
        }
    }
}
