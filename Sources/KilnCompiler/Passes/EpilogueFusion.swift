import KilnFormat

/// Fuses a bias add and an activation into the epilogue of `conv`, `linear` and `matmul`
/// (with a weight as right operand).
///
/// Before: `y = matmul(x, W); z = add(y, b); a = gelu(z)` — after: `a = matmul(x, W, b)`
/// whose step config fuses `gelu`. Only values with a single reader fuse, except a SiLU:
/// `y = conv(x, W); s = sigmoid(y); z = mul(y, s)` becomes `z = conv(x, W)` fusing `silu`.
/// Activations: the ``UnaryFunction``s that are activations (clip only with constant
/// bounds), with their parameters; the op keeps its portable attributes.
public struct EpilogueFusion: CompilerPass {
    /// `epilogue_fusion`.
    public static let name = "epilogue_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            let fn = f.name
            var removed = Set<Int>()
            var changed = true
            while changed {
                changed = false
                let uses = UseIndex(f)
                for (i, op) in f.operations.enumerated() where !removed.contains(i) && fusable(op, unit) {
                    let out = op.outputs[0].name
                    guard uses.isPrivate(out) || isSiLU(op, uses, f), let ci = uses.readers[out]?.first, !removed.contains(ci) else { continue }
                    let consumer = f.operations[ci]
                    guard consumer.outputs.count == 1 else { continue }
                    var fused = op
                    let unfused = unit.config(of: op, in: fn).activation == nil
                    if let (sigmoid, product) = siluParts(op, uses, f), unfused, !removed.contains(sigmoid), !removed.contains(product) {
                        // y = op(…); s = sigmoid(y); z = mul(y, s) — one op with a SiLU epilogue, where the mul was.
                        unit.configure(op, in: fn) { $0.activation = .init(function: UnaryFunction.silu.name) }
                        fused.outputs = f.operations[product].outputs
                        f.operations[product] = fused
                        removed.formUnion([i, sigmoid])
                        changed = true
                        continue
                    }
                    if consumer.opType == "add", op.opType == "matmul", op.inputs.count == 2, consumer.inputs.count == 2, unfused {
                        let other = consumer.inputs[0] == out ? consumer.inputs[1] : consumer.inputs[0]
                        guard let b = unit.weight(other), b.shape.count == 1,
                              let w = unit.weight(op.inputs[1]), b.shape[0] == w.shape[1] else { continue }
                        fused.inputs.append(other)
                    } else if unfused, let activation = UnaryFunction.of(consumer), activation.function.isActivation {
                        unit.configure(op, in: fn) { $0.activation = activation.fusedActivation }
                    } else if unfused, EpilogueFusion.views.contains(consumer.opType), uses.isPrivate(consumer.outputs[0].name),
                              let ai = uses.readers[consumer.outputs[0].name]?.first, !removed.contains(ai),
                              let activation = UnaryFunction.of(f.operations[ai]), activation.function.isActivation,
                              f.operations[ai].outputs.count == 1 {
                        // y = op(…); v = reshape(y); a = gelu(v): the activation is elementwise, so it
                        // applies before the view as well — in op's epilogue, the view then making a.
                        unit.configure(op, in: fn) { $0.activation = activation.fusedActivation }
                        f.operations[ci].outputs = f.operations[ai].outputs
                        removed.insert(ai)
                        changed = true
                        continue
                    } else {
                        continue
                    }
                    fused.outputs = consumer.outputs
                    f.operations[ci] = fused
                    removed.insert(i)
                    changed = true
                }
                if changed {
                    f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
                    removed = []
                }
            }
            unit.model.functions[fi] = f
        }
    }

    /// Ops that only view their input (an activation after one moves before it).
    static let views = OpSet.ops(in: .view)

    /// Whether `op`'s result is read exactly by `sigmoid` and the `mul` of the two (a SiLU).
    func isSiLU(_ op: Operation, _ uses: UseIndex, _ f: Function) -> Bool { siluParts(op, uses, f) != nil }

    /// The sigmoid and product op indices when `op`'s result y feeds only `s = sigmoid(y)` and
    /// `mul(y, s)` (either order), s has no other reader and neither y nor s is returned.
    func siluParts(_ op: Operation, _ uses: UseIndex, _ f: Function) -> (sigmoid: Int, product: Int)? {
        let y = op.outputs[0].name
        guard !uses.returned.contains(y), let readers = uses.readers[y], readers.count == 2 else { return nil }
        for (si, pi) in [(readers[0], readers[1]), (readers[1], readers[0])] {
            let s = f.operations[si], p = f.operations[pi]
            guard s.opType == "sigmoid", s.outputs.count == 1, uses.isPrivate(s.outputs[0].name), uses.readers[s.outputs[0].name] == [pi],
                  p.opType == "mul", p.outputs.count == 1, Set(p.inputs) == [y, s.outputs[0].name], p.inputs.count == 2 else { continue }
            return (si, pi)
        }
        return nil
    }

    func fusable(_ op: Operation, _ unit: CompilationUnit) -> Bool {
        guard op.outputs.count == 1, op.outputs[0].type.dtype == .float32, op.inputs.count >= 2,
              let w = unit.weight(op.inputs[1]) else { return false }
        switch op.opType {
        case "conv": return w.shape.count == 4
        case "linear": return w.shape.count == 2
        case "matmul": return w.shape.count == 2
        default: return false
        }
    }
}
