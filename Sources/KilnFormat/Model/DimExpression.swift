/// A dim written as a whole-number combination of other dims' symbols, such as
/// `past_sequence_length + sequence_length` (a decoder's grown cache) or `2*n - 1`.
///
/// Exporters name such dims with the expression's text, and a ``Dimension/symbol(_:)`` keeps
/// that text. It is read as an expression when it parses as one: integers, symbols (a letter or
/// `_`, then letters, digits, `_`, `.` or `:`), `+`, `-`, `*` where one side is an integer, and
/// parentheses. Anything else is one opaque symbol, as is an expression none of whose symbols is
/// bound elsewhere (``Function/bind(_:)``).
public struct DimExpression: Hashable, Sendable, CustomStringConvertible {
    /// The symbols with their coefficients, in the order they first appear; no coefficient is 0.
    public private(set) var symbols: [String]
    public private(set) var coefficients: [Int]
    /// The integer added.
    public private(set) var constant: Int

    /// The expression `n`.
    public init(constant n: Int) {
        (symbols, coefficients, constant) = ([], [], n)
    }

    /// The expression `1·name`.
    public init(symbol name: String) {
        (symbols, coefficients, constant) = ([name], [1], 0)
    }

    /// The expression `text` reads as, or `nil` when it is not one (see the type's summary).
    public init?(parsing text: String) {
        var parser = Parser(Array(text.utf8))
        guard let e = parser.sum(), parser.atEnd else { return nil }
        self = e
    }

    /// The expression a dim stands for: its size, its symbol read as an expression; `nil` for an
    /// anonymous dim.
    public init?(_ d: Dimension) {
        switch d {
        case .size(let n): self.init(constant: n)
        case .symbol(let s):
            guard !s.isEmpty else { return nil }
            self = DimExpression(parsing: s) ?? DimExpression(symbol: s)
        }
    }

