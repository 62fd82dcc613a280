import CKilnKernels
import KilnFormat

/// A float32 function of CKilnKernels' kiln_unary.inc, which `f32_unary` kernels run and GEMM
/// and convolution epilogues apply. Which op computes which function, with which parameters,
/// and which functions fuse, is the op registry's (``UnaryMap``); the C list only gives each name
/// its code. The name is the one a step config's fused activation stores.
public struct UnaryFunction: Sendable, Hashable, CustomStringConvertible {
    /// The name in kiln_unary.inc.
    public let name: String
    /// The C code (`KILN_UNARY_*`).
    package let code: Int32

    /// The function of this name in kiln_unary.inc, or `nil`.
    /// - Parameter name: A function name (`relu`, `gelu_tanh`).
    public init?(named name: String) {
        let code = kiln_unary_code(name)
        guard code != 0 else { return nil }
        self.name = name
        self.code = code
    }

    /// Every function of kiln_unary.inc, by code.
    public static let all: [UnaryFunction] = (1 ... Int(kiln_unary_count())).compactMap { code in
        kiln_unary_name(Int32(code)).flatMap { UnaryFunction(named: String(cString: $0)) }
    }

    /// The functions an epilogue may apply: every function of a registry op marked as an activation.
    public static let activations: Set<UnaryFunction> = Set(OpSet.schemas.values.compactMap(\.unary).filter(\.isActivation)
        .flatMap(\.functions).compactMap(UnaryFunction.init(named:)))

    public static let clip = UnaryFunction(named: "clip")!
    public static let silu = UnaryFunction(named: "silu")!
    public static let identity = UnaryFunction(named: "identity")!

    public var description: String { name }

    /// Whether a GEMM or convolution epilogue may apply it.
    public var isActivation: Bool { UnaryFunction.activations.contains(self) }

    /// A function with its two float parameters (`alpha`, `beta` of kiln_unary.inc).
    public struct Application: Sendable, Hashable {
        /// The function.
        public var function: UnaryFunction
        /// First parameter (hard_sigmoid's alpha, clip's lower bound, leaky_relu's slope).
        public var alpha: Float
        /// Second parameter (hard_sigmoid's beta, clip's upper bound).
        public var beta: Float

        /// Creates an application.
        public init(function: UnaryFunction, alpha: Float, beta: Float) {
            self.function = function
            self.alpha = alpha
            self.beta = beta
        }
    }

    /// The C function a single-input float op computes, with its parameters, as the registry
    /// maps it; `nil` when the op has no C kernel (or clip has bound inputs instead of attributes).
    /// - Parameter op: An operation of the portable op set.
    /// - Returns: The application, or `nil`.
    public static func of(_ op: Operation) -> Application? {
        guard op.inputs.count == 1, let map = OpSet.schema(op.opType)?.unary, !map.functions.isEmpty,
              let call = try? map.call(OpAttributes(op)), let f = UnaryFunction(named: call.function) else { return nil }
        return Application(function: f, alpha: Float(call.alpha), beta: Float(call.beta))
    }

    /// The epilogue activation of a lowered step.
    /// - Parameter config: The step's configuration.
    /// - Returns: The activation, or `nil` when none is fused.
    /// - Throws: ``OpError`` for a function that is not an activation of this build.
    public static func fused(in config: StepConfig) throws -> Application? {
        guard let a = config.activation else { return nil }
        guard let f = UnaryFunction(named: a.function), f.isActivation else { throw OpError("unknown fused activation '\(a.function)'") }
        return Application(function: f, alpha: a.alpha, beta: a.beta)
    }
}

extension UnaryFunction.Application {
    /// The application as a step config's fused activation.
    var fusedActivation: StepConfig.Activation { .init(function: function.name, alpha: alpha, beta: beta) }
}
