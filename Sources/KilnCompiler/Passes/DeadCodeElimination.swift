import KilnFormat

/// Removes operations whose results nobody reads and weights no function uses.
///
/// Before: `a = relu(x); b = exp(x); return a` — after: `a = relu(x); return a`.
public struct DeadCodeElimination: CompilerPass {
    /// `dead_code_elimination`.
    public static let name = "dead_code_elimination"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        var usedWeights = Set<String>()
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var live = Set(f.outputs.map(\.value))
            var kept: [Operation] = []
            for op in f.operations.reversed() where op.outputs.contains(where: { live.contains($0.name) }) {
                kept.append(op)
                for v in op.inputs where !v.isEmpty { live.insert(v) }
            }
            f.operations = kept.reversed()
            unit.model.functions[fi] = f
            usedWeights.formUnion(live)
        }
        unit.model.weights.removeAll { !usedWeights.contains($0.name) }
    }
}
