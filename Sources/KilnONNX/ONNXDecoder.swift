import CKilnSpecs
import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// The one choke point between protobuf-c's ONNX structures (specs/onnx_subset.proto)
/// and Kiln's Swift view of a model. Every count, string and tensor length is checked.
enum ONNXDecoder {
    /// ONNX element type numbers → Kiln dtypes (double is narrowed to float32 by the importer).
    static let dtypes: [Int32: DataType] = [
        1: .float32, 2: .uint8, 3: .int8, 4: .uint16, 5: .int16, 6: .int32, 7: .int64, 9: .bool, 10: .float16,
        11: .float64, 12: .uint32, 13: .uint64, 16: .bfloat16,
    ]
    static let dtypeNames: [Int32: String] = [
        0: "undefined", 1: "float", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
        8: "string", 9: "bool", 10: "float16", 11: "double", 12: "uint32", 13: "uint64", 14: "complex64",
        15: "complex128", 16: "bfloat16", 17: "float8e4m3fn", 18: "float8e4m3fnuz", 19: "float8e5m2",
        20: "float8e5m2fnuz", 21: "uint4", 22: "int4",
    ]

    /// Reads and decodes an ONNX file.
    static func read(_ path: String) throws -> ONNXModel {
        try decode(try readFile(path), path: path)
    }

    /// Decodes the bytes of an ONNX file; `path` names it in errors and locates external data.
    static func decode(_ bytes: [UInt8], path: String) throws -> ONNXModel {
        // protobuf-c parses nested messages recursively; refuse absurd nesting first.
        if bytes.withUnsafeBufferPointer({ NestingCheck.tooDeep($0) }) {
            throw ConvertError(path: path, reason: "not a valid ONNX model (messages nested more than 64 levels deep)")
        }
        guard let m = bytes.withUnsafeBufferPointer({ kiln_onnx__model_proto__unpack(nil, $0.count, $0.baseAddress) }) else {
            throw ConvertError(path: path, reason: "not a valid ONNX model (the protobuf is truncated or malformed)")
        }
        defer { kiln_onnx__model_proto__free_unpacked(m, nil) }
        let context = Context(path: path, directory: parent(path))
        return try context.model(m.pointee)
    }

    static func readFile(_ path: String) throws -> [UInt8] {
        guard let f = fopen(path, "rb") else {
            throw ConvertError(path: path, reason: "cannot open: \(String(cString: strerror(errno)))")
        }
        defer { fclose(f) }
        var st = stat()
        guard fstat(fileno(f), &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else {
            throw ConvertError(path: path, reason: "not a regular file")
        }
        var out = [UInt8](repeating: 0, count: Int(st.st_size))
        let n = out.withUnsafeMutableBytes { fread($0.baseAddress, 1, $0.count, f) }
        guard n == out.count else { throw ConvertError(path: path, reason: "read failed") }
        return out
    }

    static func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let dir = String(path[..<slash])
        return dir.isEmpty ? "/" : dir
    }

    struct Context {
        var path: String
        var directory: String

        func fail(_ reason: String) -> ConvertError { ConvertError(path: path, reason: reason) }

        func string(_ p: UnsafeMutablePointer<CChar>?) throws -> String {
            guard let p else { return "" }
            guard let s = String(validatingCString: p) else { throw fail("a name is not valid UTF-8") }
            return s
        }

        func bytesString(_ b: ProtobufCBinaryData) -> String {
            guard b.len > 0, let d = b.data else { return "" }
            return String(decoding: UnsafeBufferPointer(start: d, count: b.len), as: UTF8.self)
        }

        func list<T, R>(_ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<T>?>?, _ body: (T) throws -> R) throws -> [R] {
            guard n > 0 else { return [] }
            guard let p else { throw fail("a repeated field is missing its entries") }
            return try (0 ..< n).map { i in
                guard let e = p[i] else { throw fail("a repeated field has a missing entry") }
                return try body(e.pointee)
            }
        }

        func strings(_ n: Int, _ p: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) throws -> [String] {
            guard n > 0, let p else { return [] }
            return try (0 ..< n).map { try string(p[$0]) }
        }

        func model(_ m: KilnOnnx__ModelProto) throws -> ONNXModel {
            var opsets: [String: Int] = [:]
            for (domain, version) in try list(m.n_opset_import, m.opset_import, { (try string($0.domain), Int($0.version)) }) {
                opsets[domain == "ai.onnx" ? "" : domain] = version
            }
            guard let g = m.graph?.pointee else { throw fail("the model has no graph") }
            return ONNXModel(
                irVersion: Int(m.ir_version), producerName: try string(m.producer_name),
                producerVersion: try string(m.producer_version), modelVersion: Int(m.model_version),
                docString: try string(m.doc_string), opsets: opsets,
                metadata: try list(m.n_metadata_props, m.metadata_props) { (try string($0.key), try string($0.value)) },
                graph: try graph(g), functions: try list(m.n_functions, m.functions, function))
        }

