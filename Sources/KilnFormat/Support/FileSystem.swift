#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one place Kiln's file-system calls are checked: a failing call throws
/// a ``PackageError`` naming the file and the operating system's reason.
public enum FileSystem {
    static func errnoError(_ path: String, _ what: String, _ code: Int32 = errno) -> PackageError {
        PackageError(path: path, reason: "\(what) failed: \(String(cString: strerror(code)))")
    }

    /// Whether `path` exists, and whether it is a directory.
    /// SHA-256 of a whole file, read through a mapping.
    /// - Parameter path: The file.
    /// - Returns: 32 bytes.
    /// - Throws: ``PackageError`` naming the file when it cannot be read.
    public static func sha256(ofFileAt path: String) throws -> [UInt8] {
        let file = try MappedFile(path: path)
        return withExtendedLifetime(file) { SHA256.hash(file.bytes) }
    }

    static func kind(of path: String) -> (exists: Bool, isDirectory: Bool) {
        var st = stat()
        guard stat(path, &st) == 0 else { return (false, false) }
        return (true, (st.st_mode & S_IFMT) == S_IFDIR)
    }

    /// The whole contents of a (small) file, read with `read(2)`.
    /// - Throws: ``PackageError`` naming the file and the operating system's reason.
    public static func readFile(_ path: String) throws -> [UInt8] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw errnoError(path, "open") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw errnoError(path, "stat") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw PackageError(path: path, reason: "not a regular file") }
        var out = [UInt8](repeating: 0, count: Int(st.st_size))
        var done = 0
        while done < out.count {
            let n = out.withUnsafeMutableBytes { read(fd, $0.baseAddress! + done, $0.count - done) }
            if n < 0 {
                if errno == EINTR { continue }
                throw errnoError(path, "read")
            }
            if n == 0 { break }
            done += n
        }
        if done < out.count { out.removeLast(out.count - done) }
        return out
    }

    /// Writes a secret (a key file) atomically with mode 0600.
    /// - Throws: ``PackageError`` naming the file.
    public static func writeSecret(_ bytes: [UInt8], to path: String) throws {
        try bytes.withUnsafeBytes { try writeAtomically(path, [$0], mode: 0o600) }
    }

    /// Writes `bytes` to `path` atomically: a temporary file beside it, fsync, rename.
    /// Errors name `path`, not the temporary file.
    package static func writeAtomically(_ path: String, _ chunks: [UnsafeRawBufferPointer], mode: mode_t = 0o644) throws {
        let tmp = "\(path).tmp-\(getpid())"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode)
        guard fd >= 0 else { throw errnoError(path, "creating a temporary file beside it") }
        var ok = false
        defer {
            if !ok { unlink(tmp) }
        }
        do {
            defer { close(fd) }
            for chunk in chunks {
                try writeAll(fd, chunk, path: path)
            }
            guard fsync(fd) == 0 else { throw errnoError(path, "fsync") }
        }
        guard rename(tmp, path) == 0 else { throw errnoError(path, "rename") }
        ok = true
        syncDirectory(containing: path)
    }

    static func writeAll(_ fd: Int32, _ chunk: UnsafeRawBufferPointer, path: String) throws {
        var done = 0
        while done < chunk.count {
            let n = write(fd, chunk.baseAddress! + done, chunk.count - done)
            if n < 0 {
                if errno == EINTR { continue }
                throw errnoError(path, "write")
            }
            done += n
        }
    }

    /// Flushes a directory entry change (best effort).
    static func syncDirectory(containing path: String) {
        let dir = parentDirectory(of: path)
        let fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if fd >= 0 {
            _ = fsync(fd)
            close(fd)
        }
    }

    package static func parentDirectory(of path: String) -> String {
        var p = path
        while p.count > 1 && p.hasSuffix("/") { p.removeLast() }
        guard let slash = p.lastIndex(of: "/") else { return "." }
        let dir = String(p[..<slash])
        return dir.isEmpty ? "/" : dir
    }

    /// Creates `path` and any missing parents.
    package static func makeDirectories(_ path: String) throws {
        if kind(of: path).isDirectory { return }
        let parent = parentDirectory(of: path)
        if parent != path, !kind(of: parent).exists { try makeDirectories(parent) }
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw errnoError(path, "mkdir") }
    }

    static func makeDirectory(_ path: String) throws {
        guard mkdir(path, 0o755) == 0 else { throw errnoError(path, "mkdir") }
    }

    /// Removes a file or a directory tree (best effort).
    static func removeTree(_ path: String) {
        let k = kind(of: path)
        guard k.exists else { return }
        if k.isDirectory, let dir = opendir(path) {
            var names: [String] = []
            while let entry = readdir(dir) {
                let name = withUnsafePointer(to: entry.pointee.d_name) {
                    $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
                }
                if name != "." && name != ".." { names.append(name) }
            }
            closedir(dir)
            for n in names { removeTree("\(path)/\(n)") }
            rmdir(path)
        } else {
            unlink(path)
        }
    }

    /// Moves a fully written directory `staged` to `path`, replacing what is there.
    ///
    /// A reader sees either the old package or the new one at `path`, except for
    /// the moment between moving the old one aside and moving the new one in.
    static func replaceDirectory(_ path: String, with staged: String) throws {
        if kind(of: path).exists {
            let aside = "\(path).old-\(getpid())"
            removeTree(aside)
            guard rename(path, aside) == 0 else { throw errnoError(path, "rename") }
            guard rename(staged, path) == 0 else {
                let e = errnoError(path, "rename")
                _ = rename(aside, path)
                throw e
            }
            removeTree(aside)
        } else {
            guard rename(staged, path) == 0 else { throw errnoError(path, "rename") }
        }
        syncDirectory(containing: path)
    }
}

