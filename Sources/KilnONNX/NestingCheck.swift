import KilnFormat

/// A walk over the ONNX wire format that follows only the fields through which messages
/// can nest (graphs in attributes, types in types) and refuses files nested deeper than
/// `limit`, before protobuf-c's recursive parser sees them.
enum NestingCheck {
    enum Kind { case model, graph, function, node, attribute, valueInfo, type, typeWrapper(Int) }

    /// Fields of each message that hold a nested message of a recursive kind.
    static func child(_ kind: Kind, _ field: Int) -> Kind? {
        switch (kind, field) {
        case (.model, 7): return .graph
        case (.model, 25): return .function
        case (.graph, 1), (.function, 7): return .node
        case (.graph, 11), (.graph, 12), (.graph, 13), (.function, 12): return .valueInfo
        case (.function, 11), (.node, 5): return .attribute
        case (.attribute, 6), (.attribute, 11): return .graph
        case (.attribute, 14), (.attribute, 15), (.valueInfo, 2): return .type
        case (.type, 4), (.type, 9): return .typeWrapper(1)
        case (.type, 5): return .typeWrapper(2)
        case (.typeWrapper(let f), let g) where f == g: return .type
        default: return nil
        }
    }

    /// Whether the model in `bytes` nests deeper than `limit`; malformed bytes are left for
    /// the real parser to report.
    static func tooDeep(_ bytes: UnsafeBufferPointer<UInt8>, limit: Int = 64) -> Bool {
        ProtobufNesting.tooDeep(UnsafeRawBufferPointer(bytes), root: Kind.model, limit: limit, child: child)
    }
}
