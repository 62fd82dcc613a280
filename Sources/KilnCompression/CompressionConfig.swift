import Foundation
import KilnFormat

/// Why a compression config was refused. Prints as `FILE: $.json.path: REASON`.
public struct ConfigError: Error, Sendable, CustomStringConvertible {
    /// The config file.
    public var path: String
    /// Where in the JSON (for example `$.op_types.conv.nbits`).
    public var jsonPath: String
    /// What is wrong.
    public var reason: String

    public var description: String { "\(path): \(jsonPath): \(reason)" }
}

/// One compression setting, with coremltools' names and defaults (specs/compression.md).
public struct CompressionSetting: Sendable, Hashable {
    /// `linear_symmetric`, `linear`, `kmeans`, `uniform` or `unique`.
    public var mode: String
    /// Linear quantization: `int8`, `uint8`, `int4`, `uint4`.
    public var dtype: String = "int8"
    /// `per_tensor`, `per_channel`, `per_block` (linear) or `per_tensor`, `per_grouped_channel` (palettization).
    public var granularity: String
    /// Block size along the input axis for `per_block`.
    public var blockSize: Int = 32
    /// Palettization bits: 1, 2, 3, 4, 6 or 8.
    public var nbits: Int = 4
    /// Whether the config gave `nbits` (`unique` mode picks the fewest that fit otherwise).
    public var nbitsGiven = false
    /// Output channels per LUT for `per_grouped_channel`.
    public var groupSize: Int = 32
    /// The output-channel axis, when not the consumer's default.
    public var channelAxis: Int?
    /// Palettization: a per-channel scale applied after the look-up.
    public var enablePerChannelScale = false
    /// Palettization LUT element type: `float32` or `float16` (default: the weight's type).
    public var lutDtype: String?
    /// Only weights with more elements than this are compressed.
    public var weightThreshold: Int = 2048

    /// Whether this is linear quantization (else palettization).
    public var isLinear: Bool { mode == "linear_symmetric" || mode == "linear" }

    static let keys: Set<String> = ["mode", "dtype", "granularity", "block_size", "nbits", "group_size", "channel_axis",
                                    "enable_per_channel_scale", "lut_dtype", "weight_threshold"]

    init(json: [String: Any], path: String, at jsonPath: String) throws {
        func fail(_ key: String?, _ reason: String) -> ConfigError {
            ConfigError(path: path, jsonPath: key.map { "\(jsonPath).\($0)" } ?? jsonPath, reason: reason)
        }
        for key in json.keys.sorted() where !Self.keys.contains(key) {
            throw fail(key, "unknown key; known keys are \(Self.keys.sorted().joined(separator: ", "))")
        }
        func string(_ key: String, _ allowed: [String]) throws -> String? {
            guard let v = json[key] else { return nil }
            guard let s = v as? String, allowed.contains(s) else {
                throw fail(key, "must be one of \(allowed.map { "\"\($0)\"" }.joined(separator: ", "))")
            }
            return s
        }
        func int(_ key: String, _ valid: (Int) -> Bool, _ rule: String) throws -> Int? {
            guard let v = json[key] else { return nil }
            guard !(v is Bool && String(describing: type(of: v)).contains("Bool")), let n = v as? NSNumber,
                  let i = Int(exactly: n.doubleValue), valid(i) else {
                throw fail(key, "must be \(rule)")
            }
            return i
        }
        mode = try string("mode", ["linear_symmetric", "linear", "kmeans", "uniform", "unique"]) ?? "linear_symmetric"
        let linear = mode == "linear_symmetric" || mode == "linear"
        granularity = try string("granularity", linear ? ["per_tensor", "per_channel", "per_block"] : ["per_tensor", "per_grouped_channel"])
            ?? (linear ? "per_channel" : "per_tensor")
        if let d = try string("dtype", ["int8", "uint8", "int4", "uint4"]) {
            guard linear else { throw fail("dtype", "applies to linear quantization only") }
            dtype = d
        }
        if let b = try int("block_size", { $0 > 0 }, "a positive integer") { blockSize = b }
        if let n = try int("nbits", { [1, 2, 3, 4, 6, 8].contains($0) }, "one of 1, 2, 3, 4, 6, 8") {
            guard !linear else { throw fail("nbits", "applies to palettization only; linear quantization uses dtype") }
            nbits = n
            nbitsGiven = true
        }
        if let g = try int("group_size", { $0 > 0 }, "a positive integer") { groupSize = g }
        channelAxis = try int("channel_axis", { $0 >= -8 && $0 < 8 }, "an axis")
        if let v = json["enable_per_channel_scale"] {
            guard let b = v as? Bool else { throw fail("enable_per_channel_scale", "must be true or false") }
            enablePerChannelScale = b
        }
        lutDtype = try string("lut_dtype", ["float32", "float16"])
        if let t = try int("weight_threshold", { $0 >= 0 }, "a non-negative integer") { weightThreshold = t }
    }
}

