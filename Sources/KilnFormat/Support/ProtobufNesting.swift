/// A walk over protobuf wire bytes that follows only the fields through which messages nest
/// recursively and reports input nested deeper than a limit, before protobuf-c's recursive
/// parser (which has no depth limit) sees it. Malformed bytes are left for the real parser.
package enum ProtobufNesting {
    /// Whether the message in `bytes`, of kind `root`, nests deeper than `limit`.
    /// - Parameters:
    ///   - bytes: One serialized message.
    ///   - root: Its kind.
    ///   - limit: The deepest nesting allowed (messages inside messages).
    ///   - child: The kind of the message in field `field` of a message of kind `kind`, or `nil`
    ///     for a field that holds no recursive message.
    package static func tooDeep<Kind>(_ bytes: UnsafeRawBufferPointer, root: Kind, limit: Int,
                                      child: (Kind, Int) -> Kind?) -> Bool {
        let bytes = bytes.bindMemory(to: UInt8.self)
        var stack: [(start: Int, end: Int, kind: Kind, depth: Int)] = [(0, bytes.count, root, 0)]
        while let (start, end, kind, depth) = stack.popLast() {
            if depth > limit { return true }
            var i = start
            func varint() -> UInt64? {
                var value: UInt64 = 0, shift: UInt64 = 0
                while i < end, shift < 64 {
                    let b = bytes[i]
                    i += 1
                    value |= UInt64(b & 0x7F) << shift
                    if b & 0x80 == 0 { return value }
                    shift += 7
                }
                return nil
            }
            while i < end {
                guard let key = varint() else { break }
                let field = Int(truncatingIfNeeded: key >> 3)
                switch key & 7 {
                case 0: guard varint() != nil else { i = end; break }
                case 1: i += 8
                case 5: i += 4
                case 2:
                    guard let n = varint(), n <= UInt64(end - i) else { i = end; break }
                    let length = Int(n)
                    if let k = child(kind, field) { stack.append((i, i + length, k, depth + 1)) }
                    i += length
                default: i = end
                }
            }
        }
        return false
    }

    /// Messages of `kiln_model.proto` and `kiln_compiled.proto` through which subgraphs nest.
    package enum KilnKind { case plan, model, function, operation, attribute }

    /// The recursive fields of Kiln's manifest and plan messages: a plan's model, a model's
    /// functions, a function's operations, an operation's attributes, an attribute's graph.
    package static func kilnChild(_ kind: KilnKind, _ field: Int) -> KilnKind? {
        switch (kind, field) {
        case (.plan, 1): return .model
        case (.model, 5): return .function
        case (.function, 4): return .operation
        case (.operation, 5): return .attribute
        case (.attribute, 10): return .function
        default: return nil
        }
    }

    /// The deepest message nesting a manifest or plan may have: 16 levels of subgraphs.
    package static let kilnLimit = 4 * 16 + 3
}
