import CKilnSpecs

/// Memory for one C message tree, freed all at once.
final class CArena {
    private var blocks: [UnsafeMutableRawPointer] = []

    deinit { for b in blocks { b.deallocate() } }

    func make<T>(_ value: T) -> UnsafeMutablePointer<T> {
        let p = UnsafeMutablePointer<T>.allocate(capacity: 1)
        p.initialize(to: value)
        blocks.append(UnsafeMutableRawPointer(p))
        return p
    }

    func array<T>(_ values: [T]) -> UnsafeMutablePointer<T>? {
        guard !values.isEmpty else { return nil }
        let p = UnsafeMutablePointer<T>.allocate(capacity: values.count)
        p.initialize(from: values, count: values.count)
        blocks.append(UnsafeMutableRawPointer(p))
        return p
    }

    func string(_ s: String) -> UnsafeMutablePointer<CChar> {
        array(Array(s.utf8CString))!
    }

    func strings(_ values: [String]) -> UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? {
        array(values.map { Optional(string($0)) })
    }

    func messages<T>(_ values: [UnsafeMutablePointer<T>]) -> UnsafeMutablePointer<UnsafeMutablePointer<T>?>? {
        array(values.map { Optional($0) })
    }
}

extension ManifestCodec {
    /// Encodes a manifest payload. The output depends only on the model and layout,
    /// so the same model always gives the same bytes.
    /// - Parameters:
    ///   - contents: What the manifest says.
    ///   - patch: Lets package-internal tools (the malformed-package corpus) alter the
    ///     C message before it is packed.
    /// - Returns: The protobuf bytes.
    package static func encode(_ contents: ManifestContents,
                               patch: ((UnsafeMutablePointer<Kiln__Model>) -> Void)? = nil) -> [UInt8] {
        let arena = CArena()
        var m = buildModel(contents, arena)
        patch?(&m)
        var out = [UInt8](repeating: 0, count: kiln__model__get_packed_size(&m))
        let written = out.withUnsafeMutableBufferPointer { kiln__model__pack(&m, $0.baseAddress) }
        precondition(written == out.count, "protobuf-c packed \(written) of \(out.count) bytes")
        return out
    }

    /// The C message of a manifest, its memory owned by `arena`.
    static func buildModel(_ contents: ManifestContents, _ arena: CArena) -> Kiln__Model {
        var m = Kiln__Model()
        kiln__model__init(&m)
        m.format_version = UInt32(clamping: contents.formatVersion)
        m.metadata = encodeMetadata(contents.metadata, arena)
        m.compute_precision = encode(contents.computePrecision)
        m.n_weights = contents.weights.count
        m.weights = arena.messages(contents.weights.map { encodeWeight($0, arena) })
        m.n_functions = contents.functions.count
        m.functions = arena.messages(contents.functions.map { encodeFunction($0, arena) })
        m.weights_file = arena.string(contents.weightsFile)
        m.weights_file_size = UInt64(contents.weightsFileSize)
        return m
    }

