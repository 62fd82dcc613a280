import Dispatch
import Foundation
import KilnFormat
import KilnRuntime

// The C API of `include/kiln.h` (specs/c-api.md): opaque handles are retained Swift objects;
// strings handed out are owned by the handle that returned them.

let abiVersion: UInt32 = 1
nonisolated(unsafe) let versionString = strdup("\(CompiledFormat.compilerVersion) (runtime \(CompiledFormat.runtimeVersion), C ABI 1)")!
nonisolated(unsafe) let hostString: UnsafeMutablePointer<CChar>? = hostArchitectureName.map { strdup($0)! }

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

/// A C string owned by a handle.
final class CString: @unchecked Sendable {
    let pointer: UnsafeMutablePointer<CChar>
    init(_ s: String) { pointer = strdup(s)! }
    deinit { free(pointer) }
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

struct StatusError: Error {
    var status: Status
    var message: String
}

/// Runs async work to completion on the calling thread (C callers are never on the Swift
/// concurrency pool, so blocking here cannot starve it).
final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, Error>?
}

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

// MARK: Options

final class OptionsHandle {
    var options = ModelLoadOptions()
}

func optionsHandle(_ p: OpaquePointer?) throws -> OptionsHandle {
    guard let p else { throw StatusError(status: .invalidArgument, message: "options is NULL") }
    return Unmanaged<OptionsHandle>.fromOpaque(UnsafeRawPointer(p)).takeUnretainedValue()
}

@_cdecl("kiln_options_create")
public func kiln_options_create() -> OpaquePointer? {
    OpaquePointer(Unmanaged.passRetained(OptionsHandle()).toOpaque())
}

@_cdecl("kiln_options_free")
public func kiln_options_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<OptionsHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}

func setOption(_ p: OpaquePointer?, _ body: (OptionsHandle) throws -> Void) -> Int32 {
    do {
        try body(try optionsHandle(p))
        return 0
    } catch {
        return fail(error)
    }
}

@_cdecl("kiln_options_set_model")
public func kiln_options_set_model(_ p: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.model = name.map { String(cString: $0) } }
}

@_cdecl("kiln_options_set_threads")
public func kiln_options_set_threads(_ p: OpaquePointer?, _ threads: Int32) -> Int32 {
    setOption(p) {
        guard threads >= 1 else { throw StatusError(status: .invalidArgument, message: "threads must be at least 1, not \(threads)") }
        $0.options.threads = Int(threads)
    }
}

@_cdecl("kiln_options_set_key_file")
public func kiln_options_set_key_file(_ p: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { h in
        let key = try ArtifactKey.read(at: try string(path, "the key file path"))
        h.options.useKeys([key])
    }
}

@_cdecl("kiln_options_set_cache_dir")
public func kiln_options_set_cache_dir(_ p: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.cache = SpecializationCache(directory: try string(path, "the cache directory")) }
}

@_cdecl("kiln_options_set_max_arch")
public func kiln_options_set_max_arch(_ p: OpaquePointer?, _ arch: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.maxArchitecture = arch.map { String(cString: $0) } }
}

@_cdecl("kiln_options_set_verify")
public func kiln_options_set_verify(_ p: OpaquePointer?, _ verify: Int32) -> Int32 {
    setOption(p) { $0.options.verifyChecksums = verify != 0 }
}

// MARK: Models

/// A loaded model, its prepared functions and the strings handed out for it.
final class ModelHandle: @unchecked Sendable {
    let model: Model
    let names: [CString]
    let architecture: CString?
    let explanation: CString
    private let lock = NSLock()
    private var functions: [String: (InferenceFunction, Signature)] = [:]
    private var lastError: String?

    /// A function's signature as C strings.
    final class Signature: @unchecked Sendable {
        struct IO {
            var name: CString
            var dtype: Int32
            var dims: [(Int64, CString)]
        }
        let io: [[IO]]

        init(_ d: FunctionDescriptor) {
            func convert(_ t: TensorDescriptor) -> IO {
                IO(name: CString(t.name), dtype: DTypeCode.code(t.scalarType),
                   dims: t.shape.map { d in
                       if case .symbol(let name) = d { return (-1, CString(name)) }
                       return (Int64(d.size ?? -1), CString(""))
                   })
            }
            io = [d.inputs.map(convert), d.outputs.map(convert)]
        }
    }

