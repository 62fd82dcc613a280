import KilnFormat
import KilnReference

/// Runs 1-D convolutions, transposed convolutions and pools as the 2-D ones over a height of
/// one, so every compiled convolution kernel (GEMM, depthwise, Winograd-free channels-last,
/// transposed) serves sequence models too.
///
/// Before: `y = conv(x[N,C,W], K[O,C/g,k]); z = relu(y); u = flatten(z)` — after:
/// `x2 = unsqueeze(x, axes [2]); y2 = conv(x2, K2[O,C/g,1,k]); z2 = relu(y2); z = squeeze(z2, axes [2]); u = flatten(z)`
/// with `kernel_shape`, `strides`, `dilations`, `pads` (and `output_padding`, `output_shape`)
/// given a leading unit dim. Unary and elementwise binary ops between lifted ops stay 4-D (a
/// rank-3 operand is viewed as `[N,C,1,W]`, a weight reshaped to broadcast the same way), so
/// epilogue fusion and the layout pass see a 1-D network as a 2-D one; a value returns to 3-D
/// only where another op reads it or the function returns it. `unsqueeze` and `squeeze` are
/// views: they share their input's memory. Lifted ops keep their names and source ops.
public struct SpatialLifting: CompilerPass {
    /// `spatial_lifting`.
    public static let name = "spatial_lifting"

    /// Creates the pass.
    public init() {}

