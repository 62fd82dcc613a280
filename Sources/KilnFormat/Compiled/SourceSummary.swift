/// What a portable package held, as `kiln inspect` shows it: recorded in each artifact compiled
/// from it, so an artifact, a directory of artifacts and an `assets.json` report the same
/// parameters, precisions and operations as the package itself.
public struct SourceSummary: Sendable, Equatable {
    /// Weights of one storage precision.
    public struct Storage: Sendable, Equatable {
        /// `float32`, `int8 quantized`, ….
        public var storage: String
        /// How many weights.
        public var weights: Int
        /// Their elements.
        public var parameters: Int
        /// Their stored bytes.
        public var bytes: Int
    }

    /// One weight as the package stores it.
    public struct Weight: Sendable, Equatable {
        /// Its name.
        public var name: String
        /// The dtype it decodes to.
        public var dtype: String
        /// Its shape.
        public var shape: [Int]
        /// Its encoding kind (`dense`, `quantized`, `palettized`, …).
        public var encoding: String
        /// Its storage description.
        public var storage: String
        /// Its elements.
        public var parameters: Int
        /// Its stored bytes.
        public var bytes: Int
    }

    /// The package's format version.
    public var formatVersion: Int
    /// All weights' elements.
    public var parameterCount: Int
    /// The compute precision.
    public var computePrecision: String
    /// Weights by storage precision, largest first.
    public var storage: [Storage]
    /// Operations per type, most frequent first.
    public var operations: [(opType: String, count: Int)]
    /// Each function's operation count, in package order.
    public var functions: [(name: String, operationCount: Int)]
    /// Every weight, in package order.
    public var weights: [Weight]

    /// The summary of a package.
    /// - Parameter model: The portable model.
    public init(_ model: PortableModel) {
        formatVersion = model.formatVersion
        parameterCount = model.parameterCount
        computePrecision = model.computePrecision.rawValue
        storage = model.storagePrecisions.map { Storage(storage: $0.storage, weights: $0.weights, parameters: $0.parameters, bytes: $0.bytes) }
        operations = model.operationHistogram
        functions = model.functions.map { ($0.name, $0.operations.count) }
        weights = model.weights.map {
            Weight(name: $0.name, dtype: $0.dtype.rawValue, shape: $0.shape, encoding: $0.encoding.kindName,
                   storage: $0.storageDescription, parameters: $0.elementCount, bytes: $0.storedBytes)
        }
    }

    init(formatVersion: Int, parameterCount: Int, computePrecision: String, storage: [Storage],
         operations: [(opType: String, count: Int)], functions: [(name: String, operationCount: Int)], weights: [Weight]) {
        self.formatVersion = formatVersion
        self.parameterCount = parameterCount
        self.computePrecision = computePrecision
        self.storage = storage
        self.operations = operations
        self.functions = functions
        self.weights = weights
    }

    public static func == (a: SourceSummary, b: SourceSummary) -> Bool {
        a.formatVersion == b.formatVersion && a.parameterCount == b.parameterCount && a.computePrecision == b.computePrecision
            && a.storage == b.storage && a.weights == b.weights
            && a.operations.map(\.opType) == b.operations.map(\.opType) && a.operations.map(\.count) == b.operations.map(\.count)
            && a.functions.map(\.name) == b.functions.map(\.name) && a.functions.map(\.operationCount) == b.functions.map(\.operationCount)
    }
}
