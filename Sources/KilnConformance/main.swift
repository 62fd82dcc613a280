import Foundation
import KilnCompiler
import KilnFormat
import KilnONNX
import KilnReference
import KilnRuntime

// `kiln-conformance CASES.json [--expected FILE] [--update] [--only PREFIX]`: runs the ONNX
// backend node cases `tools/conformance.py` wrote, each converted once, then through the reference
// interpreter and through an artifact compiled for this host (run twice: the generic run and the
// shape plan). A case passes a path when every output has the expected dtype and shape and its
// values agree: `|got - want| <= atol + rtol * |want|` for floats (NaN equal to NaN), equality
// otherwise — the comparison of onnx's own backend runner.
//
// The expected-failures file lists, per line, `NAME<TAB>PATHS<TAB>CATEGORY<TAB>REASON` (PATHS:
// `reference`, `compiled` or `both`; CATEGORY: `bug` — Kiln is wrong; `by-design` — Kiln does not
// support it on purpose (an operator, a type, training), or computes more precisely than the case's
// expected values; `harness` — this runner cannot load the case). The run fails when a case fails a
// path the file does not list, and when a listed case now passes: the list may only shrink.
// `--update` rewrites it from this run, keeping the category of each case already listed and
// classifying new ones by their reason (`Category.of`).

struct Case {
    var name: String
    var rtol: Double
    var atol: Double
    var inputs: [String]
    var outputs: [String]
    var skip: String?
    var onnxruntime: String?
    /// ONNX type names of the arrays `tools/conformance.py` wrote in another form (by index):
    /// types Kiln has no tensors of.
    var inputTypes: [Int: String] = [:]
    var outputTypes: [Int: String] = [:]
}

/// What an expected failure is.
enum Category: String, CaseIterable {
    case bug, byDesign = "by-design", harness

    /// The category of a new failure, from its reason: a case the runner cannot load is the
    /// harness's; an operator or type Kiln refuses by name is by design; anything else is taken
    /// for a bug until someone decides otherwise.
    static func of(_ reason: String) -> Category {
        if reason.hasPrefix("case data:") { return .harness }
        let refusals = ["unsupported operators", "which Kiln does not support", "unsupported target type", "Kiln has no "]
        return refusals.contains(where: reason.contains) ? .byDesign : .bug
    }
}

/// Why a path failed, or nil when it passed.
typealias Verdict = String?

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(1)
}

func readCases(_ path: String) -> (onnx: String, cases: [Case]) {
    guard let bytes = try? FileSystem.readFile(path),
          let json = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any],
          let list = json["cases"] as? [[String: Any]] else {
        fail("\(path): not a cases.json written by tools/conformance.py")
    }
    let cases = list.compactMap { c -> Case? in
        guard let name = c["name"] as? String else { return nil }
        func types(_ key: String) -> [Int: String] {
            let listed = c[key] as? [String: String] ?? [:]
            return Dictionary(uniqueKeysWithValues: listed.compactMap { k, v in Int(k).map { ($0, v) } })
        }
        return Case(name: name, rtol: (c["rtol"] as? NSNumber)?.doubleValue ?? 1e-3, atol: (c["atol"] as? NSNumber)?.doubleValue ?? 1e-7,
                    inputs: c["inputs"] as? [String] ?? [], outputs: c["outputs"] as? [String] ?? [],
                    skip: c["skip"] as? String, onnxruntime: c["onnxruntime"] as? String,
                    inputTypes: types("input_types"), outputTypes: types("output_types"))
    }
    return (json["onnx"] as? String ?? "?", cases)
}

/// The values of a numeric array as doubles (nil for a type this runner cannot read).
func doubles(_ x: NDArray) -> [Double]? { x.doubles() }

func compare(_ got: NDArray, _ want: NDArray, rtol: Double, atol: Double) -> Verdict {
    guard got.scalarType == want.scalarType else { return "dtype \(got.scalarType.rawValue), expected \(want.scalarType.rawValue)" }
    guard got.shape == want.shape else { return "shape \(got.shape), expected \(want.shape)" }
    guard let g = doubles(got), let w = doubles(want) else { return "cannot compare \(want.scalarType.rawValue) values" }
    let float = want.scalarType.isFloatingPoint
    for i in g.indices {
        if g[i] == w[i] || g[i].isNaN && w[i].isNaN { continue }
        if float, abs(g[i] - w[i]) <= atol + rtol * abs(w[i]) { continue }
        return "element \(i): got \(g[i]), expected \(w[i])"
    }
    return nil
}

func oneLine(_ error: Error) -> String {
    let text = "\(error)".replacingOccurrences(of: "\n", with: " ")
    return text.count > 240 ? String(text.prefix(240)) + "…" : text
}