        func function(_ f: KilnOnnx__FunctionProto) throws -> ONNXFunction {
            var attributes: [String: ONNXAttribute?] = [:]
            for a in try strings(f.n_attribute, f.attribute) { attributes[a] = .some(nil) }
            for (k, v) in try list(f.n_attribute_proto, f.attribute_proto, attribute) { attributes[k] = v }
            return ONNXFunction(name: try string(f.name), domain: try string(f.domain), overload: try string(f.overload),
                                inputs: try strings(f.n_input, f.input), outputs: try strings(f.n_output, f.output),
                                attributes: attributes, nodes: try list(f.n_node, f.node, node))
        }

        func graph(_ g: KilnOnnx__GraphProto) throws -> ONNXGraph {
            if g.n_sparse_initializer > 0 { throw fail("sparse initializers are not supported") }
            return ONNXGraph(
                nodes: try list(g.n_node, g.node, node),
                initializers: try list(g.n_initializer, g.initializer, tensor),
                inputs: try list(g.n_input, g.input, valueInfo),
                outputs: try list(g.n_output, g.output, valueInfo),
                valueInfo: try list(g.n_value_info, g.value_info, valueInfo))
        }

        func valueInfo(_ v: KilnOnnx__ValueInfoProto) throws -> ONNXValueInfo {
            let name = try string(v.name)
            guard let t = v.type?.pointee, t.value_case == KILN_ONNX__TYPE_PROTO__VALUE_TENSOR_TYPE,
                  let tensor = t.tensor_type?.pointee else {
                return ONNXValueInfo(name: name, dtype: nil, shape: nil)
            }
            var shape: [Dimension]?
            if let s = tensor.shape?.pointee {
                shape = try list(s.n_dim, s.dim) { d -> Dimension in
                    switch d.value_case {
                    case KILN_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_VALUE:
                        return d.dim_value >= 0 ? .size(Int(d.dim_value)) : .unknown
                    case KILN_ONNX__TENSOR_SHAPE_PROTO__DIMENSION__VALUE_DIM_PARAM:
                        // A name ties dims together; "?", "-1" and other non-names (as some exporters
                        // write for "unknown") tie nothing.
                        let param = try string(d.dim_param)
                        guard let first = param.unicodeScalars.first, first == "_" || first.properties.isAlphabetic else { return .unknown }
                        // A name that is an expression of other dims' names (`past_sequence_length +
                        // sequence_length`) is spelled as Kiln spells the expressions it infers.
                        if let e = DimExpression(parsing: param), !e.symbols.isEmpty { return e.dimension }
                        return .symbol(param)
                    default: return .unknown
                    }
                }
            }
            return ONNXValueInfo(name: name, dtype: tensor.has_elem_type != 0 ? tensor.elem_type : nil, shape: shape)
        }

        func node(_ n: KilnOnnx__NodeProto) throws -> ONNXNode {
            var attributes: [String: ONNXAttribute] = [:]
            for (k, v) in try list(n.n_attribute, n.attribute, attribute) { attributes[k] = v }
            return ONNXNode(
                name: try string(n.name), opType: try string(n.op_type), domain: try string(n.domain),
                inputs: try strings(n.n_input, n.input), outputs: try strings(n.n_output, n.output), attributes: attributes)
        }

