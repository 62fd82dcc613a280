/// Structural checks every model passes before it is used or written.
extension PortableModel {
    /// Checks the model is well formed: unique names, valid shapes and encodings,
    /// every value defined once before use, no cycles, ops that fit their schemas.
    /// - Throws: ``PackageError`` naming the field and the problem.
    public func validate() throws {
        guard formatVersion >= PackageFormat.oldestReadableVersion, formatVersion <= PackageFormat.currentVersion else {
            throw PackageError(field: "format_version", reason: "format version \(formatVersion) is not supported (this Kiln reads \(PackageFormat.oldestReadableVersion)–\(PackageFormat.currentVersion))")
        }
        try Validation.text(metadata.name, "metadata.name")
        try Validation.text(metadata.description, "metadata.description")
        try Validation.text(metadata.author, "metadata.author")
        try Validation.text(metadata.license, "metadata.license")
        try Validation.text(metadata.version, "metadata.version")
        for (k, v) in metadata.user {
            guard !k.isEmpty else { throw PackageError(field: "metadata.user", reason: "empty key") }
            try Validation.text(k, "metadata.user key")
            try Validation.text(v, "metadata.user['\(k)']")
        }
        guard computePrecision.isFloatingPoint else {
            throw PackageError(field: "compute_precision", reason: "\(computePrecision.rawValue) is not a floating-point type")
        }
        var weightTypes: [String: TensorType] = [:]
        for (i, w) in weights.enumerated() {
            let field = "weights[\(i)] '\(w.name)'"
            try Validation.name(w.name, field)
            guard weightTypes.updateValue(w.type, forKey: w.name) == nil else {
                throw PackageError(field: field, reason: "duplicate weight name '\(w.name)'")
            }
            try Validation.weight(w, field)
        }
        guard !functions.isEmpty else { throw PackageError(field: "functions", reason: "the model has no functions") }
        var functionNames = Set<String>()
        for (i, f) in functions.enumerated() {
            let field = "functions[\(i)] '\(f.name)'"
            try Validation.name(f.name, field)
            guard functionNames.insert(f.name).inserted else {
                throw PackageError(field: field, reason: "duplicate function name '\(f.name)'")
            }
            try Validation.function(f, field, weights: weightTypes)
        }
    }
}

enum Validation {
    static func text(_ s: String, _ field: String) throws {
        if s.utf8.contains(0) { throw PackageError(field: field, reason: "contains a NUL character") }
    }

    static func name(_ s: String, _ field: String) throws {
        guard !s.isEmpty else { throw PackageError(field: field, reason: "name is empty") }
        try text(s, field)
    }

    /// Checks a fixed shape and returns its byte size in `dtype`.
    @discardableResult
    static func shape(_ shape: [Int], _ dtype: DataType, _ field: String) throws -> Int {
        for (i, d) in shape.enumerated() where d < 0 {
            throw PackageError(field: field, reason: "dim \(i) is negative (\(d))")
        }
        guard shapeExtent(shape) != nil, let n = elementCount(shape), let bytes = dtype.byteCount(elements: n) else {
            throw PackageError(field: field, reason: "shape \(shape) is too large (over 2^48 elements, zero dims counted as one)")
        }
        return bytes
    }

    static func type(_ t: TensorType, _ field: String) throws {
        // Sub-byte types are storage of compressed weight blobs only: no value has one.
        guard !t.dtype.isSubByte else { throw PackageError(field: field, reason: "\(t.dtype.rawValue) is a weight storage type, not a tensor type") }
        var fixed: [Int] = []
        for (i, d) in t.shape.enumerated() {
            switch d {
            case .size(let n):
                guard n >= 0 else { throw PackageError(field: field, reason: "dim \(i) is negative (\(n))") }
                fixed.append(n)
            case .symbol(let s):
                try text(s, field)
            }
        }
        guard shapeExtent(fixed) != nil, let n = elementCount(fixed), t.dtype.byteCount(elements: n) != nil else {
            throw PackageError(field: field, reason: "shape [\(t.shape.map(\.displayText).joined(separator: ", "))] is too large (over 2^48 elements, zero dims counted as one)")
        }
    }

    static func blob(_ b: WeightBlob, _ field: String) throws {
        let bytes = try shape(b.shape, b.dtype, field)
        guard bytes == b.data.count else {
            throw PackageError(field: field, reason: "holds \(b.data.count) bytes, but \(b.dtype.rawValue)\(b.shape) needs \(bytes)")
        }
    }

