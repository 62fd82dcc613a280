import KilnFormat

/// `If`, `Loop` and `Scan`: each ONNX subgraph becomes a closed Kiln function (a graph attribute).
/// Values of enclosing graphs a subgraph reads become captures — trailing inputs of the op and of
/// the body — except those known at convert time, which fold into the body. A condition known
/// at convert time inlines its branch.
extension Conversion {
    /// Whether `name` is defined in this conversion's function (always, at the top level).
    func isLocal(_ name: String) -> Bool {
        guard parent != nil else { return true }
        return bodyInputs.contains { $0.name == name } || captures.contains { $0.inner == name }
            || operations.contains { $0.outputs.contains { $0.name == name } }
    }

    /// The name under which this function reads the enclosing graphs' value `name`, capturing it
    /// (and, through each enclosing subgraph, its parent's) on first use.
    func capture(_ name: String, _ type: TensorType) throws -> String {
        guard let parent, !isLocal(name) else { return name }
        if let c = captures.first(where: { $0.key == name }) { return c.inner }
        let outer = try parent.capture(name, type)
        let inner = freshName(name)
        captures.append((key: name, outer: outer, inner: inner, type: type))
        return inner
    }

    /// ONNX names a graph reads that neither it nor its nested subgraphs define.
    static func freeNames(_ g: ONNXGraph) -> Set<String> {
        var defined = Set(g.inputs.map(\.name)).union(g.initializers.map(\.name))
        var used = Set<String>()
        for node in g.nodes {
            for i in node.inputs where !i.isEmpty { used.insert(i) }
            for case .graph(let sub) in node.attributes.values { used.formUnion(freeNames(sub)) }
            defined.formUnion(node.outputs)
        }
        used.formUnion(g.outputs.map(\.name))
        return used.subtracting(defined)
    }

    /// Converts `graph` as a closed function whose own inputs get `types` (in the graph's input
    /// order); its captures are appended to its inputs. The parent's op passes `captures`' outer names.
    func subgraph(_ graph: ONNXGraph, named name: String, inputTypes types: [TensorType], node: ONNXNode) throws -> Conversion {
        let what = "node '\(node.name)' (\(node.opType))"
        guard graph.inputs.count == types.count else {
            throw fail("\(what): subgraph '\(name)' takes \(graph.inputs.count) inputs, the op passes \(types.count)")
        }
        var inner = model
        inner.graph = graph
        let body = Conversion(model: inner, path: path, parent: self)
        for n in Conversion.freeNames(graph) {
            if let k = values[n] { body.values[n] = k }
        }
        for t in graph.initializers {
            body.values[t.name] = .constant(try narrowed(try t.value.get()))
            body.sourceConstants.insert(t.name)
        }
        for (v, t) in zip(graph.inputs, types) {
            let n = body.freshName(v.name)
            body.bodyInputs.append(Argument(name: n, type: t))
            body.values[v.name] = .value(name: n, type: t, elements: nil)
        }
        for v in graph.valueInfo + graph.outputs { body.valueInfo[v.name] = v }
        let converter = NodeConverter(body)
        do {
            for n in try body.sortedNodes() { try converter.convert(n) }
        } catch let e as ConvertError {
            throw ConvertError(path: e.path, reason: "\(what), subgraph '\(name)': \(e.reason)")
        }
        return body
    }

    /// The function of a converted subgraph: its inputs, then its captures.
    func function(of body: Conversion, named name: String, node: ONNXNode) throws -> Function {
        var outputs: [Argument] = []
        for v in body.model.graph.outputs {
            guard let known = body.values[v.name] else {
                throw fail("node '\(node.name)' (\(node.opType)), subgraph '\(name)': output '\(v.name)' is not computed")
            }
            let (value, type) = try body.operand(v.name, known)
            outputs.append(Argument(name: body.freshName("\(name)_out\(outputs.count)"), type: type, value: value))
        }
        body.removeDeadOperations(keeping: outputs.map(\.value))
        let inputs = body.bodyInputs + body.captures.map { Argument(name: $0.inner, type: $0.type) }
        return Function(name: name, inputs: inputs, outputs: outputs, operations: body.operations)
    }