        func attribute(_ a: KilnOnnx__AttributeProto) throws -> (String, ONNXAttribute) {
            let name = try string(a.name)
            if let reference = a.ref_attr_name, reference.pointee != 0 { return (name, .reference(try string(reference))) }
            var type = a.has_type != 0 ? Int(a.type.rawValue) : 0
            if type == 0 {
                // Old writers leave `type` unset; infer it from the field present.
                type = a.has_f != 0 ? 1 : a.has_i != 0 ? 2 : a.has_s != 0 ? 3 : a.t != nil ? 4 : a.g != nil ? 5
                    : a.n_floats > 0 ? 6 : a.n_ints > 0 ? 7 : a.n_strings > 0 ? 8 : 0
            }
            let value: ONNXAttribute
            switch type {
            case 1: value = .float(a.f)
            case 2: value = .int(Int(a.i))
            case 3: value = .string(bytesString(a.s))
            case 4:
                guard let t = a.t?.pointee else { throw fail("attribute '\(name)' has no tensor") }
                value = .tensor(try tensor(t))
            case 5:
                guard let g = a.g?.pointee else { throw fail("attribute '\(name)' has no graph") }
                value = .graph(try graph(g))
            case 6: value = .floats(a.n_floats > 0 && a.floats != nil ? Array(UnsafeBufferPointer(start: a.floats, count: a.n_floats)) : [])
            case 7: value = .ints(a.n_ints > 0 && a.ints != nil ? UnsafeBufferPointer(start: a.ints, count: a.n_ints).map { Int($0) } : [])
            case 8: value = .strings(a.n_strings > 0 && a.strings != nil ? (0 ..< a.n_strings).map { bytesString(a.strings[$0]) } : [])
            case 10: value = .other("a list of graphs")
            default: value = .other("attribute type \(type)")
            }
            return (name, value)
        }

        func tensor(_ t: KilnOnnx__TensorProto) throws -> ONNXTensor {
            let name = try string(t.name)
            let dims = t.n_dims > 0 && t.dims != nil ? UnsafeBufferPointer(start: t.dims, count: t.n_dims).map { Int($0) } : []
            let code = t.has_data_type != 0 ? t.data_type : 0
            if code == 21 || code == 22 {
                return ONNXTensor(name: name, dims: dims, value: Result { try fourBitArray(t, name: name, dims: dims, signed: code == 22) }
                    .mapError { $0 as? ConvertError ?? fail("\($0)") }, fourBit: true)
            }
            return ONNXTensor(name: name, dims: dims, value: Result { try array(t, name: name, dims: dims) }
                .mapError { $0 as? ConvertError ?? fail("\($0)") })
        }

        /// An int4/uint4 tensor (two values per byte, the first in the low nibble; in raw data,
        /// external data, or one byte per int32_data entry), widened to int8/uint8.
        func fourBitArray(_ t: KilnOnnx__TensorProto, name: String, dims: [Int], signed: Bool) throws -> NDArray {
            let what = "tensor '\(name)'"
            guard dims.allSatisfy({ $0 >= 0 }), let count = elementCount(dims), count <= Int.max - 1 else { throw fail("\(what) has an invalid shape \(dims)") }
            let byteCount = (count + 1) / 2
            var packed: [UInt8]
            if t.has_data_location != 0, t.data_location == KILN_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL {
                let entries = try list(t.n_external_data, t.external_data) { (try string($0.key), try string($0.value)) }
                packed = try external(entries, what: what, byteCount: byteCount)
            } else if t.has_raw_data != 0 {
                guard t.raw_data.len == byteCount else {
                    throw fail("\(what) holds \(t.raw_data.len) bytes of raw data, but \(signed ? "int4" : "uint4")\(dims) needs \(byteCount)")
                }
                packed = byteCount == 0 ? [] : Array(UnsafeBufferPointer(start: t.raw_data.data, count: byteCount))
            } else {
                guard t.n_int32_data == byteCount else { throw fail("\(what) has \(t.n_int32_data) values in int32_data, but its shape \(dims) needs \(byteCount) packed bytes") }
                packed = (0 ..< byteCount).map { UInt8(truncatingIfNeeded: t.int32_data[$0]) }
            }
            var out = NDArray(shape: dims, scalarType: signed ? .int8 : .uint8)
            out.withUnsafeMutableBytes { dst in
                for i in 0 ..< count {
                    let nibble = (packed[i / 2] >> (i % 2 == 0 ? 0 : 4)) & 0xF
                    dst[i] = signed && nibble >= 8 ? nibble | 0xF0 : nibble
                }
            }
            return out
        }

