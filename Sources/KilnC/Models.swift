import Foundation
import KilnFormat
import KilnRuntime

// `kiln_model_*`: loading a model, its functions and their inputs and outputs, and its last error.

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

/// The model of a handle.
/// - Throws: ``StatusError`` when it is NULL.
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

/// The inputs (`io` 0) or outputs (`io` 1) of a model's function (`nil`: the first), preparing it
/// when needed.
/// - Throws: ``StatusError`` for a NULL model, a bad `io` or a missing function; what preparing throws.
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
