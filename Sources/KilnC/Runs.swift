import Foundation
import KilnFormat
import KilnRuntime

// `kiln_model_run` and `kiln_outputs_*`: running a function and reading its outputs.

/// The outputs of one run, by name, each a retained tensor handle freed with the outputs.
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

/// The outputs of a handle, or `nil` for NULL.
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
