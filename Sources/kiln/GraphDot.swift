import Foundation
import KilnFormat

/// Graphviz DOT of one function (`kiln inspect --dot`, `specs/cli.md`): inputs and outputs as
/// ellipses, ops as boxes (op type, name, the artifact's kernel, fused epilogues), weights as
/// notes (storage encoding and size), edges labeled with the tensor's dtype and shape. Ops are
/// grouped into nested clusters by the `/`-separated prefix of their names (the source model's
/// modules), and with `collapse` a cluster whose ops repeat an earlier sibling's (layer 1 … n
/// of a transformer) is drawn as one node that names them.
struct GraphDot {
    var function: Function
    var weights: [String: Weight]
    /// The kernel of each op (artifacts), in op order.
    var kernels: [String]?
    /// The step config of each op (artifacts), in op order.
    var configs: [StepConfig]? = nil
    var title: String
    var depth = 8
    var collapse = true

    /// The module path of an op: its name's `/`-separated prefix, at most `depth` segments.
    func modulePath(_ op: KilnFormat.Operation) -> [String] {
        let parts = op.name.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        return Array(parts.dropLast().prefix(depth))
    }

    /// A module: its own ops and its child modules, in the order they first appear.
    final class Cluster {
        let name: String
        let path: [String]
        var children: [String: Cluster] = [:]
        var order: [String] = []
        var ops: [Int] = []
        init(name: String, path: [String]) {
            self.name = name
            self.path = path
        }
        func child(_ name: String) -> Cluster {
            if let c = children[name] { return c }
            let c = Cluster(name: name, path: path + [name])
            children[name] = c
            order.append(name)
            return c
        }
        /// Every op below, in op order.
        var allOps: [Int] { (ops + order.flatMap { children[$0]!.allOps }).sorted() }
    }

    /// `s` as the inside of a DOT string: quotes, backslashes and newlines escaped, other controls spaces.
    static func escape(_ s: String) -> String {
        var out = ""
        for c in s.unicodeScalars {
            switch c {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(c.value < 0x20 ? " " : c)
            }
        }
        return out
    }

    /// A tensor type as an edge label.
    static func typeText(_ t: TensorType) -> String { "\(t)" }

    /// The DOT text: the graph's attributes, inputs and outputs, the clusters of ops (repeats
    /// collapsed), then the weights and the edges.
    func render() -> String {
        let ops = function.operations
        var producer: [String: Int] = [:]
        var valueType: [String: TensorType] = [:]
        for (i, op) in ops.enumerated() {
            for v in op.outputs {
                producer[v.name] = i
                valueType[v.name] = v.type
            }
        }
        for a in function.inputs { valueType[a.name] = a.type }
        let root = clusters()
        var repeats = Repeats()
        findRepeats(root, into: &repeats)

        var s = "digraph \"\(Self.escape(title))\" {\n"
        s += "  graph [rankdir=TB, fontname=\"Helvetica\", fontsize=11, label=\"\(Self.escape(title))\", labelloc=t, newrank=true];\n"
        s += "  node [fontname=\"Helvetica\", fontsize=10];\n  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n"
        for (k, a) in function.inputs.enumerated() {
            s += "  in\(k) [shape=ellipse, style=filled, fillcolor=\"#d8ecd8\", label=\"\(Self.escape("\(a.name)\n\(Self.typeText(a.type))"))\"];\n"
        }
        for (k, a) in function.outputs.enumerated() {
            s += "  out\(k) [shape=ellipse, style=filled, fillcolor=\"#f6dcc8\", label=\"\(Self.escape("\(a.name)\n\(Self.typeText(a.type))"))\"];\n"
        }
        emit(root, indent: "  ", repeats: repeats, into: &s)
        connect(producer: producer, valueType: valueType, repeats: repeats, into: &s)
        s += "}\n"
        return s
    }

    /// The ops in clusters by module path.
    func clusters() -> Cluster {
        let root = Cluster(name: "", path: [])
        for (i, op) in function.operations.enumerated() {
            var c = root
            for part in modulePath(op) { c = c.child(part) }
            c.ops.append(i)
        }
        return root
    }

    /// Collapsed clusters: each op inside one maps to its group's summary node.
    struct Repeats {
        var collapsedNode: [Int: String] = [:]
        var summaries: [(cluster: Cluster, node: String, label: String)] = []

        /// The node that draws op `i`: its own, or its collapsed group's.
        func node(_ i: Int) -> String { collapsedNode[i] ?? "op\(i)" }
    }

    /// What a cluster's ops are, relative to the cluster: one op type and module path each.
    func signature(_ c: Cluster) -> [String] {
        let ops = function.operations
        return c.allOps.map { "\(ops[$0].opType)|\(modulePath(ops[$0]).dropFirst(c.path.count).joined(separator: "/"))" }
    }

