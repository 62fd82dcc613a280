/// What the format knows about an op type: its inputs, outputs, attributes,
/// and how its output types follow from its input types.
///
/// The validator uses schemas to check every op of a package; ``ModelBuilder``
/// uses them to infer output types. The op set is documented in specs/ops.md.
public struct OpSchema: Sendable {
    /// One input position.
    public struct Input: Sendable {
        /// A name for messages (for example `bias`).
        public var name: String
        /// Whether the input may be absent (`""`).
        public var optional: Bool
    }

    /// One attribute.
    public struct AttributeSpec: Sendable {
        /// The required type.
        public var kind: AttributeKind
        /// Whether every op must set it.
        public var required: Bool
    }

    /// Computes output types from input types (`nil` for absent optional inputs) and attributes.
    public typealias Inference = @Sendable ([TensorType?], [String: AttributeValue]) throws -> [TensorType]

    /// The op type.
    public var name: String
    /// Inputs in order; the last may repeat when `variadic` is set.
    public var inputs: [Input]
    /// Whether the last input may repeat.
    public var variadic: Bool
    /// The number of outputs.
    public var outputCount: Int
    /// Attributes by name.
    public var attributes: [String: AttributeSpec]
    /// Output type inference.
    public var infer: Inference

    /// Inputs that must be present.
    public var requiredInputCount: Int {
        inputs.lastIndex { !$0.optional }.map { $0 + 1 } ?? 0
    }
}

/// Why an op's inputs or attributes do not fit its schema.
public struct OpError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var reason: String
    /// Creates an error.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}
