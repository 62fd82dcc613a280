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

    /// Whether the message in `bytes[range]` nests deeper than `limit`; malformed bytes
    /// are left for the real parser to report.
    static func tooDeep(_ bytes: UnsafeBufferPointer<UInt8>, limit: Int = 64) -> Bool {
        var stack: [(Int, Int, Kind, Int)] = [(0, bytes.count, .model, 0)]
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
}
