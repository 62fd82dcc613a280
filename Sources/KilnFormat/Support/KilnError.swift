/// The one shape every Kiln error has: the class of problem, the file it is in, where inside
/// the file, and what is wrong. The CLI prints it as one line, `FILE: FIELD: REASON`, leaving
/// out the parts that are unknown; programs switch on ``errorKind``.
public protocol KilnError: Error, Sendable, CustomStringConvertible {
    /// The class of problem.
    var errorKind: KilnErrorKind { get }
    /// The file, directory or URL the problem is in, when there is one.
    var errorPath: String? { get }
    /// Where inside it (a JSON path, an op, a function), when known.
    var errorField: String? { get }
    /// What is wrong, as a sentence fragment.
    var reason: String { get }
}

/// Classes of problem, shared by every module.
public enum KilnErrorKind: String, Sendable, CaseIterable {
    /// The bytes, the model or the document do not follow the format.
    case malformed
    /// A format version newer than this Kiln reads.
    case newerFormat
    /// A checksum or digest does not match.
    case damaged
    /// Valid, but asks for something Kiln does not do (an op, a mode, an arch).
    case unsupported
    /// The file, model or entry is not there.
    case notFound
    /// An encrypted artifact and no key, or the wrong one.
    case needsKey
    /// A call's inputs or options are wrong (a shape, a dtype, a setting).
    case invalidInput
    /// Reading, writing or downloading failed.
    case io
}

extension KilnError {
    /// `FILE: FIELD: REASON`, leaving out the parts that are unknown.
    public var line: String { [errorPath, errorField, reason].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ": ") }
}

extension PackageError: KilnError {
    public var errorKind: KilnErrorKind {
        switch kind {
        case .malformed: return .malformed
        case .newerFormat: return .newerFormat
        case .damaged: return .damaged
        }
    }
    public var errorPath: String? { path }
    public var errorField: String? { field }
}

extension NPYError: KilnError {
    public var errorKind: KilnErrorKind { .malformed }
    public var errorPath: String? { path }
    public var errorField: String? { nil }
}

extension ArtifactKeyError: KilnError {
    public var errorKind: KilnErrorKind { .needsKey }
    public var errorPath: String? { path }
    public var errorField: String? { nil }
}

extension InferenceError: KilnError {
    public var errorKind: KilnErrorKind { .invalidInput }
    public var errorPath: String? { nil }
    public var errorField: String? { "function '\(function)'" + (op.map { " op '\($0)'" } ?? "") }
}

extension OpError: KilnError {
    public var errorKind: KilnErrorKind { .malformed }
    public var errorPath: String? { nil }
    public var errorField: String? { nil }
}
