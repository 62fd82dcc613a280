import Foundation
import KilnCompiler
import KilnFormat
import KilnRuntime
import XCTest

/// Integrity on every load path (file, directory, specialization cache, bookmark), the
/// verified-file memo, selection by model name and the arch cap.
final class IntegrityTests: XCTestCase {
    let classifier = "\(repositoryRoot)/examples/TinyClassifier.kiln"
    let encoder = "\(repositoryRoot)/examples/TinyEncoder.kiln"
    let features = NDArray(shape: [2, 64], scalars: (0 ..< 128).map { Float(cos(Double($0) * 0.3)) })

    func options(_ cacheDir: String) -> ModelLoadOptions {
        var o = ModelLoadOptions()
        o.cache = SpecializationCache(directory: cacheDir)
        return o
    }

    @discardableResult
    func compile(_ arch: String, into dir: String, package: String? = nil) throws -> String {
        let path = package ?? classifier
        let model = try PackageReader.read(at: path)
        let name = URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
        let file = "\(dir)/\(name).\(arch).compiled"
        try compileArtifact(model, Architecture.named(arch)!, to: file, digest: try PackageReader.digest(ofPackageAt: path))
        return file
    }

    /// The byte ranges of an artifact's header, plan and weight section.
    func sections(_ path: String) throws -> (header: Range<Int>, plan: Range<Int>, weights: Range<Int>) {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let (_, s) = try bytes.withUnsafeBytes { try CompiledArtifact.readHeader($0) }
        return (0 ..< CompiledFormat.headerSize, s[0], s[1])
    }

    /// Flips bytes in place, keeping size; with `keepTimes` the modification time is set back
    /// as `touch -r` would.
    func damage(_ path: String, at offset: Int, count: Int = 64, keepTimes: Bool = false) throws {
        var st = stat()
        XCTAssertEqual(stat(path, &st), 0)
        let fd = open(path, O_RDWR)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var bytes = [UInt8](repeating: 0, count: count)
        _ = pread(fd, &bytes, count, off_t(offset))
        for i in bytes.indices { bytes[i] ^= 0x5A }
        _ = pwrite(fd, bytes, count, off_t(offset))
        close(fd)
        if keepTimes {
            var times = [st.st_atim, st.st_mtim]
            XCTAssertEqual(utimensat(AT_FDCWD, path, &times, 0), 0)
            var after = stat()
            _ = stat(path, &after)
            XCTAssertEqual(after.st_size, st.st_size)
            XCTAssertEqual(after.st_mtim.tv_sec, st.st_mtim.tv_sec)
            XCTAssertEqual(after.st_mtim.tv_nsec, st.st_mtim.tv_nsec)
        }
    }

    func probabilities(_ model: Model) async throws -> [Float] {
        try await model.loadFunction(named: "main")!.run(inputs: ["features": features])["probabilities"]!.scalars(as: Float.self)
    }

