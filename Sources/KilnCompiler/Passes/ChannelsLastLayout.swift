import KilnFormat
import KilnReference

/// Runs 2-D convolution networks channels-last (`[N, H, W, C]`): convolutions, depthwise
/// convolutions and pools get the channels-last layout in their step configs (the ops stay
/// portable; their declared types are the channels-last ones), elementwise ops between them follow their
/// inputs, and a value is turned back to `[N, C, H, W]` only where an op that needs that order
/// reads it (or the function returns it). specs/layout.md says why channels-last.
///
/// Before: `a = conv(x, W1); b = hard_swish(a); c = conv(b, W2); d = add(c, a); y = flatten(d)` —
/// after: `xl = transpose(x, [0,2,3,1]); al = conv(xl, W1); bl = hard_swish(al);
/// cl = conv(bl, W2); dl = add(cl, al); d = transpose(dl, [0,3,1,2]); y = flatten(d)`, both convs channels-last.
///
/// The rewrite is one forward walk in graph order. Each value may have a channels-last twin;
/// an op is rewritten when its kernel has a channels-last form and its inputs have (or cheaply
/// get) twins; every other op reads channels-first values, materialized on first use by a
/// `transpose` named like the original value. `transpose` ops between the two orders (a
/// TensorFlow export's pairs around each convolution) become renames, so they cancel. Binary
/// ops broadcast against weights transposed at compile time, and against small activations
/// (a squeeze-excitation's `[N, C, 1, 1]`) transposed at run time.
public struct ChannelsLastLayout: CompilerPass {
    /// `channels_last_layout`.
    public static let name = "channels_last_layout"

    /// Creates the pass.
    public init() {}

