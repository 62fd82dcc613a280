import CKilnSpecs

/// The one choke point between Kiln's Swift model types and the protobuf-c code
/// generated from `specs/kiln_model.proto`.
///
/// Decoding never trusts the bytes: every enum value, count and string is checked
/// and reported as a ``PackageError`` naming the field.
package enum ManifestCodec {
    // MARK: Data types

    /// Proto enum numbers of ``DataType`` (specs/kiln_model.proto).
    static let dataTypeNumbers: [DataType: UInt32] = [
        .float32: 1, .float16: 2, .bfloat16: 3, .int64: 4, .int32: 5, .int16: 6, .int8: 7,
        .uint8: 8, .bool: 9, .int4: 10, .uint1: 11, .uint2: 12, .uint3: 13, .uint4: 14, .uint6: 15,
        .float64: 16, .uint16: 17, .uint32: 18, .uint64: 19,
    ]
    static let dataTypesByNumber: [UInt32: DataType] = Dictionary(
        uniqueKeysWithValues: dataTypeNumbers.map { ($0.value, $0.key) })

    static func decode(_ raw: Kiln__DataType, _ field: String) throws -> DataType {
        let n = UInt32(truncatingIfNeeded: raw.rawValue)
        guard let t = dataTypesByNumber[n] else {
            throw PackageError(field: field, reason: n == 0 ? "dtype is not set" : "unknown dtype \(n)")
        }
        return t
    }

    static func encode(_ t: DataType) -> Kiln__DataType {
        Kiln__DataType(rawValue: numericCast(dataTypeNumbers[t]!))
    }

    // MARK: Decoding

    /// Decodes a manifest payload (the protobuf after the file header).
    /// - Parameter payload: The protobuf bytes.
    /// - Returns: The decoded contents.
    /// - Throws: ``PackageError`` when the bytes are not a valid manifest.
    package static func decode(_ payload: UnsafeRawBufferPointer) throws -> ManifestContents {
        let base = payload.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard !ProtobufNesting.tooDeep(payload, root: .model, limit: ProtobufNesting.kilnLimit, child: ProtobufNesting.kilnChild) else {
            throw PackageError(reason: "manifest nests subgraphs deeper than 16 levels")
        }
        guard let m = kiln__model__unpack(nil, payload.count, base) else {
            throw PackageError(reason: "manifest protobuf is malformed (truncated or corrupt)")
        }
        defer { kiln__model__free_unpacked(m, nil) }
        return try decodeModel(m.pointee)
    }

    static func string(_ p: UnsafeMutablePointer<CChar>?, _ field: String) throws -> String {
        guard let p else { return "" }
        guard let s = String(validatingCString: p) else {
            throw PackageError(field: field, reason: "string is not valid UTF-8")
        }
        return s
    }

    static func strings(_ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ field: String) throws -> [String] {
        guard n > 0, let p else { return [] }
        return try (0 ..< n).map { try string(p[$0], "\(field)[\($0)]") }
    }

    /// Visits the messages of a repeated field, failing on a null entry.
    static func each<T, R>(_ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ field: String,
                           _ body: (T, String) throws -> R) throws -> [R] {
        guard n > 0 else { return [] }
        guard let p else { throw PackageError(field: field, reason: "missing entries") }
        var out: [R] = []
        out.reserveCapacity(n)
        for i in 0 ..< n {
            guard let e = p[i] else { throw PackageError(field: "\(field)[\(i)]", reason: "missing entry") }
            out.append(try body(e.pointee, "\(field)[\(i)]"))
        }
        return out
    }

    static func ints(_ n: Int, _ p: UnsafeMutablePointer<Int64>?) -> [Int] {
        guard n > 0, let p else { return [] }
        return (0 ..< n).map { Int(truncatingIfNeeded: p[$0]) }
    }

    static func decodeModel(_ m: Kiln__Model) throws -> ManifestContents {
        let meta = try decodeMetadata(m.metadata?.pointee)
        let precision = try decode(m.compute_precision, "compute_precision")
        let weights = try each(m.n_weights, m.weights, "weights") { w, f in try decodeWeight(w, f) }
        let functions = try each(m.n_functions, m.functions, "functions") { fn, f in try decodeFunction(fn, f) }
        guard let fileSize = Int(exactly: m.weights_file_size) else {
            throw PackageError(field: "weights_file_size", reason: "\(m.weights_file_size) does not fit in Int")
        }
        return ManifestContents(
            formatVersion: Int(m.format_version), metadata: meta, computePrecision: precision,
            weights: weights, functions: functions,
            weightsFile: try string(m.weights_file, "weights_file"), weightsFileSize: fileSize)
    }

    static func decodeMetadata(_ m: Kiln__Metadata?) throws -> Metadata {
        guard let m else { return Metadata() }
        var user: [String: String] = [:]
        let pairs = try each(m.n_user, m.user, "metadata.user") { kv, f in
            (try string(kv.key, "\(f).key"), try string(kv.value, "\(f).value"))
        }
        for (k, v) in pairs {
            guard user.updateValue(v, forKey: k) == nil else {
                throw PackageError(field: "metadata.user", reason: "duplicate key '\(k)'")
            }
        }
        return Metadata(
            name: try string(m.name, "metadata.name"),
            description: try string(m.description, "metadata.description"),
            author: try string(m.author, "metadata.author"),
            license: try string(m.license, "metadata.license"),
            version: try string(m.version, "metadata.version"),
            user: user)
    }

    static func decodeType(_ t: UnsafeMutablePointer<Kiln__TensorType>?, _ field: String) throws -> TensorType {
        guard let t = t?.pointee else { throw PackageError(field: field, reason: "type is missing") }
        let dtype = try decode(t.dtype, "\(field).dtype")
        let dims = try each(t.n_shape, t.shape, "\(field).shape") { d, f -> Dimension in
            switch d.kind_case {
            case KILN__DIMENSION__KIND_SIZE: return .size(Int(truncatingIfNeeded: d.size))
            case KILN__DIMENSION__KIND_SYMBOL: return .symbol(try string(d.symbol, f))
            default: throw PackageError(field: f, reason: "dimension has neither a size nor a symbol")
            }
        }
        return TensorType(dtype, dims)
    }

    static func decodeArgument(_ a: Kiln__Argument, _ field: String) throws -> Argument {
        let name = try string(a.name, "\(field).name")
        let value = try string(a.value, "\(field).value")
        return Argument(name: name, type: try decodeType(a.type, field), value: value.isEmpty ? name : value)
    }

    static func decodeFunction(_ fn: Kiln__Function, _ field: String) throws -> Function {
        let name = try string(fn.name, "\(field).name")
        let f = "\(field) '\(name)'"
        return Function(
            name: name,
            inputs: try each(fn.n_inputs, fn.inputs, "\(f).inputs", decodeArgument),
            outputs: try each(fn.n_outputs, fn.outputs, "\(f).outputs", decodeArgument),
            operations: try each(fn.n_operations, fn.operations, "\(f).operations", decodeOperation),
            states: try each(fn.n_states, fn.states, "\(f).states") { s, sf in
                StatePair(input: try string(s.input, "\(sf).input"), output: try string(s.output, "\(sf).output"))
            })
    }

    static func decodeOperation(_ op: Kiln__Operation, _ field: String) throws -> Operation {
        let name = try string(op.name, "\(field).name")
        let f = "\(field) '\(name)'"
        var attributes: [String: AttributeValue] = [:]
        let pairs = try each(op.n_attributes, op.attributes, "\(f).attributes", decodeAttribute)
        for (k, v) in pairs {
            guard attributes.updateValue(v, forKey: k) == nil else {
                throw PackageError(field: "\(f).attributes", reason: "duplicate attribute '\(k)'")
            }
        }
        return Operation(
            opType: try string(op.op_type, "\(f).op_type"),
            name: name,
            inputs: try strings(op.n_inputs, op.inputs, "\(f).inputs"),
            outputs: try each(op.n_outputs, op.outputs, "\(f).outputs") { v, vf in
                Value(name: try string(v.name, "\(vf).name"), type: try decodeType(v.type, vf))
            },
            attributes: attributes,
            source: try string(op.source, "\(f).source"))
    }

    static func decodeAttribute(_ a: Kiln__Attribute, _ field: String) throws -> (String, AttributeValue) {
        let name = try string(a.name, "\(field).name")
        let f = "\(field) '\(name)'"
        let value: AttributeValue
        switch a.value_case {
        case KILN__ATTRIBUTE__VALUE_INT_VALUE: value = .int(Int(truncatingIfNeeded: a.int_value))
        case KILN__ATTRIBUTE__VALUE_FLOAT_VALUE: value = .float(a.float_value)
        case KILN__ATTRIBUTE__VALUE_STRING_VALUE: value = .string(try string(a.string_value, f))
        case KILN__ATTRIBUTE__VALUE_INTS:
            value = .ints(a.ints.map { ints($0.pointee.n_values, $0.pointee.values) } ?? [])
        case KILN__ATTRIBUTE__VALUE_FLOATS:
            value = .floats(a.floats.map { l in
                l.pointee.n_values > 0 && l.pointee.values != nil
                    ? (0 ..< l.pointee.n_values).map { l.pointee.values[$0] } : []
            } ?? [])
        case KILN__ATTRIBUTE__VALUE_STRINGS:
            value = .strings(try a.strings.map { try strings($0.pointee.n_values, $0.pointee.values, f) } ?? [])
        case KILN__ATTRIBUTE__VALUE_TENSOR:
            guard let t = a.tensor?.pointee else { throw PackageError(field: f, reason: "tensor is missing") }
            let bytes: [UInt8] = t.data.len > 0 && t.data.data != nil
                ? Array(UnsafeBufferPointer(start: t.data.data, count: t.data.len)) : []
            value = .tensor(TensorLiteral(
                dtype: try decode(t.dtype, "\(f).dtype"), shape: ints(t.n_shape, t.shape), bytes: bytes))
        case KILN__ATTRIBUTE__VALUE_DTYPE: value = .dtype(try decode(a.dtype, f))
        case KILN__ATTRIBUTE__VALUE_GRAPH:
            guard let g = a.graph?.pointee else { throw PackageError(field: f, reason: "graph is missing") }
            value = .graph(try decodeFunction(g, "\(f).graph"))
        default: throw PackageError(field: f, reason: "attribute has no value")
        }
        return (name, value)
    }

    static func decodeBlob(_ b: UnsafeMutablePointer<Kiln__Blob>?, _ field: String) throws -> BlobRecord? {
        guard let b = b?.pointee else { return nil }
        guard let offset = Int(exactly: b.offset), let length = Int(exactly: b.byte_length) else {
            throw PackageError(field: field, reason: "offset \(b.offset) or byte length \(b.byte_length) does not fit in Int")
        }
        return BlobRecord(
            dtype: try decode(b.dtype, "\(field).dtype"), shape: ints(b.n_shape, b.shape),
            location: BlobLocation(offset: offset, byteLength: length, crc32: b.crc32))
    }

    static func requiredBlob(_ b: UnsafeMutablePointer<Kiln__Blob>?, _ field: String) throws -> BlobRecord {
        guard let r = try decodeBlob(b, field) else { throw PackageError(field: field, reason: "blob is missing") }
        return r
    }

    static func decodeWeight(_ w: Kiln__Weight, _ field: String) throws -> WeightRecord {
        let name = try string(w.name, "\(field).name")
        let f = "\(field) '\(name)'"
        let encoding: WeightRecord.Encoding
        switch w.encoding_case {
        case KILN__WEIGHT__ENCODING_DENSE:
            encoding = .dense(try requiredBlob(w.dense, "\(f).dense"))
        case KILN__WEIGHT__ENCODING_QUANTIZED:
            guard let q = w.quantized?.pointee else { throw PackageError(field: f, reason: "quantized encoding is missing") }
            encoding = .quantized(
                data: try requiredBlob(q.data, "\(f).quantized.data"),
                scale: try requiredBlob(q.scale, "\(f).quantized.scale"),
                zeroPoint: try decodeBlob(q.zero_point, "\(f).quantized.zero_point"))
        case KILN__WEIGHT__ENCODING_PALETTIZED:
            guard let p = w.palettized?.pointee else { throw PackageError(field: f, reason: "palettized encoding is missing") }
            encoding = .palettized(
                indices: try requiredBlob(p.indices, "\(f).palettized.indices"),
                lut: try requiredBlob(p.lut, "\(f).palettized.lut"),
                scale: try decodeBlob(p.scale, "\(f).palettized.scale"))
        default:
            throw PackageError(field: f, reason: "weight has no encoding")
        }
        return WeightRecord(
            name: name, dtype: try decode(w.dtype, "\(f).dtype"), shape: ints(w.n_shape, w.shape), encoding: encoding)
    }
}