    /// `small` broadcasts blockwise over `shape`: same rank, each dim divides.
    static func blockwise(_ small: [Int], over shape: [Int], _ field: String) throws {
        guard small.count == shape.count,
              zip(small, shape).allSatisfy({ s, d in s > 0 ? d % s == 0 : d == 0 }) else {
            throw PackageError(field: field, reason: "shape \(small) does not divide the weight's shape \(shape) blockwise")
        }
    }

    static func weight(_ w: Weight, _ field: String) throws {
        guard !w.dtype.isSubByte else {
            throw PackageError(field: field, reason: "a weight's logical dtype cannot be \(w.dtype.rawValue)")
        }
        try shape(w.shape, w.dtype, "\(field).shape")
        switch w.encoding {
        case .dense(let b):
            try blob(b, "\(field).dense")
            guard b.dtype == w.dtype, b.shape == w.shape else {
                throw PackageError(field: "\(field).dense", reason: "blob is \(b.dtype.rawValue)\(b.shape), weight is \(w.dtype.rawValue)\(w.shape)")
            }
        case .quantized(let q):
            guard w.dtype == .float32 || w.dtype == .float16 else {
                throw PackageError(field: field, reason: "a quantized weight must be float32 or float16, not \(w.dtype.rawValue)")
            }
            try blob(q.data, "\(field).quantized.data")
            try blob(q.scale, "\(field).quantized.scale")
            guard [.int8, .uint8, .int4, .uint4].contains(q.data.dtype), q.data.shape == w.shape else {
                throw PackageError(field: "\(field).quantized.data", reason: "must be int8, uint8, int4 or uint4 shaped \(w.shape), got \(q.data.dtype.rawValue)\(q.data.shape)")
            }
            guard q.scale.dtype == .float32 || q.scale.dtype == .float16 else {
                throw PackageError(field: "\(field).quantized.scale", reason: "must be float32 or float16, got \(q.scale.dtype.rawValue)")
            }
            try blockwise(q.scale.shape, over: w.shape, "\(field).quantized.scale")
            if let z = q.zeroPoint {
                try blob(z, "\(field).quantized.zero_point")
                guard z.dtype == q.data.dtype, z.shape == q.scale.shape else {
                    throw PackageError(field: "\(field).quantized.zero_point", reason: "must be \(q.data.dtype.rawValue)\(q.scale.shape), got \(z.dtype.rawValue)\(z.shape)")
                }
            }
        case .palettized(let p):
            guard w.dtype == .float32 || w.dtype == .float16 else {
                throw PackageError(field: field, reason: "a palettized weight must be float32 or float16, not \(w.dtype.rawValue)")
            }
            try blob(p.indices, "\(field).palettized.indices")
            try blob(p.lut, "\(field).palettized.lut")
            guard [.uint1, .uint2, .uint3, .uint4, .uint6, .uint8].contains(p.indices.dtype), p.indices.shape == w.shape else {
                throw PackageError(field: "\(field).palettized.indices", reason: "must be uint1–uint8 shaped \(w.shape), got \(p.indices.dtype.rawValue)\(p.indices.shape)")
            }
            guard p.lut.dtype == .float32 || p.lut.dtype == .float16, p.lut.shape.count == w.shape.count + 1,
                  p.lut.shape.last == 1 << p.indices.dtype.bitWidth else {
                throw PackageError(field: "\(field).palettized.lut", reason: "must be float32 or float16 of rank \(w.shape.count + 1) ending in \(1 << p.indices.dtype.bitWidth) entries, got \(p.lut.dtype.rawValue)\(p.lut.shape)")
            }
            try blockwise(Array(p.lut.shape.dropLast()), over: w.shape, "\(field).palettized.lut")
            if let s = p.scale {
                try blob(s, "\(field).palettized.scale")
                guard s.dtype == .float32 || s.dtype == .float16 else {
                    throw PackageError(field: "\(field).palettized.scale", reason: "must be float32 or float16, got \(s.dtype.rawValue)")
                }
                try blockwise(s.shape, over: w.shape, "\(field).palettized.scale")
            }
        }
    }