/// Loads a case's arrays, converts its model and runs both paths.
func run(_ c: Case, dir: String, scratch: String, arch: Architecture) async -> (reference: Verdict, compiled: Verdict) {
    let caseDir = "\(dir)/\(c.name)"
    var inputs: [NDArray] = []
    var outputs: [NDArray] = []
    do {
        // An array of a type Kiln has no tensors of is not read: the convert below refuses the
        // model, or the case fails naming the type.
        for i in c.inputs.indices where c.inputTypes[i] == nil {
            inputs.append(try NDArray(npyBytes: try FileSystem.readFile("\(caseDir)/input_\(i).npy")))
        }
        for i in c.outputs.indices where c.outputTypes[i] == nil {
            outputs.append(try NDArray(npyBytes: try FileSystem.readFile("\(caseDir)/output_\(i).npy")))
        }
    } catch {
        let why = "case data: \(oneLine(error))"
        return (why, why)
    }
    let model: PortableModel
    do {
        model = try ONNXImporter.convert(contentsOf: "\(caseDir)/model.onnx")
    } catch {
        let why = "convert: " + oneLine(error).replacingOccurrences(of: "\(caseDir)/model.onnx: ", with: "")
        return (why, why)
    }
    guard let function = model.function(named: "main") else { return ("convert: no function main", "convert: no function main") }
    let foreign = Set(c.inputTypes.values).union(c.outputTypes.values).sorted()
    if !foreign.isEmpty {
        let why = "types: Kiln has no \(foreign.joined(separator: " or ")) tensors to feed or compare"
        return (why, why)
    }
    // Inputs by name (the importer keeps ONNX names); an input the function dropped is unused.
    var feeds: [String: NDArray] = [:]
    for (name, x) in zip(c.inputs, inputs) where function.inputs.contains(where: { $0.name == name }) { feeds[name] = x }
    func check(_ got: [String: NDArray]) -> Verdict {
        guard function.outputs.count == c.outputs.count else { return "\(function.outputs.count) outputs, expected \(c.outputs.count)" }
        for (k, (arg, want)) in zip(function.outputs, outputs).enumerated() {
            guard let value = got[arg.name] else { return "output \(k) was not computed" }
            if let problem = compare(value, want, rtol: c.rtol, atol: c.atol) { return "output \(k): \(problem)" }
        }
        return nil
    }
    let reference: Verdict
    do {
        reference = check(try ReferenceInterpreter(model: model, function: "main").run(feeds))
    } catch {
        reference = "reference: \(oneLine(error))"
    }
    let compiled: Verdict
    let path = "\(scratch)/case.\(arch.name).compiled"
    do {
        let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: arch), sourceDigest: [UInt8](repeating: 0, count: 32))
        _ = try CompiledArtifact.write(header: header, plan: plan, to: path)
        var options = ModelLoadOptions()
        options.rememberVerifiedFiles = false
        options.threads = 1
        let loaded = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options)
        guard let f = try await loaded.loadFunction(named: "main") else { throw OpError("the artifact has no function main") }
        var values: [String: NDArray] = [:]
        let first = try await f.run(inputs: feeds)
        for (name, v) in first { values[name] = v }
        if let problem = check(values) {
            compiled = "first run: \(problem)"
        } else {
            var planned: [String: NDArray] = [:]
            for (name, v) in try await f.run(inputs: feeds) { planned[name] = v }
            compiled = check(planned).map { "planned run: \($0)" }
        }
    } catch {
        compiled = "compiled: \(oneLine(error))"
    }
    try? FileManager.default.removeItem(atPath: path)
    return (reference, compiled)
}

struct Expected {
    var paths: String
    var category: Category
    var reason: String
}

func readExpected(_ path: String) -> [String: Expected] {
    guard let bytes = try? FileSystem.readFile(path) else { return [:] }
    var out: [String: Expected] = [:]
    for (n, line) in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
        if line.isEmpty || line.hasPrefix("#") { continue }
        let parts = line.split(separator: "\t", maxSplits: 3, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 4, ["reference", "compiled", "both"].contains(parts[1]), let category = Category(rawValue: parts[2]) else {
            let categories = Category.allCases.map(\.rawValue).joined(separator: "|")
            fail("\(path):\(n + 1): expected NAME<TAB>reference|compiled|both<TAB>\(categories)<TAB>REASON")
        }
        out[parts[0]] = Expected(paths: parts[1], category: category, reason: parts[3])
    }
    return out
}

