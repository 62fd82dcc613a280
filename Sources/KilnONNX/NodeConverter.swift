import KilnFormat
import KilnReference

/// Converts one ONNX node at a time into Kiln ops, folding what is known.
struct NodeConverter {
    let c: Conversion

    init(_ conversion: Conversion) { c = conversion }

    /// Converts one node whose operator it is registered for: the unapplied instance method
    /// (`NodeConverter.gemm`), applied to the converter, then called with the node.
    typealias Handler = @Sendable (NodeConverter) -> (ONNXNode) throws -> Void

    /// ONNX operators (domain ai.onnx) the importer converts: the keys of the handler table.
    static let supported: Set<String> = Set(handlers.keys)

    /// Attributes of an ONNX node as Kiln attributes (ints, floats, strings, tensors).
    func attributes(_ node: ONNXNode, only keys: Set<String>? = nil, rename: [String: String] = [:]) throws -> [String: AttributeValue] {
        var out: [String: AttributeValue] = [:]
        for (k, v) in node.attributes where keys?.contains(k) ?? true {
            let name = rename[k] ?? k
            switch v {
            case .int(let i): out[name] = .int(i)
            case .float(let f): out[name] = .float(Double(f))
            case .string(let s): out[name] = .string(s)
            case .ints(let l): out[name] = .ints(l)
            case .floats(let l): out[name] = .floats(l.map(Double.init))
            case .strings(let l): out[name] = .strings(l)
            case .tensor(let t):
                let x = try c.narrowed(try t.value.get())
                out[name] = .tensor(TensorLiteral(dtype: x.scalarType, shape: x.shape, bytes: x.bytes))
            default: throw c.fail("node '\(node.name)' (\(node.opType)): attribute '\(k)' has a type Kiln does not support")
            }
        }
        return out
    }

    func known(_ name: String) -> Known? { name.isEmpty ? nil : c.values[name] }

    func constant(_ name: String) -> NDArray? {
        if case .constant(let x)? = known(name) { return x }
        return nil
    }

    /// The integer values of input `i` when known at convert time (fully).
    func staticInts(_ node: ONNXNode, _ i: Int) throws -> [Int]? {
        guard i < node.inputs.count else { return nil }
        if let x = constant(node.inputs[i]) { return try intValues(x) }
        if case .value(_, _, let elements?)? = known(node.inputs[i]) {
            let ints = elements.compactMap(\.int)
            return ints.count == elements.count ? ints : nil
        }
        return nil
    }

    func intValues(_ x: NDArray) throws -> [Int] {
        switch x.scalarType {
        case .int64: return x.scalars(as: Int64.self).map { Int($0) }
        case .int32: return x.scalars(as: Int32.self).map { Int($0) }
        default: throw c.fail("expected an integer tensor, got \(x.scalarType.rawValue)")
        }
    }

    func floatValues(_ x: NDArray) throws -> [Double] {
        guard x.scalarType != .bool, let values = x.doubles() else { throw c.fail("expected a numeric tensor, got \(x.scalarType.rawValue)") }
        return values
    }

    /// The partly known entries of an int vector input (a shape), if any are known.
    func elements(_ name: String) -> [Element]? {
        switch known(name) {
        case .constant(let x)?:
            guard x.rank <= 1, x.elementCount <= 64 else { return nil }
            if x.scalarType == .bool { return x.scalars(as: Bool.self).map { .known($0 ? 1 : 0) } }
            guard x.scalarType == .int64 || x.scalarType == .int32 else { return nil }
            return (try? intValues(x))?.map { .known($0) }
        case .value(_, let t, let e)?:
            if let e { return e }
            // An integer vector of known length with no value known: its entries are unknown, so
            // what is known beside them (a Concat of a run-time batch and static sizes) survives.
            guard t.dtype == .int64 || t.dtype == .int32, t.rank <= 1, let n = t.staticShape?.reduce(1, *), n <= 64 else { return nil }
            return Array(repeating: .unknown, count: n)
        default: return nil
        }
    }

    func type(_ name: String) throws -> TensorType? {
        switch known(name) {
        case nil: return nil
        case .constant(let x)?: return TensorType(x.scalarType, x.shape.map { .size($0) })
        case .value(_, let t, _)?: return t
        }
    }

    // MARK: Emitting

