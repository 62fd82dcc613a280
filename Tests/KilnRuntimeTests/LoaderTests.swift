import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime
import XCTest

/// Artifact selection from a directory, specialization into a cache, bookmarks.
final class LoaderTests: XCTestCase {
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"
    let features = NDArray(shape: [2, 64], scalars: (0 ..< 128).map { Float(cos(Double($0) * 0.3)) })

    func options(_ cacheDir: String) -> ModelLoadOptions {
        var o = ModelLoadOptions()
        o.cache = SpecializationCache(directory: cacheDir)
        return o
    }

    func compile(_ arch: String, into dir: String, package: String? = nil) throws {
        let path = package ?? classifier
        let model = try PackageReader.read(at: path)
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        let (header, plan) = try Compiler.compile(model, options: Compiler.Options(arch: Architecture.named(arch)!),
                                                  sourceDigest: try PackageReader.digest(ofPackageAt: path))
        _ = try CompiledArtifact.write(header: header, plan: plan, to: "\(dir)/\(name).\(arch).compiled")
    }

    func probabilities(_ model: Model) async throws -> [Float] {
        try await model.loadFunction(named: "main")!.run(inputs: ["features": features])["probabilities"]!.scalars(as: Float.self)
    }

    func testBaselineArtifactLoadsOnABetterHost() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try compile("x86_64", into: dir)
        try compile("arm64", into: dir)
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        #if arch(x86_64)
        XCTAssertEqual(model.architecture, "x86_64")
        XCTAssertEqual(model.explanation.chosen, "\(dir)/TinyClassifier.x86_64.compiled")
        let arm = model.explanation.candidates.first { $0.arch == "arm64" }!
        XCTAssertTrue(arm.refusal!.reason.contains("arm64 family"), arm.refusal!.reason)
        XCTAssertNil(model.explanation.specialization)
        #endif
        let reference = try await probabilities(try await Model.load(contentsOf: URL(fileURLWithPath: classifier)))
        let got = try await probabilities(model)
        for (a, b) in zip(got, reference) { XCTAssertEqual(a, b, accuracy: 1e-5) }
    }

    func testSpecializesWhenNothingFitsThenHitsTheCache() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try compile("arm64", into: dir)
        try FileManager.default.copyItem(atPath: classifier, toPath: "\(dir)/TinyClassifier.kiln")
        let first = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertEqual(first.architecture, Architecture.host?.name)
        XCTAssertTrue(first.explanation.specialization!.hasPrefix("specialized for"), first.explanation.description)
        let second = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertTrue(second.explanation.specialization!.hasPrefix("cache hit"), second.explanation.description)
        let (p1, p2) = (try await probabilities(first), try await probabilities(second))
        XCTAssertEqual(p1, p2)
        // The cached artifact is what `kiln compile --arch host` makes: the same bytes.
        let cached = SpecializationCache(directory: "\(dir)/cache").entries()
        XCTAssertEqual(cached.count, 1)
        let host = Architecture.host!
        let (header, plan) = try Compiler.compile(try PackageReader.read(at: classifier), options: Compiler.Options(arch: host),
                                                  sourceDigest: try PackageReader.digest(ofPackageAt: classifier))
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: cached[0].path)),
                       Data(CompiledArtifact.serialize(header: header, plan: plan).flatMap { $0 }))
    }

    func testNewerFormatFallsBackToSpecializationWithTheReason() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard let host = Architecture.host else { throw XCTSkip("no runnable arch") }
        try compile(host.name, into: dir)
        // Claim the next format version and fix the header checksum, as a newer compiler would write.
        let path = "\(dir)/TinyClassifier.\(host.name).compiled"
        let newer = CompiledFormat.currentVersion + 1
        try claimFormatVersion(newer, of: path)
        try FileManager.default.copyItem(atPath: classifier, toPath: "\(dir)/TinyClassifier.kiln")
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        let candidate = model.explanation.candidates[0]
        XCTAssertTrue(candidate.refusal!.reason.contains("format version \(newer) is newer"), candidate.refusal!.reason)
        XCTAssertTrue(model.explanation.specialization!.hasPrefix("specialized"), model.explanation.description)
    }

    /// Rewrites the artifact's format version and fixes the header checksum, as another compiler would write.
    func claimFormatVersion(_ version: Int, of path: String) throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        bytes[8] = UInt8(version)
        let crc = crc32(Array(bytes[0 ..< 252]))
        for i in 0 ..< 4 { bytes[252 + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// An artifact of an older format (kernel names before the catalog, convolution weights before row tiles) is refused with the reason.
    func testFormatBeforeTheKernelCatalogIsRefused() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard let host = Architecture.host else { throw XCTSkip("no runnable arch") }
        try compile(host.name, into: dir)
        let path = "\(dir)/TinyClassifier.\(host.name).compiled"
        for old in [1, 2] {
            try claimFormatVersion(old, of: path)
            do {
                _ = try await Model.load(contentsOf: URL(fileURLWithPath: path))
                XCTFail("a format-\(old) artifact loaded")
            } catch {
                XCTAssertTrue("\(error)".contains("is older than this runtime's kernels and weight layouts"), "\(error)")
                XCTAssertTrue("\(error)".contains("compile the package again"), "\(error)")
            }
        }
    }

    func testNoUsableArtifactAndNoPackageListsEveryCandidate() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try compile("arm64", into: dir)
        try Data("junk".utf8).write(to: URL(fileURLWithPath: "\(dir)/TinyClassifier.x86_64.compiled"))
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
            XCTFail("loaded")
        } catch let e as RuntimeError {
            XCTAssertTrue(e.reason.contains("TinyClassifier.arm64.compiled"), e.reason)
            XCTAssertTrue(e.reason.contains("TinyClassifier.x86_64.compiled"), e.reason)
        }
    }

    func testBookmarkSurvivesDeletingThePackageButNotARuntimeUpgrade() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.copyItem(atPath: classifier, toPath: "\(dir)/Copy.kiln")
        let cache = SpecializationCache(directory: "\(dir)/cache")
        var o = SpecializationOptions()
        o.policy = .persistent
        let model = try await cache.specialize(contentsOf: URL(fileURLWithPath: "\(dir)/Copy.kiln"), options: o)
        let bookmark = try XCTUnwrap(model.bookmarkData)
        try FileManager.default.removeItem(atPath: "\(dir)/Copy.kiln")
        let reopened = try cache.model(resolvingBookmark: bookmark)
        let (p1, p2) = (try await probabilities(reopened), try await probabilities(model))
        XCTAssertEqual(p1, p2)
        XCTAssertTrue(cache.clear(all: false).isEmpty, "persistent entries survive clear without --all")
        let next = CompiledFormat.runtimeVersion
        let upgraded = SpecializationCache(directory: "\(dir)/cache", runtimeVersion: RuntimeVersion(next.major, next.minor + 1))
        XCTAssertThrowsError(try upgraded.model(resolvingBookmark: bookmark)) { e in
            XCTAssertEqual((e as? SpecializationCacheError)?.kind, .notFound)
        }
        cache.clear(all: true)
        XCTAssertThrowsError(try cache.model(resolvingBookmark: bookmark)) { e in
            XCTAssertEqual((e as? SpecializationCacheError)?.kind, .notFound)
        }
        XCTAssertThrowsError(try cache.model(resolvingBookmark: Data("nope".utf8))) { e in
            XCTAssertEqual((e as? SpecializationCacheError)?.kind, .invalidBookmark)
        }
    }

    func testCorruptEntryIsRebuiltAndUnwritableCacheDegradesToMemory() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = SpecializationCache(directory: "\(dir)/cache")
        let url = URL(fileURLWithPath: classifier)
        _ = try await cache.specialize(contentsOf: url)
        let entry = cache.entries()[0]
        var bytes = try Data(contentsOf: URL(fileURLWithPath: entry.path))
        bytes[bytes.count - 100] ^= 0xFF // inside the weights
        try bytes.write(to: URL(fileURLWithPath: entry.path))
        let missing = try await cache.model(for: url)
        XCTAssertNil(missing, "a corrupt entry is not a hit")
        let rebuilt = try await cache.specialize(contentsOf: url)
        XCTAssertTrue(rebuilt.explanation.specialization!.hasPrefix("specialized"), rebuilt.explanation.description)
        let hit = try await cache.model(for: url)
        XCTAssertNotNil(hit)
        // A cache directory under a regular file cannot be created: specialize in memory.
        try Data().write(to: URL(fileURLWithPath: "\(dir)/file"))
        let memory = try await SpecializationCache(directory: "\(dir)/file/cache").specialize(contentsOf: url)
        XCTAssertEqual(memory.explanation.specialization, "specialized for \(Architecture.host!.name) in memory")
        XCTAssertFalse(memory.explanation.warnings.isEmpty)
        let (p1, p2) = (try await probabilities(memory), try await probabilities(rebuilt))
        XCTAssertEqual(p1, p2)
    }

    func testPruneEvictsLeastRecentlyUsed() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = SpecializationCache(directory: "\(dir)/cache")
        _ = try await cache.specialize(contentsOf: URL(fileURLWithPath: classifier))
        let encoderURL = URL(fileURLWithPath: "\(repositoryRoot)/examples/TinyEncoder.kiln")
        _ = try await cache.specialize(contentsOf: encoderURL)
        // Touch the classifier's entry so the encoder's is the least recently used.
        let older = Date(timeIntervalSinceNow: -100)
        let encoderEntry = cache.entries().first { $0.source.hasSuffix("TinyEncoder.kiln") }!
        try FileManager.default.setAttributes([.modificationDate: older], ofItemAtPath: encoderEntry.path)
        let removed = cache.prune(maxBytes: cache.entries().map(\.bytes).max()!)
        XCTAssertEqual(removed.map(\.key), [encoderEntry.key])
        XCTAssertEqual(cache.entries().count, 1)
    }
}
