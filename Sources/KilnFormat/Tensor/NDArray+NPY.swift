/// Why an `.npy` file could not be read or written.
public struct NPYError: Error, Sendable, CustomStringConvertible {
    /// The file, when known.
    public var path: String?
    /// What is wrong.
    public var reason: String

    public var description: String { [path, reason].compactMap { $0 }.joined(separator: ": ") }
}

/// NumPy `.npy` files, format versions 1.0–3.0, little-endian, C order.
extension NDArray {
    static let npyMagic: [UInt8] = [0x93] + Array("NUMPY".utf8)

    /// `descr` strings of the supported element types, read in either form; the first of a
    /// type is the one written.
    static let npyDescriptorList: [(descr: String, dtype: DataType)] = [
        ("<f4", .float32), ("<f2", .float16), ("<f8", .float64), ("<i8", .int64), ("<i4", .int32), ("<i2", .int16),
        ("|i1", .int8), ("<i1", .int8), ("|u1", .uint8), ("<u1", .uint8), ("|b1", .bool), ("<b1", .bool),
        ("<u2", .uint16), ("<u4", .uint32), ("<u8", .uint64),
        // NumPy has no bfloat16: a 2-byte void holds its bits (what ml_dtypes' bfloat16 saves as).
        ("|V2", .bfloat16), ("<V2", .bfloat16),
    ]
    static let npyDescriptors = Dictionary(uniqueKeysWithValues: npyDescriptorList.map { ($0.descr, $0.dtype) })
    static let npyWritten = Dictionary(npyDescriptorList.map { ($0.dtype, $0.descr) }, uniquingKeysWith: { first, _ in first })

    /// Reads an `.npy` file.
    /// - Parameter path: The file.
    /// - Throws: ``NPYError`` naming the file and the problem.
    public init(npyFile path: String) throws {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readFile(path)
        } catch let e as PackageError {
            throw NPYError(path: path, reason: e.reason)
        }
        do {
            self = try NDArray(npyBytes: bytes)
        } catch var e as NPYError {
            e.path = path
            throw e
        }
    }

    /// Decodes the bytes of an `.npy` file.
    /// - Parameter bytes: The file's contents.
    /// - Throws: ``NPYError`` describing the problem.
    public init(npyBytes bytes: [UInt8]) throws {
        func fail(_ reason: String) -> NPYError { NPYError(path: nil, reason: reason) }
        guard bytes.count >= 10, Array(bytes[0 ..< 6]) == NDArray.npyMagic else {
            throw fail("not an .npy file (bad magic)")
        }
        let major = bytes[6]
        let headerLength: Int
        let headerStart: Int
        switch major {
        case 1:
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8
            headerStart = 10
        case 2, 3:
            guard bytes.count >= 12 else { throw fail("truncated header") }
            headerLength = Int(bytes[8]) | Int(bytes[9]) << 8 | Int(bytes[10]) << 16 | Int(bytes[11]) << 24
            headerStart = 12
        default:
            throw fail("unsupported .npy format version \(major).\(bytes[7])")
        }
        guard headerLength <= bytes.count - headerStart else { throw fail("truncated header") }
        guard let header = String(validating: bytes[headerStart ..< headerStart + headerLength], as: UTF8.self) else {
            throw fail("header is not valid text")
        }
        let dict = try NPYHeader.parse(header)
        guard case .string(let descr)? = dict["descr"] else { throw fail("header has no 'descr'") }
        guard case .bool(let fortran)? = dict["fortran_order"] else { throw fail("header has no 'fortran_order'") }
        guard case .tuple(let shape)? = dict["shape"] else { throw fail("header has no 'shape'") }
        if fortran { throw fail("Fortran-order arrays are not supported; save with np.ascontiguousarray") }
        guard let dtype = NDArray.npyDescriptors[descr] else {
            if descr.hasPrefix(">") { throw fail("big-endian dtype '\(descr)' is not supported") }
            if descr.contains("O") { throw fail("object arrays are not supported") }
            throw fail("unsupported dtype '\(descr)'")
        }
        guard shape.allSatisfy({ $0 >= 0 }), let count = KilnFormat.elementCount(shape),
              let byteCount = dtype.byteCount(elements: count) else {
            throw fail("invalid shape \(shape)")
        }
        let dataStart = headerStart + headerLength
        guard bytes.count - dataStart >= byteCount else {
            throw fail("truncated data: \(dtype.rawValue)\(shape) needs \(byteCount) bytes, file has \(bytes.count - dataStart)")
        }
        self.init(shape: shape, scalarType: dtype)
        if byteCount > 0 {
            bytes.withUnsafeBytes { storage.base.copyMemory(from: $0.baseAddress! + dataStart, byteCount: byteCount) }
        }
        if dtype == .bool {
            let p = storage.base.assumingMemoryBound(to: UInt8.self)
            for i in 0 ..< count where p[i] > 1 { p[i] = 1 }
        }
    }

    /// The `.npy` (version 1.0) encoding of this array.
    public func npyBytes() -> [UInt8] {
        let descr = NDArray.npyWritten[scalarType]
        precondition(descr != nil, "\(scalarType.rawValue) has no .npy encoding")
        let shapeText = shape.isEmpty ? "()" : shape.count == 1 ? "(\(shape[0]),)" : "(" + shape.map(String.init).joined(separator: ", ") + ")"
        var header = "{'descr': '\(descr!)', 'fortran_order': False, 'shape': \(shapeText), }"
        let unpadded = 10 + header.utf8.count + 1
        header += String(repeating: " ", count: (64 - unpadded % 64) % 64) + "\n"
        var out = NDArray.npyMagic + [1, 0]
        out.appendLE(UInt16(header.utf8.count))
        out += Array(header.utf8)
        out += bytes
        return out
    }

    /// Writes this array as an `.npy` file, atomically.
    /// - Parameter path: The file.
    /// - Throws: ``NPYError`` when the file cannot be written.
    public func writeNPY(to path: String) throws {
        let bytes = npyBytes()
        do {
            try bytes.withUnsafeBytes { try FileSystem.writeAtomically(path, [$0]) }
        } catch let e as PackageError {
            throw NPYError(path: path, reason: e.reason)
        }
    }
}

