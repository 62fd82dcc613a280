import Foundation
import KilnFormat
import KilnTestSupport
import XCTest

/// The specialization cache across processes: a killed specializer leaves nothing that loads
/// as valid, and two processes specializing the same package do the work once.
final class SpecializationProcessTests: XCTestCase {
    let golden = "\(testGoldens)/minilm_l3_paraphrase"

    /// A directory holding only an arm64 artifact and the MiniLM package: x86-64 hosts specialize.
    func prepare() throws -> (dir: String, cache: String, inputs: [String]) {
        let root = try temporaryDirectory(self)
        let dir = "\(root)/model"
        let convert = try kiln(["convert", "\(testModels)/minilm_l3_paraphrase.onnx", "-o", "\(dir)/MiniLM.kiln"])
        XCTAssertEqual(convert.status, 0, convert.stderr)
        let compile = try kiln(["compile", "\(dir)/MiniLM.kiln", "--arch", "arm64", "-o", dir])
        XCTAssertEqual(compile.status, 0, compile.stderr)
        try? FileManager.default.removeItem(atPath: "\(dir)/assets.json")
        return (dir, "\(root)/xdg", ["--input", "input_ids=\(golden)/in_0_input_ids.npy",
                                     "--input", "attention_mask=\(golden)/in_1_attention_mask.npy"])
    }

    func spawn(_ arguments: [String], cache: String, stderr: String) throws -> Process {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: productPath("kiln"))
        p.arguments = arguments
        var env = ProcessInfo.processInfo.environment
        env["XDG_CACHE_HOME"] = cache
        p.environment = env
        p.standardInput = FileHandle.nullDevice
        p.standardOutput = FileHandle.nullDevice
        FileManager.default.createFile(atPath: stderr, contents: nil)
        p.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: stderr))
        try p.run()
        return p
    }

    func testTwoProcessesSpecializeOnce() throws {
        #if !arch(x86_64)
        throw XCTSkip("the arm64 artifact would load directly")
        #else
        let (dir, cache, inputs) = try prepare()
        let args = ["run", dir, "--explain", "--print"] + inputs
        let a = try spawn(args, cache: cache, stderr: "\(dir)/../a.err"), b = try spawn(args, cache: cache, stderr: "\(dir)/../b.err")
        a.waitUntilExit()
        b.waitUntilExit()
        XCTAssertEqual(a.terminationStatus, 0)
        XCTAssertEqual(b.terminationStatus, 0)
        let logs = try ["a", "b"].map { String(decoding: try fileBytes("\(dir)/../\($0).err"), as: UTF8.self) }
        XCTAssertEqual(logs.filter { $0.contains("specialized for") }.count, 1, logs.joined(separator: "\n---\n"))
        XCTAssertEqual(logs.filter { $0.contains("cache hit") }.count, 1, logs.joined(separator: "\n---\n"))
        let list = try kiln(["cache", "list", "--dir", "\(cache)/kiln", "--json"])
        let entries = (try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as! [String: Any])["entries"] as! [Any]
        XCTAssertEqual(entries.count, 1)
        #endif
    }

    func testKilledSpecializerLeavesNoValidLookingEntry() throws {
        #if !arch(x86_64)
        throw XCTSkip("the arm64 artifact would load directly")
        #else
        let (dir, cache, inputs) = try prepare()
        // How long an uninterrupted run takes here, so the kills land while the child still works.
        let started = Date()
        let full = try spawn(["run", dir, "--print"] + inputs, cache: cache, stderr: "\(dir)/../full.err")
        full.waitUntilExit()
        XCTAssertEqual(full.terminationStatus, 0)
        let duration = Date().timeIntervalSince(started)
        for fraction in [0.1, 0.3, 0.5] {
            // A kill proves something only if the child was still running: a run that finished first
            // (a warmer machine) is tried again with half the delay.
            var delay = duration * fraction, killed = false
            for _ in 0 ..< 5 where !killed {
                try? FileManager.default.removeItem(atPath: cache)
                let p = try spawn(["run", dir, "--print"] + inputs, cache: cache, stderr: "\(dir)/../k.err")
                Thread.sleep(forTimeInterval: delay)
                kill(p.processIdentifier, SIGKILL)
                p.waitUntilExit()
                killed = p.terminationReason == .uncaughtSignal && p.terminationStatus == SIGKILL
                delay /= 2
            }
            XCTAssertTrue(killed, "no run of \(duration) s was still running after \(delay * 2) s to be killed")
            // Whatever is in the cache now either is a complete, valid artifact or is ignored.
            let folder = "\(cache)/kiln/evictable"
            for file in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where file.hasSuffix(".compiled") {
                XCTAssertNoThrow(try CompiledArtifact.read(at: "\(folder)/\(file)", verifyWeights: true), "delay \(delay): \(file)")
            }
            let after = try spawn(["run", dir, "--print"] + inputs, cache: cache, stderr: "\(dir)/../after.err")
            after.waitUntilExit()
            let log = String(decoding: try fileBytes("\(dir)/../after.err"), as: UTF8.self)
            XCTAssertEqual(after.terminationStatus, 0, log)
        }
        #endif
    }
}
