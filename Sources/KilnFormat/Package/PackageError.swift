/// Why a package, manifest or model could not be read, validated or written.
///
/// Prints as one line: `FILE: FIELD: REASON`, leaving out the parts that are unknown.
public struct PackageError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The file the problem is in, when there is one.
    public var path: String?
    /// Where in the model the problem is (for example `functions[0] 'main' op 'fc1'`).
    public var field: String?
    /// What is wrong.
    public var reason: String
    /// The class of problem, for programs (loaders fall back on a newer format, report damage).
    public var kind: Kind

    /// Classes of problem.
    public enum Kind: String, Sendable, Equatable {
        /// The bytes or the model do not follow the format.
        case malformed
        /// A format version newer than this Kiln reads.
        case newerFormat
        /// A checksum or digest does not match: the file is damaged.
        case damaged
    }

    /// Creates an error.
    /// - Parameters:
    ///   - path: The file the problem is in.
    ///   - field: Where in the model the problem is.
    ///   - reason: What is wrong.
    ///   - kind: The class of problem.
    public init(path: String? = nil, field: String? = nil, reason: String, kind: Kind = .malformed) {
        self.path = path
        self.field = field
        self.reason = reason
        self.kind = kind
    }

    /// The same error, naming `path` when it does not name a file yet.
    public func inFile(_ path: String) -> PackageError {
        var e = self
        if e.path == nil { e.path = path }
        return e
    }

    public var description: String {
        [path, field, reason].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": ")
    }
}
