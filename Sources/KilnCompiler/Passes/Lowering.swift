import KilnFormat

/// Chooses the kernel of every operation for the target arch and packs GEMM weights in
/// that arch's panel layout.
///
/// Before: `y = linear(x, W[N, K], b)` — after: `y = linear(x, W@p16[K, N], b)` run by
/// `f32_gemm_6x16__avx2`, where `W@p16` holds W's panels of 16 columns. Operations with
/// no specialized kernel run the portable op set's `reference` kernel.
public struct Lowering: CompilerPass {
    /// `lowering`.
    public static let name = "lowering"

    /// Creates the pass.
    public init() {}

    static let unary: Set<String> = [
        "relu", "hard_swish", "hard_sigmoid", "gelu", "sigmoid", "tanh", "exp", "log", "erf", "sqrt", "reciprocal", "neg", "abs",
    ]
    static let binary: Set<String> = ["add", "sub", "mul", "div"]

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be packed.
    public func apply(to unit: inout CompilationUnit) throws {
        let arch = unit.arch
        let tile = String(arch.gemm.name.dropFirst("f32_gemm".count)) // e.g. "_6x16__avx2"
        // Elementwise and depthwise kernels: the same C compiled for AVX2 on x86-64 v3 and up.
        let vector = arch.family == "x86_64" && arch.level >= 3 ? "__avx2" : "__scalar"
        var packed: [String: String] = [:] // (weight + orientation) -> packed name
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var kernels: [String] = []
            for (i, op) in f.operations.enumerated() {
                let float = op.outputs.count == 1 && op.outputs[0].type.dtype == .float32
                var kernel = "reference"
                if float, op.opType == "conv", op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4,
                   case .dense = w.encoding, (try? op.attributes.int("group", 1)) == 1 {
                    // Dense conv weights are already the A operand of a direct NCHW GEMM.
                    kernel = "f32_conv2d_nchw" + tile
                } else if float, op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), let o = orientation(op, w) {
                    let key = "\(w.name)|\(o.label)|\(arch.gemm.nr)"
                    let name: String
                    if let existing = packed[key] {
                        name = existing
                    } else {
                        name = unit.freshWeightName("\(w.name)@\(o.label)\(arch.gemm.nr)")
                        do {
                            unit.model.weights.append(try WeightPacking.pack(w, name: name, o.orientation, nr: arch.gemm.nr))
                        } catch let e as CompileError {
                            throw CompileError("op '\(op.name)': \(e.reason)")
                        }
                        packed[key] = name
                    }
                    var lowered = op
                    lowered.inputs[1] = name
                    f.operations[i] = lowered
                    kernel = (op.opType == "conv" ? "f32_conv2d" : "f32_gemm") + tile
                } else if float, op.opType == "conv", depthwise(op, unit) {
                    kernel = "f32_dwconv2d" + vector
                } else if float, op.opType == "matmul", op.inputs.count == 2 {
                    kernel = "f32_matmul" + tile
                } else if float, Lowering.binary.contains(op.opType) {
                    kernel = "f32_binary__scalar"
                } else if float, Lowering.unary.contains(op.opType) || (op.opType == "clip" && op.inputs.count == 1) {
                    kernel = "f32_unary" + vector
                } else if float, op.opType == "softmax" {
                    kernel = "f32_softmax__scalar"
                } else if float, op.opType == "layer_norm" {
                    kernel = "f32_layer_norm__scalar"
                } else if op.opType == "gather", op.inputs.count == 2, (try? op.attributes.int("axis", 0)) == 0,
                          let data = unit.weight(op.inputs[0]), data.shape.count >= 1 {
                    kernel = "gather_rows"
                } else if float, op.opType == "global_average_pool" {
                    kernel = "f32_global_average_pool__scalar"
                }
                kernels.append(kernel)
            }
            unit.model.functions[fi] = f
            unit.kernels[f.name] = kernels
        }
    }

    struct Layout {
        var label: String
        var orientation: WeightPacking.Orientation
    }

    /// How the op reads its weight as B (K × N), when a packed GEMM runs it.
    func orientation(_ op: Operation, _ w: Weight) -> Layout? {
        switch op.opType {
        case "linear" where w.shape.count == 2:
            let (n, k) = (w.shape[0], w.shape[1])
            return Layout(label: "pt", orientation: .init(k: k, n: n, flat: { kk, nn in nn * k + kk }))
        case "matmul" where w.shape.count == 2:
            let (k, n) = (w.shape[0], w.shape[1])
            return Layout(label: "p", orientation: .init(k: k, n: n, flat: { kk, nn in kk * n + nn }))
        case "conv" where w.shape.count == 4:
            guard (try? op.attributes.int("group", 1)) == 1 else { return nil }
            let n = w.shape[0], k = w.shape[1] * w.shape[2] * w.shape[3]
            return Layout(label: "pc", orientation: .init(k: k, n: n, flat: { kk, nn in nn * k + kk }))
        default:
            return nil
        }
    }

    func depthwise(_ op: Operation, _ unit: CompilationUnit) -> Bool {
        guard op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4, w.shape[1] == 1,
              let group = try? op.attributes.int("group", 1) else { return false }
        return group == w.shape[0] && group > 1
    }
}

