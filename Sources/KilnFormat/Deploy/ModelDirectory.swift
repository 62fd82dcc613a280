import Foundation

/// The file names Kiln gives a model's files, and the only place that knows them.
///
/// A model `Name` is deployed as a portable package `Name.kiln` (a directory), compiled
/// artifacts `Name.<arch>.compiled` beside it, an `assets.json` listing the artifacts, and
/// optionally one `Name.kilnarchive` holding the artifacts and the manifest. Arch names hold no
/// dot, so an artifact's name parses from the right.
public enum ModelFile: Sendable, Equatable {
    /// `Name.kiln`.
    case package(name: String)
    /// `Name.<arch>.compiled`.
    case artifact(name: String, arch: String)
    /// `Name.kilnarchive`.
    case archive(name: String)
    /// `assets.json`.
    case manifest

    /// The manifest's file name.
    public static let manifestFileName = "assets.json"

    /// Parses a file name (not a path); nil when it names none of Kiln's files.
    public init?(fileName file: String) {
        if file == ModelFile.manifestFileName {
            self = .manifest
        } else if let stem = ModelFile.stem(file, CompiledFormat.fileExtension) {
            guard let dot = stem.lastIndex(of: "."), dot != stem.startIndex, stem.index(after: dot) != stem.endIndex else { return nil }
            self = .artifact(name: String(stem[..<dot]), arch: String(stem[stem.index(after: dot)...]))
        } else if let stem = ModelFile.stem(file, PackageFormat.packageExtension) {
            self = .package(name: stem)
        } else if let stem = ModelFile.stem(file, ModelArchive.fileExtension) {
            self = .archive(name: stem)
        } else {
            return nil
        }
    }

    /// Parses the last component of a path.
    public init?(path: String) {
        var p = Substring(path)
        while p.count > 1, p.hasSuffix("/") { p = p.dropLast() }
        self.init(fileName: String(p.split(separator: "/").last ?? p))
    }

    /// The file name.
    public var fileName: String {
        switch self {
        case .package(let name): return "\(name).\(PackageFormat.packageExtension)"
        case .artifact(let name, let arch): return "\(name).\(arch).\(CompiledFormat.fileExtension)"
        case .archive(let name): return "\(name).\(ModelArchive.fileExtension)"
        case .manifest: return ModelFile.manifestFileName
        }
    }

    /// The model the file belongs to (nil for `assets.json`, which names it inside).
    public var modelName: String? {
        switch self {
        case .package(let name), .artifact(let name, _), .archive(let name): return name
        case .manifest: return nil
        }
    }

    /// The arch of an artifact.
    public var arch: String? {
        if case .artifact(_, let arch) = self { return arch }
        return nil
    }

    /// Whether the file is a compiled artifact.
    public var isArtifact: Bool { arch != nil }

    /// Whether the file is a portable package.
    public var isPackage: Bool {
        if case .package = self { return true }
        return false
    }

    static func stem(_ file: String, _ ext: String) -> String? {
        guard file.hasSuffix(".\(ext)"), file.count > ext.count + 1 else { return nil }
        return String(file.dropLast(ext.count + 1))
    }
}

/// A directory of one or more models' files: packages, artifacts and `assets.json`.
///
/// The listing is read once, sorted, so every question asked of it sees the same files.
public struct ModelDirectory: Sendable {
    /// The directory.
    public let path: String
    /// Its entries' names, sorted.
    public let files: [String]

    /// Lists `path`; an unreadable directory lists nothing.
    public init(path: String) {
        self.path = path
        self.files = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
    }

    /// A directory whose listing is already known.
    public init(path: String, files: [String]) {
        self.path = path
        self.files = files.sorted()
    }

    /// The full path of `file` in the directory.
    public func path(of file: String) -> String { path.isEmpty ? file : "\(path)/\(file)" }

    /// The full path of `assets.json` in the directory.
    public var manifestPath: String { path(of: ModelFile.manifestFileName) }

    /// The models the directory holds: of its packages and artifacts, sorted.
    public var modelNames: [String] {
        Set(files.compactMap { f in ModelFile(fileName: f).flatMap { $0.isArtifact || $0.isPackage ? $0.modelName : nil } }).sorted()
    }

    /// Whether `file` is a package or an artifact of `model` (any model when nil).
    public static func belongs(_ file: String, to model: String?) -> Bool {
        guard let f = ModelFile(fileName: file), f.isArtifact || f.isPackage else { return false }
        return model == nil || f.modelName == model
    }

    /// The packages and artifacts of `model` (of every model when nil), sorted.
    public func files(of model: String?) -> [String] { files.filter { ModelDirectory.belongs($0, to: model) } }

    /// The compiled artifacts' file names of `model` (of every model when nil), sorted.
    public func artifacts(of model: String?) -> [String] {
        files.filter { f in ModelFile(fileName: f).map { $0.isArtifact && (model == nil || $0.modelName == model) } ?? false }
    }

    /// The first package of `model` (of any model when nil), as a full path.
    public func package(of model: String?) -> String? {
        files.first { f in ModelFile(fileName: f).map { $0.isPackage && (model == nil || $0.modelName == model) } ?? false }.map(path(of:))
    }
}