    /// With `collapse`, the children of `c` (and below) that repeat an earlier sibling's ops (at
    /// least 3), taken out of their clusters into `repeats`, one summary node per repeated kind.
    func findRepeats(_ c: Cluster, into repeats: inout Repeats) {
        guard collapse else { return }
        var firstBySignature: [[String]: (String, [String])] = [:]
        var groups: [[String]: [String]] = [:]
        for name in c.order {
            let child = c.children[name]!
            let sig = signature(child)
            if child.allOps.count >= 3, firstBySignature[sig] != nil {
                groups[sig, default: []].append(name)
            } else if firstBySignature[sig] == nil {
                firstBySignature[sig] = (name, [])
            }
        }
        for (sig, names) in groups.sorted(by: { $0.value.first! < $1.value.first! }) {
            let first = firstBySignature[sig]!.0
            let node = "collapsed_\(repeats.summaries.count)"
            let count = c.children[first]!.allOps.count
            let label = "\(names.count) more like \(first)\n\(names.first!)\(names.count > 1 ? " … \(names.last!)" : "")\n\(count) ops each"
            for n in names {
                for i in c.children[n]!.allOps { repeats.collapsedNode[i] = node }
                c.children[n] = nil
                c.order.removeAll { $0 == n }
            }
            repeats.summaries.append((c, node, label))
        }
        for name in c.order { findRepeats(c.children[name]!, into: &repeats) }
    }

    /// An op's box: type, last name segment, the artifact's kernel and what its step config adds
    /// (layout, fused activation).
    func opLabel(_ i: Int) -> String {
        let op = function.operations[i]
        var lines = [op.opType, op.name.split(separator: "/").last.map(String.init) ?? op.name]
        if let kernels, i < kernels.count { lines.append("[\(kernels[i])]") }
        if let configs, i < configs.count {
            let c = configs[i]
            if c.layout != .channelsFirst { lines.append("+ layout \(StepConfig(layout: c.layout))") }
            if let a = c.activation { lines.append("+ activation \(StepConfig(activation: a))") }
        }
        return lines.joined(separator: "\n")
    }

    /// Appends the ops (red: run by the reference interpreter), summaries and subclusters of `c`.
    func emit(_ c: Cluster, indent: String, repeats: Repeats, into s: inout String) {
        for i in c.ops where repeats.collapsedNode[i] == nil {
            let reference = kernels.map { i < $0.count && $0[i] == "reference" } ?? false
            s += "\(indent)op\(i) [shape=box, style=\"rounded,filled\", fillcolor=\"\(reference ? "#f4c7c3" : "#dde6f4")\", label=\"\(Self.escape(opLabel(i)))\"];\n"
        }
        for summary in repeats.summaries where summary.cluster === c {
            s += "\(indent)\(summary.node) [shape=box3d, style=filled, fillcolor=\"#ece4f4\", label=\"\(Self.escape(summary.label))\"];\n"
        }
        for name in c.order {
            let child = c.children[name]!
            let id = "cluster_" + child.path.joined(separator: "_").unicodeScalars.map { $0.properties.isAlphabetic || ("0" ... "9").contains($0) ? String($0) : "_" }.joined()
            s += "\(indent)subgraph \"\(Self.escape(id))\" {\n\(indent)  label=\"\(Self.escape(name))\"; style=\"rounded\"; color=\"#9aa7b8\";\n"
            emit(child, indent: indent + "  ", repeats: repeats, into: &s)
            s += "\(indent)}\n"
        }
    }

    /// Appends the weights read by drawn ops, then every edge once: producer to consumer (labeled
    /// with the tensor's type), input to consumer, weight to consumer, and to the outputs.
    func connect(producer: [String: Int], valueType: [String: TensorType], repeats: Repeats, into s: inout String) {
        let ops = function.operations
        let node = repeats.node
        let collapsedNode = repeats.collapsedNode
        var weightNodes: [String: String] = [:]
        var edges = Set<String>()
        var edgeList: [String] = []
        func addEdge(_ from: String, _ to: String, _ label: String?) {
            guard from != to else { return }
            let line = "  \(from) -> \(to)" + (label.map { " [label=\"\(Self.escape($0))\"]" } ?? "") + ";\n"
            if edges.insert("\(from)>\(to)").inserted { edgeList.append(line) }
        }
        let inputIndex = Dictionary(uniqueKeysWithValues: function.inputs.enumerated().map { ($1.name, $0) })
        for (i, op) in ops.enumerated() {
            for name in op.inputs where !name.isEmpty {
                let label = valueType[name].map(Self.typeText)
                if let p = producer[name] {
                    addEdge(node(p), node(i), label)
                } else if let k = inputIndex[name] {
                    addEdge("in\(k)", node(i), nil)
                } else if let w = weights[name], collapsedNode[i] == nil {
                    let id = weightNodes[name] ?? "w\(weightNodes.count)"
                    if weightNodes[name] == nil {
                        weightNodes[name] = id
                        let shape = "[\(w.shape.map(String.init).joined(separator: ", "))]"
                        s += "  \(id) [shape=note, style=filled, fillcolor=\"#f7f3d6\", fontsize=8, label=\"\(Self.escape("\(name.split(separator: "/").last.map(String.init) ?? name)\n\(w.dtype.rawValue)\(shape)\n\(w.storageDescription), \(humanBytes(w.storedBytes))"))\"];\n"
                    }
                    addEdge(id, node(i), nil)
                }
            }
        }
        for (k, a) in function.outputs.enumerated() {
            if let p = producer[a.value] { addEdge(node(p), "out\(k)", nil) } else if let j = inputIndex[a.value] { addEdge("in\(j)", "out\(k)", nil) }
        }
        s += edgeList.joined()
    }
}

