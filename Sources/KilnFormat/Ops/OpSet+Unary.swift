#if canImport(Glibc)
import Glibc
#endif

/// What the registry knows of an elementwise unary function beyond its schema: which C function
/// computes it (`KILN_UNARY_*` in CKilnKernels' kiln_unary.inc, by name) with which parameters,
/// whether GEMM and convolution epilogues may fuse it, and its exact value in Double — the
/// reference interpreter computes that formula, and kernel tests compare every C variant with it.
public struct UnaryMap: Sendable {
    /// The C function of a unary op and its two float parameters (`alpha`, `beta`).
    public struct Call: Sendable, Hashable {
        /// The function's name in kiln_unary.inc.
        public var function: String
        /// First parameter.
        public var alpha: Double
        /// Second parameter.
        public var beta: Double
    }

    /// Whether integer inputs are valid (the reference interpreter computes them exactly);
    /// otherwise the input must be floating-point.
    public var acceptsIntegers: Bool
    /// Whether a GEMM or convolution epilogue may apply it (the activations networks fuse).
    public var isActivation: Bool
    /// Every C function the op may lower to (empty: no C kernel; the interpreter runs it).
    public var functions: [String]
    /// The C function and parameters for an op's attributes.
    public var call: @Sendable (OpAttributes) throws -> Call
    /// The exact function for an op's attributes; throws for attribute values the op rejects.
    public var formula: @Sendable (OpAttributes) throws -> @Sendable (Double) -> Double
}

extension OpSet {
    /// An elementwise unary op: schema, ONNX name, attribute defaults, kernel and formula, in one row.
    /// - Parameters:
    ///   - name: The op type.
    ///   - onnx: The ONNX operator converted one to one, if any.
    ///   - integers: Whether integer inputs are valid.
    ///   - activation: Whether epilogues may fuse it.
    ///   - defaults: Float attributes and their defaults (a string attribute's default is a `.string`).
    ///   - kernel: The C function (named as in kiln_unary.inc) with attribute names for its two parameters;
    ///     `nil` for none.
    ///   - formula: The exact function for the op's attributes.
    static func unary(_ name: String, onnx: String?, integers: Bool = false, activation: Bool = false,
                      _ defaults: [String: AttributeValue] = [:], kernel: (function: String, alpha: String?, beta: String?)? = nil,
                      _ formula: @escaping @Sendable (OpAttributes) throws -> @Sendable (Double) -> Double) -> OpSchema {
        unary(name, onnx: onnx, integers: integers, activation: activation, defaults, functions: kernel.map { [$0.function] } ?? [], call: { a in
            guard let kernel else { throw OpError("\(name) has no C kernel") }
            return UnaryMap.Call(function: kernel.function, alpha: try kernel.alpha.map(a.float) ?? 0, beta: try kernel.beta.map(a.float) ?? 0)
        }, formula)
    }

    static func unary(_ name: String, onnx: String?, integers: Bool, activation: Bool, _ defaults: [String: AttributeValue],
                      inputs: [String] = ["x"], functions: [String], call: @escaping @Sendable (OpAttributes) throws -> UnaryMap.Call,
                      _ formula: @escaping @Sendable (OpAttributes) throws -> @Sendable (Double) -> Double) -> OpSchema {
        var schema = op(name, inputs, defaults.mapValues(\.kind)) { ctx in
            let x = try ctx.input(0)
            if !integers { try requireFloat(x, name) }
            _ = try formula(OpAttributes(ctx.attributes, opType: name)) // rejects attribute values the op does not take
            return [x]
        }
        for (key, value) in defaults { schema.attributes[key]?.defaultValue = value }
        schema.onnx = onnx.map { [$0] } ?? []
        schema.unary = UnaryMap(acceptsIntegers: integers, isActivation: activation, functions: functions, call: call, formula: formula)
        return schema
    }

    static func sigmoid(_ x: Double) -> Double { 1 / (1 + exp(-x)) }
    /// log(1 + eˣ) without overflow for large x.
    static func softplus(_ x: Double) -> Double { x > 0 ? x + log1p(exp(-x)) : log1p(exp(x)) }

