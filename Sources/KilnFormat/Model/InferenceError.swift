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
    /// dtypes and ranks equal, fixed dims equal, each symbol one size throughout.
    /// - Parameter inputs: The arrays by input name.
    /// - Returns: The size bound to each symbol.
    /// - Throws: ``InferenceError`` naming the input, dim and symbol.
    public func bind(_ inputs: [String: NDArray]) throws -> [String: Int] {
        func fail(_ reason: String) -> InferenceError { InferenceError(function: name, reason: reason) }
        let expected = Set(self.inputs.map(\.name))
        if let unknown = inputs.keys.filter({ !expected.contains($0) }).sorted().first {
            throw fail("unknown input '\(unknown)'; inputs are \(self.inputs.map { "'\($0.name)' \($0.type)" }.joined(separator: ", "))")
        }
        var symbols: [String: (Int, String)] = [:]
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
                    if let (bound, from) = symbols[s], bound != x.shape[i] {
                        throw fail("input '\(arg.name)' dim \(i) (\(s)) is \(x.shape[i]), but \(s) is \(bound) from input '\(from)'")
                    }
                    symbols[s] = symbols[s] ?? (x.shape[i], arg.name)
                default: break
                }
            }
        }
        return symbols.mapValues(\.0)
    }
}