        func array(_ t: KilnOnnx__TensorProto, name: String, dims: [Int]) throws -> NDArray {
            let code = t.has_data_type != 0 ? t.data_type : 0
            let what = "tensor '\(name)'"
            guard let dtype = ONNXDecoder.dtypes[code] else {
                throw fail("\(what) has element type \(ONNXDecoder.dtypeNames[code] ?? "\(code)"), which Kiln does not support")
            }
            guard dims.allSatisfy({ $0 >= 0 }), let count = elementCount(dims), let byteCount = dtype.byteCount(elements: count) else {
                throw fail("\(what) has an invalid shape \(dims)")
            }
            // Every length is checked against the shape before the array is allocated: a shape
            // that claims far more data than the file holds is an error, not an allocation.
            if t.has_data_location != 0, t.data_location == KILN_ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL {
                let entries = try list(t.n_external_data, t.external_data) { (try string($0.key), try string($0.value)) }
                let bytes = try external(entries, what: what, byteCount: byteCount)
                var out = NDArray(shape: dims, scalarType: dtype)
                out.withUnsafeMutableBytes { dst in bytes.withUnsafeBytes { dst.copyMemory(from: $0) } }
                return out
            }
            if t.has_raw_data != 0 {
                guard t.raw_data.len == byteCount else {
                    throw fail("\(what) holds \(t.raw_data.len) bytes of raw data, but \(dtype.rawValue)\(dims) needs \(byteCount)")
                }
                var out = NDArray(shape: dims, scalarType: dtype)
                if byteCount > 0 {
                    out.withUnsafeMutableBytes { $0.baseAddress!.copyMemory(from: t.raw_data.data, byteCount: byteCount) }
                }
                return out
            }
            let (present, field): (Int, String) = switch dtype {
            case .float32: (t.n_float_data, "float_data")
            case .float64: (t.n_double_data, "double_data")
            case .int64: (t.n_int64_data, "int64_data")
            case .uint32, .uint64: (t.n_uint64_data, "uint64_data")
            default: (t.n_int32_data, "int32_data")
            }
            guard present == count else { throw fail("\(what) has \(present) values in \(field), but its shape \(dims) holds \(count)") }
            var out = NDArray(shape: dims, scalarType: dtype)
            switch dtype {
            case .float32:
                out.mutableView(as: Float.self) { p in for i in 0 ..< count { p[i] = t.float_data[i] } }
            case .float64:
                out.mutableView(as: Double.self) { p in for i in 0 ..< count { p[i] = t.double_data[i] } }
            case .int64:
                out.mutableView(as: Int64.self) { p in for i in 0 ..< count { p[i] = t.int64_data[i] } }
            case .uint64:
                out.mutableView(as: UInt64.self) { p in for i in 0 ..< count { p[i] = t.uint64_data[i] } }
            case .uint32:
                out.mutableView(as: UInt32.self) { p in for i in 0 ..< count { p[i] = UInt32(truncatingIfNeeded: t.uint64_data[i]) } }
            default:
                // int32, int16, uint16, int8, uint8, bool, float16 and bfloat16 all live in int32_data.
                let size = dtype.bitWidth / 8
                out.withUnsafeMutableBytes { raw in
                    for i in 0 ..< count {
                        var v = t.int32_data[i].littleEndian
                        withUnsafeBytes(of: &v) { (raw.baseAddress! + i * size).copyMemory(from: $0.baseAddress!, byteCount: size) }
                    }
                }
            }
            return out
        }

        /// Reads external tensor data from a file beside the model (relative paths only).
        func external(_ entries: [(String, String)], what: String, byteCount: Int) throws -> [UInt8] {
            var location = "", offset = 0, length: Int?
            for (k, v) in entries {
                switch k {
                case "location": location = v
                case "offset": guard let n = Int(v), n >= 0 else { throw fail("\(what) has a bad external offset '\(v)'") }; offset = n
                case "length": guard let n = Int(v), n >= 0 else { throw fail("\(what) has a bad external length '\(v)'") }; length = n
                default: break
                }
            }
            guard !location.isEmpty else { throw fail("\(what) has external data without a location") }
            let parts = location.split(separator: "/", omittingEmptySubsequences: false)
            guard !location.hasPrefix("/"), !parts.contains(".."), !location.contains("\\") else {
                throw fail("\(what): external data location '\(location)' is outside the model's folder")
            }
            let file = "\(directory)/\(location)"
            if let length, length != byteCount {
                throw ConvertError(path: file, reason: "\(what) needs \(byteCount) bytes, external length says \(length)")
            }
            guard let f = fopen(file, "rb") else {
                throw ConvertError(path: file, reason: "cannot open external data for \(what): \(String(cString: strerror(errno)))")
            }
            defer { fclose(f) }
            var st = stat()
            guard fstat(fileno(f), &st) == 0, offset <= Int(st.st_size), byteCount <= Int(st.st_size) - offset else {
                throw ConvertError(path: file, reason: "external data for \(what) is shorter than \(offset) + \(byteCount) bytes")
            }
            var out = [UInt8](repeating: 0, count: byteCount)
            guard fseeko(f, off_t(offset), SEEK_SET) == 0,
                  out.withUnsafeMutableBytes({ fread($0.baseAddress, 1, $0.count, f) }) == byteCount else {
                throw ConvertError(path: file, reason: "external data for \(what) is shorter than \(offset) + \(byteCount) bytes")
            }
            return out
        }
    }
}
