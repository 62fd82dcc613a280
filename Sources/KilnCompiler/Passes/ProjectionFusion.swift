import KilnFormat
import KilnReference

/// Merges `matmul`s that read the same input through float32 weights of the same depth — an
/// attention block's query, key and value projections — into one GEMM over the weights side by
/// side, whose result one `split` along the last axis hands back as the original values:
///
/// Before: `q = matmul(x, Wq, bq); k = matmul(x, Wk, bk); v = matmul(x, Wv, bv)` — after:
/// `qkv = matmul(x, [Wq Wk Wv], [bq bk bv]); q, k, v = split(qkv, axis -1)`.
///
/// Runs after epilogue fusion (biases are then the matmuls' third input); ops with a fused
/// activation, compressed weights, or mixed bias/no bias are left alone.
public struct ProjectionFusion: CompilerPass {
    /// `projection_fusion`.
    public static let name = "projection_fusion"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            // Candidate matmuls by their input, in op order.
            var groups: [String: [Int]] = [:]
            var order: [String] = []
            for (i, op) in f.operations.enumerated() where eligible(op, unit, function: f.name) {
                if groups[op.inputs[0]] == nil { order.append(op.inputs[0]) }
                groups[op.inputs[0], default: []].append(i)
            }
            var replace: [Int: [Operation]] = [:]
            var removed = Set<Int>()
            for x in order {
                guard let members = groups[x], members.count >= 2 else { continue }
                let ops = members.map { f.operations[$0] }
                let weights = ops.map { unit.weight($0.inputs[1])! }
                let k = weights[0].shape[0]
                let biased = ops[0].inputs.count == 3
                guard weights.allSatisfy({ $0.shape[0] == k }), ops.allSatisfy({ ($0.inputs.count == 3) == biased }) else { continue }
                let widths = weights.map { $0.shape[1] }
                let total = widths.reduce(0, +)
                // [K, ΣN]: each row of K holds the weights' rows side by side.
                let columns = try weights.map { try WeightDecoding.dense($0).scalars(as: Float.self) }
                var joined = [Float](repeating: 0, count: k * total)
                var offset = 0
                for (w, n) in zip(columns, widths) {
                    for r in 0 ..< k { for c in 0 ..< n { joined[r * total + offset + c] = w[r * n + c] } }
                    offset += n
                }
                let wName = unit.freshWeightName("\(weights[0].name)+\(weights.count - 1)")
                unit.model.weights.append(Weight(name: wName, dtype: .float32, shape: [k, total], encoding: .dense(
                    WeightBlob(dtype: .float32, shape: [k, total], data: ByteStorage(joined.withUnsafeBytes { Array($0) })))))
                var inputs = [x, wName]
                if biased {
                    let biases = try ops.map { try WeightDecoding.dense(unit.weight($0.inputs[2])!).scalars(as: Float.self) }
                    let bName = unit.freshWeightName("\(ops[0].inputs[2])+\(ops.count - 1)")
                    let all = biases.flatMap { $0 }
                    unit.model.weights.append(Weight(name: bName, dtype: .float32, shape: [total], encoding: .dense(
                        WeightBlob(dtype: .float32, shape: [total], data: ByteStorage(all.withUnsafeBytes { Array($0) })))))
                    inputs.append(bName)
                }
                var type = ops[0].outputs[0].type
                type.shape[type.shape.count - 1] = .size(total)
                let merged = Value(name: freshValueName("\(ops[0].outputs[0].name)+\(ops.count - 1)", f), type: type)
                let gemm = Operation(opType: "matmul", name: ops[0].name, inputs: inputs, outputs: [merged], source: ops[0].source)
                let split = Operation(opType: "split", name: "\(ops[0].name)/split", inputs: [merged.name], outputs: ops.map { $0.outputs[0] },
                                      attributes: ["axis": .int(-1), "split": .ints(widths)], source: ops[0].source)
                replace[members[0]] = [gemm, split]
                removed.formUnion(members.dropFirst())
            }
            guard !replace.isEmpty else { continue }
            var out: [Operation] = []
            for (i, op) in f.operations.enumerated() where !removed.contains(i) {
                out += replace[i] ?? [op]
            }
            f.operations = out
            unit.model.functions[fi] = f
        }
    }

    /// A `matmul` of an activation by a dense float32 [K, N] weight, with an optional [N] bias and
    /// no fused activation, whose result has a fixed last dim N.
    func eligible(_ op: Operation, _ unit: CompilationUnit, function: String) -> Bool {
        guard op.opType == "matmul", (2 ... 3).contains(op.inputs.count), op.outputs.count == 1, op.attributes.isEmpty,
              unit.config(of: op, in: function).isPortable,
              unit.weight(op.inputs[0]) == nil, let w = unit.weight(op.inputs[1]), w.shape.count == 2, w.dtype == .float32,
              case .dense = w.encoding, op.outputs[0].type.shape.last?.size == w.shape[1] else { return false }
        if op.inputs.count == 3 {
            guard let b = unit.weight(op.inputs[2]), b.shape == [w.shape[1]], b.dtype == .float32, case .dense = b.encoding else { return false }
        }
        return true
    }

    /// A value name the function does not use yet.
    func freshValueName(_ base: String, _ f: Function) -> String {
        var used = Set(f.inputs.map(\.name))
        for op in f.operations { for o in op.outputs { used.insert(o.name) } }
        if !used.contains(base) { return base }
        var i = 2
        while used.contains("\(base)\(i)") { i += 1 }
        return "\(base)\(i)"
    }
}