    static func encodeMetadata(_ meta: Metadata, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Metadata> {
        var m = Kiln__Metadata()
        kiln__metadata__init(&m)
        m.name = arena.string(meta.name)
        m.description = arena.string(meta.description)
        m.author = arena.string(meta.author)
        m.license = arena.string(meta.license)
        m.version = arena.string(meta.version)
        let pairs = meta.user.sorted { $0.key < $1.key }.map { kv -> UnsafeMutablePointer<Kiln__KeyValue> in
            var e = Kiln__KeyValue()
            kiln__key_value__init(&e)
            e.key = arena.string(kv.key)
            e.value = arena.string(kv.value)
            return arena.make(e)
        }
        m.n_user = pairs.count
        m.user = arena.messages(pairs)
        return arena.make(m)
    }

    static func encodeType(_ t: TensorType, _ arena: CArena) -> UnsafeMutablePointer<Kiln__TensorType> {
        var m = Kiln__TensorType()
        kiln__tensor_type__init(&m)
        m.dtype = encode(t.dtype)
        let dims = t.shape.map { d -> UnsafeMutablePointer<Kiln__Dimension> in
            var e = Kiln__Dimension()
            kiln__dimension__init(&e)
            switch d {
            case .size(let n):
                e.kind_case = KILN__DIMENSION__KIND_SIZE
                e.size = Int64(n)
            case .symbol(let s):
                e.kind_case = KILN__DIMENSION__KIND_SYMBOL
                e.symbol = arena.string(s)
            }
            return arena.make(e)
        }
        m.n_shape = dims.count
        m.shape = arena.messages(dims)
        return arena.make(m)
    }

    static func encodeArgument(_ a: Argument, isOutput: Bool, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Argument> {
        var m = Kiln__Argument()
        kiln__argument__init(&m)
        m.name = arena.string(a.name)
        m.type = encodeType(a.type, arena)
        m.value = arena.string(isOutput && a.value != a.name ? a.value : "")
        return arena.make(m)
    }

    static func encodeFunction(_ f: Function, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Function> {
        var m = Kiln__Function()
        kiln__function__init(&m)
        m.name = arena.string(f.name)
        m.n_inputs = f.inputs.count
        m.inputs = arena.messages(f.inputs.map { encodeArgument($0, isOutput: false, arena) })
        m.n_outputs = f.outputs.count
        m.outputs = arena.messages(f.outputs.map { encodeArgument($0, isOutput: true, arena) })
        m.n_operations = f.operations.count
        m.operations = arena.messages(f.operations.map { encodeOperation($0, arena) })
        m.n_states = f.states.count
        m.states = arena.messages(f.states.map { pair in
            var e = Kiln__StatePair()
            kiln__state_pair__init(&e)
            e.input = arena.string(pair.input)
            e.output = arena.string(pair.output)
            return arena.make(e)
        })
        return arena.make(m)
    }

    static func encodeOperation(_ op: Operation, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Operation> {
        var m = Kiln__Operation()
        kiln__operation__init(&m)
        m.op_type = arena.string(op.opType)
        m.name = arena.string(op.name)
        m.n_inputs = op.inputs.count
        m.inputs = arena.strings(op.inputs)
        let outputs = op.outputs.map { v -> UnsafeMutablePointer<Kiln__Value> in
            var e = Kiln__Value()
            kiln__value__init(&e)
            e.name = arena.string(v.name)
            e.type = encodeType(v.type, arena)
            return arena.make(e)
        }
        m.n_outputs = outputs.count
        m.outputs = arena.messages(outputs)
        let attributes = op.attributes.sorted { $0.key < $1.key }.map { encodeAttribute($0.key, $0.value, arena) }
        m.n_attributes = attributes.count
        m.attributes = arena.messages(attributes)
        m.source = arena.string(op.source)
        return arena.make(m)
    }

    static func encodeAttribute(_ name: String, _ value: AttributeValue, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Attribute> {
        var m = Kiln__Attribute()
        kiln__attribute__init(&m)
        m.name = arena.string(name)
        switch value {
        case .int(let v):
            m.value_case = KILN__ATTRIBUTE__VALUE_INT_VALUE
            m.int_value = Int64(v)
        case .float(let v):
            m.value_case = KILN__ATTRIBUTE__VALUE_FLOAT_VALUE
            m.float_value = v
        case .string(let v):
            m.value_case = KILN__ATTRIBUTE__VALUE_STRING_VALUE
            m.string_value = arena.string(v)
        case .ints(let v):
            var l = Kiln__IntList()
            kiln__int_list__init(&l)
            l.n_values = v.count
            l.values = arena.array(v.map { Int64($0) })
            m.value_case = KILN__ATTRIBUTE__VALUE_INTS
            m.ints = arena.make(l)
        case .floats(let v):
            var l = Kiln__FloatList()
            kiln__float_list__init(&l)
            l.n_values = v.count
            l.values = arena.array(v)
            m.value_case = KILN__ATTRIBUTE__VALUE_FLOATS
            m.floats = arena.make(l)
        case .strings(let v):
            var l = Kiln__StringList()
            kiln__string_list__init(&l)
            l.n_values = v.count
            l.values = arena.strings(v)
            m.value_case = KILN__ATTRIBUTE__VALUE_STRINGS
            m.strings = arena.make(l)
        case .tensor(let t):
            var l = Kiln__TensorValue()
            kiln__tensor_value__init(&l)
            l.dtype = encode(t.dtype)
            l.n_shape = t.shape.count
            l.shape = arena.array(t.shape.map { Int64($0) })
            l.data = ProtobufCBinaryData(len: t.bytes.count, data: arena.array(t.bytes))
            m.value_case = KILN__ATTRIBUTE__VALUE_TENSOR
            m.tensor = arena.make(l)
        case .dtype(let t):
            m.value_case = KILN__ATTRIBUTE__VALUE_DTYPE
            m.dtype = encode(t)
        case .graph(let f):
            m.value_case = KILN__ATTRIBUTE__VALUE_GRAPH
            m.graph = encodeFunction(f, arena)
        }
        return arena.make(m)
    }

    static func encodeBlob(_ b: BlobRecord?, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Blob>? {
        guard let b else { return nil }
        var m = Kiln__Blob()
        kiln__blob__init(&m)
        m.dtype = encode(b.dtype)
        m.n_shape = b.shape.count
        m.shape = arena.array(b.shape.map { Int64($0) })
        m.offset = UInt64(b.location.offset)
        m.byte_length = UInt64(b.location.byteLength)
        m.crc32 = b.location.crc32
        return arena.make(m)
    }

    static func encodeWeight(_ w: WeightRecord, _ arena: CArena) -> UnsafeMutablePointer<Kiln__Weight> {
        var m = Kiln__Weight()
        kiln__weight__init(&m)
        m.name = arena.string(w.name)
        m.dtype = encode(w.dtype)
        m.n_shape = w.shape.count
        m.shape = arena.array(w.shape.map { Int64($0) })
        switch w.encoding {
        case .dense(let b):
            m.encoding_case = KILN__WEIGHT__ENCODING_DENSE
            m.dense = encodeBlob(b, arena)
        case .quantized(let d, let s, let z):
            var q = Kiln__QuantizedEncoding()
            kiln__quantized_encoding__init(&q)
            q.data = encodeBlob(d, arena)
            q.scale = encodeBlob(s, arena)
            q.zero_point = encodeBlob(z, arena)
            m.encoding_case = KILN__WEIGHT__ENCODING_QUANTIZED
            m.quantized = arena.make(q)
        case .palettized(let i, let l, let s):
            var p = Kiln__PalettizedEncoding()
            kiln__palettized_encoding__init(&p)
            p.indices = encodeBlob(i, arena)
            p.lut = encodeBlob(l, arena)
            p.scale = encodeBlob(s, arena)
            m.encoding_case = KILN__WEIGHT__ENCODING_PALETTIZED
            m.palettized = arena.make(p)
        }
        return arena.make(m)
    }
}