    init(_ model: Model) {
        self.model = model
        names = model.functionNames.map(CString.init)
        architecture = model.architecture.map(CString.init)
        explanation = CString(model.explanation.description)
    }

    func setError(_ message: String) {
        lock.lock()
        lastError = message
        lock.unlock()
    }

    func error() -> String? {
        lock.lock()
        defer { lock.unlock() }
        return lastError
    }

    /// The prepared function (`nil`: the first), prepared once.
    func function(_ name: UnsafePointer<CChar>?) throws -> (InferenceFunction, Signature) {
        let wanted = name.map { String(cString: $0) } ?? model.functionNames.first ?? ""
        lock.lock()
        if let f = functions[wanted] {
            lock.unlock()
            return f
        }
        lock.unlock()
        let model = self.model
        guard let f = try blocking({ try await model.loadFunction(named: wanted) }) else {
            throw StatusError(status: .notFound, message: "no function '\(wanted)'; the model has \(model.functionNames.map { "'\($0)'" }.joined(separator: ", "))")
        }
        let entry = (f, Signature(f.descriptor))
        lock.lock()
        defer { lock.unlock() }
        if let existing = functions[wanted] { return existing }
        functions[wanted] = entry
        return entry
    }
}

func model(_ p: OpaquePointer?) throws -> ModelHandle {
    guard let p else { throw StatusError(status: .invalidArgument, message: "model is NULL") }
    return Unmanaged<ModelHandle>.fromOpaque(UnsafeRawPointer(p)).takeUnretainedValue()
}

@_cdecl("kiln_model_load")
public func kiln_model_load(_ path: UnsafePointer<CChar>?, _ options: OpaquePointer?, _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the model out-pointer is NULL") }
        out.pointee = nil
        let path = try string(path, "path")
        let o = try options.map { try optionsHandle($0).options } ?? ModelLoadOptions()
        let m = try blocking { try await Model.load(contentsOf: URL(fileURLWithPath: path), options: o) }
        out.pointee = OpaquePointer(Unmanaged.passRetained(ModelHandle(m)).toOpaque())
        return 0
    } catch {
        return fail(error)
    }
}

@_cdecl("kiln_model_free")
public func kiln_model_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<ModelHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}

@_cdecl("kiln_model_copy_error")
public func kiln_model_copy_error(_ p: OpaquePointer?, _ buffer: UnsafeMutablePointer<CChar>?, _ capacity: Int) -> Int {
    guard let h = try? model(p), let message = h.error() else {
        if let buffer, capacity > 0 { buffer[0] = 0 }
        return 0
    }
    let bytes = Array(message.utf8)
    if let buffer, capacity > 0 {
        let n = min(bytes.count, capacity - 1)
        for i in 0 ..< n { buffer[i] = CChar(bitPattern: bytes[i]) }
        buffer[n] = 0
    }
    return bytes.count
}

@_cdecl("kiln_model_function_count")
public func kiln_model_function_count(_ p: OpaquePointer?) -> Int { (try? model(p))?.names.count ?? 0 }

@_cdecl("kiln_model_function_name")
public func kiln_model_function_name(_ p: OpaquePointer?, _ i: Int) -> UnsafePointer<CChar>? {
    guard let h = try? model(p), i >= 0, i < h.names.count else { return nil }
    return UnsafePointer(h.names[i].pointer)
}

@_cdecl("kiln_model_architecture")
public func kiln_model_architecture(_ p: OpaquePointer?) -> UnsafePointer<CChar>? {
    (try? model(p))?.architecture.map { UnsafePointer($0.pointer) }
}

@_cdecl("kiln_model_explanation")
public func kiln_model_explanation(_ p: OpaquePointer?) -> UnsafePointer<CChar>? {
    (try? model(p)).map { UnsafePointer($0.explanation.pointer) }
}

func signatureEntry(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ io: Int32) throws -> (ModelHandle, [ModelHandle.Signature.IO]) {
    let h = try model(p)
    guard io == 0 || io == 1 else { throw StatusError(status: .invalidArgument, message: "io must be KILN_INPUTS or KILN_OUTPUTS, not \(io)") }
    return (h, try h.function(function).1.io[Int(io)])
}

