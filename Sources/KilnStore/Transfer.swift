import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import KilnFormat

/// Where manifests and artifacts come from: `http://`, `https://` (FoundationNetworking, libcurl
/// underneath), `file://` or a local path.
public struct Source: Sendable, CustomStringConvertible {
    /// A remote URL, or `nil` for a local file.
    let url: URL?
    /// A local path, or `nil` for a remote URL.
    let path: String?

    /// Parses `text`.
    /// - Throws: ``StoreError`` for an unsupported scheme.
    public init(_ text: String) throws {
        if let u = URL(string: text), let scheme = u.scheme?.lowercased(), scheme.count > 1 {
            switch scheme {
            case "http", "https":
                url = u
                path = nil
            case "file":
                url = nil
                path = u.path
            default:
                throw StoreError(path: text, reason: "unsupported URL scheme '\(scheme)' (http, https, file or a path)")
            }
        } else {
            url = nil
            path = text
        }
    }

    init(url: URL?, path: String?) {
        self.url = url
        self.path = path
    }

    public var description: String { url?.absoluteString ?? path ?? "" }

    /// A file beside this one (the manifest's artifacts).
    func sibling(_ file: String) -> Source {
        if let url { return Source(url: url.deletingLastPathComponent().appendingPathComponent(file), path: nil) }
        return Source(url: nil, path: FileSystem.parentDirectory(of: path!) + "/" + file)
    }

    /// An entry's `url`, resolved against this manifest: an absolute `http(s)` URL, or a
    /// reference relative to the manifest. A remote manifest may not name local files.
    /// - Throws: ``StoreError`` for a reference that does not resolve or leaves the allowed schemes.
    func resolve(_ reference: String) throws -> Source {
        if let base = url {
            guard let resolved = URL(string: reference, relativeTo: base)?.absoluteURL,
                  let scheme = resolved.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
                throw StoreError(path: description, reason: "artifact url '\(reference)' is not an http(s) URL or a reference relative to the manifest")
            }
            return Source(url: resolved, path: nil)
        }
        if let u = URL(string: reference), let scheme = u.scheme?.lowercased(), scheme.count > 1 {
            switch scheme {
            case "http", "https": return Source(url: u, path: nil)
            case "file": return Source(url: nil, path: u.path)
            default: throw StoreError(path: description, reason: "artifact url '\(reference)' has an unsupported scheme '\(scheme)'")
            }
        }
        return Source(url: nil, path: reference.hasPrefix("/") ? reference : FileSystem.parentDirectory(of: path!) + "/" + reference)
    }

    /// The last path component.
    var fileName: String { url?.lastPathComponent ?? URL(fileURLWithPath: path!).lastPathComponent }
}

/// Downloads and copies with checks; blocks the calling thread.
struct Transfer: Sendable {
    /// Seconds without progress before a transfer fails.
    var timeout: Double

    /// Reads a small file (a manifest) whole.
    /// - Throws: ``StoreError`` naming the source.
    func read(_ source: Source, limit: Int) throws -> [UInt8] {
        var out: [UInt8] = []
        try stream(source, expectedBytes: nil, limit: limit) { out += $0 }
        return out
    }

    /// Downloads `source` to `destination` (a new file), checking size and SHA-256, then fsyncs it.
    /// - Returns: The bytes transferred.
    /// - Throws: ``StoreError``; the partial file is removed.
    @discardableResult
    func download(_ source: Source, to destination: String, bytes expected: Int?, sha256: String?) throws -> Int {
        let fd = open(destination, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw StoreError(path: destination, reason: "cannot create (\(String(cString: strerror(errno))))") }
        var ok = false
        defer {
            close(fd)
            if !ok { unlink(destination) }
        }
        var digest = SHA256()
        var count = 0
        var writeError: String?
        try stream(source, expectedBytes: expected, limit: expected.map { $0 + 1 } ?? Int.max) { chunk in
            guard writeError == nil else { return }
            chunk.withUnsafeBytes { b in
                digest.update(b)
                var done = 0
                while done < b.count {
                    let n = write(fd, b.baseAddress! + done, b.count - done)
                    if n < 0 {
                        if errno == EINTR { continue }
                        writeError = String(cString: strerror(errno))
                        return
                    }
                    done += n
                }
            }
            count += chunk.count
        }
        if let writeError { throw StoreError(path: destination, reason: "cannot write (\(writeError))") }
        if let expected, count != expected {
            throw StoreError(path: source.description, reason: "transfer gave \(count) bytes, the manifest lists \(expected) (cut short or wrong file)")
        }
        if let sha256 {
            let got = SHA256.hex(digest.finalize())
            guard got == sha256 else {
                throw StoreError(path: source.description, reason: "SHA-256 \(got) differs from the manifest's \(sha256); the download is damaged or not the listed file")
            }
        }
        guard fsync(fd) == 0 else { throw StoreError(path: destination, reason: "fsync failed (\(String(cString: strerror(errno))))") }
        ok = true
        return count
    }

