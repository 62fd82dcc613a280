/// A portable Kiln model: metadata, functions and the weight pool they share.
///
/// This is the in-memory form of a `Name.kiln` package. Read one with
/// ``PackageReader``, build one with ``ModelBuilder``, write one with ``PackageWriter``.
public struct PortableModel: Sendable {
    /// The package format version this model was read from (the writer writes at least the
    /// version its contents need: ``writtenFormatVersion``).
    public var formatVersion: Int
    /// Descriptive metadata.
    public var metadata: Metadata
    /// The precision arithmetic runs in.
    public var computePrecision: DataType
    /// The shared weight pool, in manifest order.
    public var weights: [Weight]
    /// The entry points.
    public var functions: [Function]

    /// Creates a model.
    /// - Parameter formatVersion: The version read; by default the oldest that holds the functions.
    public init(formatVersion: Int? = nil, metadata: Metadata,
                computePrecision: DataType = .float32, weights: [Weight], functions: [Function]) {
        self.formatVersion = formatVersion
            ?? (functions.contains(where: \.hasSubgraphs) ? PackageFormat.subgraphVersion : PackageFormat.oldestReadableVersion)
        self.metadata = metadata
        self.computePrecision = computePrecision
        self.weights = weights
        self.functions = functions
    }

    /// The function called `name`, if any.
    public func function(named name: String) -> Function? {
        functions.first { $0.name == name }
    }

    /// The weight called `name`, if any.
    public func weight(named name: String) -> Weight? {
        weights.first { $0.name == name }
    }

    /// The version a package of this model is written as: its own, raised to the first
    /// version with subgraphs when a function has control flow.
    public var writtenFormatVersion: Int {
        functions.contains(where: \.hasSubgraphs) ? max(formatVersion, PackageFormat.subgraphVersion) : formatVersion
    }

    /// Elements of all weights, counting compressed weights by their dense size.
    public var parameterCount: Int {
        weights.reduce(0) { $0 + $1.elementCount }
    }
}
