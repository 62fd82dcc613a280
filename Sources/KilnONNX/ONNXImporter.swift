import KilnFormat
import KilnReference

/// Options of an ONNX conversion.
public struct ConvertOptions: Sendable {
    /// The model's name (default: the file name without `.onnx`).
    public var name: String?
    /// The name of the function the graph becomes.
    public var functionName = "main"

    /// Every dim of every graph input becomes a symbol of its own (`INPUT_dimK`) and every shape
    /// the file states beyond them (value infos, outputs) is dropped, so the converter infers all
    /// of it: the symbolic-dim sweep of the tests and the zoo bench.
    package var symbolicInputDims = false

    /// Creates options with the defaults.
    public init(name: String? = nil, functionName: String = "main") {
        self.name = name
        self.functionName = functionName
    }
}

/// Converts ONNX models to portable Kiln models (specs/ops.md lists the operator mapping).
///
/// Initializers and `Constant` nodes become weights or constants; everything computable
/// at convert time (shape subgraphs over static dims, ops on constants) is folded;
/// parameters known at convert time become attributes; `Identity` and `Dropout` vanish.
/// Names of inputs, outputs and values are kept.
public enum ONNXImporter {
    /// Converts the ONNX model at `path`.
    /// - Parameters:
    ///   - path: An `.onnx` file; external data is read from files beside it.
    ///   - options: Conversion options.
    /// - Returns: The validated portable model.
    /// - Throws: ``ConvertError`` naming the file and every problem found.
    public static func convert(contentsOf path: String, options: ConvertOptions = ConvertOptions()) throws -> PortableModel {
        try convert(try ONNXDecoder.read(path), path: path, options: options)
    }

    /// Converts an ONNX model held in memory; `path` names it in errors.
    package static func convert(bytes: [UInt8], path: String, options: ConvertOptions = ConvertOptions()) throws -> PortableModel {
        try convert(try ONNXDecoder.decode(bytes, path: path), path: path, options: options)
    }

    static func convert(_ decoded: ONNXModel, path: String, options: ConvertOptions) throws -> PortableModel {
        var onnx = try FunctionInliner.inline(decoded, path: path)
        if options.symbolicInputDims { onnx.graph.makeInputDimsSymbolic() }
        var name = options.name ?? String(path.split(separator: "/").last ?? "model")
        if options.name == nil, name.hasSuffix(".onnx") { name.removeLast(5) }
        let conversion = Conversion(model: onnx, path: path)
        try conversion.checkSupported()
        let function = try conversion.run(functionName: options.functionName)
        var metadata = Metadata(name: name, description: onnx.docString)
        if onnx.modelVersion != 0 { metadata.version = String(onnx.modelVersion) }
        if !onnx.producerName.isEmpty { metadata.user["onnx.producer_name"] = onnx.producerName }
        if !onnx.producerVersion.isEmpty { metadata.user["onnx.producer_version"] = onnx.producerVersion }
        metadata.user["onnx.ir_version"] = String(onnx.irVersion)
        metadata.user["onnx.opset"] = onnx.opsets.sorted { $0.key < $1.key }
            .map { "\($0.key.isEmpty ? "ai.onnx" : $0.key) \($0.value)" }.joined(separator: ", ")
        for (k, v) in onnx.metadata { metadata.user[k] = v }
        let model = PortableModel(metadata: metadata, weights: conversion.weights, functions: [function])
        do {
            try model.validate()
        } catch let e as PackageError {
            throw ConvertError(path: path, reason: "the converted model is invalid: \(e)")
        }
        return model
    }
}

/// What the importer knows about one ONNX value.
enum Known {
    /// Known at convert time.
    case constant(NDArray)
    /// Computed at run time by the Kiln value `name`. `elements` describes a small int64
    /// vector (a shape) whose entries are partly known.
    case value(name: String, type: TensorType, elements: [Element]?)
}

/// One entry of a partly known shape vector.
enum Element: Equatable {
    case known(Int)
    case dim(String)
    case unknown

    var int: Int? { if case .known(let n) = self { return n } else { return nil } }
    var dimension: Dimension {
        switch self {
        case .known(let n): return .size(n)
        case .dim(let s): return .symbol(s)
        case .unknown: return .unknown
        }
    }
}