/// A read-only memory mapping of a whole file, unmapped when released.
final class MappedFile: @unchecked Sendable {
    let path: String
    let base: UnsafeRawPointer?
    let count: Int
    /// The mapped file as `fstat` saw it when it was opened.
    let identity: FileIdentity

    init(path: String) throws {
        self.path = path
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw FileSystem.errnoError(path, "open") }
        defer { close(fd) }
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileSystem.errnoError(path, "stat") }
        guard (st.st_mode & S_IFMT) == S_IFREG else { throw PackageError(path: path, reason: "not a regular file") }
        count = Int(st.st_size)
        identity = FileIdentity(st)
        if count == 0 {
            base = nil
            return
        }
        let p = mmap(nil, count, PROT_READ, MAP_PRIVATE, fd, 0)
        guard let p, p != MAP_FAILED else { throw FileSystem.errnoError(path, "mmap") }
        base = UnsafeRawPointer(p)
    }

    deinit {
        if let base { munmap(UnsafeMutableRawPointer(mutating: base), count) }
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Drops the process's resident copies of the whole pages inside `range` (read again from the
    /// page cache when next touched; the mapping is read-only and private, so nothing is lost).
    func releaseResidentPages(_ range: Range<Int>) {
        guard let base, !range.isEmpty else { return }
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let start = (max(range.lowerBound, 0) + page - 1) / page * page, end = min(range.upperBound, count) / page * page
        guard start < end else { return }
        madvise(UnsafeMutableRawPointer(mutating: base + start), end - start, MADV_DONTNEED)
    }

    /// A zero-copy view of `range`, keeping the mapping alive.
    func storage(_ range: Range<Int>) -> ByteStorage {
        guard let base else { return ByteStorage([]) }
        return ByteStorage(borrowing: base + range.lowerBound, count: range.count, owner: self)
    }
}

/// What identifies one version of a file on this machine without reading it: device, inode,
/// size, and the modification and status-change times in nanoseconds.
///
/// Any write to the file moves its status-change time (ctime), which no unprivileged call can set
/// back (`touch -r` restores the modification time and itself moves ctime), so an identity that
/// equals a remembered one names the same, unchanged bytes.
public struct FileIdentity: Sendable, Hashable, CustomStringConvertible {
    /// `st_dev`.
    public var device: UInt64
    /// `st_ino`.
    public var inode: UInt64
    /// `st_size`.
    public var size: Int64
    /// `st_mtim` in nanoseconds.
    public var modified: Int64
    /// `st_ctim` in nanoseconds.
    public var changed: Int64

    init(_ st: stat) {
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        size = Int64(st.st_size)
        modified = Int64(st.st_mtim.tv_sec) * 1_000_000_000 + Int64(st.st_mtim.tv_nsec)
        changed = Int64(st.st_ctim.tv_sec) * 1_000_000_000 + Int64(st.st_ctim.tv_nsec)
    }

    /// The identity of the file at `path` now, or `nil` when it cannot be stat'ed.
    /// - Parameter path: The file.
    public init?(path: String) {
        var st = stat()
        guard stat(path, &st) == 0 else { return nil }
        self.init(st)
    }

    /// `dev=…;ino=…;size=…;mtime=…;ctime=…`.
    public var description: String { "dev=\(device);ino=\(inode);size=\(size);mtime=\(modified);ctime=\(changed)" }
}

/// Files written whole or not at all.
public enum AtomicFile {
    /// Writes the concatenation of `chunks` to `path`: a temporary file beside it, fsync, rename,
    /// then fsync of the directory. A crash leaves either the old file or the new one.
    /// - Parameters:
    ///   - chunks: The bytes, in order.
    ///   - path: The destination.
    /// - Throws: ``PackageError`` naming the file when it cannot be written.
    public static func write(_ chunks: [[UInt8]], to path: String) throws {
        func withPointers(_ i: Int, _ acc: [UnsafeRawBufferPointer], _ body: ([UnsafeRawBufferPointer]) throws -> Void) rethrows {
            guard i < chunks.count else { return try body(acc) }
            try chunks[i].withUnsafeBytes { try withPointers(i + 1, acc + [$0], body) }
        }
        try withPointers(0, []) { try FileSystem.writeAtomically(path, $0) }
    }
}
