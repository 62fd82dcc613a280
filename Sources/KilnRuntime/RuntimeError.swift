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