/// One conversion in progress.
final class Conversion {
    let model: ONNXModel
    let path: String
    let opset: Int
    var values: [String: Known] = [:]
    var weights: [Weight] = []
    var operations: [Operation] = []
    var usedNames = Set<String>()
    var opNames = Set<String>()
    var materialized: [String: String] = [:]
    var valueInfo: [String: ONNXValueInfo] = [:]
    lazy var initializerNames = Set(model.graph.initializers.map(\.name))
    /// Initializers the file holds as int4/uint4 (their values widened to int8/uint8).
    lazy var fourBitInitializers = Set(model.graph.initializers.filter(\.fourBit).map(\.name))
    /// Values the model states as constants (initializers and Constant nodes), as opposed
    /// to values folded from them.
    var sourceConstants = Set<String>()
    /// Integer initializers folded through a `Cast` to float32, by the cast's output (see
    /// `NodeConverter.keepScaledIntegers`).
    var integerCasts: [String: NDArray] = [:]
    /// Conditions that test whether a run-time dim is 1 or 0, by ONNX name, with the value assumed
    /// for them: a dim tested against 1 is 1 (PyTorch's `x.squeeze(d)` exports as
    /// `If(shape[d] == 1, Squeeze, Identity)` when the exporter cannot prove the size, and code
    /// squeezes a dim it expects to be 1); a dim tested against 0 is not 0. An `If` whose branches
    /// differ in rank takes the assumed branch, checked when it runs (`NodeConverter.convertIf`).
    var dimTests: [String: Bool] = [:]

    /// The conversion of the graph around this one when this one converts a subgraph (a branch
    /// or loop body), else `nil`.
    let parent: Conversion?
    /// Values of enclosing graphs a subgraph reads, in first-use order: the name in the key's
    /// scope (any enclosing conversion's), the name the parent's op passes, and the subgraph's input.
    var captures: [(key: String, outer: String, inner: String, type: TensorType)] = []
    /// The subgraph's own inputs (loop counters, carried values, scan slices).
    var bodyInputs: [Argument] = []

    init(model: ONNXModel, path: String, parent: Conversion? = nil) {
        self.model = model
        self.path = path
        self.parent = parent
        opset = model.opsets[""] ?? 1
        if let parent { usedNames = parent.usedNames }
    }

    /// The conversion of the top-level graph (which holds every weight).
    var root: Conversion { parent?.root ?? self }

    func fail(_ reason: String) -> ConvertError { ConvertError(path: path, reason: reason) }

    /// Every operator the model uses that Kiln cannot convert, in one error.
    func checkSupported() throws {
        var counts: [String: (Int, String, Int)] = [:]
        // Subgraphs' nodes too: one list for the whole model.
        var pending = [model.graph]
        while let graph = pending.popLast() {
            for node in graph.nodes {
                for case .graph(let g) in node.attributes.values { pending.append(g) }
                let domain = node.domain == "ai.onnx" ? "" : node.domain
                if domain.isEmpty && NodeConverter.supported.contains(node.opType) { continue }
                if domain == "com.microsoft" && NodeConverter.contribSupported.contains(node.opType) { continue }
                if domain == "ai.onnx.ml" && NodeConverter.mlSupported.contains(node.opType) { continue }
                let key = "\(domain)|\(node.opType)"
                let previous = counts[key]?.0 ?? 0
                counts[key] = (previous + 1, domain.isEmpty ? "ai.onnx" : domain, model.opsets[domain] ?? 0)
            }
        }
        guard counts.isEmpty else {
            // ai.onnx first, then other domains; by operator name within a domain.
            let list = counts.map { key, v in
                (key.split(separator: "|", omittingEmptySubsequences: false).map(String.init), v)
            }.sorted { ($0.0[0], $0.0[1]) < ($1.0[0], $1.0[1]) }.map { key, v in
                "\(key[1]) ×\(v.0) (\(v.1), opset \(v.2))"
            }
            throw fail("unsupported operators: " + list.joined(separator: ", "))
        }
    }

