import KilnFormat

/// The type of one function input or output, as callers see it.
public struct TensorDescriptor: Sendable, Hashable, CustomStringConvertible {
    /// The input or output name.
    public let name: String
    /// The element type.
    public let scalarType: DataType
    /// The dimensions; dynamic ones are symbols (the empty symbol is anonymous).
    public let shape: [Dimension]

    /// Whether any dimension is bound only at run time.
    public var isDynamic: Bool { shape.contains { $0.size == nil } }

    /// `tokens: int64[batch, seq]`.
    public var description: String { "\(name): \(TensorType(scalarType, shape))" }
}

/// A function's signature: its inputs and outputs in order.
public struct FunctionDescriptor: Sendable {
    /// The function's name.
    public let name: String
    /// Inputs in calling order.
    public let inputs: [TensorDescriptor]
    /// Outputs in result order.
    public let outputs: [TensorDescriptor]
    /// The state the function declares (``InferenceFunction/makeState(pairs:dims:)``).
    public let states: [StatePair]

    init(_ f: Function) {
        name = f.name
        states = f.states
        inputs = f.inputs.map { TensorDescriptor(name: $0.name, scalarType: $0.type.dtype, shape: $0.type.shape) }
        outputs = f.outputs.map { TensorDescriptor(name: $0.name, scalarType: $0.type.dtype, shape: $0.type.shape) }
    }

    /// Input names in calling order.
    public var inputNames: [String] { inputs.map(\.name) }
    /// Output names in result order.
    public var outputNames: [String] { outputs.map(\.name) }

    /// The descriptor of input `name`, or `nil` when there is none.
    /// - Parameter name: An input name.
    /// - Returns: Its dtype and shape.
    public func inputDescriptor(of name: String) -> TensorDescriptor? {
        inputs.first { $0.name == name }
    }

    /// The descriptor of output `name`, or `nil` when there is none.
    /// - Parameter name: An output name.
    /// - Returns: Its dtype and shape.
    public func outputDescriptor(of name: String) -> TensorDescriptor? {
        outputs.first { $0.name == name }
    }
}

/// The results of one run, by output name, in the function's output order.
public struct InferenceOutputs: Sendable, Sequence {
    /// Output names still held, in order.
    public private(set) var names: [String]
    private var values: [String: NDArray]

    init(names: [String], values: [String: NDArray]) {
        self.names = names
        self.values = values
    }

    /// The output called `name`, if held.
    public subscript(name: String) -> NDArray? { values[name] }

    /// Takes the output called `name` out of the container (avoids keeping a second reference).
    /// - Parameter name: An output name.
    /// - Returns: The array, or `nil` when absent or already removed.
    @discardableResult
    public mutating func remove(_ name: String) -> NDArray? {
        names.removeAll { $0 == name }
        return values.removeValue(forKey: name)
    }

    /// The number of outputs held.
    public var count: Int { names.count }

    public func makeIterator() -> AnyIterator<(name: String, value: NDArray)> {
        var i = 0
        let names = names, values = values
        return AnyIterator {
            guard i < names.count else { return nil }
            defer { i += 1 }
            return (names[i], values[names[i]]!)
        }
    }
}
