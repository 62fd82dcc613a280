/// Why running a function failed: bad inputs, or an op that cannot run on them.
public struct InferenceError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The function that was run.
    public var function: String
    /// The op that failed, when the failure is inside the graph.
    public var op: String?
    /// What is wrong.
    public var reason: String

    /// Creates an error.
    public init(function: String, op: String? = nil, reason: String) {
        self.function = function
        self.op = op
        self.reason = reason
    }

    public var description: String {
        "function '\(function)'" + (op.map { " op '\($0)'" } ?? "") + ": " + reason
    }
}

/// Checking call inputs against a function's signature and binding its symbols.
extension Function {
    /// Checks `inputs` against the signature: every input present, no unknown names,
    /// dtypes and ranks equal, fixed dims equal, each symbol one size throughout, and each dim
    /// written as an expression of symbols (``DimExpression``) equal to its value. An expression
    /// with one symbol no plain dim binds binds that symbol; one with more is an opaque symbol.
    /// - Parameter inputs: The arrays by input name.
    /// - Returns: The size bound to each symbol, and to each expression's text.
    /// - Throws: ``InferenceError`` naming the input, dim and symbol.
    public func bind(_ inputs: [String: NDArray]) throws -> [String: Int] {
        func fail(_ reason: String) -> InferenceError { InferenceError(function: name, reason: reason) }
        let expected = Set(self.inputs.map(\.name))
        if let unknown = inputs.keys.filter({ !expected.contains($0) }).sorted().first {
            throw fail("unknown input '\(unknown)'; inputs are \(self.inputs.map { "'\($0.name)' \($0.type)" }.joined(separator: ", "))")
        }
        var symbols: [String: (size: Int, from: String)] = [:]
        var expressions: [(arg: String, dim: Int, text: String, e: DimExpression, size: Int)] = []
        func bindSymbol(_ s: String, _ n: Int, _ arg: String, _ i: Int) throws {
            if let (bound, from) = symbols[s], bound != n {
                throw fail("input '\(arg)' dim \(i) (\(s)) is \(n), but \(s) is \(bound) from \(from)")
            }
            symbols[s] = symbols[s] ?? (n, "input '\(arg)'")
        }
        for arg in self.inputs {
            guard let x = inputs[arg.name] else {
                throw fail("missing input '\(arg.name)' (\(arg.type))")
            }
            guard x.scalarType == arg.type.dtype else {
                throw fail("input '\(arg.name)' must be \(arg.type.dtype.rawValue), got \(x.scalarType.rawValue)")
            }
            guard x.rank == arg.type.rank else {
                throw fail("input '\(arg.name)' must have rank \(arg.type.rank) \(arg.type), got shape \(x.shape)")
            }
            for (i, d) in arg.type.shape.enumerated() {
                switch d {
                case .size(let n) where n != x.shape[i]:
                    throw fail("input '\(arg.name)' dim \(i) must be \(n), got \(x.shape[i]) (shape \(x.shape))")
                case .symbol(let s) where !s.isEmpty:
                    if !DimExpression.isPlainName(s), let e = DimExpression(parsing: s), !(e.isSymbol && e.symbols[0] == s) {
                        expressions.append((arg.name, i, s, e, x.shape[i]))
                    } else {
                        try bindSymbol(s, x.shape[i], arg.name, i)
                    }
                default: break
                }
            }
        }
        try bindExpressions(expressions, &symbols, fail)
        return symbols.mapValues(\.size)
    }

    /// Checks or solves the dims written as expressions, in rounds while one binds a symbol
    /// another needs; the rest are opaque symbols, each one size throughout.
    private func bindExpressions(_ pending: [(arg: String, dim: Int, text: String, e: DimExpression, size: Int)],
                                 _ symbols: inout [String: (size: Int, from: String)], _ fail: (String) -> InferenceError) throws {
        var pending = pending
        var sizes = symbols.mapValues(\.size)
        while !pending.isEmpty {
            var left: [(arg: String, dim: Int, text: String, e: DimExpression, size: Int)] = []
            for p in pending {
                if let value = p.e.evaluate(sizes) {
                    guard value == p.size else {
                        let terms = p.e.symbols.map { "\($0) = \(symbols[$0]!.size) from \(symbols[$0]!.from)" }
                        throw fail("input '\(p.arg)' dim \(p.dim) (\(p.text)) is \(p.size), but \(p.text) is \(value) (\(terms.joined(separator: ", ")))")
                    }
                } else if let (s, n) = p.e.solve(for: p.size, sizes) {
                    symbols[s] = (n, "input '\(p.arg)' dim \(p.dim) (\(p.text))")
                    sizes[s] = n
                } else {
                    left.append(p)
                    continue
                }
                // The text is bound too, for checks of declared types that name it.
                symbols[p.text] = symbols[p.text] ?? (p.size, "input '\(p.arg)'")
            }
            if left.count == pending.count { break }
            pending = left
        }
        for p in pending {
            if let (bound, from) = symbols[p.text], bound != p.size {
                throw fail("input '\(p.arg)' dim \(p.dim) (\(p.text)) is \(p.size), but \(p.text) is \(bound) from \(from)")
            }
            symbols[p.text] = symbols[p.text] ?? (p.size, "input '\(p.arg)'")
        }
    }
}
