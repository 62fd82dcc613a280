/// Inlines model-local functions (ONNX `FunctionProto`, written by the PyTorch dynamo exporter
/// for each module) into their callers before conversion.
///
/// A call — a node whose domain, op type and overload name a function of the model — becomes
/// the function's nodes. Its inputs and outputs take the caller's value names; every other name
/// in the body, subgraphs included, gets a prefix unique to the call, so two calls never share
/// a value. An attribute that refers to one of the function's (`ref_attr_name`) takes the
/// caller's value, else the function's default, else is left out. Calls inside functions and
/// inside subgraphs are inlined too; a function that reaches itself is an error naming the node.
enum FunctionInliner {
    /// The deepest chain of calls inlined (a guard against exponential expansion).
    static let maximumDepth = 64

    static func inline(_ model: ONNXModel, path: String) throws -> ONNXModel {
        guard !model.functions.isEmpty else { return model }
        var table: [String: ONNXFunction] = [:]
        for f in model.functions { table[key(f.domain, f.name, f.overload)] = f }
        var state = State(functions: table, path: path)
        var out = model
        out.graph = try state.graph(model.graph, stack: [], origin: nil)
        out.functions = []
        return out
    }

    static func key(_ domain: String, _ name: String, _ overload: String) -> String {
        "\(domain == "ai.onnx" ? "" : domain)\u{1}\(name)\u{1}\(overload)"
    }

    struct State {
        var functions: [String: ONNXFunction]
        var path: String
        var calls = 0

        func fail(_ reason: String) -> ConvertError { ConvertError(path: path, reason: reason) }

        mutating func graph(_ g: ONNXGraph, stack: [String], origin: String?) throws -> ONNXGraph {
            var out = g
            out.nodes = try nodes(g.nodes, stack: stack, origin: origin)
            return out
        }

        /// `stack`: the functions being expanded; `origin`: the graph node whose call they came from,
        /// which errors name.
        mutating func nodes(_ list: [ONNXNode], stack: [String], origin: String?) throws -> [ONNXNode] {
            var out: [ONNXNode] = []
            out.reserveCapacity(list.count)
            for var node in list {
                for (k, v) in node.attributes {
                    if case .graph(let body) = v { node.attributes[k] = .graph(try graph(body, stack: stack, origin: origin)) }
                }
                let k = FunctionInliner.key(node.domain, node.opType, "")
                guard let f = functions[k] else {
                    out.append(node)
                    continue
                }
                let what = origin.map { "node '\($0)' (through its model-local functions)" }
                    ?? "node '\(node.name)' (\(node.domain.isEmpty ? "" : node.domain + ".")\(node.opType))"
                if stack.contains(k) {
                    let chain = (stack + [k]).map { functions[$0]?.name ?? "?" }.joined(separator: " → ")
                    throw fail("\(what): model-local function '\(f.name)' calls itself (\(chain))")
                }
                guard stack.count < FunctionInliner.maximumDepth else { throw fail("\(what): model-local functions nest more than \(FunctionInliner.maximumDepth) calls deep") }
                guard node.inputs.count <= f.inputs.count, node.outputs.count <= f.outputs.count else {
                    throw fail("\(what) passes \(node.inputs.count) inputs and \(node.outputs.count) outputs; function '\(f.name)' takes \(f.inputs.count) and \(f.outputs.count)")
                }
                for name in node.attributes.keys where f.attributes[name] == nil {
                    throw fail("\(what) sets attribute '\(name)', which function '\(f.name)' does not take")
                }
                out += try nodes(try expand(node, f), stack: stack + [k], origin: origin ?? node.name)
            }
            return out
        }

        /// The body of `f` for one call, with names bound to the caller's.
        mutating func expand(_ call: ONNXNode, _ f: ONNXFunction) throws -> [ONNXNode] {
            calls += 1
            let prefix = "\(call.name.isEmpty ? f.name : call.name)__\(calls)__"
            var bound: [String: String] = [:]
            for (i, name) in f.inputs.enumerated() { bound[name] = i < call.inputs.count ? call.inputs[i] : "" }
            for (i, name) in f.outputs.enumerated() where i < call.outputs.count && !call.outputs[i].isEmpty { bound[name] = call.outputs[i] }
            var attributes: [String: ONNXAttribute] = [:]
            for (name, fallback) in f.attributes {
                if let v = call.attributes[name] { attributes[name] = v } else if let d = fallback { attributes[name] = d }
            }
            let rename = { (name: String) -> String in name.isEmpty ? "" : bound[name] ?? prefix + name }
            return try f.nodes.map { try bind($0, rename: rename, attributes: attributes, prefix: prefix) }
        }

        /// One body node with its names renamed and attribute references resolved.
        func bind(_ n: ONNXNode, rename: (String) -> String, attributes: [String: ONNXAttribute], prefix: String) throws -> ONNXNode {
            var out = n
            out.name = n.name.isEmpty ? "" : prefix + n.name
            out.inputs = n.inputs.map(rename)
            out.outputs = n.outputs.map(rename)
            var resolved: [String: ONNXAttribute] = [:]
            for (k, v) in n.attributes {
                switch v {
                case .reference(let r):
                    if let value = attributes[r] { resolved[k] = value }
                case .graph(let g):
                    resolved[k] = .graph(try bind(g, rename: rename, attributes: attributes, prefix: prefix))
                default:
                    resolved[k] = v
                }
            }
            out.attributes = resolved
            return out
        }

        /// A subgraph inside a function body: every name renamed as the body's are.
        func bind(_ g: ONNXGraph, rename: (String) -> String, attributes: [String: ONNXAttribute], prefix: String) throws -> ONNXGraph {
            var out = g
            out.nodes = try g.nodes.map { try bind($0, rename: rename, attributes: attributes, prefix: prefix) }
            out.inputs = g.inputs.map { var v = $0; v.name = rename(v.name); return v }
            out.outputs = g.outputs.map { var v = $0; v.name = rename(v.name); return v }
            out.valueInfo = g.valueInfo.map { var v = $0; v.name = rename(v.name); return v }
            out.initializers = g.initializers.map { var t = $0; t.name = rename(t.name); return t }
            return out
        }
    }
}
