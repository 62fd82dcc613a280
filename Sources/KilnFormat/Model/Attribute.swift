/// A small literal tensor carried inline (little-endian, C order).
public struct TensorLiteral: Sendable, Hashable {
    /// The element type.
    public var dtype: DataType
    /// The fixed shape.
    public var shape: [Int]
    /// The raw element bytes.
    public var bytes: [UInt8]

    /// Creates a literal from raw bytes.
    /// - Parameters:
    ///   - dtype: The element type.
    ///   - shape: The fixed shape.
    ///   - bytes: Little-endian element bytes in C order.
    public init(dtype: DataType, shape: [Int], bytes: [UInt8]) {
        self.dtype = dtype
        self.shape = shape
        self.bytes = bytes
    }
}

/// The typed value of an op attribute.
public enum AttributeValue: Sendable, Hashable {
    case int(Int)
    case float(Double)
    case string(String)
    case ints([Int])
    case floats([Double])
    case strings([String])
    case tensor(TensorLiteral)
    case dtype(DataType)
    /// A subgraph (a branch or loop body of a control-flow op): a closed function whose inputs
    /// are listed by the op (specs/ops.md, control flow).
    case graph(Function)

    /// The name of the attribute's type, as schemas and errors spell it.
    public var kind: AttributeKind {
        switch self {
        case .int: return .int
        case .float: return .float
        case .string: return .string
        case .ints: return .ints
        case .floats: return .floats
        case .strings: return .strings
        case .tensor: return .tensor
        case .dtype: return .dtype
        case .graph: return .graph
        }
    }
}

/// The type of an attribute.
public enum AttributeKind: String, Sendable, Hashable {
    case int, float, string, ints, floats, strings, tensor, dtype, graph
}
