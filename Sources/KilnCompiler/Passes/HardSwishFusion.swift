import KilnFormat
import KilnReference

/// Replaces hard swish and hard sigmoid written as their parts (as Paddle and some PyTorch
/// exports spell them) by one op, which ``EpilogueFusion`` can then fold into the producing
/// convolution:
/// - `x · clip(x + 3, 0, 6) / 6` — `div(mul(x, c), 6)`, `mul(mul(x, c), 1/6)` or
///   `mul(x, div(c, 6))` with `c = clip(add(x, 3), 0, 6)` — becomes `hard_swish(x)`;
/// - `clip(x + 3, 0, 6) / 6` alone becomes `hard_sigmoid(x)` with `alpha = 1/6`, `beta = 0.5`.
/// The fused ops compute `x · max(0, min(1, x/6 + 1/2))`, within a float32 rounding of the parts.
/// Constants are scalar weights (or clip attributes) within float32 rounding of 3, 0, 6 and 1/6;
/// every intermediate value must be read only inside the pattern.
public struct HardSwishFusion: CompilerPass {
    /// `hard_swish_fusion`.
    public static let name = "hard_swish_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        let scalars = GeluFusion()
        GeluFusion.fuse(&unit, centers: ["clip"]) { i, f, uses, unit in
            self.match(clip: i, f, uses, unit, scalars).map { m in
                (m.ops, m.result, Operation(opType: m.swish ? "hard_swish" : "hard_sigmoid", name: "", inputs: [m.x], outputs: [],
                                            attributes: m.swish ? [:] : ["alpha": .float(Double(Float(1.0 / 6))), "beta": .float(0.5)]))
            }
        }
    }

    struct Match {
        var x: String
        var ops: Set<Int>
        var result: Int
        var swish: Bool
    }

    /// A clip's bound `i` (1: min, 2: max) from its input or attribute.
    func bound(_ clip: Operation, _ i: Int, _ unit: CompilationUnit, _ scalars: GeluFusion) -> Double? {
        if clip.inputs.count > i, !clip.inputs[i].isEmpty { return scalars.scalar(clip.inputs[i], unit) }
        return (try? clip.attributes.float(i == 1 ? "min" : "max", .nan)).flatMap { $0.isNaN ? nil : $0 }
    }

    /// Whether `op` divides `value` by 6 or multiplies it by 1/6.
    func sixth(_ op: Operation, of value: String, _ unit: CompilationUnit, _ s: GeluFusion) -> Bool {
        guard op.inputs.count == 2, op.outputs.count == 1 else { return false }
        if op.opType == "div" { return op.inputs[0] == value && s.near(s.scalar(op.inputs[1], unit), 6) }
        return op.opType == "mul" && s.near(s.scalar(s.other(op, value) ?? "", unit), 1.0 / 6)
    }

    func match(clip ci: Int, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit, _ s: GeluFusion) -> Match? {
        let clip = f.operations[ci]
        guard clip.outputs.count == 1, s.near(bound(clip, 1, unit, s), 0), s.near(bound(clip, 2, unit, s), 6),
              let ai = uses.producer[clip.inputs[0]], uses.isPrivate(clip.inputs[0]) else { return nil }
        let add = f.operations[ai]
        guard add.opType == "add", add.inputs.count == 2, add.outputs.count == 1,
              let x = add.inputs.first(where: { s.near(s.scalar(s.other(add, $0) ?? "", unit), 3) && unit.weight($0) == nil }),
              let type = f.operations.lazy.flatMap(\.outputs).first(where: { $0.name == x })?.type ?? f.inputs.first(where: { $0.name == x })?.type,
              type.dtype == .float32, add.outputs[0].type.shape == type.shape,
              let (ri, reader) = s.onlyReader(clip.outputs[0].name, f, uses) else { return nil }
        let c = clip.outputs[0].name
        if reader.opType == "mul", s.other(reader, c) == x, let (di, div) = s.onlyReader(reader.outputs[0].name, f, uses),
           sixth(div, of: reader.outputs[0].name, unit, s) {
            // x · c, then / 6.
            return Match(x: x, ops: [ai, ci, ri, di], result: di, swish: true)
        }
        guard sixth(reader, of: c, unit, s) else { return nil }
        let h = reader.outputs[0].name
        if let (mi, mul) = s.onlyReader(h, f, uses), mul.opType == "mul", s.other(mul, h) == x {
            // x · (c / 6).
            return Match(x: x, ops: [ai, ci, ri, mi], result: mi, swish: true)
        }
        return Match(x: x, ops: [ai, ci, ri], result: ri, swish: false)
    }
}