    static let binaries = OpSet.ops(in: .layoutAgnostic)

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be decoded.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var walk = Walk(unit.model.functions[fi], unit)
            guard walk.worthwhile else { continue }
            try walk.run(&unit)
            unit.model.functions[fi].operations = walk.out
        }
    }

    /// A 3-D type with a unit dim inserted at axis 2.
    static func lifted(_ t: TensorType) -> TensorType {
        var shape = t.shape
        shape.insert(.size(1), at: 2)
        return TensorType(t.dtype, shape)
    }

    /// Window attributes of one spatial dim given a leading unit dim (pads `[b, e]` → `[0, b, 0, e]`).
    static func liftedWindow(_ a: [String: AttributeValue]) -> [String: AttributeValue]? {
        var out = a
        for key in ["kernel_shape", "strides", "dilations"] {
            guard let v = a[key] else { continue }
            guard case .ints(let list) = v, list.count == 1 else { return nil }
            out[key] = .ints([1] + list)
        }
        if let v = a["pads"] {
            guard case .ints(let p) = v, p.count == 2 else { return nil }
            out["pads"] = .ints([0, p[0], 0, p[1]])
        }
        if let v = a["output_padding"] {
            guard case .ints(let p) = v, p.count == 1 else { return nil }
            out["output_padding"] = .ints([0] + p)
        }
        if let v = a["output_shape"] {
            guard case .ints(let p) = v, p.count == 1 else { return nil }
            out["output_shape"] = .ints([1] + p)
        }
        return out
    }

    struct Walk {
        let function: Function
        var out: [Operation] = []
        var types: [String: TensorType] = [:]
        /// The 4-D twin (`[N,C,1,W]`) of a 3-D value.
        var twin: [String: String] = [:]
        /// 3-D values that exist as themselves (inputs, results of ops left alone, squeezed twins).
        var present: Set<String> = []
        var valueNames: Set<String> = []
        var opNames: Set<String> = []
        /// Weights reshaped for a lifted op or a 4-D broadcast, by original name.
        var reshaped: [String: String] = [:]
        let worthwhile: Bool
        /// Values only lifted ops read (a pad in front of a 1-D convolution lifts with it).
        var feedsLifted: Set<String> = []

        init(_ f: Function, _ unit: CompilationUnit) {
            function = f
            for a in f.inputs {
                types[a.name] = a.type
                present.insert(a.name)
                valueNames.insert(a.name)
            }
            for op in f.operations {
                opNames.insert(op.name)
                for o in op.outputs {
                    types[o.name] = o.type
                    valueNames.insert(o.name)
                }
            }
            worthwhile = f.operations.contains { SpatialLifting.liftable($0, unit) }
            let uses = UseIndex(f)
            for (v, readers) in uses.readers where !uses.returned.contains(v) {
                if readers.allSatisfy({ SpatialLifting.liftable(f.operations[$0], unit) && f.operations[$0].inputs[0] == v }) { feedsLifted.insert(v) }
            }
        }

        func fresh(_ base: String, in taken: Set<String>) -> String {
            if !taken.contains(base) { return base }
            var i = 2
            while taken.contains("\(base)\(i)") { i += 1 }
            return "\(base)\(i)"
        }

        /// The 4-D twin of a 3-D value, made (a view) on first use.
        mutating func lifted(_ v: String, for op: Operation) -> String? {
            if let t = twin[v] { return t }
            guard let type = types[v], type.rank == 3 else { return nil }
            let t = fresh("\(v)@2d", in: valueNames)
            valueNames.insert(t)
            types[t] = SpatialLifting.lifted(type)
            let name = fresh("\(op.name)/unsqueeze", in: opNames)
            opNames.insert(name)
            out.append(Operation(opType: "unsqueeze", name: name, inputs: [v], outputs: [Value(name: t, type: types[t]!)],
                                 attributes: ["axes": .ints([2])], source: op.source))
            twin[v] = t
            return t
        }

        /// The 3-D value itself, squeezed back (a view) from its twin on first use.
        mutating func flat(_ v: String, for op: Operation) -> String {
            guard !v.isEmpty, !present.contains(v), let t = twin[v], let type = types[v] else { return v }
            let name = fresh("\(op.name)/squeeze", in: opNames)
            opNames.insert(name)
            out.append(Operation(opType: "squeeze", name: name, inputs: [t], outputs: [Value(name: v, type: type)],
                                 attributes: ["axes": .ints([2])], source: op.source))
            present.insert(v)
            return v
        }

        /// Emits `op` reading `inputs` with its one output made 4-D.
        mutating func emitLifted(_ op: Operation, inputs: [String], attributes: [String: AttributeValue]? = nil) {
            let y = op.outputs[0]
            let t = fresh("\(y.name)@2d", in: valueNames)
            valueNames.insert(t)
            types[t] = SpatialLifting.lifted(y.type)
            var lifted = op
            lifted.inputs = inputs
            lifted.outputs = [Value(name: t, type: types[t]!)]
            if let attributes { lifted.attributes = attributes }
            out.append(lifted)
            twin[y.name] = t
        }

        mutating func run(_ unit: inout CompilationUnit) throws {
            for op in function.operations {
                if try rewrite(op, &unit) { continue }
                var kept = op
                kept.inputs = op.inputs.map { flat($0, for: op) }
                out.append(kept)
                for o in op.outputs { present.insert(o.name) }
            }
            let end = Operation(opType: "return", name: "return", inputs: [], outputs: [])
            for o in function.outputs { _ = flat(o.value, for: end) }
        }

        mutating func rewrite(_ op: Operation, _ unit: inout CompilationUnit) throws -> Bool {
            if SpatialLifting.liftable(op, unit) {
                guard let attributes = SpatialLifting.liftedWindow(op.attributes) else { return false }
                var inputs = op.inputs
                if inputs.count > 1 {
                    guard let w = try reshapedWeight(op.inputs[1], insertingAt: 2, &unit) else { return false }
                    inputs[1] = w
                }
                guard let x = lifted(op.inputs[0], for: op) else { return false }
                inputs[0] = x
                emitLifted(op, inputs: inputs, attributes: attributes)
                return true
            }
            if op.opType == "pad" { return try rewritePad(op, unit) }
            guard op.outputs.count == 1, op.outputs[0].type.rank == 3, op.inputs.contains(where: { twin[$0] != nil }) else { return false }
            if op.opType == "identity" || op.opType == "dropout" && op.outputs.count == 1 {
                emitLifted(op, inputs: [twin[op.inputs[0]]!])
                return true
            }
            if SpatialLifting.binaries.contains(op.opType) { return try rewriteBinary(op, &unit) }
            guard op.inputs.count == 1, let t = twin[op.inputs[0]], UnaryFunction.of(op) != nil else { return false }
            emitLifted(op, inputs: [t])
            return true
        }

        /// A pad of a 3-D value that is lifted already, or that only lifted ops read: its amounts
        /// (attribute or constant input) gain a zero pair for the unit dim, so ``PadFolding`` can
        /// fold it into the convolution after it.
        mutating func rewritePad(_ op: Operation, _ unit: CompilationUnit) throws -> Bool {
            guard op.outputs.count == 1, op.outputs[0].type.rank == 3, let x = op.inputs.first, types[x]?.rank == 3,
                  twin[x] != nil || feedsLifted.contains(op.outputs[0].name),
                  op.attributes["axes"] == nil, op.inputs.count < 4 || op.inputs[3].isEmpty else { return false }
            var pads: [Int]
            if let a = try? op.attributes.ints("pads") {
                pads = a
            } else if op.inputs.count > 1, let w = unit.weight(op.inputs[1]), let v = try? WeightDecoding.dense(w), v.scalarType == .int64 {
                pads = v.scalars(as: Int64.self).map { Int($0) }
            } else {
                return false
            }
            guard pads.count == 6, let t = lifted(x, for: op) else { return false }
            pads = [pads[0], pads[1], 0, pads[2], pads[3], pads[4], 0, pads[5]]
            var attributes = op.attributes
            attributes["pads"] = .ints(pads)
            var inputs = op.inputs
            inputs[0] = t
            if inputs.count > 1 { inputs[1] = "" }
            while inputs.count > 1, inputs.last!.isEmpty { inputs.removeLast() }
            emitLifted(op, inputs: inputs, attributes: attributes)
            return true
        }

        /// An elementwise binary op on a twin: the other operand a twin, a viewed 3-D value, a
        /// reshaped weight, or anything of rank 0 or 1 (it broadcasts over `W` alike).
        mutating func rewriteBinary(_ op: Operation, _ unit: inout CompilationUnit) throws -> Bool {
            guard op.inputs.count == 2 else { return false }
            var inputs: [String] = []
            for v in op.inputs {
                if let t = twin[v] {
                    inputs.append(t)
                } else if let w = unit.weight(v), w.shape.count == 2 || w.shape.count == 3 {
                    guard let r = try reshapedWeight(v, insertingAt: w.shape.count == 3 ? 2 : 1, &unit) else { return false }
                    inputs.append(r)
                } else if let type = types[v] ?? unit.weight(v)?.type, type.rank <= 1 {
                    inputs.append(v)
                } else if types[v]?.rank == 3, let t = lifted(v, for: op) {
                    inputs.append(t)
                } else {
                    return false
                }
            }
            emitLifted(op, inputs: inputs)
            return true
        }

        /// A weight with a unit dim inserted at `axis` (sharing the bytes when dense; decoded to
        /// float32 otherwise), made once per weight and axis.
        mutating func reshapedWeight(_ name: String, insertingAt axis: Int, _ unit: inout CompilationUnit) throws -> String? {
            let key = "\(name)|\(axis)"
            if let r = reshaped[key] { return r }
            guard let w = unit.weight(name), axis <= w.shape.count else { return nil }
            var shape = w.shape
            shape.insert(1, at: axis)
            let blob: WeightBlob
            if case .dense(let b) = w.encoding {
                blob = WeightBlob(dtype: b.dtype, shape: shape, data: b.data)
            } else {
                let dense: NDArray
                do { dense = try WeightDecoding.dense(w) } catch { throw CompileError("weight '\(name)': cannot decode it: \(error)") }
                guard dense.scalarType == .float32 else { return nil }
                blob = WeightBlob(dtype: .float32, shape: shape, data: ByteStorage(dense.scalars(as: Float.self).withUnsafeBytes { Array($0) }))
            }
            let r = unit.freshWeightName("\(name)@2d")
            unit.model.weights.append(Weight(name: r, dtype: blob.dtype, shape: shape, encoding: .dense(blob)))
            reshaped[key] = r
            return r
        }
    }

    /// Whether `op` is a 1-D convolution, transposed convolution or pool this pass lifts: a
    /// rank-3 float32 input, one output, window attributes of one dim, and for convolutions a
    /// stored rank-3 weight.
    static func liftable(_ op: Operation, _ unit: CompilationUnit) -> Bool {
        guard op.outputs.count == 1, op.outputs[0].type.rank == 3, op.outputs[0].type.dtype == .float32, !op.inputs.isEmpty else { return false }
        switch op.opType {
        case "conv", "conv_transpose":
            guard op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 3, w.dtype.isFloatingPoint else { return false }
            if op.inputs.count > 2, !op.inputs[2].isEmpty, unit.weight(op.inputs[2]) == nil { return false }
        case "max_pool", "average_pool":
            guard op.inputs.count == 1 else { return false }
        default:
            return false
        }
        return liftedWindow(op.attributes) != nil
    }
}