    static func function(_ f: Function, _ field: String, weights: [String: TensorType]) throws {
        // Where each value is defined: -1 for inputs and weights, else the op's index.
        var definedAt: [String: Int] = [:]
        for (i, op) in f.operations.enumerated() {
            for v in op.outputs where definedAt[v.name] == nil { definedAt[v.name] = i }
        }
        var scope = weights
        for (i, a) in f.inputs.enumerated() {
            let af = "\(field).inputs[\(i)] '\(a.name)'"
            try name(a.name, af)
            try type(a.type, af)
            guard scope.updateValue(a.type, forKey: a.name) == nil else {
                throw PackageError(field: af, reason: "value '\(a.name)' is defined more than once")
            }
        }
        var opNames = Set<String>()
        for (i, op) in f.operations.enumerated() {
            let of = "\(field) op '\(op.name)'"
            try name(op.name, "\(field).operations[\(i)]")
            guard opNames.insert(op.name).inserted else {
                throw PackageError(field: of, reason: "duplicate op name '\(op.name)'")
            }
            guard let schema = OpSet.schema(op.opType) else {
                throw PackageError(field: of, reason: "unknown op type '\(op.opType)'")
            }
            try text(op.source, "\(of).source")
            // Inputs.
            let maxInputs = schema.variadic ? Int.max : schema.inputs.count
            guard op.inputs.count >= schema.requiredInputCount, op.inputs.count <= maxInputs else {
                throw PackageError(field: of, reason: "\(op.opType) takes \(schema.requiredInputCount)\(maxInputs == schema.requiredInputCount ? "" : maxInputs == Int.max ? " or more" : "–\(maxInputs)") inputs, got \(op.inputs.count)")
            }
            var inputTypes: [TensorType?] = []
            for (k, v) in op.inputs.enumerated() {
                let spec = schema.inputs[min(k, schema.inputs.count - 1)]
                if v.isEmpty {
                    guard spec.optional else {
                        throw PackageError(field: of, reason: "required input \(k) (\(spec.name)) is empty")
                    }
                    inputTypes.append(nil)
                    continue
                }
                guard let t = scope[v] else {
                    throw undefinedUse(v, by: i, in: f, definedAt: definedAt, field: of)
                }
                inputTypes.append(t)
            }
            // Attributes.
            for (key, value) in op.attributes {
                guard let spec = schema.attributes[key] else {
                    throw PackageError(field: of, reason: "\(op.opType) has no attribute '\(key)'")
                }
                guard value.kind == spec.kind else {
                    throw PackageError(field: of, reason: "attribute '\(key)' must be \(spec.kind.rawValue), got \(value.kind.rawValue)")
                }
                // A subgraph is closed: it reads only its own inputs (the op passes them), never
                // the enclosing function's values or the model's weights.
                if case .graph(let body) = value { try function(body, "\(of).\(key)", weights: [:]) }
            }
            for (key, spec) in schema.attributes where spec.required && op.attributes[key] == nil {
                throw PackageError(field: of, reason: "required attribute '\(key)' is missing")
            }
            // Outputs.
            guard schema.outputCount.contains(op.outputs.count) else {
                let range = schema.outputCount
                throw PackageError(field: of, reason: "\(op.opType) has \(range.count == 1 ? "\(range.lowerBound)" : range.upperBound == Int.max ? "\(range.lowerBound) or more" : "\(range.lowerBound)–\(range.upperBound)") output(s), got \(op.outputs.count)")
            }
            do {
                let inferred = try schema.infer(OpSchema.Context(inputs: inputTypes, attributes: op.attributes, outputCount: op.outputs.count))
                for (v, t) in zip(op.outputs, inferred) {
                    guard let t else { continue }
                    if v.type.dtype != t.dtype || v.type.rank != t.rank {
                        throw PackageError(field: of, reason: "output '\(v.name)' is declared \(v.type) but the op gives \(t)")
                    }
                }
            } catch let e as OpError {
                throw PackageError(field: of, reason: e.reason)
            }
            for v in op.outputs {
                try name(v.name, "\(of) output")
                try type(v.type, "\(of) output '\(v.name)'")
                guard scope.updateValue(v.type, forKey: v.name) == nil else {
                    throw PackageError(field: of, reason: "value '\(v.name)' is defined more than once")
                }
            }
        }
        var outputNames = Set<String>()
        for (i, a) in f.outputs.enumerated() {
            let af = "\(field).outputs[\(i)] '\(a.name)'"
            try name(a.name, af)
            try type(a.type, af)
            guard outputNames.insert(a.name).inserted else {
                throw PackageError(field: af, reason: "duplicate output name '\(a.name)'")
            }
            guard let t = scope[a.value] else {
                throw PackageError(field: af, reason: "returns value '\(a.value)', which is not defined")
            }
            // A float value may be returned as another float type (floats are computed in float32).
            let sameType = t.dtype == a.type.dtype || (t.dtype.isFloatingPoint && a.type.dtype.isFloatingPoint)
            guard sameType, t.rank == a.type.rank else {
                throw PackageError(field: af, reason: "declared \(a.type) but value '\(a.value)' is \(t)")
            }
        }
        try states(f, field)
    }

