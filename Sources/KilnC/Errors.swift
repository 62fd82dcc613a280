import Foundation
import KilnFormat
import KilnRuntime

// Errors of the C API: each failure becomes a `kiln_status` and a message, kept per thread
// (`kiln_last_error`) and per model (`kiln_model_copy_error`).

/// The `kiln_status` values.
enum Status: Int32 {
    case ok = 0, invalidArgument, notFound, malformed, key, unsupported, run, `internal`
}

/// The last error message per thread.
enum ThreadError {
    static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k) { free($0) }
        return k
    }()
    nonisolated(unsafe) static let empty = strdup("")!

    static func set(_ message: String) {
        free(pthread_getspecific(key))
        pthread_setspecific(key, strdup(message))
    }

    static var current: UnsafePointer<CChar> {
        guard let p = pthread_getspecific(key) else { return UnsafePointer(empty) }
        return UnsafePointer(p.assumingMemoryBound(to: CChar.self))
    }
}

/// Maps an error to a status and records its message.
func fail(_ error: Error, model: ModelHandle? = nil) -> Int32 {
    let status: Status
    let message: String
    switch error {
    case let e as StatusError:
        status = e.status
        message = e.message
    case let e as ArtifactKeyError:
        status = .key
        message = e.description
    case let e as PackageError:
        status = e.reason.hasPrefix("no such") ? .notFound : .malformed
        message = e.description
    case let e as RuntimeError:
        if e.reason.contains("no such file") || e.reason.hasPrefix("holds no model") {
            status = .notFound
        } else if e.reason.contains("runs on this host") || e.reason.contains("cannot run") || e.reason.contains("arch cap") {
            status = .unsupported
        } else {
            status = .invalidArgument
        }
        message = e.description
    case let e as InferenceError:
        status = e.op == nil ? .invalidArgument : .run
        message = e.description
    default:
        status = .internal
        message = "\(error)"
    }
    ThreadError.set(message)
    model?.setError(message)
    return status.rawValue
}

/// A failure of the C API itself (a NULL argument, a bad index …), with the status it returns.
struct StatusError: Error {
    var status: Status
    var message: String
}
