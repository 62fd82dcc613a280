import KilnFormat

/// An ONNX attribute value, decoded.
enum ONNXAttribute: Sendable {
    case float(Float)
    case int(Int)
    case string(String)
    case tensor(ONNXTensor)
    case floats([Float])
    case ints([Int])
    case strings([String])
    /// A subgraph (a branch or loop body).
    case graph(ONNXGraph)
    /// Inside a model-local function: the value of the calling node's attribute of this name.
    case reference(String)
    case other(String)
}

/// An ONNX tensor (initializer or attribute value), decoded into an array when its
/// element type is one Kiln holds.
struct ONNXTensor: Sendable {
    var name: String
    var dims: [Int]
    /// The values, or why they cannot be used.
    var value: Result<NDArray, ConvertError>
    /// Whether the file holds 4-bit integers (int4/uint4), widened here to int8/uint8 values.
    var fourBit = false
}

struct ONNXValueInfo: Sendable {
    var name: String
    /// `nil` when the value is not a tensor or has no type.
    var dtype: Int32?
    /// `nil` when the rank is unknown.
    var shape: [Dimension]?
}

struct ONNXNode: Sendable {
    var name: String
    var opType: String
    var domain: String
    var inputs: [String]
    var outputs: [String]
    var attributes: [String: ONNXAttribute]
}

struct ONNXGraph: Sendable {
    var nodes: [ONNXNode]
    var initializers: [ONNXTensor]
    var inputs: [ONNXValueInfo]
    var outputs: [ONNXValueInfo]
    var valueInfo: [ONNXValueInfo]

    /// Each dim of each input that is not an initializer becomes a symbol of its own; the stated
    /// shapes of values and outputs are dropped (their types kept).
    mutating func makeInputDimsSymbolic() {
        let weights = Set(initializers.map(\.name))
        for k in inputs.indices where !weights.contains(inputs[k].name) {
            let name = inputs[k].name
            inputs[k].shape = inputs[k].shape.map { $0.indices.map { .symbol("\(name)_dim\($0)") } }
        }
        for k in outputs.indices { outputs[k].shape = nil }
        valueInfo = []
    }
}

/// A model-local function (ONNX FunctionProto, as the PyTorch dynamo exporter writes them),
/// inlined into its callers before conversion.
struct ONNXFunction: Sendable {
    var name: String
    var domain: String
    var overload: String
    var inputs: [String]
    var outputs: [String]
    /// Attributes the function takes, with their defaults when it has one.
    var attributes: [String: ONNXAttribute?]
    var nodes: [ONNXNode]
}

struct ONNXModel: Sendable {
    var irVersion: Int
    var producerName: String
    var producerVersion: String
    var modelVersion: Int
    var docString: String
    var opsets: [String: Int]
    var metadata: [(String, String)]
    var graph: ONNXGraph
    var functions: [ONNXFunction] = []
}

/// Why an ONNX model could not be converted. Prints as `FILE: REASON`.
public struct ConvertError: Error, Sendable, CustomStringConvertible {
    /// The ONNX file (or external-data file) involved.
    public var path: String
    /// What is wrong.
    public var reason: String

    /// Creates an error.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

extension ConvertError: KilnError {
    public var errorKind: KilnErrorKind { .unsupported }
    public var errorPath: String? { path }
    public var errorField: String? { nil }
}
