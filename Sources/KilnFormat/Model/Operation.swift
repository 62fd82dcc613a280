import Foundation

/// A named SSA value with its type.
public struct Value: Sendable, Hashable {
    /// The value's name, unique within its function.
    public var name: String
    /// The value's type.
    public var type: TensorType

    /// Creates a value.
    public init(name: String, type: TensorType) {
        self.name = name
        self.type = type
    }
}

/// One operation of a function's graph.
public struct Operation: Sendable, Hashable {
    /// The op type, from the op set (for example `linear`).
    public var opType: String
    /// The op's name, unique within its function.
    public var name: String
    /// Names of the consumed values; `""` marks an absent optional input.
    public var inputs: [String]
    /// The values this op defines.
    public var outputs: [Value]
    /// Attributes by name.
    public var attributes: [String: AttributeValue]
    /// Where the op came from, for debugging (an original node name or location).
    public var source: String

    /// Creates an operation.
    public init(opType: String, name: String, inputs: [String], outputs: [Value],
                attributes: [String: AttributeValue] = [:], source: String = "") {
        self.opType = opType
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.attributes = attributes
        self.source = source
    }
}

/// A function input or output.
public struct Argument: Sendable, Hashable {
    /// The name callers use.
    public var name: String
    /// The declared type.
    public var type: TensorType
    /// For outputs, the SSA value returned under `name`; for inputs, equal to `name`.
    public var value: String

    /// Creates an argument.
    /// - Parameters:
    ///   - name: The name callers use.
    ///   - type: The declared type.
    ///   - value: The SSA value returned (outputs); defaults to `name`.
    public init(name: String, type: TensorType, value: String? = nil) {
        self.name = name
        self.type = type
        self.value = value ?? name
    }
}

/// A named entry point of a model: inputs, outputs and the op graph between them.
public struct Function: Sendable, Hashable {
    /// The function's name (for example `main`).
    public var name: String
    /// Inputs, in calling order.
    public var inputs: [Argument]
    /// Outputs, in result order.
    public var outputs: [Argument]
    /// Operations in topological order.
    public var operations: [Operation]
    /// Inputs that a stateful run reads from the state the runtime keeps, each paired with the
    /// output whose value becomes the state for the next run (see ``StatePair``).
    public var states: [StatePair]

    /// Creates a function.
    public init(name: String, inputs: [Argument], outputs: [Argument], operations: [Operation], states: [StatePair] = []) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.operations = operations
        self.states = states
    }
}

/// State a function keeps between runs (Core ML's stateful models): in a stateful run, `input`
/// is not passed by the caller but read from the state, which is `output`'s value of the run
/// before (a language model's `past_key_values.N.key` and `present.N.key`). The two have the
/// same type and rank. A fresh state is zero-length along the input's dims that the other
/// inputs leave unbound. Callers that pass the input themselves run the function as before.
public struct StatePair: Sendable, Hashable {
    /// The input read from the state.
    public var input: String
    /// The output that becomes the state.
    public var output: String

    /// Pairs an input with the output that becomes its next value.
    public init(input: String, output: String) {
        self.input = input
        self.output = output
    }
}

extension StatePair {
    /// The pairs a rule names in `function`: `INPUT=OUTPUT`, each side a name or a pattern with
    /// one `*` standing for the same text on both sides (`past_key_values.*=present.*`); rules
    /// are separated by commas. Every rule must match at least one input, and each matched
    /// input's output must exist.
    /// - Throws: ``OpError`` saying which rule does not fit the function.
    public static func pairs(rule: String, in function: Function) throws -> [StatePair] {
        var pairs: [StatePair] = []
        for part in rule.split(separator: ",", omittingEmptySubsequences: true).map({ $0.trimmingCharacters(in: .whitespaces) }) {
            let sides = part.split(separator: "=", omittingEmptySubsequences: false).map(String.init)
            guard sides.count == 2, !sides[0].isEmpty, !sides[1].isEmpty,
                  sides[0].filter({ $0 == "*" }).count == sides[1].filter({ $0 == "*" }).count,
                  sides[0].filter({ $0 == "*" }).count <= 1 else {
                throw OpError("state rule '\(part)': expected INPUT=OUTPUT, with one '*' on both sides or on neither")
            }
            let (input, output) = (sides[0], sides[1])
            var matched = 0
            for arg in function.inputs {
                guard let stem = Self.match(arg.name, input) else { continue }
                let out = output.replacingOccurrences(of: "*", with: stem)
                guard function.outputs.contains(where: { $0.name == out }) else {
                    throw OpError("state rule '\(part)': input '\(arg.name)' pairs with output '\(out)', which function '\(function.name)' does not have")
                }
                pairs.append(StatePair(input: arg.name, output: out))
                matched += 1
            }
            guard matched > 0 else {
                throw OpError("state rule '\(part)' matches no input of function '\(function.name)' (inputs: \(function.inputs.map(\.name).joined(separator: ", ")))")
            }
        }
        return pairs
    }

    /// The text `*` stands for when `name` matches `pattern` ("" without a `*`), else `nil`.
    private static func match(_ name: String, _ pattern: String) -> String? {
        guard let star = pattern.firstIndex(of: "*") else { return name == pattern ? "" : nil }
        let (prefix, suffix) = (pattern[..<star], pattern[pattern.index(after: star)...])
        guard name.count >= prefix.count + suffix.count, name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
        return String(name.dropFirst(prefix.count).dropLast(suffix.count))
    }
}
