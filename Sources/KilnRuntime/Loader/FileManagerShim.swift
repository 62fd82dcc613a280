import Foundation

/// The few file operations the loader and cache need, each failing with a reason.
enum FileManagerShim {
    static func contents(of directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
    }

    static func isDirectory(_ path: String) -> Bool {
        var d: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &d) && d.boolValue
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }

    /// Writes `bytes` to a temporary file beside `path`, flushes it, and renames it into place.
    static func writeAtomically(_ path: String, _ bytes: [UInt8]) throws {
        let tmp = "\(path).tmp-\(getpid())-\(UInt64.random(in: 0 ..< UInt64.max))"
        let fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw RuntimeError(path: path, reason: "cannot create (\(String(cString: strerror(errno))))") }
        var ok = true
        bytes.withUnsafeBytes { raw in
            var done = 0
            while done < raw.count {
                let n = write(fd, raw.baseAddress! + done, raw.count - done)
                if n <= 0 { ok = false; return }
                done += n
            }
        }
        ok = ok && fsync(fd) == 0
        close(fd)
        guard ok, rename(tmp, path) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(tmp)
            throw RuntimeError(path: path, reason: "cannot write (\(reason))")
        }
    }
}