    /// The union of several subgraphs' captures (outer names, first-use order), with each
    /// function's capture inputs reordered to it (unused ones added).
    func unify(_ bodies: [(Conversion, Function)]) -> (outer: [String], functions: [Function]) {
        var order: [(key: String, outer: String, type: TensorType)] = []
        for (b, _) in bodies { for c in b.captures where !order.contains(where: { $0.key == c.key }) { order.append((c.key, c.outer, c.type)) } }
        let functions = bodies.map { b, f -> Function in
            var f = f
            let own = b.bodyInputs.count
            f.inputs = Array(f.inputs[..<own]) + order.map { c in
                if let mine = b.captures.first(where: { $0.key == c.key }) { return Argument(name: mine.inner, type: mine.type) }
                return Argument(name: b.freshName("\(c.key)_unused"), type: c.type)
            }
            return f
        }
        return (order.map(\.outer), functions)
    }
}

extension NodeConverter {
    /// The control-flow family's handlers.
    static let controlFlowHandlers: [String: Handler] = ["If": convertIf, "Loop": convertLoop, "Scan": convertScan]

    func graphAttribute(_ node: ONNXNode, _ key: String) throws -> ONNXGraph {
        guard case .graph(let g)? = node.attributes[key] else {
            throw c.fail("node '\(node.name)' (\(node.opType)): attribute '\(key)' must be a graph")
        }
        return g
    }

    /// Defines the node's outputs as new values of `types` and appends the op.
    func appendControlFlow(_ node: ONNXNode, _ opType: String, inputs: [String], types: [TensorType],
                           attributes: [String: AttributeValue]) {
        var values: [Value] = []
        for (i, (name, type)) in zip(node.outputs, types).enumerated() {
            let valueName = c.freshName(name.isEmpty ? "\(node.name)_unused\(i)" : name)
            values.append(Value(name: valueName, type: type))
            if !name.isEmpty { c.values[name] = .value(name: valueName, type: type, elements: nil) }
        }
        c.operations.append(Operation(opType: opType, name: c.freshOpName(node.name.isEmpty ? opType : node.name),
                                      inputs: inputs, outputs: values, attributes: attributes, source: node.name))
    }

