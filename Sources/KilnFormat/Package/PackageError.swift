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

    /// Creates an error.
    /// - Parameters:
    ///   - path: The file the problem is in.
    ///   - field: Where in the model the problem is.
    ///   - reason: What is wrong.
    public init(path: String? = nil, field: String? = nil, reason: String) {
        self.path = path
        self.field = field
        self.reason = reason
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
