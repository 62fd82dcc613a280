/// An op's attributes read through its schema: an attribute the op does not set has the
/// registry's default, so no kernel, pass or importer restates a default.
public struct OpAttributes: Sendable {
    /// The attributes the op sets.
    public let values: [String: AttributeValue]
    let specs: [String: OpSchema.AttributeSpec]

    /// The attributes of `op`, with the defaults of its op type's schema.
    /// - Parameter op: An operation of the portable op set.
    public init(_ op: Operation) {
        self.init(op.attributes, opType: op.opType)
    }

    /// `values` with the defaults of `opType`'s schema.
    /// - Parameters:
    ///   - values: The attributes an op sets.
    ///   - opType: Its op type.
    public init(_ values: [String: AttributeValue], opType: String) {
        self.values = values
        specs = OpSet.schema(opType)?.attributes ?? [:]
    }

    /// The value set, else the default.
    /// - Parameter name: An attribute name.
    /// - Returns: The value, or `nil` when neither is there.
    public subscript(_ name: String) -> AttributeValue? { values[name] ?? specs[name]?.defaultValue }

    private func missing(_ name: String) -> OpError { OpError("attribute '\(name)' is not set and has no default") }

    /// A float attribute (an int is widened).
    /// - Parameter name: An attribute name.
    /// - Throws: ``OpError`` when it has another type or no value.
    public func float(_ name: String) throws -> Double {
        switch self[name] {
        case .float(let v)?: return v
        case .int(let v)?: return Double(v)
        case nil: throw missing(name)
        case let v?: throw OpError("attribute '\(name)' must be float, got \(v.kind.rawValue)")
        }
    }

    /// An int attribute.
    /// - Parameter name: An attribute name.
    /// - Throws: ``OpError`` when it has another type or no value.
    public func int(_ name: String) throws -> Int {
        switch self[name] {
        case .int(let v)?: return v
        case nil: throw missing(name)
        case let v?: throw OpError("attribute '\(name)' must be int, got \(v.kind.rawValue)")
        }
    }

    /// A string attribute.
    /// - Parameter name: An attribute name.
    /// - Throws: ``OpError`` when it has another type or no value.
    public func string(_ name: String) throws -> String {
        switch self[name] {
        case .string(let v)?: return v
        case nil: throw missing(name)
        case let v?: throw OpError("attribute '\(name)' must be string, got \(v.kind.rawValue)")
        }
    }
}
