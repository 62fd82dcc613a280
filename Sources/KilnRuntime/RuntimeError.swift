import KilnFormat

/// Why a model could not be loaded.
public struct RuntimeError: Error, Sendable, CustomStringConvertible {
    /// The file or directory involved.
    public var path: String
    /// What is wrong.
    public var reason: String

    /// Creates an error.
    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

extension RuntimeError: KilnError {
    public var errorKind: KilnErrorKind { .invalidInput }
    public var errorPath: String? { path }
    public var errorField: String? { nil }
}

extension SpecializationCacheError: KilnError {
    public var errorKind: KilnErrorKind { kind == .notFound ? .notFound : .malformed }
    public var errorPath: String? { nil }
    public var errorField: String? { nil }
}
