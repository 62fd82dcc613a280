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
        /// The value an op that does not set it has (ONNX's default), when the registry states it.
        public var defaultValue: AttributeValue? = nil
    }

    /// What type inference sees of one op.
    public struct Context: Sendable {
        /// Input types in order; `nil` for absent optional inputs.
        public var inputs: [TensorType?]
        /// The op's attributes.
        public var attributes: [String: AttributeValue]
        /// How many outputs the op declares.
        public var outputCount: Int

        /// Creates a context.
        public init(inputs: [TensorType?], attributes: [String: AttributeValue], outputCount: Int) {
            self.inputs = inputs
            self.attributes = attributes
            self.outputCount = outputCount
        }

        /// Input `i`, which must be present.
        public func input(_ i: Int) throws -> TensorType {
            guard i < inputs.count, let t = inputs[i] else { throw OpError("input \(i) is missing") }
            return t
        }

        /// Input `i` when present.
        public func optionalInput(_ i: Int) -> TensorType? {
            i < inputs.count ? inputs[i] : nil
        }
    }

    /// Computes output types; `nil` marks an output whose type cannot be inferred
    /// without input values (the declared type is then trusted).
    public typealias Inference = @Sendable (Context) throws -> [TensorType?]

    /// The op type.
    public var name: String
    /// Inputs in order; the last may repeat when `variadic` is set.
    public var inputs: [Input]
    /// Whether the last input may repeat.
    public var variadic: Bool
    /// How many outputs the op may have.
    public var outputCount: ClosedRange<Int>
    /// Attributes by name.
    public var attributes: [String: AttributeSpec]
    /// Output type inference.
    public var infer: Inference
    /// ONNX operator types (domain ai.onnx) the importer converts to this op one to one, their
    /// attributes carried over.
    public var onnx: [String] = []
    /// For an elementwise unary function: its kernel and its exact formula.
    public var unary: UnaryMap? = nil
    /// The groups the op belongs to (passes and kernel families handle groups, not op lists).
    public var groups: OpGroups = []
    /// Inputs whose values (not only their shapes) decide the result's shape: a shape plan folds
    /// them into constants, and an input there that depends on run-time data keeps the function
    /// generic.
    public var shapeInputs: [Int] = []

    /// The schema with `groups` added.
    func `in`(_ more: OpGroups) -> OpSchema {
        var s = self
        s.groups.formUnion(more)
        return s
    }

    /// Inputs that must be present.
    public var requiredInputCount: Int {
        inputs.lastIndex { !$0.optional }.map { $0 + 1 } ?? 0
    }
}

/// Groups of ops that passes and kernel families treat alike.
public struct OpGroups: OptionSet, Sendable, Hashable {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// Broadcasting arithmetic of two operands of one numeric type (`binary` kernels).
    public static let arithmetic = OpGroups(rawValue: 1 << 0)
    /// Broadcasting comparisons with a bool result (`binary` kernels).
    public static let comparison = OpGroups(rawValue: 1 << 1)
    /// Broadcasting logic on bools (`binary` kernels).
    public static let logical = OpGroups(rawValue: 1 << 2)
    /// Computes the same in any layout when every operand is permuted alike (the layout pass
    /// moves it to channels-last).
    public static let layoutAgnostic = OpGroups(rawValue: 1 << 3)
    /// Moves elements without computing (`copy` kernels: strided block copies).
    public static let copy = OpGroups(rawValue: 1 << 4)
    /// Reinterprets its input's shape; the result shares its bytes (`view` steps).
    public static let view = OpGroups(rawValue: 1 << 5)
    /// Makes values from shapes, scalars and attributes alone (`generate` steps; folded by shape plans).
    public static let generator = OpGroups(rawValue: 1 << 6)
    /// Runs subgraphs (`if`, `loop`, `scan`): its results' shapes are known only by running it.
    public static let controlFlow = OpGroups(rawValue: 1 << 7)
}

/// Why an op's inputs or attributes do not fit its schema or its kernel.
public struct OpError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var reason: String
    /// Creates an error.
    public init(_ reason: String) { self.reason = reason }
    public var description: String { reason }
}

/// Typed attribute access for type inference and kernels.
extension Dictionary where Key == String, Value == AttributeValue {
    /// An int attribute, or `fallback` when absent.
    public func int(_ name: String, _ fallback: Int) throws -> Int {
        switch self[name] {
        case nil: return fallback
        case .int(let v)?: return v
        case let v?: throw OpError("attribute '\(name)' must be int, got \(v.kind.rawValue)")
        }
    }

    /// A float attribute, or `fallback` when absent.
    public func float(_ name: String, _ fallback: Double) throws -> Double {
        switch self[name] {
        case nil: return fallback
        case .float(let v)?: return v
        case .int(let v)?: return Double(v)
        case let v?: throw OpError("attribute '\(name)' must be float, got \(v.kind.rawValue)")
        }
    }

    /// A string attribute, or `fallback` when absent.
    public func string(_ name: String, _ fallback: String) throws -> String {
        switch self[name] {
        case nil: return fallback
        case .string(let v)?: return v
        case let v?: throw OpError("attribute '\(name)' must be string, got \(v.kind.rawValue)")
        }
    }

    /// An ints attribute, or `nil` when absent.
    public func ints(_ name: String) throws -> [Int]? {
        switch self[name] {
        case nil: return nil
        case .ints(let v)?: return v
        case let v?: throw OpError("attribute '\(name)' must be ints, got \(v.kind.rawValue)")
        }
    }

    /// A strings attribute, or `nil` when absent.
    public func strings(_ name: String) throws -> [String]? {
        switch self[name] {
        case nil: return nil
        case .strings(let v)?: return v
        case let v?: throw OpError("attribute '\(name)' must be strings, got \(v.kind.rawValue)")
        }
    }

    /// A floats attribute, or `nil` when absent.
    public func floats(_ name: String) throws -> [Double]? {
        switch self[name] {
        case nil: return nil
        case .floats(let v)?: return v
        case let v?: throw OpError("attribute '\(name)' must be floats, got \(v.kind.rawValue)")
        }
    }
}