    func run(functionName: String) throws -> Function {
        let graph = model.graph
        for v in graph.valueInfo + graph.outputs { valueInfo[v.name] = v }
        for t in graph.initializers {
            values[t.name] = .constant(try narrowed(try t.value.get()))
            usedNames.insert(t.name)
            sourceConstants.insert(t.name)
        }
        var inputs: [Argument] = []
        for v in graph.inputs where values[v.name] == nil {
            guard let code = v.dtype, let onnxType = ONNXDecoder.dtypes[code] else {
                throw fail("input '\(v.name)' has type \(v.dtype.map { ONNXDecoder.dtypeNames[$0] ?? "\($0)" } ?? "unknown"), which Kiln does not support")
            }
            guard let shape = v.shape else { throw fail("input '\(v.name)' has no shape (its rank must be known)") }
            let type = TensorType(onnxType, shape)
            inputs.append(Argument(name: v.name, type: type))
            usedNames.insert(v.name)
            if onnxType == .float64 {
                // Kiln computes in float32, so a float64 input is float32 for the rest of the graph
                // (as float64 constants are): one cast, which the runtime's widening makes a no-op.
                let name = freshName("\(v.name)_float32"), narrow = TensorType(.float32, shape)
                usedNames.insert(name)
                operations.append(Operation(opType: "cast", name: freshOpName("\(v.name)_cast"), inputs: [v.name],
                                            outputs: [Value(name: name, type: narrow)], attributes: ["to": .dtype(.float32)], source: ""))
                values[v.name] = .value(name: name, type: narrow, elements: nil)
            } else {
                values[v.name] = .value(name: v.name, type: type, elements: nil)
            }
        }
        let converter = NodeConverter(self)
        for node in try sortedNodes() {
            try converter.convert(node)
        }
        removeDeadOperations(keeping: graph.outputs.compactMap { v -> String? in
            if case .value(let name, _, _)? = values[v.name] { return name }
            return nil
        })
        var outputs: [Argument] = []
        for v in graph.outputs {
            guard let known = values[v.name] else { throw fail("graph output '\(v.name)' is not computed by any node") }
            var (valueName, type) = try operand(v.name, known)
            // Floats are computed as float32; an output the graph declares float16, bfloat16 or
            // float64 is returned in that type.
            if type.dtype == .float32, let code = v.dtype, let declared = ONNXDecoder.dtypes[code], declared.isFloatingPoint {
                type = TensorType(declared, type.shape)
            }
            outputs.append(Argument(name: v.name, type: type, value: valueName))
        }
        return Function(name: functionName, inputs: inputs, outputs: outputs, operations: operations)
    }

    /// Drops ops none of whose outputs is used (shape computations folded into attributes).
    func removeDeadOperations(keeping roots: [String]) {
        var live = Set(roots)
        var kept: [Operation] = []
        for op in operations.reversed() where op.outputs.contains(where: { live.contains($0.name) }) {
            kept.append(op)
            for i in op.inputs where !i.isEmpty { live.insert(i) }
        }
        operations = kept.reversed()
        let used = live
        weights.removeAll { !used.contains($0.name) }
    }

    /// Nodes in an order where every input is defined first (ONNX requires this order,
    /// but not every exporter keeps it).
    func sortedNodes(_ nodes: [ONNXNode]? = nil) throws -> [ONNXNode] {
        let nodes = nodes ?? model.graph.nodes
        var producer: [String: Int] = [:]
        for (i, n) in nodes.enumerated() { for o in n.outputs where !o.isEmpty { producer[o] = i } }
        var state = [UInt8](repeating: 0, count: nodes.count)
        var order: [ONNXNode] = []
        for start in nodes.indices where state[start] == 0 {
            var stack: [(Int, Int)] = [(start, 0)]
            state[start] = 1
            while let (i, next) = stack.last {
                // What a node's subgraphs read from this graph must come first too.
                var inputs = nodes[i].inputs
                for case .graph(let g) in nodes[i].attributes.values { inputs += Conversion.freeNames(g).sorted() }
                if next < inputs.count {
                    stack[stack.count - 1].1 += 1
                    let name = inputs[next]
                    if name.isEmpty || values[name] != nil { continue }
                    guard let p = producer[name] else {
                        throw fail("\(label(nodes[i], i)) reads '\(name)', which no node, input or initializer defines")
                    }
                    if state[p] == 1 { throw fail("the graph has a cycle through \(label(nodes[p], p))") }
                    if state[p] == 0 {
                        state[p] = 1
                        stack.append((p, 0))
                    }
                } else {
                    state[i] = 2
                    order.append(nodes[i])
                    stack.removeLast()
                }
            }
        }
        return order
    }