/// The Python-literal dictionary in an `.npy` header.
enum NPYHeader {
    enum Value {
        case string(String)
        case bool(Bool)
        case tuple([Int])
    }

    static func parse(_ text: String) throws -> [String: Value] {
        var s = Substring(text)
        func fail(_ why: String) -> NPYError { NPYError(path: nil, reason: "malformed header (\(why))") }
        func skipSpace() { s = s.drop { $0 == " " || $0 == "\n" || $0 == "\t" } }
        func expect(_ c: Character) throws {
            skipSpace()
            guard s.first == c else { throw fail("expected '\(c)'") }
            s.removeFirst()
        }
        func string() throws -> String {
            skipSpace()
            guard let q = s.first, q == "'" || q == "\"" else { throw fail("expected a string") }
            s.removeFirst()
            guard let end = s.firstIndex(of: q) else { throw fail("unterminated string") }
            let v = String(s[..<end])
            s = s[s.index(after: end)...]
            return v
        }
        func value() throws -> Value {
            skipSpace()
            if s.hasPrefix("True") { s = s.dropFirst(4); return .bool(true) }
            if s.hasPrefix("False") { s = s.dropFirst(5); return .bool(false) }
            if s.first == "(" {
                s.removeFirst()
                var dims: [Int] = []
                while true {
                    skipSpace()
                    if s.first == ")" { s.removeFirst(); break }
                    let digits = s.prefix { $0.isASCII && ($0.isNumber || $0 == "-") }
                    guard !digits.isEmpty, let n = Int(digits) else { throw fail("expected a dimension") }
                    dims.append(n)
                    s = s.dropFirst(digits.count)
                    // Python 2 headers wrote long integers with an L suffix.
                    if s.first == "L" { s.removeFirst() }
                    skipSpace()
                    if s.first == "," { s.removeFirst() }
                }
                return .tuple(dims)
            }
            return .string(try string())
        }
        var out: [String: Value] = [:]
        try expect("{")
        while true {
            skipSpace()
            if s.first == "}" { break }
            let key = try string()
            try expect(":")
            out[key] = try value()
            skipSpace()
            if s.first == "," { s.removeFirst() }
            guard !s.isEmpty else { throw fail("unterminated dictionary") }
        }
        return out
    }
}
