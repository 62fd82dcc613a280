import CKilnKernels
import KilnFormat

/// The elementwise float32 functions that `f32_unary` kernels run and that GEMM and
/// convolution epilogues apply: the one list, mapped once to the C codes (`KILN_UNARY_OPS`).
/// The raw value is the name stored in a fused op's `kiln.activation` attribute.
public enum UnaryFunction: String, Sendable, Hashable, CaseIterable {
    case relu, hardSwish = "hard_swish", hardSigmoid = "hard_sigmoid", gelu, geluTanh = "gelu_tanh", clip, sigmoid, tanh
    case exp, log, erf, sqrt, reciprocal, neg, abs, leakyRelu = "leaky_relu", floor, ceil, round, identity, softplus
    /// `x · sigmoid(x)`: no op of its own; fused from `mul(x, sigmoid(x))` after a GEMM or convolution.
    case silu

    /// The C code (`KILN_UNARY_*`).
    package var code: Int32 {
        switch self {
        case .relu: return Int32(KILN_UNARY_RELU)
        case .hardSwish: return Int32(KILN_UNARY_HARD_SWISH)
        case .hardSigmoid: return Int32(KILN_UNARY_HARD_SIGMOID)
        case .gelu: return Int32(KILN_UNARY_GELU)
        case .geluTanh: return Int32(KILN_UNARY_GELU_TANH)
        case .clip: return Int32(KILN_UNARY_CLIP)
        case .sigmoid: return Int32(KILN_UNARY_SIGMOID)
        case .tanh: return Int32(KILN_UNARY_TANH)
        case .exp: return Int32(KILN_UNARY_EXP)
        case .log: return Int32(KILN_UNARY_LOG)
        case .erf: return Int32(KILN_UNARY_ERF)
        case .sqrt: return Int32(KILN_UNARY_SQRT)
        case .reciprocal: return Int32(KILN_UNARY_RECIPROCAL)
        case .neg: return Int32(KILN_UNARY_NEG)
        case .abs: return Int32(KILN_UNARY_ABS)
        case .leakyRelu: return Int32(KILN_UNARY_LEAKY_RELU)
        case .floor: return Int32(KILN_UNARY_FLOOR)
        case .ceil: return Int32(KILN_UNARY_CEIL)
        case .round: return Int32(KILN_UNARY_ROUND)
        case .identity: return Int32(KILN_UNARY_IDENTITY)
        case .softplus: return Int32(KILN_UNARY_SOFTPLUS)
        case .silu: return Int32(KILN_UNARY_SILU)
        }
    }

    /// Whether a GEMM or convolution epilogue may apply it (the activations networks fuse).
    public var isActivation: Bool {
        switch self {
        case .relu, .hardSwish, .hardSigmoid, .gelu, .geluTanh, .clip, .sigmoid, .tanh, .leakyRelu, .silu: return true
        default: return false
        }
    }

    /// A function with its two float parameters (see `KILN_UNARY_OPS`).
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

    /// The function a single-input float op computes, with its parameters; `nil` when the op
    /// is not one (or clip has bound inputs instead of attributes).
    /// - Parameter op: An operation of the portable op set.
    /// - Returns: The application, or `nil`.
    public static func of(_ op: Operation) -> Application? {
        let a = op.attributes
        switch op.opType {
        case "gelu":
            guard let mode = try? a.string("approximate", "none") else { return nil }
            return Application(function: mode == "tanh" ? .geluTanh : .gelu, alpha: 0, beta: 0)
        case "hard_sigmoid":
            guard let alpha = try? a.float("alpha", 0.2), let beta = try? a.float("beta", 0.5) else { return nil }
            return Application(function: .hardSigmoid, alpha: Float(alpha), beta: Float(beta))
        case "leaky_relu":
            guard let alpha = try? a.float("alpha", 0.01) else { return nil }
            return Application(function: .leakyRelu, alpha: Float(alpha), beta: 0)
        case "clip":
            guard op.inputs.count == 1, let lo = try? a.float("min", -Double.infinity),
                  let hi = try? a.float("max", Double.infinity) else { return nil }
            return Application(function: .clip, alpha: Float(lo), beta: Float(hi))
        default:
            guard let f = UnaryFunction(rawValue: op.opType), f != .geluTanh, f != .silu else { return nil }
            return Application(function: f, alpha: 0, beta: 0)
        }
    }

    /// The epilogue activation recorded on a fused op (`kiln.activation`, `kiln.alpha`, `kiln.beta`).
    /// - Parameter op: A lowered op.
    /// - Returns: The activation, or `nil` when none is fused.
    /// - Throws: ``OpError`` for an unknown activation name.
    public static func fused(in op: Operation) throws -> Application? {
        let name = try op.attributes.string("kiln.activation", "")
        if name.isEmpty { return nil }
        guard let f = UnaryFunction(rawValue: name), f.isActivation else { throw OpError("unknown fused activation '\(name)'") }
        return Application(function: f, alpha: Float(try op.attributes.float("kiln.alpha", 0)),
                           beta: Float(try op.attributes.float("kiln.beta", 0)))
    }

    /// Records `application` on `op` as its fused epilogue activation.
    static func fuse(_ application: Application, into op: inout Operation) {
        op.attributes["kiln.activation"] = .string(application.function.rawValue)
        op.attributes["kiln.alpha"] = .float(Double(application.alpha))
        op.attributes["kiln.beta"] = .float(Double(application.beta))
    }
}
