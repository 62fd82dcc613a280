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

    /// Creates a function.
    public init(name: String, inputs: [Argument], outputs: [Argument], operations: [Operation]) {
        self.name = name
        self.inputs = inputs
        self.outputs = outputs
        self.operations = operations
    }
}
