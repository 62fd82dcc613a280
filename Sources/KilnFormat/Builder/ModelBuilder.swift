/// Builds models in Swift: weights, functions and ops, with output types inferred
/// from the op set.
///
/// ```swift
/// var builder = ModelBuilder(name: "Tiny")
/// let w = try builder.addWeight("fc.weight", shape: [10, 64], values: weights)
/// var f = builder.function("main")
/// let x = f.input("x", TensorType(.float32, ["batch", 64]))
/// let y = try f.apply("linear", [x, f.use(w)], name: "fc")
/// f.output("logits", y)
/// try builder.add(f)
/// let model = try builder.build()
/// ```
public struct ModelBuilder {
    /// The metadata the model will carry.
    public var metadata: Metadata
    private var weights: [Weight] = []
    private var weightIndex: [String: Int] = [:]
    private var functions: [Function] = []

    /// Starts a model.
    /// - Parameter name: The model's name.
    public init(name: String) {
        metadata = Metadata(name: name)
    }

    /// Adds a dense weight.
    /// - Parameters:
    ///   - name: A name unique in the model.
    ///   - dtype: The element type of `bytes`.
    ///   - shape: The weight's shape.
    ///   - bytes: Little-endian element bytes in C order.
    /// - Returns: The weight, to pass to ``FunctionBuilder/use(_:)``.
    /// - Throws: ``PackageError`` when the name is taken or the bytes do not fit the shape.
    @discardableResult
    public mutating func addWeight(_ name: String, dtype: DataType, shape: [Int], bytes: [UInt8]) throws -> Weight {
        let w = Weight(name: name, dtype: dtype, shape: shape,
                       encoding: .dense(WeightBlob(dtype: dtype, shape: shape, data: ByteStorage(bytes))))
        try add(w)
        return w
    }

    /// Adds a dense float32 weight.
    /// - Parameters:
    ///   - name: A name unique in the model.
    ///   - shape: The weight's shape.
    ///   - values: The values in C order.
    /// - Returns: The weight.
    /// - Throws: ``PackageError`` when the name is taken or the count does not fit the shape.
    @discardableResult
    public mutating func addWeight(_ name: String, shape: [Int], values: [Float]) throws -> Weight {
        let bytes = values.withUnsafeBytes { raw in raw.flatMap { [$0] } }
        return try addWeight(name, dtype: .float32, shape: shape, bytes: bytes)
    }

    /// Adds a weight in any encoding.
    /// - Parameter weight: The weight.
    /// - Throws: ``PackageError`` when the name is taken or the weight is malformed.
    public mutating func add(_ weight: Weight) throws {
        guard weightIndex[weight.name] == nil else {
            throw PackageError(field: "weight '\(weight.name)'", reason: "a weight with this name already exists")
        }
        try Validation.weight(weight, "weight '\(weight.name)'")
        weightIndex[weight.name] = weights.count
        weights.append(weight)
    }

    /// Starts a function; add it with ``add(_:)-(FunctionBuilder)`` when done.
    /// - Parameter name: The function's name.
    /// - Returns: A builder for the function.
    public func function(_ name: String) -> FunctionBuilder {
        FunctionBuilder(name: name)
    }

    /// Adds a finished function.
    /// - Parameter function: The function's builder.
    /// - Throws: ``PackageError`` when a function of that name exists.
    public mutating func add(_ function: FunctionBuilder) throws {
        guard !functions.contains(where: { $0.name == function.name }) else {
            throw PackageError(field: "function '\(function.name)'", reason: "a function with this name already exists")
        }
        functions.append(function.function)
    }

    /// The finished, validated model.
    /// - Returns: The model.
    /// - Throws: ``PackageError`` when the model is not well formed.
    public func build() throws -> PortableModel {
        let model = PortableModel(metadata: metadata, weights: weights, functions: functions)
        try model.validate()
        return model
    }
}

/// A value inside a function being built.
public struct ValueRef: Sendable, Hashable {
    /// The value's name.
    public var name: String
    /// Its type.
    public var type: TensorType
}

