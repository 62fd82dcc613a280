import Foundation
import KilnRuntime

extension ModelStore {
    /// Loads `model`'s current installed version; when it is missing or does not load (damaged,
    /// no artifact for this host, no key), loads `fallback` — a package or artifact shipped with
    /// the app — and says why in ``LoadExplanation/fallback``.
    /// - Parameters:
    ///   - model: The model name.
    ///   - fallback: The bundled package, artifact, archive or directory; `nil` for none.
    ///   - options: Load options (its `model` is set to `model`).
    /// - Returns: The model.
    /// - Throws: ``StoreError`` when nothing is installed and there is no fallback; the installed
    ///   version's error when there is no fallback; the fallback's error when it fails too.
    public func load(model: String, fallback: URL? = nil, options: ModelLoadOptions = .default) async throws -> Model {
        var o = options
        o.model = model
        let reason: String
        if let dir = currentDirectory(of: model) {
            do {
                return try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: o)
            } catch {
                guard fallback != nil else { throw error }
                reason = "the installed version (\(dir)) did not load: \(error)"
            }
        } else {
            guard fallback != nil else { throw StoreError(path: directory, reason: "'\(model)' is not installed and there is no fallback") }
            reason = "'\(model)' is not installed in \(directory)"
        }
        let loaded = try await Model.load(contentsOf: fallback!, options: o)
        return loaded.loadedAsFallback(because: reason)
    }
}