@_cdecl("kiln_model_io_count")
public func kiln_model_io_count(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ io: Int32, _ count: UnsafeMutablePointer<Int>?) -> Int32 {
    do {
        let (_, list) = try signatureEntry(p, function, io)
        count?.pointee = list.count
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

@_cdecl("kiln_model_io_describe")
public func kiln_model_io_describe(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ io: Int32, _ index: Int,
                                   _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?, _ dtype: UnsafeMutablePointer<Int32>?,
                                   _ rank: UnsafeMutablePointer<Int>?) -> Int32 {
    do {
        let (_, list) = try signatureEntry(p, function, io)
        guard index >= 0, index < list.count else { throw StatusError(status: .notFound, message: "index \(index) is past the \(list.count) \(io == 0 ? "inputs" : "outputs")") }
        name?.pointee = UnsafePointer(list[index].name.pointer)
        dtype?.pointee = list[index].dtype
        rank?.pointee = list[index].dims.count
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

@_cdecl("kiln_model_io_dimension")
public func kiln_model_io_dimension(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ io: Int32, _ index: Int, _ dimension: Int,
                                    _ size: UnsafeMutablePointer<Int64>?, _ symbol: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    do {
        let (_, list) = try signatureEntry(p, function, io)
        guard index >= 0, index < list.count, dimension >= 0, dimension < list[index].dims.count else {
            throw StatusError(status: .notFound, message: "no dimension \(dimension) of \(io == 0 ? "input" : "output") \(index)")
        }
        let d = list[index].dims[dimension]
        size?.pointee = d.0
        symbol?.pointee = UnsafePointer(d.1.pointer)
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

// MARK: Tensors

/// An array and its shape as C integers.
final class TensorHandle: @unchecked Sendable {
    let array: NDArray
    let shape: UnsafeMutablePointer<Int64>

    init(_ array: NDArray) {
        self.array = array.isContiguous ? array : array.contiguous()
        shape = .allocate(capacity: max(array.rank, 1))
        for (i, d) in array.shape.enumerated() { shape[i] = Int64(d) }
    }

    deinit { shape.deallocate() }
}

/// Keeps nothing alive: the caller owns wrapped memory.
final class Borrowed {}

func tensor(_ p: OpaquePointer?) -> TensorHandle? {
    p.map { Unmanaged<TensorHandle>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

func makeTensor(_ dtype: Int32, _ rank: Int, _ shape: UnsafePointer<Int64>?, _ data: UnsafeRawPointer?, _ bytes: Int,
                _ out: UnsafeMutablePointer<OpaquePointer?>?, copy: Bool) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the tensor out-pointer is NULL") }
        out.pointee = nil
        guard let type = DTypeCode.type(dtype) else { throw StatusError(status: .invalidArgument, message: "unknown dtype \(dtype)") }
        guard rank >= 0, rank <= 32, rank == 0 || shape != nil else { throw StatusError(status: .invalidArgument, message: "rank \(rank) needs a shape of that many dimensions (0 to 32)") }
        var dims: [Int] = []
        var count = 1
        for i in 0 ..< rank {
            let d = shape![i]
            guard d >= 0, d <= Int64(Int32.max) else { throw StatusError(status: .invalidArgument, message: "dimension \(i) is \(d)") }
            dims.append(Int(d))
            let (m, overflow) = count.multipliedReportingOverflow(by: Int(d))
            guard !overflow else { throw StatusError(status: .invalidArgument, message: "the shape \(dims) has too many elements") }
            count = m
        }
        let (expected, overflow) = count.multipliedReportingOverflow(by: type.bitWidth / 8)
        guard !overflow, expected == bytes else {
            throw StatusError(status: .invalidArgument, message: "\(type)\(dims) is \(expected) bytes; \(bytes) were given")
        }
        guard bytes == 0 || data != nil else { throw StatusError(status: .invalidArgument, message: "data is NULL") }
        let array: NDArray
        if copy || bytes == 0 {
            array = NDArray(shape: dims, scalarType: type,
                            borrowing: ByteStorage(copying: UnsafeRawBufferPointer(start: data, count: bytes)))
        } else {
            array = NDArray(shape: dims, scalarType: type, borrowing: ByteStorage(borrowing: data!, count: bytes, owner: Borrowed()))
        }
        out.pointee = OpaquePointer(Unmanaged.passRetained(TensorHandle(array)).toOpaque())
        return 0
    } catch {
        return fail(error)
    }
}

@_cdecl("kiln_tensor_create")
public func kiln_tensor_create(_ dtype: Int32, _ rank: Int, _ shape: UnsafePointer<Int64>?, _ data: UnsafeRawPointer?, _ bytes: Int,
                               _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    makeTensor(dtype, rank, shape, data, bytes, out, copy: true)
}

@_cdecl("kiln_tensor_wrap")
public func kiln_tensor_wrap(_ dtype: Int32, _ rank: Int, _ shape: UnsafePointer<Int64>?, _ data: UnsafeRawPointer?, _ bytes: Int,
                             _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    makeTensor(dtype, rank, shape, data, bytes, out, copy: false)
}

@_cdecl("kiln_tensor_free")
public func kiln_tensor_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<TensorHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}

@_cdecl("kiln_tensor_dtype")
public func kiln_tensor_dtype(_ p: OpaquePointer?) -> Int32 { tensor(p).map { DTypeCode.code($0.array.scalarType) } ?? 0 }

@_cdecl("kiln_tensor_rank")
public func kiln_tensor_rank(_ p: OpaquePointer?) -> Int { tensor(p)?.array.rank ?? 0 }

@_cdecl("kiln_tensor_shape")
public func kiln_tensor_shape(_ p: OpaquePointer?) -> UnsafePointer<Int64>? { tensor(p).map { UnsafePointer($0.shape) } }

@_cdecl("kiln_tensor_data")
public func kiln_tensor_data(_ p: OpaquePointer?) -> UnsafeRawPointer? { tensor(p)?.array.contiguousElements?.baseAddress }

@_cdecl("kiln_tensor_bytes")
public func kiln_tensor_bytes(_ p: OpaquePointer?) -> Int { tensor(p).map { $0.array.elementCount * $0.array.elementSize } ?? 0 }

// MARK: Runs

final class OutputsHandle {
    let names: [CString]
    let tensors: [OpaquePointer]

    init(_ outputs: InferenceOutputs) {
        var names: [CString] = [], tensors: [OpaquePointer] = []
        for (name, value) in outputs {
            names.append(CString(name))
            tensors.append(OpaquePointer(Unmanaged.passRetained(TensorHandle(value)).toOpaque()))
        }
        self.names = names
        self.tensors = tensors
    }

    deinit { for t in tensors { kiln_tensor_free(t) } }
}

func outputs(_ p: OpaquePointer?) -> OutputsHandle? {
    p.map { Unmanaged<OutputsHandle>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

@_cdecl("kiln_model_run")
public func kiln_model_run(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ count: Int,
                           _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ inputs: UnsafePointer<OpaquePointer?>?,
                           _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the outputs out-pointer is NULL") }
        out.pointee = nil
        let h = try model(p)
        guard count >= 0, count == 0 || (names != nil && inputs != nil) else {
            throw StatusError(status: .invalidArgument, message: "\(count) inputs need names and tensors")
        }
        var arrays: [String: NDArray] = [:]
        for i in 0 ..< count {
            let name = try string(names![i], "input name \(i)")
            guard let t = tensor(inputs![i]) else { throw StatusError(status: .invalidArgument, message: "input '\(name)' is NULL") }
            guard arrays.updateValue(t.array, forKey: name) == nil else {
                throw StatusError(status: .invalidArgument, message: "input '\(name)' is given twice")
            }
        }
        let (f, _) = try h.function(function)
        let frozen = arrays
        let result = try blocking { try await f.run(inputs: frozen) }
        out.pointee = OpaquePointer(Unmanaged.passRetained(OutputsHandle(result)).toOpaque())
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

@_cdecl("kiln_outputs_count")
public func kiln_outputs_count(_ p: OpaquePointer?) -> Int { outputs(p)?.names.count ?? 0 }

@_cdecl("kiln_outputs_name")
public func kiln_outputs_name(_ p: OpaquePointer?, _ i: Int) -> UnsafePointer<CChar>? {
    guard let o = outputs(p), i >= 0, i < o.names.count else { return nil }
    return UnsafePointer(o.names[i].pointer)
}

@_cdecl("kiln_outputs_tensor")
public func kiln_outputs_tensor(_ p: OpaquePointer?, _ i: Int) -> OpaquePointer? {
    guard let o = outputs(p), i >= 0, i < o.tensors.count else { return nil }
    return o.tensors[i]
}

@_cdecl("kiln_outputs_free")
public func kiln_outputs_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<OutputsHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}
