import KilnFormat
import KilnReference

/// Replaces GELU written as its parts (as PyTorch and Hugging Face exports spell it) by one
/// `gelu` op, which ``EpilogueFusion`` can then fold into the producing GEMM:
/// - erf form: `0.5 · x · (1 + erf(x / √2))` — `div(x, √2)` or `mul(x, 1/√2)`, `erf`,
///   `add(·, 1)`, then `mul(x, ·)` and `mul(·, 0.5)` in either order (`mul(mul(x, 0.5), ·)` and
///   `mul(x, mul(0.5, ·))` too);
/// - tanh form: `0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))` with `x³` as `pow(x, 3)`
///   or `mul(x, mul(x, x))`, giving `gelu` with `approximate = "tanh"`.
/// Constants are scalar weights within float32 rounding of the exact values; every
/// intermediate value must be read only inside the pattern.
public struct GeluFusion: CompilerPass {
    /// `gelu_fusion`.
    public static let name = "gelu_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        Self.fuse(&unit, centers: ["erf", "tanh"]) { i, f, uses, unit in
            self.match(at: i, f, uses, unit).map { m in
                (m.ops, m.result, Operation(opType: "gelu", name: "", inputs: [m.x], outputs: [],
                                            attributes: f.operations[i].opType == "tanh" ? ["approximate": .string("tanh")] : [:]))
            }
        }
    }

    /// Rewrites each pattern found around an op of type `centers`: `match` gives the pattern's ops,
    /// the one whose output is the pattern's result, and the op replacing it (which takes that op's
    /// name, outputs and source); the pattern's other ops are removed. Patterns do not overlap.
    static func fuse(_ unit: inout CompilationUnit, centers: Set<String>,
                     _ match: (Int, Function, UseIndex, CompilationUnit) -> (ops: Set<Int>, result: Int, replacement: Operation)?) {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var removed = Set<Int>()
            let uses = UseIndex(f)
            for (i, op) in f.operations.enumerated() where centers.contains(op.opType) {
                guard let m = match(i, f, uses, unit), removed.isDisjoint(with: m.ops) else { continue }
                let last = f.operations[m.result]
                var replacement = m.replacement
                (replacement.name, replacement.outputs, replacement.source) = (last.name, last.outputs, last.source)
                f.operations[m.result] = replacement
                removed.formUnion(m.ops.subtracting([m.result]))
            }
            if !removed.isEmpty {
                f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
                unit.model.functions[fi] = f
            }
        }
    }

    /// A matched pattern: its input, the ops it covers, and the op whose output is the GELU.
    struct Match {
        var x: String
        var ops: Set<Int>
        var result: Int
    }

    /// The scalar value of a weight, if `name` is a one-element float weight.
    func scalar(_ name: String, _ unit: CompilationUnit) -> Double? {
        guard let w = unit.weight(name), w.elementCount == 1, let dense = try? WeightDecoding.dense(w) else { return nil }
        switch dense.scalarType {
        case .float32: return Double(dense.scalars(as: Float.self)[0])
        case .float64: return dense.scalars(as: Double.self)[0]
        default: return nil
        }
    }

    func near(_ v: Double?, _ want: Double) -> Bool { v.map { abs($0 - want) <= 1e-6 * max(1, abs(want)) } ?? false }

    /// The other operand of a two-input op that reads `value`.
    func other(_ op: Operation, _ value: String) -> String? {
        guard op.inputs.count == 2 else { return nil }
        return op.inputs[0] == value ? op.inputs[1] : op.inputs[1] == value ? op.inputs[0] : nil
    }

    /// The single reader of `value` when it has one and is not returned.
    func onlyReader(_ value: String, _ f: Function, _ uses: UseIndex) -> (Int, Operation)? {
        guard uses.isPrivate(value), let r = uses.readers[value]?.first else { return nil }
        return (r, f.operations[r])
    }

    func match(at center: Int, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> Match? {
        let core = f.operations[center]
        guard core.inputs.count == 1, core.outputs.count == 1, let pre = uses.producer[core.inputs[0]], uses.isPrivate(core.inputs[0]) else { return nil }
        var ops: Set<Int> = [center, pre]
        let scaled = f.operations[pre]
        let x: String
        if core.opType == "erf" {
            // x / √2 or x · (1/√2).
            guard scaled.inputs.count == 2 else { return nil }
            if scaled.opType == "div", near(scalar(scaled.inputs[1], unit), 2.0.squareRoot()) {
                x = scaled.inputs[0]
            } else if scaled.opType == "mul", let k = scaled.inputs.firstIndex(where: { near(scalar($0, unit), 0.5.squareRoot()) }) {
                x = scaled.inputs[1 - k]
            } else {
                return nil
            }
        } else {
            // √(2/π) · (x + 0.044715 · x³)
            guard scaled.opType == "mul", scaled.inputs.count == 2,
                  let k = scaled.inputs.firstIndex(where: { near(scalar($0, unit), (2 / Double.pi).squareRoot()) }),
                  uses.isPrivate(scaled.inputs[1 - k]), let si = uses.producer[scaled.inputs[1 - k]] else { return nil }
            let sum = f.operations[si]
            guard sum.opType == "add", sum.inputs.count == 2 else { return nil }
            ops.insert(si)
            var found: String?
            for (a, b) in [(sum.inputs[0], sum.inputs[1]), (sum.inputs[1], sum.inputs[0])] {
                guard uses.isPrivate(b), let ci = uses.producer[b] else { continue }
                let cubic = f.operations[ci]
                guard cubic.opType == "mul", cubic.inputs.count == 2,
                      let c = cubic.inputs.firstIndex(where: { near(scalar($0, unit), 0.044715) }),
                      uses.isPrivate(cubic.inputs[1 - c]), let pi = uses.producer[cubic.inputs[1 - c]] else { continue }
                let power = f.operations[pi]
                if power.opType == "pow", power.inputs.count == 2, power.inputs[0] == a, near(scalar(power.inputs[1], unit), 3) {
                    ops.formUnion([ci, pi])
                } else if power.opType == "mul", power.inputs.count == 2, power.inputs.contains(a),
                          case let sq = power.inputs[0] == a ? power.inputs[1] : power.inputs[0],
                          uses.isPrivate(sq), let qi = uses.producer[sq],
                          f.operations[qi].opType == "mul", f.operations[qi].inputs == [a, a] {
                    ops.formUnion([ci, pi, qi])
                } else {
                    continue
                }
                found = a
                break
            }
            guard let a = found else { return nil }
            x = a
        }
        // 1 + core(…)
        guard let (ai, add) = onlyReader(core.outputs[0].name, f, uses), add.opType == "add",
              let one = other(add, core.outputs[0].name), near(scalar(one, unit), 1) else { return nil }
        ops.insert(ai)
        // x · (1 + …) · 0.5, in either order, (x · 0.5) · (1 + …), or x · (0.5 · (1 + …)).
        guard let (mi, m) = onlyReader(add.outputs[0].name, f, uses), m.opType == "mul", let partner = other(m, add.outputs[0].name) else { return nil }
        ops.insert(mi)
        if near(scalar(partner, unit), 0.5) {
            guard let (xi, outer) = onlyReader(m.outputs[0].name, f, uses), outer.opType == "mul", other(outer, m.outputs[0].name) == x else { return nil }
            ops.insert(xi)
            return Match(x: x, ops: ops, result: xi)
        }
        if partner == x {
            guard let (hi, half) = onlyReader(m.outputs[0].name, f, uses), half.opType == "mul",
                  let h = other(half, m.outputs[0].name), near(scalar(h, unit), 0.5) else { return nil }
            ops.insert(hi)
            return Match(x: x, ops: ops, result: hi)
        }
        guard uses.isPrivate(partner), let hi = uses.producer[partner] else { return nil }
        let half = f.operations[hi]
        guard half.opType == "mul", other(half, x).map({ near(scalar($0, unit), 0.5) }) == true else { return nil }
        ops.insert(hi)
        return Match(x: x, ops: ops, result: mi)
    }
}