    /// If: a condition known now inlines its branch; otherwise an `if` whose branches are closed
    /// bodies, with the outer values they read as captures.
    /// - Parameter node: An `If` node.
    /// - Throws: `ConvertError` when the branches do not fit the node or each other.
    func convertIf(_ node: ONNXNode) throws {
        let what = "node '\(node.name)' (If)"
        let (thenGraph, elseGraph) = (try graphAttribute(node, "then_branch"), try graphAttribute(node, "else_branch"))
        guard let condName = node.inputs.first, !condName.isEmpty, let condKnown = known(condName) else { throw c.fail("\(what) has no condition") }
        guard thenGraph.outputs.count == node.outputs.count, elseGraph.outputs.count == node.outputs.count else {
            throw c.fail("\(what): the branches return \(thenGraph.outputs.count) and \(elseGraph.outputs.count) values for \(node.outputs.count) outputs")
        }
        if let cond = constant(condName) {
            // A condition known now: the chosen branch's nodes join this graph.
            guard cond.elementCount == 1 else { throw c.fail("\(what): the condition has \(cond.elementCount) elements") }
            let flag = cond.scalarType == .bool ? cond.scalars(as: Bool.self)[0] : try floatValues(cond)[0] != 0
            try inline(node, flag ? thenGraph : elseGraph)
            return
        }
        let thenBody = try c.subgraph(thenGraph, named: "then_branch", inputTypes: [], node: node)
        let elseBody = try c.subgraph(elseGraph, named: "else_branch", inputTypes: [], node: node)
        let thenFunction = try c.function(of: thenBody, named: "then_branch", node: node)
        let elseFunction = try c.function(of: elseBody, named: "else_branch", node: node)
        let (outer, functions) = c.unify([(thenBody, thenFunction), (elseBody, elseFunction)])
        let (condOperand, _) = try c.operand(condName, condKnown)
        let types = try zip(functions[0].outputs, functions[1].outputs).map { a, b -> TensorType in
            guard a.type.dtype == b.type.dtype else {
                throw c.fail("\(what): output '\(a.name)' is \(a.type.dtype.rawValue) in one branch and \(b.type.dtype.rawValue) in the other")
            }
            return TensorType(a.type.dtype, zip(a.type.shape, b.type.shape).map { $0 == $1 ? $0 : .unknown })
        }
        if let k = functions[0].outputs.indices.first(where: { functions[0].outputs[$0].type.rank != functions[1].outputs[$0].type.rank }) {
            let (a, b) = (functions[0].outputs[k].type.rank, functions[1].outputs[k].type.rank)
            guard let assumed = c.dimTests[condName] else {
                throw c.fail("\(what): the branches return values of ranks \(a) and \(b); Kiln needs one rank per output")
            }
            // A squeeze-if-size-1 of a run-time dim: the assumed branch is taken, and each result
            // passes through a check of the condition when the function runs.
            // The check runs first (ops run in order), so a wrong assumption stops the function
            // before the branch's ops, and the results depend on it.
            let condType = TensorType(.bool, try type(condName)?.shape ?? [])
            var check = condOperand
            if !assumed {
                check = c.freshName("\(condName)_not")
                c.operations.append(Operation(opType: "not", name: c.freshOpName("\(node.name)_not"), inputs: [condOperand],
                                              outputs: [Value(name: check, type: condType)], source: node.name))
            }
            let message = "node '\(node.name)' (If) was converted taking its \(assumed ? "then" : "else") branch, which assumes a dim of \(assumed ? "1" : "more than 0") (the branches differ in rank: \(a) and \(b)); this input's dim is not"
            let guardName = c.freshName("\(condName)_assumed")
            c.operations.append(Operation(opType: "assume", name: c.freshOpName("\(node.name)_assume"), inputs: [check, check],
                                          outputs: [Value(name: guardName, type: condType)], attributes: ["message": .string(message)], source: node.name))
            try inline(node, assumed ? thenGraph : elseGraph)
            for out in node.outputs where !out.isEmpty {
                guard case .value(let name, let t, _)? = c.values[out] else { continue }
                let checked = c.freshName("\(out)_checked")
                c.operations.append(Operation(opType: "assume", name: c.freshOpName("\(node.name)_assume"), inputs: [name, guardName],
                                              outputs: [Value(name: checked, type: t)], attributes: ["message": .string(message)], source: node.name))
                c.values[out] = .value(name: checked, type: t, elements: nil)
            }
            return
        }
        appendControlFlow(node, "if", inputs: [condOperand] + outer, types: types,
                          attributes: ["then_branch": .graph(functions[0]), "else_branch": .graph(functions[1])])
    }

    /// The nodes of `branch` join this graph, its outputs becoming `node`'s.
    func inline(_ node: ONNXNode, _ branch: ONNXGraph) throws {
        for t in branch.initializers {
            c.values[t.name] = .constant(try c.narrowed(try t.value.get()))
            c.sourceConstants.insert(t.name)
        }
        for v in branch.valueInfo + branch.outputs { c.valueInfo[v.name] = v }
        for n in try c.sortedNodes(branch.nodes) { try convert(n) }
        for (out, v) in zip(node.outputs, branch.outputs) where !out.isEmpty {
            guard let k = c.values[v.name] else { throw c.fail("node '\(node.name)' (If): branch output '\(v.name)' is not computed") }
            c.values[out] = k
        }
    }

