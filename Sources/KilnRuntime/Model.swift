import Foundation
import KilnFormat
import KilnReference

/// How to load a model.
public struct ModelLoadOptions: Sendable {
    /// The defaults.
    public static let `default` = ModelLoadOptions()
    /// Verify every weight blob's checksum while loading (default `true`).
    public var verifyChecksums = true

    /// Creates options with the defaults.
    public init() {}
}

/// A loaded model: its metadata and its named functions.
///
/// ```swift
/// let model = try await Model.load(contentsOf: URL(fileURLWithPath: "TinyEncoder.kiln"))
/// guard let encode = try await model.loadFunction(named: "encode") else { … }
/// let outputs = try await encode.run(inputs: ["tokens": tokens])
/// ```
public final class Model: Sendable {
    /// The model's metadata.
    public let metadata: Metadata
    /// Where it was loaded from.
    public let url: URL
    let portable: PortableModel

    init(portable: PortableModel, url: URL) {
        self.portable = portable
        metadata = portable.metadata
        self.url = url
    }

    /// Loads a model.
    ///
    /// Today this accepts a portable `Name.kiln` package, run by the reference interpreter.
    /// - Parameters:
    ///   - url: The package.
    ///   - options: Load options.
    /// - Returns: The model.
    /// - Throws: ``PackageError`` for a malformed package, ``RuntimeError`` for anything else.
    public static func load(contentsOf url: URL, options: ModelLoadOptions = .default) async throws -> Model {
        let path = url.path
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw RuntimeError(path: path, reason: "no such file or directory")
        }
        guard isDirectory.boolValue, FileManager.default.fileExists(atPath: "\(path)/\(PackageFormat.manifestFileName)") else {
            throw RuntimeError(path: path, reason: "not a Kiln package (expected a Name.kiln directory)")
        }
        return Model(portable: try PackageReader.read(at: path, verifyChecksums: options.verifyChecksums), url: url)
    }

    /// The names of the model's functions, in package order.
    public var functionNames: [String] { portable.functions.map(\.name) }

    /// Prepares a function for running.
    /// - Parameter name: The function's name.
    /// - Returns: The function, or `nil` when the model has none of that name.
    /// - Throws: ``InferenceError`` when the function exists but cannot be prepared.
    public func loadFunction(named name: String) async throws -> InferenceFunction? {
        guard portable.function(named: name) != nil else { return nil }
        return InferenceFunction(try ReferenceInterpreter(model: portable, function: name))
    }
}

/// A function ready to run. Calls from many tasks at once are safe.
public final class InferenceFunction: Sendable {
    /// The function's name.
    public let name: String
    /// Its inputs and outputs.
    public let descriptor: FunctionDescriptor
    private let interpreter: ReferenceInterpreter

    init(_ interpreter: ReferenceInterpreter) {
        self.interpreter = interpreter
        name = interpreter.function.name
        descriptor = FunctionDescriptor(interpreter.function)
    }

    /// Runs the function.
    /// - Parameter inputs: Arrays by input name; every input must be given, with the
    ///   declared dtype and rank, fixed dims equal and each symbol one size throughout.
    /// - Returns: The outputs by name.
    /// - Throws: ``InferenceError`` naming the function and what is wrong.
    public func run(inputs: [String: NDArray]) async throws -> InferenceOutputs {
        let values = try interpreter.run(inputs)
        return InferenceOutputs(names: descriptor.outputNames, values: values)
    }
}