    /// `node 'name' (Op)`, or `node #3 (Op)` for an unnamed node.
    func label(_ node: ONNXNode, _ index: Int) -> String {
        node.name.isEmpty ? "node #\(index) (\(node.opType))" : "node '\(node.name)' (\(node.opType))"
    }

    /// float64 tensors become float32 (Kiln computes in float32).
    func narrowed(_ x: NDArray) throws -> NDArray {
        guard x.scalarType == .float64 else { return x }
        return NDArray(shape: x.shape, scalars: x.scalars(as: Double.self).map { Float($0) })
    }

    /// A fresh value or weight name based on `base`.
    /// Names are unique across the model, subgraphs included, so a name says which value it
    /// is at every level (the top-level conversion keeps the registry).
    func freshName(_ base: String) -> String {
        var name = base.isEmpty ? "value" : base
        var n = 1
        let registry = root
        while usedNames.contains(name) || registry.usedNames.contains(name) {
            name = "\(base)_\(n)"
            n += 1
        }
        usedNames.insert(name)
        registry.usedNames.insert(name)
        return name
    }

    func freshOpName(_ base: String) -> String {
        var name = base
        var n = 1
        while opNames.contains(name) {
            name = "\(base)_\(n)"
            n += 1
        }
        opNames.insert(name)
        return name
    }

    /// The Kiln value holding an ONNX value, materializing constants as weights
    /// (initializers and large tensors) or `constant` ops (small folded values).
    func operand(_ onnxName: String, _ known: Known) throws -> (String, TensorType) {
        switch known {
        case .value(let name, let type, _):
            // A value of an enclosing graph is a capture of a subgraph.
            return (try capture(name, type), type)
        case .constant(let x):
            let type = TensorType(x.scalarType, x.shape.map { .size($0) })
            if let name = materialized[onnxName] { return (name, type) }
            // A subgraph reading an enclosing graph's initializer or Constant sees it as one too.
            var stated = (initializer: false, source: false)
            var scope: Conversion? = self
            while let s = scope {
                stated.initializer = stated.initializer || s.initializerNames.contains(onnxName)
                stated.source = stated.source || s.sourceConstants.contains(onnxName)
                scope = s.parent
            }
            let isInitializer = stated.initializer
            let name: String
            // Stated float tensors (not scalars) are parameters: weights. Small folded values,
            // scalars and integer shape parameters are constant ops.
            if isInitializer || x.elementCount > 64 || (stated.source && x.scalarType.isFloatingPoint && x.rank > 0) {
                if parent != nil {
                    // Weights live in the model; a subgraph receives one as a capture. An enclosing
                    // graph's own constant is made there (once), this graph's at the top level.
                    var owner = parent
                    while let o = owner, !o.initializerNames.contains(onnxName) && !o.sourceConstants.contains(onnxName) { owner = o.parent }
                    if let owner {
                        let (outer, _) = try owner.operand(onnxName, .constant(x))
                        let inner = try capture(outer, type)
                        materialized[onnxName] = inner
                        return (inner, type)
                    }
                    let weight = root.freshName(onnxName)
                    root.weights.append(Weight(name: weight, dtype: x.scalarType, shape: x.shape,
                                               encoding: .dense(WeightBlob(dtype: x.scalarType, shape: x.shape, data: ByteStorage(x.bytes)))))
                    let inner = try capture(weight, type)
                    materialized[onnxName] = inner
                    return (inner, type)
                }
                name = isInitializer ? onnxName : freshName(onnxName)
                let data = ByteStorage(x.bytes)
                weights.append(Weight(name: name, dtype: x.scalarType, shape: x.shape,
                                      encoding: .dense(WeightBlob(dtype: x.scalarType, shape: x.shape, data: data))))
            } else {
                name = freshName(onnxName)
                let literal = TensorLiteral(dtype: x.scalarType, shape: x.shape, bytes: x.bytes)
                operations.append(Operation(opType: "constant", name: freshOpName(name), inputs: [],
                                            outputs: [Value(name: name, type: type)], attributes: ["value": .tensor(literal)]))
            }
            materialized[onnxName] = name
            return (name, type)
        }
    }
}