    func testEveryDamagedSectionOfAFileIsRefusedNamingTheFileAndTheCheck() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let good = try compile("x86_64", into: dir)
        let s = try sections(good)
        for (what, offset) in [("weights", s.weights.lowerBound + s.weights.count / 2), ("plan", s.plan.lowerBound + s.plan.count / 2),
                               ("header", 40)] {
            let copy = "\(dir)/\(what)/TinyClassifier.x86_64.compiled"
            try FileManager.default.createDirectory(atPath: "\(dir)/\(what)", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: good, toPath: copy)
            try damage(copy, at: offset, count: what == "header" ? 4 : 64)
            do {
                _ = try await Model.load(contentsOf: URL(fileURLWithPath: copy), options: options("\(dir)/cache"))
                XCTFail("a damaged \(what) loaded")
            } catch {
                let message = "\(error)"
                XCTAssertTrue(message.contains(copy), message)
                XCTAssertTrue(message.contains(what) && message.contains("checksum mismatch"), message)
            }
        }
        // The intact file loads and says how it was checked.
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: good), options: options("\(dir)/cache"))
        XCTAssertTrue(model.explanation.verification!.hasPrefix("weights verified (CRC-32"), model.explanation.description)
    }

    func testTheMemoSkipsRehashingOnlyForTheUnchangedFile() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let file = try compile("x86_64", into: dir)
        let o = options("\(dir)/cache")
        let first = try await Model.load(contentsOf: URL(fileURLWithPath: file), options: o)
        XCTAssertTrue(first.explanation.verification!.hasPrefix("weights verified (CRC-32"), first.explanation.description)
        let records = try FileManager.default.contentsOfDirectory(atPath: "\(dir)/cache/verified")
        XCTAssertEqual(records.count, 1)
        let second = try await Model.load(contentsOf: URL(fileURLWithPath: file), options: o)
        XCTAssertEqual(second.explanation.verification, "weights verified on an earlier load of this unchanged file")
        // Same size, same mtime (as `touch -r` leaves it), different bytes: ctime moved, so it is checked again.
        let s = try sections(file)
        try damage(file, at: s.weights.lowerBound + 100, count: 64, keepTimes: true)
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: file), options: o)
            XCTFail("a changed file was taken as verified")
        } catch {
            XCTAssertTrue("\(error)".contains("weights: checksum mismatch"), "\(error)")
        }
        // The explicit opt-out loads it (header and plan still checked).
        var off = o
        off.verifyChecksums = false
        let unverified = try await Model.load(contentsOf: URL(fileURLWithPath: file), options: off)
        XCTAssertEqual(unverified.explanation.verification, "weights not verified (verification turned off)")
    }

    func testADamagedCandidateIsRefusedAndTheNextOneOrThePackageIsUsed() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard let host = Architecture.host else { throw XCTSkip("no Kiln architecture on this CPU") }
        let baseline = Architecture.all.first { $0.family == host.family && $0.level == 1 }!
        guard host != baseline else { throw XCTSkip("this host runs only \(baseline.name)") }
        let best = try compile(host.name, into: dir)
        try compile(baseline.name, into: dir)
        let s = try sections(best)
        try damage(best, at: s.weights.lowerBound + 8)
        let model = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertEqual(model.architecture, baseline.name)
        let refused = model.explanation.candidates.first { $0.path == best }!
        XCTAssertTrue(refused.refusal!.reason.contains("weights: checksum mismatch"), model.explanation.description)
        let explained = try Model.explainSelection(inDirectory: dir, options: options("\(dir)/cache"))
        XCTAssertEqual(explained.chosen, "\(dir)/TinyClassifier.\(baseline.name).compiled")
        XCTAssertTrue(explained.description.contains("refused: weights: checksum mismatch"), explained.description)
        let reference = try await probabilities(try await Model.load(contentsOf: URL(fileURLWithPath: classifier)))
        for (a, b) in zip(try await probabilities(model), reference) { XCTAssertEqual(a, b, accuracy: 1e-5) }
        // Both damaged: the package beside them is specialized.
        let other = "\(dir)/TinyClassifier.\(baseline.name).compiled"
        try damage(other, at: try sections(other).weights.lowerBound + 8)
        try FileManager.default.copyItem(atPath: classifier, toPath: "\(dir)/TinyClassifier.kiln")
        let specialized = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertTrue(specialized.explanation.specialization!.hasPrefix("specialized for"), specialized.explanation.description)
        XCTAssertTrue(specialized.explanation.candidates.allSatisfy { $0.refusal != nil })
    }

    func testADirectoryRefusesEachDamagedSectionAndUsesTheNextCandidate() async throws {
        guard let host = Architecture.host else { throw XCTSkip("no Kiln architecture on this CPU") }
        let baseline = Architecture.all.first { $0.family == host.family && $0.level == 1 }!
        guard host != baseline else { throw XCTSkip("this host runs only \(baseline.name)") }
        let root = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let good = try compile(host.name, into: root)
        let s = try sections(good)
        for (what, offset, count) in [("header", 20, 4), ("plan", s.plan.lowerBound + 10, 64), ("weights", s.weights.upperBound - 100, 64)] {
            let dir = "\(root)/\(what)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            let best = "\(dir)/TinyClassifier.\(host.name).compiled"
            try FileManager.default.copyItem(atPath: good, toPath: best)
            try damage(best, at: offset, count: count)
            try compile(baseline.name, into: dir)
            let model = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(root)/cache"))
            XCTAssertEqual(model.architecture, baseline.name, what)
            let refusal = model.explanation.candidates.first { $0.path == best }!.refusal?.reason ?? ""
            XCTAssertTrue(refusal.hasPrefix(what) && refusal.contains("checksum mismatch"), "\(what): \(refusal)")
        }
    }

    func testAssetsManifestDigestsAreChecked() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard let host = Architecture.host else { throw XCTSkip("no Kiln architecture on this CPU") }
        let file = try compile(host.name, into: dir)
        let name = URL(fileURLWithPath: file).lastPathComponent
        let digest = SHA256.hex(try FileSystem.sha256(ofFileAt: file))
        func manifest(_ sha: String) throws {
            let json = #"{"model": "TinyClassifier", "artifacts": [{"arch": "\#(host.name)", "file": "\#(name)", "sha256": "\#(sha)"}]}"#
            try Data(json.utf8).write(to: URL(fileURLWithPath: "\(dir)/assets.json"))
        }
        try manifest(digest)
        let ok = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertTrue(ok.explanation.verification!.contains("matches assets.json"), ok.explanation.description)
        let again = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
        XCTAssertTrue(again.explanation.verification!.contains("earlier load"), again.explanation.description)
        try manifest(String(repeating: "0", count: 64))
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
            XCTFail("an artifact whose SHA-256 differs from assets.json loaded")
        } catch {
            XCTAssertTrue("\(error)".contains("assets.json: SHA-256"), "\(error)")
        }
    }

    func testCacheEntriesAndBookmarksAreVerified() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let cache = SpecializationCache(directory: "\(dir)/cache")
        let reference = try await probabilities(try await Model.load(contentsOf: URL(fileURLWithPath: classifier)))
        for what in ["weights", "plan", "header"] {
            let first = try await cache.specialize(contentsOf: URL(fileURLWithPath: classifier))
            let entry = first.url.path
            XCTAssertTrue(entry.hasPrefix("\(dir)/cache/evictable/"), entry)
            let bookmark = first.bookmarkData!
            let s = try sections(entry)
            let offset = what == "weights" ? s.weights.lowerBound + 16 : what == "plan" ? s.plan.lowerBound + 8 : 24
            try damage(entry, at: offset, count: what == "header" ? 4 : 64, keepTimes: true)
            // The bookmark refuses the damaged entry, naming it and the check.
            do {
                _ = try cache.model(resolvingBookmark: bookmark)
                XCTFail("a cache entry with damaged \(what) reopened")
            } catch let e as SpecializationCacheError {
                XCTAssertTrue(e.reason.contains("damaged") && e.reason.contains(entry) && e.reason.contains(what), e.reason)
            }
            // Specializing again finds it damaged, removes it and builds it anew.
            let rebuilt = try await cache.specialize(contentsOf: URL(fileURLWithPath: classifier))
            XCTAssertTrue(rebuilt.explanation.specialization!.hasPrefix("specialized for"), "\(what): \(rebuilt.explanation.description)")
            let reopened = try cache.model(resolvingBookmark: bookmark)
            for (a, b) in zip(try await probabilities(reopened), reference) { XCTAssertEqual(a, b, accuracy: 1e-5) }
        }
    }

    func testSelectionByModelName() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard Architecture.host != nil else { throw XCTSkip("no Kiln architecture on this CPU") }
        let baseline = Architecture.all.first { $0.family == Architecture.host!.family && $0.level == 1 }!
        try compile(baseline.name, into: dir)
        try compile(Architecture.host!.name, into: dir, package: encoder)
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: options("\(dir)/cache"))
            XCTFail("a two-model directory loaded without a name")
        } catch {
            XCTAssertTrue("\(error)".contains("holds 2 models ('TinyClassifier', 'TinyEncoder')"), "\(error)")
        }
        XCTAssertThrowsError(try Model.explainSelection(inDirectory: dir))
        let c = try await Model.load(contentsOf: URL(fileURLWithPath: dir), model: "TinyClassifier", options: options("\(dir)/cache"))
        XCTAssertEqual(c.metadata.name, try PackageReader.read(at: classifier).metadata.name)
        XCTAssertEqual(c.functionNames, ["main"])
        XCTAssertEqual(c.explanation.candidates.count, 1)
        let e = try await Model.load(contentsOf: URL(fileURLWithPath: dir), model: "TinyEncoder", options: options("\(dir)/cache"))
        XCTAssertEqual(e.functionNames, ["embed", "encode"])
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: dir), model: "Nothing", options: options("\(dir)/cache"))
            XCTFail("an unknown model name loaded")
        } catch {
            XCTAssertTrue("\(error)".contains("holds no model 'Nothing'; it holds 'TinyClassifier', 'TinyEncoder'"), "\(error)")
        }
        // A file of another model is refused too.
        var o = options("\(dir)/cache")
        o.model = "TinyEncoder"
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: "\(dir)/TinyClassifier.\(baseline.name).compiled"), options: o)
            XCTFail("a file of another model loaded")
        } catch {
            XCTAssertTrue("\(error)".contains("is model 'TinyClassifier', not 'TinyEncoder'"), "\(error)")
        }
    }

    func testTheArchCapChoosesAndSpecializesBelowIt() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        guard let host = Architecture.host else { throw XCTSkip("no Kiln architecture on this CPU") }
        let baseline = Architecture.all.first { $0.family == host.family && $0.level == 1 }!
        guard host != baseline else { throw XCTSkip("this host runs only \(baseline.name): nothing to cap") }
        try compile(host.name, into: dir)
        try compile(baseline.name, into: dir)
        var o = options("\(dir)/cache")
        o.maxArchitecture = baseline.name
        let capped = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: o)
        XCTAssertEqual(capped.architecture, baseline.name)
        let refused = capped.explanation.candidates.first { $0.arch == host.name }!
        XCTAssertTrue(refused.refusal!.reason.contains("above the arch cap"), capped.explanation.description)
        o.maxArchitecture = "sparc64"
        do {
            _ = try await Model.load(contentsOf: URL(fileURLWithPath: dir), options: o)
            XCTFail("an unknown cap was accepted")
        } catch {
            XCTAssertTrue("\(error)".contains("unknown architecture 'sparc64'"), "\(error)")
        }
        var s = SpecializationOptions()
        s.maxArchitecture = baseline.name
        let specialized = try await SpecializationCache(directory: "\(dir)/cache").specialize(contentsOf: URL(fileURLWithPath: classifier), options: s)
        XCTAssertEqual(specialized.architecture, baseline.name)
    }

    func testASetgidCacheDirectoryKeepsEntriesGroupWritable() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let shared = "\(dir)/shared"
        XCTAssertEqual(mkdir(shared, 0o775), 0)
        XCTAssertEqual(chmod(shared, 0o2775), 0)
        let cache = SpecializationCache(directory: shared)
        let model = try await cache.specialize(contentsOf: URL(fileURLWithPath: classifier))
        _ = try await Model.load(contentsOf: URL(fileURLWithPath: model.url.path), options: options(shared))
        func mode(_ p: String) -> mode_t {
            var st = stat()
            XCTAssertEqual(stat(p, &st), 0, p)
            return st.st_mode
        }
        for sub in ["evictable", "locks", "verified"] {
            let m = mode("\(shared)/\(sub)")
            XCTAssertNotEqual(m & S_ISGID, 0, sub)
            XCTAssertNotEqual(m & S_IWGRP, 0, sub)
        }
        let lock = try FileManager.default.contentsOfDirectory(atPath: "\(shared)/locks").first!
        XCTAssertNotEqual(mode("\(shared)/locks/\(lock)") & S_IWGRP, 0)
        XCTAssertNotEqual(mode(model.url.path) & S_IWGRP, 0)
        let record = try FileManager.default.contentsOfDirectory(atPath: "\(shared)/verified").first!
        XCTAssertNotEqual(mode("\(shared)/verified/\(record)") & S_IWGRP, 0)
    }

    func testHardwareChecksumsEqualThePortableOnes() throws {
        var rng = SystemRandomNumberGenerator()
        let bytes = (0 ..< 300_000).map { _ in UInt8.random(in: 0 ... 255, using: &rng) }
        try bytes.withUnsafeBytes { all in
            for n in Array(0 ..< 300) + [1023, 4096, 65_537, 299_999] {
                for start in [0, 1, 7] where start + n <= all.count {
                    let part = UnsafeRawBufferPointer(rebasing: all[start ..< start + n])
                    let portable = part.reduce(UInt32(0xFFFF_FFFF)) { c, b in
                        var c = c ^ UInt32(b)
                        for _ in 0 ..< 8 { c = (c >> 1) ^ (0xEDB8_8320 & (0 &- (c & 1))) }
                        return c
                    } ^ 0xFFFF_FFFF
                    XCTAssertEqual(crc32(part), portable, "CRC-32 of \(n) bytes at \(start)")
                    XCTAssertEqual(SHA256.hash(part), SHA256.portableHash(part), "SHA-256 of \(n) bytes at \(start)")
                }
            }
            XCTAssertEqual(crc32Parallel(all), crc32(all))
        }
        let big = [UInt8](repeating: 0xA5, count: 20 << 20)
        big.withUnsafeBytes { XCTAssertEqual(crc32Parallel($0), crc32($0)) }
        if !crc32UsesHardware { print("CRC-32 hardware path not available on this CPU; the table path was tested") }
        if !SHA256.usesHardware { print("SHA-256 hardware path not available on this CPU; the portable path was tested") }
        // The known answer.
        XCTAssertEqual(SHA256.hex(Array("abc".utf8).withUnsafeBytes { SHA256.hash($0) }),
                       "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
