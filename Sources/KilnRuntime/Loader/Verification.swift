import Foundation
import KilnFormat

/// Checks an artifact's weights before its first run, remembering files already checked.
///
/// The memo is a directory of empty-named records, `<cache>/verified/<sha256>`, one per verified
/// file version: the SHA-256 of the file's identity (device, inode, size, mtime and ctime in
/// nanoseconds), its stored header CRC, its stored weight CRC and the check made. A record is
/// written only after the check passed on the bytes mapped from that very file version (the
/// identity comes from `fstat` of the descriptor that was mapped). Any write to the file moves
/// its ctime, which unprivileged code cannot set back, so a changed file never matches a record
/// even when its size and mtime are restored (`touch -r`). A missing or unwritable memo only
/// costs a rehash.
struct ArtifactVerifier: Sendable {
    /// `false` when the caller opted out (`verifyChecksums = false`, `--no-verify`).
    var enabled: Bool
    /// The memo directory, or `nil` for none.
    var memo: String?

    init(enabled: Bool, cacheDirectory: String?) {
        self.enabled = enabled
        memo = cacheDirectory.map { "\($0)/verified" }
    }

    func record(_ identity: FileIdentity, _ check: String) -> String? {
        guard let memo else { return nil }
        let text = "kiln-verified;v1;\(identity);\(check)"
        return "\(memo)/\(Array(text.utf8).withUnsafeBytes { SHA256.hex(SHA256.hash($0)) })"
    }

    func remembered(_ identity: FileIdentity?, _ check: String) -> Bool {
        guard let identity, let path = record(identity, check) else { return false }
        return access(path, F_OK) == 0
    }

    func remember(_ identity: FileIdentity?, _ check: String, path file: String) {
        guard let identity, let memo, let path = record(identity, check) else { return }
        SharedDirectory.make(memo)
        // Not fsync'ed: a lost record costs one rehash, never a wrong answer.
        let temp = "\(path).tmp-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let fd = open(temp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { return }
        let line = Array("\(file)\n".utf8)
        _ = line.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        SharedDirectory.share(fd: fd, in: memo)
        close(fd)
        if rename(temp, path) != 0 { unlink(temp) }
    }

    /// Checks `artifact`'s weight section unless disabled, already checked while reading, or
    /// remembered for this unchanged file.
    /// - Returns: A sentence for the load explanation.
    /// - Throws: ``PackageError`` naming `path` and the failed check.
    func verify(_ artifact: CompiledArtifact, path: String) throws -> String {
        guard enabled else { return "weights not verified (verification turned off)" }
        if artifact.weightsVerified { return "weights verified (CRC-32)" }
        let check = "header=\(String(artifact.headerChecksum, radix: 16));weights=\(String(artifact.weightsChecksum, radix: 16));crc32"
        if remembered(artifact.file, check) { return "weights verified on an earlier load of this unchanged file" }
        let start = DispatchTime.now().uptimeNanoseconds
        do {
            try artifact.verifyWeights()
        } catch let e as PackageError {
            throw e.inFile(path)
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        remember(artifact.file, check, path: path)
        let rate = seconds > 0 ? String(format: " at %.1f GB/s", Double(artifact.weightBytes) / seconds / 1e9) : ""
        return "weights verified (CRC-32 of \(artifact.weightBytes) bytes\(rate))"
    }

    /// Checks an artifact file's size and SHA-256 against what `assets.json` lists, unless
    /// disabled or remembered. A match covers the weights too (the digest is of the whole file).
    /// - Returns: A sentence for the load explanation.
    /// - Throws: ``ArtifactSelection/Refusal`` on a mismatch.
    func verifyListed(_ artifact: CompiledArtifact, path: String, sha256 expected: String, bytes: Int?) throws -> String {
        guard enabled else { return "not verified (verification turned off)" }
        let expected = expected.lowercased()
        let size = artifact.fileBytes?.count ?? 0
        if let bytes, bytes != size {
            throw ArtifactSelection.Refusal(.damaged, "assets.json: the file is \(size) bytes, the manifest lists \(bytes)")
        }
        let check = "sha256=\(expected)"
        if remembered(artifact.file, check) { return "SHA-256 matched assets.json on an earlier load of this unchanged file" }
        guard let bytes = artifact.fileBytes else { throw ArtifactSelection.Refusal(.unreadable, "no file bytes to hash") }
        let start = DispatchTime.now().uptimeNanoseconds
        let digest = SHA256.hex(SHA256.hash(bytes.bytes))
        guard digest == expected else {
            throw ArtifactSelection.Refusal(.damaged, "assets.json: SHA-256 \(digest) differs from the manifest's \(expected)")
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        remember(artifact.file, check, path: path)
        let rate = seconds > 0 ? String(format: " at %.1f GB/s", Double(size) / seconds / 1e9) : ""
        return "SHA-256 of \(size) bytes matches assets.json\(rate)"
    }
}

/// Directories a group of users shares: when a directory is setgid, what Kiln creates in it is
/// group-writable (directories `02775`, files `0664`), whatever the process's umask.
enum SharedDirectory {
    static func isShared(_ path: String) -> Bool {
        var st = stat()
        return stat(path, &st) == 0 && (st.st_mode & S_ISGID) != 0
    }

    /// Creates `path` and its parents; a directory made inside a setgid one is setgid and group-writable.
    @discardableResult
    static func make(_ path: String) -> Bool {
        var st = stat()
        if stat(path, &st) == 0 { return (st.st_mode & S_IFMT) == S_IFDIR }
        let parent = (path as NSString).deletingLastPathComponent
        if !parent.isEmpty, parent != path { make(parent) }
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { return false }
        if isShared(parent) { chmod(path, 0o2775) }
        return true
    }

    /// Makes an open file group-writable when it lives in a shared directory.
    static func share(fd: Int32, in directory: String) {
        if isShared(directory) { fchmod(fd, 0o664) }
    }

    /// Makes a file group-writable when it lives in a shared directory.
    static func share(path: String, in directory: String) {
        if isShared(directory) { chmod(path, 0o664) }
    }
}