    /// Whether `text` is a plain name (letters, digits, `_`, `.`, `:` only): one symbol, never an
    /// expression. A byte check, so binding inputs parses only the dims that may be expressions.
    public static func isPlainName(_ text: String) -> Bool {
        text.utf8.allSatisfy { b in
            (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") || (b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9"))
                || b == UInt8(ascii: "_") || b == UInt8(ascii: ".") || b == UInt8(ascii: ":") || b >= 0x80
        }
    }

    /// Whether the expression is one symbol with coefficient 1 and nothing added.
    public var isSymbol: Bool { symbols.count == 1 && coefficients[0] == 1 && constant == 0 }

    /// The dim: a size when no symbol is left, else a symbol spelled as ``description``.
    public var dimension: Dimension {
        symbols.isEmpty ? .size(constant) : .symbol(description)
    }

    /// `past_sequence_length + sequence_length`, `2*n - 1`: terms in the order their symbols
    /// first appeared, the integer last.
    public var description: String {
        var text = ""
        for (s, c) in zip(symbols, coefficients) {
            let magnitude = c.magnitude == 1 ? s : "\(c.magnitude)*\(s)"
            text += text.isEmpty ? (c < 0 ? "-" : "") + magnitude : (c < 0 ? " - " : " + ") + magnitude
        }
        if text.isEmpty { return String(constant) }
        if constant != 0 { text += (constant < 0 ? " - " : " + ") + String(constant.magnitude) }
        return text
    }

    /// The value for the symbols' sizes; `nil` when a symbol is missing or the value overflows.
    public func evaluate(_ sizes: [String: Int]) -> Int? {
        var total = constant
        for (s, c) in zip(symbols, coefficients) {
            guard let n = sizes[s] else { return nil }
            let (p, o1) = c.multipliedReportingOverflow(by: n)
            let (t, o2) = total.addingReportingOverflow(p)
            guard !o1, !o2 else { return nil }
            total = t
        }
        return total
    }

    /// The size of the only symbol not in `sizes` that makes the expression `value`, when there is
    /// exactly one such symbol and a whole, non-negative size does it.
    public func solve(for value: Int, _ sizes: [String: Int]) -> (symbol: String, size: Int)? {
        let unbound = symbols.indices.filter { sizes[symbols[$0]] == nil }
        guard unbound.count == 1 else { return nil }
        let k = unbound[0]
        var known = constant
        for i in symbols.indices where i != k {
            let (p, o1) = coefficients[i].multipliedReportingOverflow(by: sizes[symbols[i]]!)
            let (t, o2) = known.addingReportingOverflow(p)
            guard !o1, !o2 else { return nil }
            known = t
        }
        let (diff, overflow) = value.subtractingReportingOverflow(known)
        let c = coefficients[k]
        guard !overflow, diff % c == 0, diff / c >= 0 else { return nil }
        return (symbols[k], diff / c)
    }

    public static func + (a: DimExpression, b: DimExpression) -> DimExpression? {
        a.adding(b, times: 1)
    }

    public static func - (a: DimExpression, b: DimExpression) -> DimExpression? {
        a.adding(b, times: -1)
    }

    /// `self + k·other`; `nil` on overflow.
    func adding(_ other: DimExpression, times k: Int) -> DimExpression? {
        var out = self
        for (s, c) in zip(other.symbols, other.coefficients) {
            let (kc, o) = c.multipliedReportingOverflow(by: k)
            guard !o else { return nil }
            if let i = out.symbols.firstIndex(of: s) {
                let (sum, o2) = out.coefficients[i].addingReportingOverflow(kc)
                guard !o2 else { return nil }
                out.coefficients[i] = sum
            } else {
                out.symbols.append(s)
                out.coefficients.append(kc)
            }
        }
        let (kn, o1) = other.constant.multipliedReportingOverflow(by: k)
        let (total, o2) = out.constant.addingReportingOverflow(kn)
        guard !o1, !o2 else { return nil }
        out.constant = total
        // Terms that cancelled go.
        let kept = out.coefficients.indices.filter { out.coefficients[$0] != 0 }
        (out.symbols, out.coefficients) = (kept.map { out.symbols[$0] }, kept.map { out.coefficients[$0] })
        return out
    }

    /// `k·self`; `nil` on overflow.
    public func scaled(by k: Int) -> DimExpression? {
        guard k != 0 else { return DimExpression(constant: 0) }
        return DimExpression(constant: 0).adding(self, times: k)
    }

    /// Recursive descent over the text's bytes: `sum := product (('+' | '-') product)*`,
    /// `product := factor ('*' factor)*` (one side an integer), `factor := integer | symbol |
    /// '(' sum ')' | '-' factor`.
    private struct Parser {
        let bytes: [UInt8]
        var at = 0
        /// Parentheses and signs open around the factor being read: text nested deeper than
        /// ``maxDepth`` is not an expression (no exporter writes one, and recursion stays shallow).
        var depth = 0
        static let maxDepth = 32

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var atEnd: Bool {
            mutating get { skipSpaces(); return at == bytes.count }
        }

        mutating func skipSpaces() {
            while at < bytes.count, bytes[at] == UInt8(ascii: " ") || bytes[at] == UInt8(ascii: "\t") { at += 1 }
        }

        mutating func take(_ c: Character) -> Bool {
            skipSpaces()
            guard at < bytes.count, bytes[at] == c.asciiValue! else { return false }
            at += 1
            return true
        }

        mutating func sum() -> DimExpression? {
            guard var e = product() else { return nil }
            while true {
                if take("+") {
                    guard let t = product(), let s = e + t else { return nil }
                    e = s
                } else if take("-") {
                    guard let t = product(), let s = e - t else { return nil }
                    e = s
                } else {
                    return e
                }
            }
        }

        mutating func product() -> DimExpression? {
            guard var e = factor() else { return nil }
            while take("*") {
                guard let f = factor() else { return nil }
                if e.symbols.isEmpty, let p = f.scaled(by: e.constant) {
                    e = p
                } else if f.symbols.isEmpty, let p = e.scaled(by: f.constant) {
                    e = p
                } else {
                    return nil
                }
            }
            return e
        }

        mutating func factor() -> DimExpression? {
            if take("(") {
                depth += 1
                defer { depth -= 1 }
                guard depth <= Parser.maxDepth, let e = sum(), take(")") else { return nil }
                return e
            }
            if take("-") {
                depth += 1
                defer { depth -= 1 }
                guard depth <= Parser.maxDepth else { return nil }
                return factor()?.scaled(by: -1)
            }
            skipSpaces()
            guard at < bytes.count else { return nil }
            let start = at
            func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
            func isLetter(_ b: UInt8) -> Bool {
                (b | 0x20) >= UInt8(ascii: "a") && (b | 0x20) <= UInt8(ascii: "z") || b == UInt8(ascii: "_")
            }
            if isDigit(bytes[at]) {
                while at < bytes.count, isDigit(bytes[at]) { at += 1 }
                guard let n = Int(String(decoding: bytes[start ..< at], as: UTF8.self)) else { return nil }
                return DimExpression(constant: n)
            }
            guard isLetter(bytes[at]) else { return nil }
            while at < bytes.count, isLetter(bytes[at]) || isDigit(bytes[at]) || bytes[at] == UInt8(ascii: ".") || bytes[at] == UInt8(ascii: ":") {
                at += 1
            }
            return DimExpression(symbol: String(decoding: bytes[start ..< at], as: UTF8.self))
        }
    }
}