    /// Emits one Kiln op. Inputs are ONNX value names ("" = absent); outputs are ONNX
    /// names. Folds the op when every input is known at convert time.
    @discardableResult
    func emit(_ node: ONNXNode, _ opType: String, _ inputs: [String], _ attributes: [String: AttributeValue],
              outputs: [String]? = nil, elements: [[Element]?] = [], refine: ((Int, TensorType?) -> TensorType?)? = nil) throws -> [Known] {
        var inputs = inputs
        while inputs.last == "" { inputs.removeLast() }
        let outs = outputs ?? node.outputs
        let what = "node '\(node.name)' (\(node.opType))"
        let types = try inputs.map { try type($0) }
        for (name, t) in zip(inputs, types) where !name.isEmpty && t == nil {
            throw c.fail("\(what) reads '\(name)', which is not defined")
        }
        guard let schema = OpSet.schema(opType) else { throw c.fail("\(what): no Kiln op '\(opType)'") }
        var inferred: [TensorType?]
        do {
            inferred = try schema.infer(OpSchema.Context(inputs: types, attributes: attributes, outputCount: outs.count))
        } catch let e as OpError {
            throw c.fail("\(what): \(e.reason)")
        }
        // Fold when everything is known and the op is not a source of run-time values.
        let allConstant = inputs.allSatisfy { $0.isEmpty || constant($0) != nil }
        if allConstant {
            let op = Operation(opType: opType, name: node.name, inputs: inputs, outputs: [], attributes: attributes)
            do {
                let results = try ReferenceInterpreter.evaluate(op, inputs.map { constant($0) })
                var known: [Known] = []
                for (i, (name, r)) in zip(outs, results).enumerated() {
                    var value = r
                    if let t = inferred[i], [.float16, .bfloat16].contains(t.dtype), r.scalarType == .float32 {
                        value = try ReferenceInterpreter.evaluate(
                            Operation(opType: "cast", name: "narrow", inputs: [""], outputs: [], attributes: ["to": .dtype(t.dtype)]), [r])[0]
                        if t.dtype == .bfloat16 {
                            // Already rounded to bfloat16 by the cast: its upper 16 bits are exact.
                            let floats = value.scalars(as: Float.self)
                            var bf = NDArray(shape: value.shape, scalarType: .bfloat16)
                            bf.withUnsafeMutableBytes { raw in
                                for (i, f) in floats.enumerated() { raw.storeBytes(of: UInt16(truncatingIfNeeded: f.bitPattern >> 16), toByteOffset: 2 * i, as: UInt16.self) }
                            }
                            value = bf
                        } else {
                            value = NDArray(shape: value.shape, scalars: value.scalars(as: Float.self).map { Float16($0) })
                        }
                    }
                    if !name.isEmpty { c.values[name] = .constant(value) }
                    known.append(.constant(value))
                }
                return known
            } catch let e as OpError {
                throw c.fail("\(what): \(e.reason)")
            }
        }
        var operandNames: [String] = []
        for name in inputs {
            if name.isEmpty { operandNames.append(""); continue }
            operandNames.append(try c.operand(name, known(name)!).0)
        }
        var results: [Known] = []
        var values: [Value] = []
        for (i, name) in outs.enumerated() {
            var t = inferred.indices.contains(i) ? inferred[i] : nil
            if let refine { t = refine(i, t) }
            if t == nil, let info = c.valueInfo[name], let code = info.dtype, let dtype = ONNXDecoder.dtypes[code], let shape = info.shape {
                t = TensorType(dtype == .float64 ? .float32 : dtype, shape.map { _ in .unknown })
            }
            guard let type = t else { throw c.fail("\(what): cannot infer the type of output '\(name)'") }
            let valueName = c.freshName(name.isEmpty ? "\(node.name)_unused\(i)" : name)
            values.append(Value(name: valueName, type: type))
            let known = Known.value(name: valueName, type: type, elements: i < elements.count ? elements[i] : nil)
            if !name.isEmpty { c.values[name] = known }
            results.append(known)
        }
        c.operations.append(Operation(opType: opType, name: c.freshOpName(node.name.isEmpty ? "\(opType)" : node.name),
                                      inputs: operandNames, outputs: values, attributes: attributes, source: node.name))
        return results
    }

    func alias(_ node: ONNXNode) throws {
        guard let first = node.inputs.first, let k = known(first) else {
            throw c.fail("node '\(node.name)' (\(node.opType)) has no input")
        }
        c.values[node.outputs[0]] = k
        // Dropout's optional mask output is all true in inference.
        if node.outputs.count > 1, !node.outputs[1].isEmpty, let t = try type(first), let shape = t.staticShape {
            c.values[node.outputs[1]] = .constant(NDArray(shape: shape, scalars: [Bool](repeating: true, count: shape.reduce(1, *))))
        }
    }

    func int(_ node: ONNXNode, _ name: String, _ fallback: Int) -> Int {
        if case .int(let v)? = node.attributes[name] { return v }
        return fallback
    }

    func float(_ node: ONNXNode, _ name: String, _ fallback: Float) -> Float {
        if case .float(let v)? = node.attributes[name] { return v }
        return fallback
    }

    func ints(_ node: ONNXNode, _ name: String) -> [Int]? {
        if case .ints(let v)? = node.attributes[name] { return v }
        return nil
    }

    func input(_ node: ONNXNode, _ i: Int) -> String { i < node.inputs.count ? node.inputs[i] : "" }
}

extension NDArray {
    static func int64vector(_ values: [Int]) -> NDArray {
        NDArray(shape: [values.count], scalars: values.map { Int64($0) })
    }
}