    /// Loop: a `loop` whose body is a closed function, carried values of any shape.
    /// - Parameter node: A `Loop` node.
    /// - Throws: `ConvertError` when the body does not fit the node's inputs and outputs.
    func convertLoop(_ node: ONNXNode) throws {
        let what = "node '\(node.name)' (Loop)"
        let graph = try graphAttribute(node, "body")
        let carried = node.inputs.count - 2
        guard carried >= 0, graph.inputs.count == 2 + carried, graph.outputs.count >= 1 + carried else {
            throw c.fail("\(what): the body takes \(graph.inputs.count) inputs and returns \(graph.outputs.count) values for \(max(carried, 0)) carried values")
        }
        let scans = graph.outputs.count - 1 - carried
        guard node.outputs.count <= carried + scans else { throw c.fail("\(what) has \(node.outputs.count) outputs for \(carried + scans) values") }
        var initial: [TensorType] = []
        for i in 2 ..< node.inputs.count {
            guard let t = try type(node.inputs[i]) else { throw c.fail("\(what): loop-carried value '\(node.inputs[i])' is not defined") }
            // A carried value may change shape from one iteration to the next.
            initial.append(TensorType(t.dtype, t.shape.map { _ in .unknown }))
        }
        let body = try c.subgraph(graph, named: "body", inputTypes: [TensorType(.int64, []), TensorType(.bool, [])] + initial, node: node)
        let f = try c.function(of: body, named: "body", node: node)
        for (k, t) in initial.enumerated() where f.outputs[1 + k].type.dtype != t.dtype {
            throw c.fail("\(what): carried value \(k) is \(t.dtype.rawValue) but the body returns \(f.outputs[1 + k].type.dtype.rawValue)")
        }
        var inputs: [String] = []
        for i in 0 ..< 2 {
            let name = input(node, i)
            inputs.append(name.isEmpty ? "" : try c.operand(name, known(name)!).0)
        }
        for i in 2 ..< node.inputs.count { inputs.append(try c.operand(node.inputs[i], known(node.inputs[i])!).0) }
        inputs += body.captures.map(\.outer)
        let types = (0 ..< carried).map { f.outputs[1 + $0].type.withUnknownDims }
            + (0 ..< scans).map { k in let t = f.outputs[1 + carried + k].type; return TensorType(t.dtype, [.unknown] + t.withUnknownDims.shape) }
        var outputs = node.outputs
        while outputs.count < carried + scans { outputs.append("") }
        var n = node
        n.outputs = outputs
        appendControlFlow(n, "loop", inputs: inputs, types: types, attributes: ["body": .graph(f), "captures": .int(body.captures.count)])
    }

    /// Scan of opsets 8: a batch axis 0 on every state and scan input (scanned along axis 1), and
    /// sequence lengths. Each batch entry becomes a scan of its own (the batch must be static
    /// and the lengths absent or full), the results stacked back along axis 0.
    func convertScan8(_ node: ONNXNode) throws {
        let what = "node '\(node.name)' (Scan)"
        let m = int(node, "num_scan_inputs", 0)
        let n = node.inputs.count - 1 - m
        guard m >= 1, n >= 0 else { throw c.fail("\(what): \(node.inputs.count) inputs do not fit \(m) scan inputs after sequence_lens") }
        let operands = Array(node.inputs.dropFirst())
        guard let first = try type(operands[n]), first.rank >= 2, let batch = first.shape[0].size, let length = first.shape[1].size else {
            throw c.fail("\(what): an opset-8 Scan needs a static batch and sequence length")
        }
        if !input(node, 0).isEmpty {
            guard let lens = try staticInts(node, 0), lens.allSatisfy({ $0 == length }) else {
                throw c.fail("\(what): sequence_lens shorter than the sequence are not supported")
            }
        }
        var perBatch: [[String]] = []
        for b in 0 ..< batch {
            var inputs: [String] = []
            for name in operands {
                let (sliced, row) = (c.freshName("\(name)_batch\(b)_slice"), c.freshName("\(name)_batch\(b)"))
                try emit(node, "slice", [name], ["starts": .ints([b]), "ends": .ints([b + 1]), "axes": .ints([0])], outputs: [sliced])
                try emit(node, "squeeze", [sliced], ["axes": .ints([0])], outputs: [row])
                inputs.append(row)
            }
            var scan = node
            scan.name = "\(node.name)_batch\(b)"
            scan.inputs = inputs
            scan.outputs = node.outputs.map { $0.isEmpty ? "" : c.freshName("\($0)_batch\(b)") }
            scan.attributes = ["num_scan_inputs": .int(m), "body": .graph(try graphAttribute(node, "body"))]
            if let d = ints(node, "directions") { scan.attributes["scan_input_directions"] = .ints(d) }
            try convertScan9(scan)
            perBatch.append(scan.outputs)
        }
        for (k, out) in node.outputs.enumerated() where !out.isEmpty {
            var rows: [String] = []
            for b in 0 ..< batch {
                let row = c.freshName("\(out)_row\(b)")
                try emit(node, "unsqueeze", [perBatch[b][k]], ["axes": .ints([0])], outputs: [row])
                rows.append(row)
            }
            try emit(node, "concat", rows, ["axis": .int(0)], outputs: [out])
        }
    }