    /// Feeds `source`'s bytes to `sink` in order.
    func stream(_ source: Source, expectedBytes: Int?, limit: Int, _ sink: (Data) -> Void) throws {
        if let path = source.path {
            let fd = open(path, O_RDONLY | O_CLOEXEC)
            guard fd >= 0 else { throw StoreError(path: path, reason: errno == ENOENT ? "no such file" : "cannot open (\(String(cString: strerror(errno))))") }
            defer { close(fd) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var total = 0
            while true {
                let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw StoreError(path: path, reason: "cannot read (\(String(cString: strerror(errno))))")
                }
                if n == 0 { break }
                total += n
                guard total <= limit else { throw StoreError(path: path, reason: "is larger than expected (over \(limit) bytes)") }
                sink(Data(buffer[0 ..< n]))
            }
            return
        }
        try HTTPStream(url: source.url!, timeout: timeout, limit: limit).run(sink)
    }
}

/// One HTTP GET streamed through a URLSession delegate. The sink runs on the session's queue,
/// one chunk at a time; the caller waits.
final class HTTPStream: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    let url: URL
    let timeout: Double
    let limit: Int
    private let lock = NSLock()
    private var failure: String?
    private var received = 0
    private var sink: ((Data) -> Void)?
    private let done = DispatchSemaphore(value: 0)

    init(url: URL, timeout: Double, limit: Int) {
        self.url = url
        self.timeout = timeout
        self.limit = limit
    }

    func run(_ sink: (Data) -> Void) throws {
        withoutActuallyEscaping(sink) { escapable in
            self.sink = escapable
            let configuration = URLSessionConfiguration.ephemeral
            configuration.timeoutIntervalForRequest = timeout
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            configuration.urlCache = nil
            let queue = OperationQueue()
            queue.maxConcurrentOperationCount = 1
            let session = URLSession(configuration: configuration, delegate: self, delegateQueue: queue)
            var request = URLRequest(url: url)
            request.httpMethod = "GET"
            request.setValue("identity", forHTTPHeaderField: "Accept-Encoding")
            request.setValue("kiln/\(CompiledFormat.compilerVersion)", forHTTPHeaderField: "User-Agent")
            let task = session.dataTask(with: request)
            task.resume()
            done.wait()
            session.finishTasksAndInvalidate()
            self.sink = nil
        }
        lock.lock()
        defer { lock.unlock() }
        if let failure { throw StoreError(path: url.absoluteString, reason: failure) }
    }

    private func fail(_ reason: String) {
        lock.lock()
        if failure == nil { failure = reason }
        lock.unlock()
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        if let http = response as? HTTPURLResponse, http.statusCode != 200 {
            let text = HTTPURLResponse.localizedString(forStatusCode: http.statusCode)
            fail(http.statusCode == 404 ? "not found on the server (HTTP 404)" : "the server answered HTTP \(http.statusCode) (\(text))")
            completionHandler(.cancel)
            return
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        received += data.count
        if received > limit {
            fail("sent more than the \(limit == Int.max ? 0 : limit - 1) bytes expected")
            dataTask.cancel()
            return
        }
        sink?(data)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: Error?) {
        if let error {
            let ns = error as NSError
            if ns.code == NSURLErrorTimedOut {
                fail("the transfer stalled (no data for \(Int(timeout)) s) after \(received) bytes")
            } else if ns.code == NSURLErrorCancelled {
                fail("the transfer was cancelled after \(received) bytes")
            } else {
                fail("the transfer failed after \(received) bytes: \(ns.localizedDescription)")
            }
        }
        done.signal()
    }
}
