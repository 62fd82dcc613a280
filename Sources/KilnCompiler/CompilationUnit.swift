import KilnFormat

/// The model being compiled for one architecture, as the passes see it.
public struct CompilationUnit: Sendable {
    /// The functions and weights; passes rewrite both.
    public var model: PortableModel {
        didSet { weightIndex = CompilationUnit.index(model.weights) }
    }
    /// The target.
    public let arch: Architecture
    /// The oldest runtime allowed to load the artifact: lowering chooses only kernels it has.
    public var minimumRuntime = CompiledFormat.runtimeVersion
    /// Kernel name of every operation, per function (set by ``Lowering``).
    public var kernels: [String: [KernelID]] = [:]
    /// What passes chose for an op beyond its portable form (layout, fused activation, packed
    /// weight), per function and op name; an op without an entry runs as the op set defines it.
    public var configs: [String: [String: StepConfig]] = [:]

    /// The configuration chosen for `op` of function `function`.
    /// - Parameters:
    ///   - op: An operation of the function.
    ///   - function: The function's name.
    /// - Returns: Its configuration (``StepConfig/portable`` when no pass chose one).
    public func config(of op: Operation, in function: String) -> StepConfig {
        configs[function]?[op.name] ?? .portable
    }

    /// Changes the configuration of `op` of function `function`.
    /// - Parameters:
    ///   - op: An operation of the function.
    ///   - function: The function's name.
    ///   - change: Edits the configuration.
    public mutating func configure(_ op: Operation, in function: String, _ change: (inout StepConfig) -> Void) {
        var c = config(of: op, in: function)
        change(&c)
        configs[function, default: [:]][op.name] = c.isPortable ? nil : c
    }

    /// Wraps a model for compiling.
    /// - Parameters:
    ///   - model: A validated portable model.
    ///   - arch: The target.
    public init(model: PortableModel, arch: Architecture) {
        self.model = model
        self.arch = arch
        weightIndex = CompilationUnit.index(model.weights)
    }

    /// The weight of this name, if any.
    func weight(_ name: String) -> Weight? { weightIndex[name].map { model.weights[$0] } }

    /// Index of each weight by name, kept current as passes change the model.
    private(set) var weightIndex: [String: Int]

    static func index(_ weights: [Weight]) -> [String: Int] {
        Dictionary(weights.enumerated().map { ($1.name, $0) }, uniquingKeysWith: { a, _ in a })
    }

    /// A weight name not yet used, derived from `base`.
    func freshWeightName(_ base: String) -> String {
        if weightIndex[base] == nil { return base }
        var i = 2
        while weightIndex["\(base)\(i)"] != nil { i += 1 }
        return "\(base)\(i)"
    }
}

/// One compiler pass: rewrites the unit in place.
public protocol CompilerPass: Sendable {
    /// The pass's name in pipelines.
    static var name: String { get }
    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when the model cannot be compiled.
    func apply(to unit: inout CompilationUnit) throws
}

/// Why a model could not be compiled.
public struct CompileError: Error, Sendable, CustomStringConvertible {
    /// What is wrong.
    public var reason: String
    /// Creates an error.
    /// - Parameter reason: What is wrong.
    public init(_ reason: String) { self.reason = reason }
    /// The reason.
    public var description: String { reason }
}

/// Uses of values inside one function.
struct UseIndex {
    /// Operation indices reading each value.
    var readers: [String: [Int]] = [:]
    /// Operation index defining each value.
    var producer: [String: Int] = [:]
    /// Values the function returns.
    var returned: Set<String> = []

    init(_ f: Function) {
        for (i, op) in f.operations.enumerated() {
            for v in op.inputs where !v.isEmpty { readers[v, default: []].append(i) }
            for o in op.outputs { producer[o.name] = i }
        }
        returned = Set(f.outputs.map(\.value))
    }

    /// Whether `value` feeds exactly one op and is not returned.
    func isPrivate(_ value: String) -> Bool {
        !returned.contains(value) && (readers[value]?.count ?? 0) == 1
    }
}

extension CompileError: KilnError {
    public var errorKind: KilnErrorKind { .unsupported }
    public var errorPath: String? { nil }
    public var errorField: String? { nil }
}