/// A per-layer compression config: global, per op type and per op or weight name (globs).
public struct CompressionConfig: Sendable {
    /// A setting or an explicit "skip" (`null`).
    public enum Entry: Sendable, Hashable {
        case skip
        case compress(CompressionSetting)
    }

    /// The setting for everything not matched below.
    public var global: Entry?
    /// By consumer op type (Kiln op types: `linear`, `conv`, `matmul`, `gather`, …).
    public var opTypes: [String: Entry]
    /// By weight or consumer op name; exact names or `*`/`?` globs, in file order.
    public var opNames: [(String, Entry)]

    /// Reads and checks a config file before any work.
    /// - Parameter path: The JSON file.
    /// - Throws: ``ConfigError`` naming the JSON path of the problem.
    public init(contentsOf path: String) throws {
        let data: Data
        do { data = Data(try FileSystem.readFile(path)) } catch let error as PackageError {
            throw ConfigError(path: path, jsonPath: "$", reason: "cannot read the file (\(error.reason))")
        }
        try self.init(data: data, path: path)
    }

    /// Parses a config from JSON bytes; `path` names it in errors.
    public init(data: Data, path: String) throws {
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw ConfigError(path: path, jsonPath: "$", reason: "not valid JSON")
        }
        guard let object = root as? [String: Any] else { throw ConfigError(path: path, jsonPath: "$", reason: "must be a JSON object") }
        for key in object.keys.sorted() where !["global", "op_types", "op_names"].contains(key) {
            throw ConfigError(path: path, jsonPath: "$.\(key)", reason: "unknown key; the config has global, op_types and op_names")
        }
        func entry(_ v: Any, _ at: String) throws -> Entry {
            if v is NSNull { return .skip }
            guard let o = v as? [String: Any] else { throw ConfigError(path: path, jsonPath: at, reason: "must be an object or null") }
            return .compress(try CompressionSetting(json: o, path: path, at: at))
        }
        global = try object["global"].map { try entry($0, "$.global") }
        func table(_ key: String) throws -> [(String, Entry)] {
            guard let v = object[key] else { return [] }
            guard let o = v as? [String: Any] else { throw ConfigError(path: path, jsonPath: "$.\(key)", reason: "must be an object") }
            // JSONSerialization does not keep key order; sort for a deterministic order.
            return try o.keys.sorted().map { ($0, try entry(o[$0]!, "$.\(key).\($0)")) }
        }
        opTypes = Dictionary(uniqueKeysWithValues: try table("op_types"))
        opNames = try table("op_names")
    }

    /// A config from parts (for tests and tools).
    public init(global: Entry?, opTypes: [String: Entry] = [:], opNames: [(String, Entry)] = []) {
        self.global = global
        self.opTypes = opTypes
        self.opNames = opNames
    }

    /// The entry for one weight used by one consumer op: weight name, then op name, then op type, then global.
    func resolve(weight: String, op: KilnFormat.Operation?) -> Entry? {
        func byName(_ name: String) -> Entry? {
            if let exact = opNames.first(where: { $0.0 == name }) { return exact.1 }
            return opNames.first { glob($0.0, matches: name) }?.1
        }
        guard let op else { return byName(weight) ?? global }
        return byName(weight) ?? byName(op.name) ?? opTypes[op.opType] ?? global
    }
}

/// `*` matches any run of characters, `?` any one character.
func glob(_ pattern: String, matches text: String) -> Bool {
    let p = Array(pattern), t = Array(text)
    var (pi, ti) = (0, 0)
    var (star, mark) = (-1, 0)
    while ti < t.count {
        if pi < p.count, p[pi] == "?" || p[pi] == t[ti] {
            pi += 1
            ti += 1
        } else if pi < p.count, p[pi] == "*" {
            star = pi
            mark = ti
            pi += 1
        } else if star >= 0 {
            pi = star + 1
            mark += 1
            ti = mark
        } else {
            return false
        }
    }
    while pi < p.count, p[pi] == "*" { pi += 1 }
    return pi == p.count
}

extension ConfigError: KilnError {
    public var errorKind: KilnErrorKind { .malformed }
    public var errorPath: String? { path }
    public var errorField: String? { jsonPath }
}
