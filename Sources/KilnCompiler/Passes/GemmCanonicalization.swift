import KilnFormat
import KilnReference

/// Rewrites every float32 `gemm` as the ops the compiled kernels run: `linear` when `B` is a
/// stored weight (transposed at compile time when `trans_b = 0`, scaled by `alpha`, with
/// `beta·C` as its bias when `C` is a vector; a compressed weight with `trans_b = 0` and
/// `alpha = 1` is instead `matmul`'s right operand as stored, so that it stays compressed), else
/// `matmul`; `trans_a`, `alpha` and `beta` on run-time values become `transpose`, `mul` and `add`.
///
/// Before: `y = gemm(x, W[K, N], c[N])` (how a GPT-2 `Conv1D` exports: `transB = 0`) — after:
/// `y = linear(x, Wᵀ[N, K], c)`, which lowering packs for the GEMM microkernels and epilogue
/// fusion and projection fusion treat like any other projection.
public struct GemmCanonicalization: CompilerPass {
    /// `gemm_canonicalization`.
    public static let name = "gemm_canonicalization"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be decoded.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            guard f.operations.contains(where: { $0.opType == "gemm" }) else { continue }
            var rewrite = Rewrite(function: f)
            for op in f.operations {
                if op.opType == "gemm", try rewrite.gemm(op, &unit) { continue }
                rewrite.out.append(op)
            }
            f.operations = rewrite.out
            unit.model.functions[fi] = f
        }
    }

    static func isDense(_ w: Weight) -> Bool {
        if case .dense = w.encoding { return true }
        return false
    }

    struct Rewrite {
        var out: [Operation] = []
        var names: Set<String> = []
        var types: [String: TensorType] = [:]

        init(function f: Function) {
            for a in f.inputs {
                names.insert(a.name)
                types[a.name] = a.type
            }
            for op in f.operations {
                names.insert(op.name)
                for o in op.outputs {
                    names.insert(o.name)
                    types[o.name] = o.type
                }
            }
        }

        /// `v` transposed (a run-time copy).
        mutating func transposed(_ v: String, _ unit: CompilationUnit, for op: Operation) -> String? {
            guard let t = types[v] ?? unit.weight(v)?.type, t.rank == 2 else { return nil }
            return emit("transpose", [v], TensorType(t.dtype, [t.shape[1], t.shape[0]]), for: op, attributes: ["perm": .ints([1, 0])])
        }

        mutating func fresh(_ base: String) -> String {
            var name = base, i = 2
            while names.contains(name) {
                name = "\(base)\(i)"
                i += 1
            }
            names.insert(name)
            return name
        }

        /// Emits `opType` on `inputs` as a new value of `type`; returns the value's name.
        mutating func emit(_ opType: String, _ inputs: [String], _ type: TensorType, for op: Operation, name: String? = nil,
                           output: String? = nil, attributes: [String: AttributeValue] = [:]) -> String {
            let value = output ?? fresh("\(op.outputs[0].name)@\(opType)")
            out.append(Operation(opType: opType, name: name ?? fresh("\(op.name)/\(opType)"), inputs: inputs,
                                 outputs: [Value(name: value, type: type)], attributes: attributes, source: op.source))
            return value
        }

        mutating func gemm(_ op: Operation, _ unit: inout CompilationUnit) throws -> Bool {
            guard op.inputs.count >= 2, op.outputs.count == 1, op.outputs[0].type.dtype == .float32, op.outputs[0].type.rank == 2 else { return false }
            let attributes = op.attributes
            let alpha = (try? attributes.float("alpha", 1)) ?? 1, beta = (try? attributes.float("beta", 1)) ?? 1
            let ta = ((try? attributes.int("trans_a", 0)) ?? 0) != 0, tb = ((try? attributes.int("trans_b", 0)) ?? 0) != 0
            let y = op.outputs[0]
            let c = op.inputs.count > 2 && !op.inputs[2].isEmpty ? op.inputs[2] : nil
            guard (types[op.inputs[0]] ?? unit.weight(op.inputs[0])?.type)?.rank == 2,
                  (types[op.inputs[1]] ?? unit.weight(op.inputs[1])?.type)?.rank == 2 else { return false }
            var a = op.inputs[0]
            if ta { a = transposed(a, unit, for: op)! }
            // The bias a linear step adds: beta·C when C is a stored vector of N values (or one).
            let n = y.type.shape[1]
            var bias: String?
            if let c, let w = unit.weight(c), w.dtype == .float32, let nn = n.size,
               w.shape.reduce(1, *) == nn || w.shape.reduce(1, *) == 1, w.shape.count <= 1 || w.shape.dropLast().allSatisfy({ $0 == 1 }) {
                var v = try decode(w)
                if v.count == 1 { v = [Float](repeating: v[0], count: nn) }
                bias = add(unit: &unit, name: "\(c)@bias", shape: [nn], values: v.map { $0 * Float(beta) })
            }
            let needsAdd = c != nil && bias == nil && beta != 0
            let product = needsAdd || (alpha != 1 && unit.weight(op.inputs[1]) == nil) ? nil : y.name
            var result: String
            if let w = unit.weight(op.inputs[1]), w.shape.count == 2, !tb, alpha == 1, !GemmCanonicalization.isDense(w) {
                // A compressed B[K, N] stays compressed (transposing it here would decode it): a
                // matmul with the weight as its right operand, which lowering packs as it is and
                // epilogue fusion gives the bias.
                let plain = bias == nil && !needsAdd
                result = emit("matmul", [a, w.name], y.type, for: op, name: plain ? op.name : nil, output: plain ? y.name : nil)
                if let bias {
                    result = emit("add", [result, bias], y.type, for: op, name: needsAdd ? nil : op.name, output: needsAdd ? nil : y.name)
                }
            } else if let w = unit.weight(op.inputs[1]), w.shape.count == 2 {
                // A stored B: linear over W[N, K], transposed and scaled here.
                var values = try decode(w)
                let (rows, cols) = (w.shape[0], w.shape[1])
                if !tb { values = (0 ..< cols).flatMap { j in (0 ..< rows).map { i in values[i * cols + j] } } }
                if alpha != 1 { values = values.map { $0 * Float(alpha) } }
                let shape = tb ? [rows, cols] : [cols, rows]
                let weight = tb && alpha == 1 ? w.name : add(unit: &unit, name: "\(w.name)@linear", shape: shape, values: values)
                result = emit("linear", [a, weight] + (bias.map { [$0] } ?? []), y.type, for: op, name: product == nil ? nil : op.name, output: product)
            } else {
                var b = op.inputs[1]
                if tb { b = transposed(b, unit, for: op)! }
                let plain = alpha == 1 && bias == nil && !needsAdd
                result = emit("matmul", [a, b], y.type, for: op, name: plain ? op.name : nil, output: plain ? y.name : nil)
                if alpha != 1 {
                    let s = add(unit: &unit, name: "\(op.name)@alpha", shape: [], values: [Float(alpha)])
                    let last = bias == nil && !needsAdd
                    result = emit("mul", [result, s], y.type, for: op, name: last ? op.name : nil, output: last ? y.name : nil)
                }
                if let bias {
                    result = emit("add", [result, bias], y.type, for: op, name: needsAdd ? nil : op.name, output: needsAdd ? nil : y.name)
                }
            }
            if needsAdd, let c {
                var scaled = c
                if beta != 1 {
                    let s = add(unit: &unit, name: "\(op.name)@beta", shape: [], values: [Float(beta)])
                    let type = unit.weight(c)?.type ?? TensorType(.float32, [.unknown, .unknown])
                    scaled = emit("mul", [c, s], type, for: op)
                }
                result = emit("add", [result, scaled], y.type, for: op, name: op.name, output: y.name)
            }
            _ = result
            return true
        }

        func decode(_ w: Weight) throws -> [Float] {
            do {
                let v = try WeightDecoding.dense(w)
                guard v.scalarType == .float32 else { throw CompileError("weight '\(w.name)' is not float32") }
                return v.scalars(as: Float.self)
            } catch let e as CompileError {
                throw e
            } catch {
                throw CompileError("weight '\(w.name)': cannot decode it: \(error)")
            }
        }

        func add(unit: inout CompilationUnit, name: String, shape: [Int], values: [Float]) -> String {
            let n = unit.freshWeightName(name)
            unit.model.weights.append(Weight(name: n, dtype: .float32, shape: shape,
                                             encoding: .dense(WeightBlob(dtype: .float32, shape: shape, data: ByteStorage(values.withUnsafeBytes { Array($0) })))))
            return n
        }
    }
}