extension InspectCommand {
    /// `--dot` / `--svg`: the DOT text of a package's or artifact's function, and its rendering.
    static func graph(_ path: String, _ args: ParsedArguments, keys: ArtifactKeyProvider?) throws {
        let report = try ModelReport.make(path, model: args.value("--model"), keys: keys)
        let functionName = args.value("--function")
        let model: PortableModel
        var kernels: [[String]]?, configs: [[StepConfig]]?
        if let a = report.artifact {
            model = a.plan.model
            kernels = a.plan.functions.map { $0.steps.map(\.kernel) }
            configs = a.plan.functions.map { $0.steps.map(\.config) }
        } else {
            // The report of a package holds its functions; read the package for the weights.
            var base = report.path
            while base.hasSuffix("/") { base.removeLast() }
            let packagePath = FileManager.default.fileExists(atPath: "\(base)/\(PackageFormat.manifestFileName)") ? base
                : ModelDirectory(path: base).package(of: nil) ?? base
            model = try PackageReader.read(at: packagePath)
        }
        guard let index = functionName.map({ n in model.functions.firstIndex { $0.name == n } }) ?? (model.functions.isEmpty ? nil : 0) else {
            throw Failure(message: "\(path): no function '\(functionName ?? "")'; it has \(model.functions.map { "'\($0.name)'" }.joined(separator: ", "))")
        }
        var depth = 8
        if let text = args.value("--depth") {
            guard let d = Int(text), d >= 0 else { throw UsageError(message: "--depth '\(text)' is not a count", command: spec) }
            depth = d
        }
        let f = model.functions[index]
        let arch = report.artifact.map { " (\($0.header.arch))" } ?? ""
        let graph = GraphDot(function: f, weights: Dictionary(model.weights.map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a }),
                             kernels: kernels?[index], configs: configs?[index], title: "\(report.name) — \(f.name)\(arch)", depth: depth,
                             collapse: !args.has("--no-collapse"))
        let dot = graph.render()
        if args.has("--dot") { Console.out(dot) }
        if let svg = args.value("--svg") { try render(dot, to: svg) }
    }

    /// Runs Graphviz's `dot -Tsvg`, writing `file` atomically.
    static func render(_ dot: String, to file: String) throws {
        let search = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        guard let exe = search.map({ "\($0)/dot" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            throw Failure(message: "--svg needs Graphviz's 'dot', which is not installed; install it (Debian: apt-get install graphviz), or write the DOT text with --dot")
        }
        let parent = (file as NSString).deletingLastPathComponent
        var isDir: ObjCBool = false
        guard parent.isEmpty || (FileManager.default.fileExists(atPath: parent, isDirectory: &isDir) && isDir.boolValue) else {
            throw Failure(message: "\(file): the directory \(parent) does not exist")
        }
        let temp = "\(file).tmp-\(getpid())"
        let p = Process()
        p.executableURL = URL(fileURLWithPath: exe)
        p.arguments = ["-Tsvg", "-o", temp]
        let input = Pipe()
        let errors = Pipe()
        p.standardInput = input
        p.standardError = errors
        p.standardOutput = FileHandle.nullDevice
        do { try p.run() } catch { throw Failure(message: "\(exe): cannot run (\(error))") }
        input.fileHandleForWriting.write(Data(dot.utf8))
        try? input.fileHandleForWriting.close()
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        guard p.terminationStatus == 0 else {
            unlink(temp)
            throw Failure(message: "\(file): dot failed: \(message.split(separator: "\n").first ?? "exit \(p.terminationStatus)")")
        }
        guard rename(temp, file) == 0 else {
            unlink(temp)
            throw Failure(message: "\(file): cannot write")
        }
    }
}