    static let toLast = [0, 2, 3, 1]
    static let toFirst = [0, 3, 1, 2]
    static let binaries = OpSet.ops(in: .layoutAgnostic)

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    /// - Throws: ``CompileError`` when a weight cannot be decoded.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            // A region of channels-last ops with a single convolution that needs a transpose on its
            // way in and on its way out (a lone 1-D convolution in a sequence model) costs more than
            // it saves: its convolutions stay channels-first and the walk runs again.
            var excluded: Set<String> = []
            while true {
                var trial = unit
                var walk = Walk(function: unit.model.functions[fi], excluded: excluded)
                try walk.run(&trial)
                let lone = walk.loneConvolutions()
                if lone.isEmpty {
                    unit = trial
                    unit.model.functions[fi] = walk.result
                    break
                }
                excluded.formUnion(lone)
            }
        }
    }

    /// The rewrite of one function.
    struct Walk {
        var function: Function
        var out: [Operation] = []
        var types: [String: TensorType] = [:]
        /// Channels-last twin of a rank-4 value.
        var twin: [String: String] = [:] {
            didSet { twinValues = Set(twin.values) }
        }
        var twinValues: Set<String> = []
        /// Channels-first values that exist (inputs, results of ops left as they are, materialized ones).
        var present: Set<String> = []
        /// Values renamed away (a transpose whose result is another value's twin).
        var alias: [String: String] = [:]
        var names: Set<String> = []
        var transposedWeights: [String: String] = [:]
        /// Convolutions and pools left channels-first (by name).
        let excluded: Set<String>
        /// The layout chosen for each rewritten convolution and pool (by name).
        var layouts: [String: StepConfig.Layout] = [:]
        /// The transpose (source, perm) that made each channels-first value, for composing.
        var transposedFrom: [String: (source: String, perm: [Int])] = [:]
        /// Region of each twin (union-find over op indices of `out`): which channels-last ops are connected.
        var region: [String: Int] = [:]
        var parent: [Int] = []
        /// Per region root: its convolutions and the transposes on its boundary.
        var convolutions: [Int: [String]] = [:]
        var boundary: [Int: Int] = [:]
        /// Twins made by a transpose, not yet part of a region.
        var madeTwins: Set<String> = []
        /// Token sequences `[B, L, C]` read as `[B, C, L]` (a transpose [0, 2, 1]): result → source.
        var channelsOfTokens: [String: String] = [:]
        /// Channels-first planes merged into `[B, C, H·W]` (a reshape of a value with a twin): result → the planes.
        var mergedPlanes: [String: String] = [:]

        init(function: Function, excluded: Set<String> = []) {
            self.function = function
            self.excluded = excluded
            for a in function.inputs {
                types[a.name] = a.type
                present.insert(a.name)
                names.insert(a.name)
            }
            for op in function.operations {
                names.insert(op.name)
                for o in op.outputs {
                    types[o.name] = o.type
                    names.insert(o.name)
                }
            }
        }

        var result: Function {
            var f = function
            f.operations = out
            f.outputs = function.outputs.map { a in
                var a = a
                a.value = alias[a.value] ?? a.value
                return a
            }
            return f
        }

        mutating func root(_ i: Int) -> Int {
            var i = i
            while parent[i] != i { parent[i] = parent[parent[i]]; i = parent[i] }
            return i
        }

        /// Convolutions alone in their region with transposes both into and out of it.
        mutating func loneConvolutions() -> Set<String> {
            var counts: [Int: (convs: [String], boundary: Int)] = [:]
            for (r, convs) in convolutions { counts[root(r), default: ([], 0)].convs += convs }
            for (r, n) in boundary { counts[root(r), default: ([], 0)].boundary += n }
            return Set(counts.values.filter { $0.convs.count == 1 && $0.boundary >= 2 }.flatMap(\.convs))
        }

        func fresh(_ base: String) -> String {
            if !names.contains(base) { return base }
            var i = 2
            while names.contains("\(base)\(i)") { i += 1 }
            return "\(base)\(i)"
        }

        static func permuted(_ t: TensorType, _ perm: [Int]) -> TensorType { TensorType(t.dtype, perm.map { t.shape[$0] }) }

        /// Emits `transpose(source, perm)` as `result`.
        mutating func transpose(_ source: String, _ perm: [Int], as result: String, type: TensorType, from op: Operation) {
            let name = fresh("\(op.name).\(perm == ChannelsLastLayout.toLast ? "to_last" : "to_first")")
            names.insert(name)
            out.append(Operation(opType: "transpose", name: name, inputs: [source], outputs: [Value(name: result, type: type)],
                                 attributes: ["perm": .ints(perm)], source: op.source))
        }

        /// The channels-first value `v`, materialized from its twin when no op made it.
        mutating func first(_ v: String, for op: Operation) -> String {
            if v.isEmpty || present.contains(v) { return v }
            guard let t = twin[v], let type = types[v] else { return v }
            transpose(t, ChannelsLastLayout.toFirst, as: v, type: type, from: op)
            present.insert(v)
            if let r = region[t], let lastType = types[t], !ChannelsLastLayout.movesOnlyUnitDims(lastType, ChannelsLastLayout.toFirst) {
                boundary[r, default: 0] += 1
            }
            return v
        }

        /// The channels-last twin of `v`, made by a transpose when `make` allows it.
        mutating func last(_ v: String, make: Bool, for op: Operation) -> String? {
            if let t = twin[v] { return t }
            guard make, let type = types[v], type.rank == 4 else { return nil }
            let name = fresh("\(v)@nhwc")
            names.insert(name)
            let lastType = Walk.permuted(type, ChannelsLastLayout.toLast)
            types[name] = lastType
            // A value made by a transpose: one transpose of its source instead of two in a row.
            if let (source, perm) = transposedFrom[v], let sourceType = types[source] {
                let composed = ChannelsLastLayout.toLast.map { perm[$0] }
                transpose(source, composed, as: name, type: lastType, from: op)
                if !ChannelsLastLayout.movesOnlyUnitDims(sourceType, composed) { madeTwins.insert(name) }
            } else {
                transpose(v, ChannelsLastLayout.toLast, as: name, type: lastType, from: op)
                if !ChannelsLastLayout.movesOnlyUnitDims(type, ChannelsLastLayout.toLast) { madeTwins.insert(name) }
            }
            twin[v] = name
            return name
        }

        /// Emits `op` with its first output (rank 4) as a channels-last twin (a conv or pool with `layout`).
        mutating func emitLast(_ op: Operation, inputs: [String], attributes: [String: AttributeValue]? = nil, opType: String? = nil,
                               layout: StepConfig.Layout? = nil) {
            var o = op
            if let layout { layouts[op.name] = layout }
            o.inputs = inputs
            if let attributes { o.attributes = attributes }
            if let opType { o.opType = opType }
            let v = op.outputs[0]
            let name = fresh("\(v.name)@nhwc")
            names.insert(name)
            let type = Walk.permuted(v.type, ChannelsLastLayout.toLast)
            types[name] = type
            // Outputs after the first (a quantization's scale and zero point) keep their order.
            o.outputs = [Value(name: name, type: type)] + op.outputs.dropFirst()
            for rest in op.outputs.dropFirst() { present.insert(rest.name) }
            twin[v.name] = name
            out.append(o)
            join([name], inputs: inputs, isConvolution: op.opType == "conv", name: op.name)
        }

        /// Puts an emitted channels-last op (its twin outputs) in the region of its channels-last
        /// inputs, joining those regions; a transpose made for it counts on the region's boundary.
        mutating func join(_ outputs: [String], inputs: [String], isConvolution: Bool, name: String) {
            let id = parent.count
            parent.append(id)
            for input in inputs where region[input] != nil || madeTwins.contains(input) {
                if let r = region[input] {
                    let (a, b) = (root(r), root(id))
                    if a != b { parent[a] = b }
                } else {
                    boundary[id, default: 0] += 1
                    madeTwins.remove(input)
                }
            }
            for o in outputs { region[o] = id }
            if isConvolution { convolutions[id, default: []].append(name) }
        }

        mutating func run(_ unit: inout CompilationUnit) throws {
            for original in function.operations {
                var op = original
                op.inputs = op.inputs.map { alias[$0] ?? $0 }
                let rewritten = excluded.contains(op.name) ? false : try rewrite(op, &unit)
                if !rewritten {
                    op.inputs = op.inputs.map { first($0, for: op) }
                    if op.opType == "transpose", op.outputs.count == 1, let perm = try? op.attributes.ints("perm"), perm.count == 4 {
                        transposedFrom[op.outputs[0].name] = (op.inputs[0], perm)
                    }
                    if op.opType == "transpose", op.outputs.count == 1, (try? op.attributes.ints("perm")) == [0, 2, 1] {
                        channelsOfTokens[op.outputs[0].name] = op.inputs[0]
                    }
                    for o in op.outputs { present.insert(o.name) }
                    out.append(op)
                }
            }
            for a in function.outputs { _ = first(alias[a.value] ?? a.value, for: Operation(opType: "", name: "output", inputs: [], outputs: [])) }
            for op in out { if let layout = layouts[op.name] { unit.configure(op, in: function.name) { $0.layout = layout } } }
        }

        func isFloat4D(_ v: String) -> Bool { types[v].map { $0.rank == 4 && $0.dtype == .float32 } ?? false }

        /// Rewrites `op` channels-last when it can; false leaves it to the caller.
        mutating func rewrite(_ op: Operation, _ unit: inout CompilationUnit) throws -> Bool {
            if op.outputs.count != 1 { return rewriteMultipleOutputs(op, unit) }
            let y = op.outputs[0]
            switch op.opType {
            case "conv":
                guard isFloat4D(op.inputs[0]), y.type.rank == 4, unit.config(of: op, in: function.name).layout == .channelsFirst,
                      ChannelsLastLayout.convolutionFits(op, unit) else { return false }
                let rest = op.inputs.dropFirst().map { first($0, for: op) }
                if twin[op.inputs[0]] == nil, ChannelsLastLayout.readsPlanes(op, unit) {
                    // A few channels-first planes (a network's input image): gathered straight into im2col rows.
                    emitLast(op, inputs: [first(op.inputs[0], for: op)] + rest, layout: .planesToChannelsLast)
                    return true
                }
                guard let x = last(op.inputs[0], make: true, for: op) else { return false }
                emitLast(op, inputs: [x] + rest, layout: .channelsLast)
                return true
            case "max_pool", "average_pool":
                guard isFloat4D(op.inputs[0]), y.type.rank == 4, op.outputs.count == 1, (try? op.attributes.ints("kernel_shape"))??.count == 2,
                      (try? op.attributes.int("storage_order", 0)) == 0, let x = last(op.inputs[0], make: true, for: op) else { return false }
                emitLast(op, inputs: [x], layout: .channelsLast)
                return true
            case "global_average_pool", "global_max_pool":
                guard isFloat4D(op.inputs[0]), let x = last(op.inputs[0], make: false, for: op) else { return false }
                emitLast(op, inputs: [x], attributes: ["axes": .ints([1, 2]), "keepdims": .int(1)],
                         opType: op.opType == "global_average_pool" ? "reduce_mean" : "reduce_max")
                return true
            case "transpose":
                if imageAsTokens(op) { return true }
                guard let perm = try? op.attributes.ints("perm"), isFloat4D(op.inputs[0]) || twin[op.inputs[0]] != nil else { return false }
                if perm == ChannelsLastLayout.toFirst, exists(op.inputs[0], unit), twin[y.name] == nil {
                    // A channels-last tensor read as channels-first: the result's twin is the source.
                    twin[y.name] = op.inputs[0]
                    return true
                }
                if perm == ChannelsLastLayout.toLast, let t = twin[op.inputs[0]] {
                    alias[y.name] = t
                    return true
                }
                return false
            case "concat":
                guard let axis = try? op.attributes.int("axis", 0), axis == 1 || axis == -3, y.type.rank == 4,
                      op.inputs.allSatisfy({ twin[$0] != nil }) else { return false }
                var a = op.attributes
                a["axis"] = .int(3)
                emitLast(op, inputs: op.inputs.map { twin[$0]! }, attributes: a)
                return true
            case "batch_norm":
                // Not folded into a convolution (it follows a concat or an add): a per-channel scale and
                // shift along the last axis, with both computed once from the stored parameters.
                guard let t = twin[op.inputs[0]], y.type.rank == 4, op.inputs.count == 5,
                      let (scale, shift) = try batchNormAffine(op, &unit) else { return false }
                let scaled = fresh("\(y.name)@scaled")
                names.insert(scaled)
                let type = Walk.permuted(y.type, ChannelsLastLayout.toLast)
                types[scaled] = type
                out.append(Operation(opType: "mul", name: fresh("\(op.name).scale"), inputs: [t, scale], outputs: [Value(name: scaled, type: type)],
                                     source: op.source))
                names.insert(out.last!.name)
                region[scaled] = region[t]
                emitLast(Operation(opType: "add", name: op.name, inputs: [], outputs: op.outputs, source: op.source), inputs: [scaled, shift])
                return true
            case "resize":
                // Scales or sizes fixed at convert time, no region of interest: the same resize with
                // its per-axis parameters moved to the channels-last axes.
                guard let t = twin[op.inputs[0]], y.type.rank == 4, op.inputs.dropFirst().allSatisfy({ $0.isEmpty }),
                      (try? op.attributes.string("coordinate_transformation_mode", "half_pixel")) != "tf_crop_and_resize" else { return false }
                var a = op.attributes
                if let axes = try? op.attributes.ints("axes") {
                    let position = [0, 3, 1, 2]
                    a["axes"] = .ints(try axes.map { position[try OpSet.normalize(axis: $0, rank: 4)] })
                } else if let scales = try? op.attributes.floats("scales"), scales.count == 4 {
                    a["scales"] = .floats(ChannelsLastLayout.toLast.map { scales[$0] })
                } else if let sizes = try? op.attributes.ints("sizes"), sizes.count == 4 {
                    a["sizes"] = .ints(ChannelsLastLayout.toLast.map { sizes[$0] })
                } else {
                    return false
                }
                emitLast(op, inputs: [t] + op.inputs.dropFirst(), attributes: a)
                return true
            case "pad":
                // Amounts fixed at convert time: the same pad with them moved to the channels-last axes
                // (so a pad in front of a convolution can fold into it).
                guard let t = twin[op.inputs[0]], y.type.rank == 4, op.attributes["axes"] == nil, let pads = try? op.attributes.ints("pads"),
                      pads.count == 8, op.inputs.count < 2 || op.inputs[1].isEmpty,
                      op.inputs.dropFirst(2).allSatisfy({ $0.isEmpty || unit.weight($0) != nil }) else { return false }
                var a = op.attributes
                a["pads"] = .ints(ChannelsLastLayout.toLast.map { pads[$0] } + ChannelsLastLayout.toLast.map { pads[4 + $0] })
                emitLast(op, inputs: [t] + op.inputs.dropFirst(), attributes: a)
                return true
            case "slice":
                // Bounds fixed at convert time (a ghost module's channel slice): the same slice with
                // its axes moved to the channels-last positions.
                guard let t = twin[op.inputs[0]], y.type.rank == 4, op.inputs.dropFirst().allSatisfy({ $0.isEmpty }),
                      let starts = (try? op.attributes.ints("starts")) ?? nil else { return false }
                let axes = ((try? op.attributes.ints("axes")) ?? nil) ?? Array(0 ..< starts.count)
                guard axes.count == starts.count, let moved = try? axes.map({ ChannelsLastLayout.toFirst[try OpSet.normalize(axis: $0, rank: 4)] })
                else { return false }
                var a = op.attributes
                a["axes"] = .ints(moved)
                emitLast(op, inputs: [t], attributes: a)
                return true
            case "cast":
                return castLast(op)
            case "reshape":
                return tokensAsImage(op) || noteMergedPlanes(op)
            case "identity", "dropout":
                // Inference dropout with no mask read is the identity: the result shares the input's twin.
                guard op.inputs.count >= 1, let t = twin[op.inputs[0]] else { return false }
                twin[y.name] = t
                return true
            case _ where ChannelsLastLayout.binaries.contains(op.opType):
                return try rewriteBinary(op, &unit)
            default:
                guard op.inputs.count >= 1, let t = twin[op.inputs[0]], y.type.dtype == .float32,
                      let unary = UnaryFunction.of(op), op.inputs.count == 1 || unary.function == .clip else { return false }
                emitLast(op, inputs: [t] + op.inputs.dropFirst().map { first($0, for: op) })
                return true
            }
        }

        /// A channel split, or a quantization at run time, of a twin; false leaves it channels-first.
        mutating func rewriteMultipleOutputs(_ op: Operation, _ unit: CompilationUnit) -> Bool {
            guard op.inputs.count >= 1, let t = twin[op.inputs[0]] else { return false }
            if op.opType == "split", let axis = try? op.attributes.int("axis", 0), axis == 1 || axis == -3,
               op.inputs.dropFirst().allSatisfy({ $0.isEmpty || unit.weight($0) != nil }), op.outputs.allSatisfy({ $0.type.rank == 4 }) {
                splitChannels(op, twin: t)
                return true
            }
            if op.opType == "dynamic_quantize_linear", op.inputs.count == 1, op.outputs.count == 3, op.outputs[0].type.rank == 4 {
                // The range is over the whole tensor and each element quantizes alone: the data
                // follows its input's order; the scale and zero point are scalars.
                emitLast(op, inputs: [t])
                return true
            }
            return false
        }

        /// A `cast` of a twin, element by element: an activation quantized at run time keeps its order through its casts.
        mutating func castLast(_ op: Operation) -> Bool {
            guard op.inputs.count == 1, let t = twin[op.inputs[0]], op.outputs[0].type.rank == 4 else { return false }
            emitLast(op, inputs: [t])
            return true
        }

        /// A channel split (a C2f block's halves) along axis 3 of the input's twin `t`, every part a twin.
        mutating func splitChannels(_ op: Operation, twin t: String) {
            var o = op
            o.inputs = [t] + op.inputs.dropFirst()
            o.attributes["axis"] = .int(3)
            o.outputs = op.outputs.map { v in
                let name = fresh("\(v.name)@nhwc")
                names.insert(name)
                let type = Walk.permuted(v.type, ChannelsLastLayout.toLast)
                types[name] = type
                twin[v.name] = name
                return Value(name: name, type: type)
            }
            out.append(o)
            join(o.outputs.map(\.name), inputs: [t], isConvolution: false, name: op.name)
        }

        /// A broadcasting binary on twins, weights transposed at compile time, scalars, or small
        /// activations transposed at run time; false leaves it channels-first.
        mutating func rewriteBinary(_ op: Operation, _ unit: inout CompilationUnit) throws -> Bool {
            let y = op.outputs[0]
            guard op.inputs.count == 2, y.type.rank == 4, y.type.dtype == .float32,
                  op.inputs.contains(where: { twin[$0] != nil }) else { return false }
            var inputs: [String] = []
            for v in op.inputs {
                if let t = twin[v] { inputs.append(t); continue }
                if unit.weight(v) != nil, let w = try transposedWeight(v, &unit) { inputs.append(w); continue }
                guard let type = types[v] else { return false }
                if type.elementCount == 1 {
                    inputs.append(first(v, for: op)) // a scalar broadcasts the same either way
                    continue
                }
                // Small activations only (a squeeze-excitation's [N, C, 1, 1]): their transpose is cheap.
                // A tensor of run-time dims is not known to be small: it stays channels-first.
                let planeIsOne = type.rank == 4 && type.shape[2].size == 1 && type.shape[3].size == 1
                let small = planeIsOne || type.elementCount.map { n in y.type.elementCount.map { n <= $0 / 8 } ?? false } ?? false
                guard type.rank == 4, small, let t = last(first(v, for: op), make: true, for: op) else { return false }
                inputs.append(t)
            }
            emitLast(op, inputs: inputs)
            return true
        }

        /// Whether `v` is a tensor some op (or the caller, or the weights) already made.
        func exists(_ v: String, _ unit: CompilationUnit) -> Bool {
            present.contains(v) || twinValues.contains(v) || unit.weight(v) != nil
        }
    }

    /// Whether transposing a tensor of `type` by `perm` moves only size-1 dims (a view, no copy).
    static func movesOnlyUnitDims(_ type: TensorType, _ perm: [Int]) -> Bool {
        guard perm.count == type.rank else { return false }
        let moved = perm.filter { type.shape[$0] != .size(1) }
        return moved == moved.sorted()
    }

    /// Whether a conv reads its channels-first input directly (layout `planesToChannelsLast`): one group, a
    /// window wider than a pixel, and few channels, so that gathering im2col rows from planes costs
    /// less than transposing the input first.
    static func readsPlanes(_ op: Operation, _ unit: CompilationUnit) -> Bool {
        guard let w = unit.weight(op.inputs[1]), w.shape.count == 4, (try? op.attributes.int("group", 1)) == 1 else { return false }
        return w.shape[1] <= 8 && w.shape[2] * w.shape[3] > 1
    }

    /// Whether a conv has a channels-last kernel: 2-D, a weight known at compile time, and one
    /// group, one filter per channel (depthwise), or (dense weights, an arch with indirect
    /// microkernels) any other group count.
    static func convolutionFits(_ op: Operation, _ unit: CompilationUnit) -> Bool {
        guard op.inputs.count >= 2, let w = unit.weight(op.inputs[1]), w.shape.count == 4,
              let group = try? op.attributes.int("group", 1) else { return false }
        if op.inputs.count > 2, !op.inputs[2].isEmpty, unit.weight(op.inputs[2]) == nil { return false }
        if group == 1 || (group == w.shape[0] && w.shape[1] == 1) { return true }
        // Other group counts: a dense weight, per group an indirect GEMM (where the arch has the kernel).
        guard group > 1, w.shape[0] % group == 0, case .dense = w.encoding else { return false }
        return unit.arch.kernel(.conv2dNHWC).hasIndirectMicrokernel
    }
}