    /// Scan: opset 8's batched form (`convertScan8`), or later opsets' (`convertScan9`).
    /// - Parameter node: A `Scan` node.
    /// - Throws: `ConvertError` when the body or the axes do not fit the node.
    func convertScan(_ node: ONNXNode) throws {
        if c.opset < 9 { try convertScan8(node) } else { try convertScan9(node) }
    }

    /// Scan of opset 9 on: states, then scan inputs sliced along their axes, as one `scan`.
    /// - Parameter node: A `Scan` node (or one batch entry of an opset-8 Scan).
    /// - Throws: `ConvertError` when the body or the axes do not fit the node.
    func convertScan9(_ node: ONNXNode) throws {
        let what = "node '\(node.name)' (Scan)"
        let graph = try graphAttribute(node, "body")
        let m = int(node, "num_scan_inputs", 0)
        let n = node.inputs.count - m
        guard m >= 1, n >= 0, graph.inputs.count == node.inputs.count, graph.outputs.count >= n else {
            throw c.fail("\(what): \(node.inputs.count) inputs, \(m) scan inputs and a body of \(graph.inputs.count) inputs do not fit")
        }
        let k = graph.outputs.count - n
        let inAxes = ints(node, "scan_input_axes") ?? Array(repeating: 0, count: m)
        let outAxes = ints(node, "scan_output_axes") ?? Array(repeating: 0, count: k)
        guard inAxes.count == m, outAxes.count == k else { throw c.fail("\(what): scan axes do not match the scan inputs and outputs") }
        var types: [TensorType] = []
        var length: Dimension = .unknown
        for (i, name) in node.inputs.enumerated() {
            guard let t = try type(name) else { throw c.fail("\(what): input '\(name)' is not defined") }
            if i < n { types.append(t); continue }
            guard let axis = Optional(inAxes[i - n] < 0 ? inAxes[i - n] + t.rank : inAxes[i - n]), axis >= 0, axis < t.rank else {
                throw c.fail("\(what): scan axis \(inAxes[i - n]) is out of range for input '\(name)' of rank \(t.rank)")
            }
            var shape = t.shape
            let d = shape.remove(at: axis)
            if i == n { length = d }
            types.append(TensorType(t.dtype, shape))
        }
        let body = try c.subgraph(graph, named: "body", inputTypes: types, node: node)
        let f = try c.function(of: body, named: "body", node: node)
        var inputs = try node.inputs.map { try c.operand($0, known($0)!).0 }
        inputs += body.captures.map(\.outer)
        var attributes = try attributes(node, only: ["num_scan_inputs", "scan_input_axes", "scan_input_directions", "scan_output_axes", "scan_output_directions"])
        attributes["captures"] = .int(body.captures.count)
        var outTypes = Array(types[..<n])
        for j in 0 ..< k {
            let t = f.outputs[n + j].type
            let axis = outAxes[j] < 0 ? outAxes[j] + t.rank + 1 : outAxes[j]
            guard axis >= 0, axis <= t.rank else { throw c.fail("\(what): scan output axis \(outAxes[j]) is out of range") }
            var shape = t.shape
            shape.insert(length, at: axis)
            outTypes.append(TensorType(t.dtype, shape))
        }
        appendControlFlow(node, "scan", inputs: inputs, types: outTypes, attributes: attributes.merging(["body": .graph(f)]) { a, _ in a })
    }
}

extension TensorType {
    /// The same dtype and rank, every dim unknown.
    var withUnknownDims: TensorType { TensorType(dtype, shape.map { _ in .unknown }) }
}
