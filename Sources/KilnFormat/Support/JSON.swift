import Foundation

/// A JSON value with ordered object keys, so output is stable and readable (the CLI's reports,
/// `assets.json`).
public enum JSON: Sendable {
    case object([(String, JSON)])
    case array([JSON])
    case string(String)
    case int(Int)
    case number(Double)
    case bool(Bool)
    case null

    /// Pretty-printed text with two-space indentation.
    public func rendered(indent: Int = 0) -> String {
        let pad = String(repeating: "  ", count: indent)
        let inner = String(repeating: "  ", count: indent + 1)
        switch self {
        case .object(let pairs):
            if pairs.isEmpty { return "{}" }
            let body = pairs.map { "\(inner)\(JSON.quote($0.0)): \($0.1.rendered(indent: indent + 1))" }
            return "{\n" + body.joined(separator: ",\n") + "\n\(pad)}"
        case .array(let items):
            if items.isEmpty { return "[]" }
            if items.allSatisfy({ $0.isScalar }) {
                return "[" + items.map { $0.rendered() }.joined(separator: ", ") + "]"
            }
            return "[\n" + items.map { inner + $0.rendered(indent: indent + 1) }.joined(separator: ",\n") + "\n\(pad)]"
        case .string(let s): return JSON.quote(s)
        case .int(let n): return String(n)
        case .number(let v): return v.isFinite ? String(format: "%.6g", v) : "null"
        case .bool(let b): return b ? "true" : "false"
        case .null: return "null"
        }
    }

    private var isScalar: Bool {
        switch self {
        case .object, .array: return false
        default: return true
        }
    }

    public static func quote(_ s: String) -> String {
        var out = "\""
        for u in s.unicodeScalars {
            switch u {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where u.value < 0x20:
                let h = String(u.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - h.count) + h
            default: out.unicodeScalars.append(u)
            }
        }
        return out + "\""
    }
}