    /// Each state pairs an input and an output of one dtype and rank, each named by one state at most.
    static func states(_ f: Function, _ field: String) throws {
        var inputs = Set<String>(), outputs = Set<String>()
        for (i, pair) in f.states.enumerated() {
            let sf = "\(field).states[\(i)]"
            guard let a = f.inputs.first(where: { $0.name == pair.input }) else {
                throw PackageError(field: sf, reason: "names input '\(pair.input)', which the function does not have")
            }
            guard let b = f.outputs.first(where: { $0.name == pair.output }) else {
                throw PackageError(field: sf, reason: "names output '\(pair.output)', which the function does not have")
            }
            guard a.type.dtype == b.type.dtype, a.type.rank == b.type.rank else {
                throw PackageError(field: sf, reason: "input '\(a.name)' is \(a.type) but output '\(b.name)' is \(b.type)")
            }
            guard inputs.insert(a.name).inserted, outputs.insert(b.name).inserted else {
                throw PackageError(field: sf, reason: "input '\(a.name)' or output '\(b.name)' is in more than one state")
            }
        }
    }

    /// The error for a use of a value that is not (yet) defined: a cycle when the
    /// defining op depends on the user, else a use before definition.
    static func undefinedUse(_ value: String, by user: Int, in f: Function, definedAt: [String: Int], field: String) -> PackageError {
        guard let def = definedAt[value], def >= user else {
            return PackageError(field: field, reason: "input '\(value)' is not defined")
        }
        if def == user {
            return PackageError(field: field, reason: "cycle: op '\(f.operations[user].name)' consumes its own output '\(value)'")
        }
        // Search from the defining op back through its inputs for `user`.
        var parent: [Int: Int] = [def: -1]
        var stack = [def]
        while let op = stack.popLast() {
            for input in f.operations[op].inputs {
                guard let d = definedAt[input], d >= user else { continue }
                if d == user {
                    // Values flow user → op → … → def → user.
                    var path = [f.operations[user].name]
                    var k = op
                    while true {
                        path.append(f.operations[k].name)
                        guard let p = parent[k], p >= 0 else { break }
                        k = p
                    }
                    path.append(f.operations[user].name)
                    return PackageError(field: field, reason: "cycle: " + path.joined(separator: " → "))
                }
                if parent[d] == nil {
                    parent[d] = op
                    stack.append(d)
                }
            }
        }
        return PackageError(field: field, reason: "input '\(value)' is used before its definition by op '\(f.operations[def].name)'")
    }
}

extension Weight {
    /// Checks what a generic decoder relies on before it reads the blobs: a dense blob of a
    /// whole-byte type (read in its own shape: a compiled artifact keeps some dense weights in
    /// a kernel's layout), and for compressed encodings everything a package's reader checks
    /// (dtype, shapes, storage types, blockwise scales). An artifact's weights are not
    /// validated as a package's when it loads, so decoders call this first.
    /// - Throws: ``PackageError`` naming the weight and the problem.
    public func validateEncoding() throws {
        let field = "weight '\(name)'"
        if case .dense(let b) = encoding {
            guard !b.dtype.isSubByte, !dtype.isSubByte else {
                throw PackageError(field: "\(field).dense", reason: "blob is \(b.dtype.rawValue)\(b.shape), weight is \(dtype.rawValue)\(shape): a dense blob holds whole-byte elements")
            }
            try Validation.blob(b, "\(field).dense")
            return
        }
        try Validation.weight(self, field)
    }
}

extension Function {
    /// Checks `pairs` as this function's states: each names an input and an output of one dtype
    /// and rank, each input and output in one pair at most.
    /// - Throws: ``PackageError`` naming the pair and what is wrong.
    public func checkStates(_ pairs: [StatePair]) throws {
        var f = self
        f.states = pairs
        try Validation.states(f, "function '\(name)'")
    }
}
