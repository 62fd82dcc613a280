/// Descriptive facts about a model, carried in its package manifest.
public struct Metadata: Sendable, Hashable {
    /// The model's name (for example `TinyClassifier`).
    public var name: String
    /// What the model does.
    public var description: String
    /// Who made it.
    public var author: String
    /// Its license (for example `Apache-2.0`).
    public var license: String
    /// The model's own version string.
    public var version: String
    /// Free key/value pairs.
    public var user: [String: String]

    /// Creates metadata; every field defaults to empty.
    public init(name: String = "", description: String = "", author: String = "",
                license: String = "", version: String = "", user: [String: String] = [:]) {
        self.name = name
        self.description = description
        self.author = author
        self.license = license
        self.version = version
        self.user = user
    }
}
