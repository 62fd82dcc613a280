import Dispatch
import Foundation
import KilnFormat
import KilnRuntime

// The C API of `include/kiln.h` (specs/c-api.md): opaque handles are retained Swift objects;
// strings handed out are owned by the handle that returned them.

let abiVersion: UInt32 = 1
nonisolated(unsafe) let versionString = strdup("\(CompiledFormat.compilerVersion) (runtime \(CompiledFormat.runtimeVersion), C ABI 1)")!
nonisolated(unsafe) let hostString: UnsafeMutablePointer<CChar>? = hostArchitectureName.map { strdup($0)! }

/// A C string owned by a handle.
final class CString: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<CChar>
    init(_ s: String) { pointer = strdup(s)! }
    deinit { free(pointer) }
}

/// Runs async work to completion on the calling thread (C callers are never on the Swift
/// concurrency pool, so blocking here cannot starve it): the result, handed across threads.
final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, Error>?
}

/// Runs `body` to completion, blocking the calling thread.
/// - Throws: What `body` throws.
func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
    let box = ResultBox<T>()
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        do { box.result = .success(try await body()) } catch { box.result = .failure(error) }
        done.signal()
    }
    done.wait()
    return try box.result!.get()
}

/// A C string argument as a String.
/// - Throws: ``StatusError`` naming `what` when it is NULL.
func string(_ p: UnsafePointer<CChar>?, _ what: String) throws -> String {
    guard let p else { throw StatusError(status: .invalidArgument, message: "\(what) is NULL") }
    return String(cString: p)
}

// MARK: Library

@_cdecl("kiln_abi_version")
public func kiln_abi_version() -> UInt32 { abiVersion }

@_cdecl("kiln_version")
public func kiln_version() -> UnsafePointer<CChar> { UnsafePointer(versionString) }

@_cdecl("kiln_host_architecture")
public func kiln_host_architecture() -> UnsafePointer<CChar>? { hostString.map { UnsafePointer($0) } }

@_cdecl("kiln_last_error")
public func kiln_last_error() -> UnsafePointer<CChar> { ThreadError.current }

@_cdecl("kiln_dtype_size")
public func kiln_dtype_size(_ dtype: Int32) -> Int { DTypeCode.type(dtype).map { $0.bitWidth / 8 } ?? 0 }

/// `kiln_dtype` values.
enum DTypeCode {
    static let table: [(Int32, DataType)] = [
        (1, .float32), (2, .float16), (3, .bfloat16), (4, .float64), (5, .int64), (6, .int32), (7, .int16), (8, .int8),
        (9, .uint8), (10, .bool), (11, .uint16), (12, .uint32), (13, .uint64),
    ]
    static func type(_ code: Int32) -> DataType? { table.first { $0.0 == code }?.1 }
    static func code(_ type: DataType) -> Int32 { table.first { $0.1 == type }?.0 ?? 0 }
}