/// Builds one function: inputs, ops (types inferred), outputs.
public struct FunctionBuilder {
    /// The function's name.
    public let name: String
    fileprivate var function: Function
    private var names = Set<String>()
    private var counters: [String: Int] = [:]

    init(name: String) {
        self.name = name
        function = Function(name: name, inputs: [], outputs: [], operations: [])
    }

    /// Declares an input.
    /// - Parameters:
    ///   - name: The input's name.
    ///   - type: Its type; dynamic dims are symbols.
    /// - Returns: The input value.
    public mutating func input(_ name: String, _ type: TensorType) -> ValueRef {
        function.inputs.append(Argument(name: name, type: type))
        names.insert(name)
        return ValueRef(name: name, type: type)
    }

    /// Refers to a model weight from this function.
    /// - Parameter weight: A weight added to the model.
    /// - Returns: The weight as a value.
    public func use(_ weight: Weight) -> ValueRef {
        ValueRef(name: weight.name, type: weight.type)
    }

    /// Appends an op, inferring its output types from the op set.
    /// - Parameters:
    ///   - opType: The op type (specs/ops.md).
    ///   - inputs: Its inputs; `nil` for an absent optional input.
    ///   - attributes: Its attributes.
    ///   - name: The op's name; generated from the op type when `nil`.
    ///   - outputNames: Names of its outputs; derived from the op name when `nil`.
    ///   - outputTypes: Output types, for ops whose types depend on input values.
    /// - Returns: The op's outputs.
    /// - Throws: ``PackageError`` when the op type is unknown or the inputs do not fit it.
    @discardableResult
    public mutating func apply(_ opType: String, _ inputs: [ValueRef?], _ attributes: [String: AttributeValue] = [:],
                               name: String? = nil, outputNames: [String]? = nil,
                               outputTypes: [TensorType]? = nil) throws -> [ValueRef] {
        guard let schema = OpSet.schema(opType) else {
            throw PackageError(field: "function '\(self.name)'", reason: "unknown op type '\(opType)'")
        }
        let opName = name ?? freshName(opType)
        let field = "function '\(self.name)' op '\(opName)'"
        let inferred: [TensorType?]
        do {
            inferred = try schema.infer(OpSchema.Context(
                inputs: inputs.map { $0?.type }, attributes: attributes,
                outputCount: outputTypes?.count ?? outputNames?.count ?? schema.outputCount.lowerBound))
        } catch let e as OpError {
            throw PackageError(field: field, reason: e.reason)
        }
        let types = try inferred.enumerated().map { i, t -> TensorType in
            if let given = outputTypes?[i] { return given }
            guard let t else {
                throw PackageError(field: field, reason: "output \(i)'s type depends on input values; pass outputTypes")
            }
            return t
        }
        let outNames = outputNames ?? (types.count == 1 ? [opName] : types.indices.map { "\(opName):\($0)" })
        let outputs = zip(outNames, types).map { Value(name: $0, type: $1) }
        function.operations.append(Operation(
            opType: opType, name: opName, inputs: inputs.map { $0?.name ?? "" }, outputs: outputs, attributes: attributes))
        names.insert(opName)
        return outputs.map { ValueRef(name: $0.name, type: $0.type) }
    }

    /// Appends a single-output op; see ``apply(_:_:_:name:outputNames:outputTypes:)``.
    public mutating func apply1(_ opType: String, _ inputs: [ValueRef?], _ attributes: [String: AttributeValue] = [:],
                                name: String? = nil) throws -> ValueRef {
        try apply(opType, inputs, attributes, name: name)[0]
    }

    /// Declares an output.
    /// - Parameters:
    ///   - name: The name callers see.
    ///   - value: The value returned.
    public mutating func output(_ name: String, _ value: ValueRef) {
        function.outputs.append(Argument(name: name, type: value.type, value: value.name))
    }

    private mutating func freshName(_ opType: String) -> String {
        var n = counters[opType, default: 0]
        var candidate: String
        repeat {
            candidate = "\(opType)_\(n)"
            n += 1
        } while names.contains(candidate)
        counters[opType] = n
        return candidate
    }
}