    /// The elementwise unary ops (specs/ops.md, "Elementwise").
    static var unaryOps: [OpSchema] {
        let k = { (f: String) in (function: f, alpha: String?.none, beta: String?.none) }
        return [
            unary("relu", onnx: "Relu", integers: true, activation: true, kernel: k("relu")) { _ in { $0 > 0 ? $0 : ($0.isNaN ? $0 : 0) } },
            unary("abs", onnx: "Abs", integers: true, kernel: k("abs")) { _ in { Swift.abs($0) } },
            unary("neg", onnx: "Neg", integers: true, kernel: k("neg")) { _ in { -$0 } },
            unary("identity", onnx: nil, integers: true, kernel: k("identity")) { _ in { $0 } }.in(.view),
            unary("sign", onnx: "Sign", integers: true) { _ in { $0.isNaN ? $0 : $0 > 0 ? 1 : $0 < 0 ? -1 : 0 } },
            unary("sqrt", onnx: "Sqrt", kernel: k("sqrt")) { _ in { $0.squareRoot() } },
            unary("reciprocal", onnx: "Reciprocal", kernel: k("reciprocal")) { _ in { 1 / $0 } },
            unary("exp", onnx: "Exp", kernel: k("exp")) { _ in { exp($0) } },
            unary("log", onnx: "Log", kernel: k("log")) { _ in { log($0) } },
            unary("erf", onnx: "Erf", kernel: k("erf")) { _ in { erf($0) } },
            unary("tanh", onnx: "Tanh", activation: true, kernel: k("tanh")) { _ in { tanh($0) } },
            unary("sigmoid", onnx: "Sigmoid", activation: true, kernel: k("sigmoid")) { _ in sigmoid },
            unary("silu", onnx: nil, activation: true, kernel: k("silu")) { _ in { $0 * sigmoid($0) } },
            unary("floor", onnx: "Floor", kernel: k("floor")) { _ in { $0.rounded(.down) } },
            unary("ceil", onnx: "Ceil", kernel: k("ceil")) { _ in { $0.rounded(.up) } },
            unary("round", onnx: "Round", kernel: k("round")) { _ in { $0.rounded(.toNearestOrEven) } },
            unary("hard_swish", onnx: "HardSwish", activation: true, kernel: k("hard_swish")) { _ in { $0 * max(0, min(1, $0 / 6 + 0.5)) } },
            unary("softplus", onnx: "Softplus", kernel: k("softplus")) { _ in softplus },
            unary("softsign", onnx: "Softsign") { _ in { $0 / (1 + Swift.abs($0)) } },
            unary("mish", onnx: "Mish") { _ in { $0 * tanh(softplus($0)) } },
            unary("sin", onnx: "Sin", kernel: k("sin")) { _ in { sin($0) } },
            unary("cos", onnx: "Cos", kernel: k("cos")) { _ in { cos($0) } },
            unary("tan", onnx: "Tan") { _ in { tan($0) } },
            unary("asin", onnx: "Asin") { _ in { asin($0) } },
            unary("acos", onnx: "Acos") { _ in { acos($0) } },
            unary("atan", onnx: "Atan") { _ in { atan($0) } },
            unary("sinh", onnx: "Sinh") { _ in { sinh($0) } },
            unary("cosh", onnx: "Cosh") { _ in { cosh($0) } },
            unary("asinh", onnx: "Asinh") { _ in { asinh($0) } },
            unary("acosh", onnx: "Acosh") { _ in { acosh($0) } },
            unary("atanh", onnx: "Atanh") { _ in { atanh($0) } },
            unary("leaky_relu", onnx: "LeakyRelu", activation: true, ["alpha": .float(0.01)],
                  kernel: ("leaky_relu", "alpha", nil)) { a in
                let alpha = try a.float("alpha")
                return { $0 < 0 ? alpha * $0 : $0 }
            },
            unary("hard_sigmoid", onnx: "HardSigmoid", activation: true, ["alpha": .float(0.2), "beta": .float(0.5)],
                  kernel: ("hard_sigmoid", "alpha", "beta")) { a in
                let (alpha, beta) = (try a.float("alpha"), try a.float("beta"))
                return { max(0, min(1, alpha * $0 + beta)) }
            },
            unary("elu", onnx: "Elu", ["alpha": .float(1)]) { a in
                let alpha = try a.float("alpha")
                return { $0 >= 0 ? $0 : alpha * (exp($0) - 1) }
            },
            unary("celu", onnx: "Celu", ["alpha": .float(1)]) { a in
                let alpha = try a.float("alpha")
                return { max(0, $0) + min(0, alpha * (exp($0 / alpha) - 1)) }
            },
            unary("selu", onnx: "Selu", ["alpha": .float(1.67326319217681884765625), "gamma": .float(1.05070102214813232421875)]) { a in
                let (alpha, gamma) = (try a.float("alpha"), try a.float("gamma"))
                return { $0 > 0 ? gamma * $0 : gamma * (alpha * exp($0) - alpha) }
            },
            unary("thresholded_relu", onnx: "ThresholdedRelu", ["alpha": .float(1)]) { a in
                let alpha = try a.float("alpha")
                return { $0 > alpha ? $0 : 0 }
            },
            unary("shrink", onnx: "Shrink", ["bias": .float(0), "lambd": .float(0.5)]) { a in
                let (bias, lambd) = (try a.float("bias"), try a.float("lambd"))
                return { $0 < -lambd ? $0 + bias : $0 > lambd ? $0 - bias : 0 }
            },
            // erf form, or the tanh approximation.
            unary("gelu", onnx: "Gelu", integers: false, activation: true, ["approximate": .string("none")], functions: ["gelu", "gelu_tanh"], call: { a in
                UnaryMap.Call(function: try a.string("approximate") == "tanh" ? "gelu_tanh" : "gelu", alpha: 0, beta: 0)
            }) { a in
                switch try a.string("approximate") {
                case "none": return { 0.5 * $0 * (1 + erf($0 / 2.0.squareRoot())) }
                case "tanh": return { 0.5 * $0 * (1 + tanh((2 / Double.pi).squareRoot() * ($0 + 0.044715 * $0 * $0 * $0))) }
                case let mode: throw OpError("approximate must be \"none\" or \"tanh\", got \"\(mode)\"")
                }
            },
            // Bounds as attributes (or, without a kernel of this form, as inputs); crossed bounds give
            // the upper one, as NumPy's clip; NaN stays NaN.
            unary("clip", onnx: nil, integers: true, activation: true, ["min": .float(-.infinity), "max": .float(.infinity)],
                  inputs: ["x", "min?", "max?"], functions: ["clip"], call: { a in
                UnaryMap.Call(function: "clip", alpha: try a.float("min"), beta: try a.float("max"))
            }) { a in
                let (lo, hi) = (try a.float("min"), try a.float("max"))
                return { x in
                    let low = x < lo ? lo : x
                    return low > hi ? hi : low
                }
            },
        ]
    }
}