let arguments = CommandLine.arguments.dropFirst()
guard let casesPath = arguments.first, !casesPath.hasPrefix("-") else {
    fail("usage: kiln-conformance CASES.json [--expected FILE] [--update] [--only PREFIX]")
}
func option(_ name: String) -> String? {
    guard let i = arguments.firstIndex(of: name), arguments.index(after: i) < arguments.endIndex else { return nil }
    return arguments[arguments.index(after: i)]
}
let expectedPath = option("--expected")
let update = arguments.contains("--update")
let only = option("--only")
let verbose = arguments.contains("--verbose")
guard let arch = Architecture.host else { fail("this host runs no Kiln architecture") }
let (onnxVersion, cases) = readCases(casesPath)
let dir = (casesPath as NSString).deletingLastPathComponent + "/cases"
let scratch = NSTemporaryDirectory() + "kiln-conformance-\(getpid())"
try? FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
let expected = expectedPath.map(readExpected) ?? [:]

var results: [(name: String, reference: Verdict, compiled: Verdict)] = []
var ortPassed = 0, skipped = 0
let started = Date()
for c in cases where only.map({ c.name.hasPrefix($0) }) ?? true {
    if c.skip != nil { skipped += 1; continue }
    if c.onnxruntime == "pass" { ortPassed += 1 }
    let (r, k) = await run(c, dir: dir, scratch: scratch, arch: arch)
    results.append((c.name, r, k))
    if verbose { print("\(c.name): reference \(r ?? "pass"); compiled \(k ?? "pass")") }
}
try? FileManager.default.removeItem(atPath: scratch)

let total = results.count
let referencePassed = results.filter { $0.reference == nil }.count
let compiledPassed = results.filter { $0.compiled == nil }.count
print("conformance (onnx \(onnxVersion) node cases, \(arch.name)): \(total) tensor cases, \(skipped) skipped (not tensors)")
print("  reference interpreter: \(referencePassed) passed, \(total - referencePassed) failed")
print("  compiled artifact:     \(compiledPassed) passed, \(total - compiledPassed) failed")
print("  onnxruntime (same cases, from tools/conformance.py): \(ortPassed) passed, \(total - ortPassed) failed")
print(String(format: "  %.1f s", Date().timeIntervalSince(started)))

func paths(_ r: Verdict, _ k: Verdict) -> String? {
    switch (r != nil, k != nil) {
    case (true, true): return "both"
    case (true, false): return "reference"
    case (false, true): return "compiled"
    case (false, false): return nil
    }
}

if update, let expectedPath {
    var lines = ["# ONNX node conformance cases Kiln fails (make conformance): NAME<TAB>reference|compiled|both<TAB>CATEGORY<TAB>REASON.",
                 "# CATEGORY: bug (Kiln is wrong), by-design (not supported on purpose, or more precise than the case), harness (the runner",
                 "# cannot load the case). Written by kiln-conformance --update, which keeps listed cases' categories; the list may only shrink."]
    var counts: [Category: Int] = [:]
    for r in results {
        guard let p = paths(r.reference, r.compiled) else { continue }
        let reason = (r.reference ?? r.compiled)!.replacingOccurrences(of: "\t", with: " ")
        // A harness row whose case now loads is classified again by its new reason.
        let kept = expected[r.name].flatMap { $0.category == .harness && !reason.hasPrefix("case data:") ? nil : $0.category }
        let category = kept ?? Category.of(reason)
        counts[category, default: 0] += 1
        lines.append("\(r.name)\t\(p)\t\(category.rawValue)\t\(reason)")
    }
    do {
        try AtomicFile.write([Array((lines.joined(separator: "\n") + "\n").utf8)], to: expectedPath)
    } catch {
        fail("\(expectedPath): \(error)")
    }
    let summary = Category.allCases.map { "\(counts[$0] ?? 0) \($0.rawValue)" }.joined(separator: ", ")
    print("wrote \(expectedPath): \(counts.values.reduce(0, +)) expected failures (\(summary))")
    exit(0)
}

guard expectedPath != nil else { exit(0) }
var problems: [String] = []
for r in results {
    let actual = paths(r.reference, r.compiled)
    let listed = expected[r.name]?.paths
    if actual == listed { continue }
    if let actual {
        let covered = listed == "both" || listed == actual
        if !covered {
            problems.append("\(r.name): fails \(actual == "both" ? "both paths" : "the \(actual) path") — \((r.reference ?? r.compiled)!)")
        } else {
            problems.append("\(r.name): now passes the \(actual == "reference" ? "compiled" : "reference") path; list it as '\(actual)'")
        }
    } else {
        problems.append("\(r.name): now passes; remove it from the expected failures")
    }
}
if !problems.isEmpty {
    for p in problems.prefix(60) { print("  \(p)") }
    if problems.count > 60 { print("  … and \(problems.count - 60) more") }
    fail("\(problems.count) conformance results differ from \(expectedPath!) (run with --update after fixing, to shrink it)")
}
let listedCounts = Category.allCases.map { k in "\(results.filter { expected[$0.name]?.category == k }.count) \(k.rawValue)" }
print("  every failure is listed in \(expectedPath!) (\(listedCounts.joined(separator: ", ")))")
