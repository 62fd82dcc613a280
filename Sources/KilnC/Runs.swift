import Foundation
import KilnFormat
import KilnRuntime

// `kiln_model_run` and `kiln_outputs_*`: running a function and reading its outputs.

/// The outputs of one run, by name, each a retained tensor handle freed with the outputs.
final class OutputsHandle {
    let names: [CString]
    /// NULL once `kiln_outputs_take` has handed the tensor to the caller.
    var tensors: [OpaquePointer?]

    /// `inputs` are the run's borrowed inputs: an output sharing memory with one (a function that
    /// returns an input, or a view of it) is copied, so that the outputs outlive the caller's arrays.
    init(_ outputs: InferenceOutputs, inputs: [NDArray]) {
        var names: [CString] = [], tensors: [OpaquePointer] = []
        let ranges = inputs.compactMap { x -> Range<UInt>? in
            guard let b = x.contiguousElements?.baseAddress, x.elementCount > 0 else { return nil }
            let start = UInt(bitPattern: b)
            return start ..< start + UInt(x.elementCount * x.elementSize)
        }
        for (name, value) in outputs {
            names.append(CString(name))
            var value = value
            // (A non-contiguous output is copied by its tensor handle.)
            if let bytes = value.contiguousElements, let b = bytes.baseAddress, !bytes.isEmpty {
                let start = UInt(bitPattern: b)
                if ranges.contains(where: { $0.overlaps(start ..< start + UInt(bytes.count)) }) {
                    value = NDArray(shape: value.shape, scalarType: value.scalarType, borrowing: ByteStorage(copying: bytes))
                }
            }
            tensors.append(OpaquePointer(Unmanaged.passRetained(TensorHandle(value)).toOpaque()))
        }
        self.names = names
        self.tensors = tensors
    }

    deinit { for t in tensors { kiln_tensor_free(t) } }
}

/// Moves every output's tensor handle to the caller (`tensors`, `capacity` entries): each is then
/// freed on its own with `kiln_tensor_free`, so one output kept (a row of logits) does not keep
/// the others (a decoder's whole cache) alive. The outputs keep their names; their tensors are
/// NULL afterwards.
@_cdecl("kiln_outputs_take")
public func kiln_outputs_take(_ p: OpaquePointer?, _ tensors: UnsafeMutablePointer<OpaquePointer?>?, _ capacity: Int) -> Int32 {
    do {
        guard let o = outputs(p) else { throw StatusError(status: .invalidArgument, message: "the outputs handle is NULL") }
        guard o.tensors.isEmpty || tensors != nil else { throw StatusError(status: .invalidArgument, message: "the tensors array is NULL") }
        guard capacity >= o.tensors.count else {
            throw StatusError(status: .invalidArgument, message: "\(o.tensors.count) outputs; tensors holds \(capacity)")
        }
        guard o.tensors.allSatisfy({ $0 != nil }) else { throw StatusError(status: .invalidArgument, message: "the outputs' tensors were already taken") }
        for (i, t) in o.tensors.enumerated() { tensors![i] = t }
        o.tensors = o.tensors.map { _ in nil }
        return 0
    } catch {
        return fail(error)
    }
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
            try add(t.array, name, to: &arrays)
        }
        out.pointee = try run(h, function, arrays)
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

private func add(_ array: NDArray, _ name: String, to arrays: inout [String: NDArray]) throws {
    guard arrays.updateValue(array, forKey: name) == nil else {
        throw StatusError(status: .invalidArgument, message: "input '\(name)' is given twice")
    }
}

/// Runs `function` of `h` on `arrays`; the outputs handle.
private func run(_ h: ModelHandle, _ function: UnsafePointer<CChar>?, _ arrays: [String: NDArray]) throws -> OpaquePointer {
    let (f, _) = try h.function(function)
    let result = try blocking { try await f.run(inputs: arrays) }
    return OpaquePointer(Unmanaged.passRetained(OutputsHandle(result, inputs: Array(arrays.values))).toOpaque())
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

/// `kiln_model_run` with each input given by parallel arrays instead of a tensor handle: one call
/// for a run with many inputs (a decoder's past cache), every input borrowed for the call only.
@_cdecl("kiln_model_run_arrays")
public func kiln_model_run_arrays(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ count: Int,
                                  _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ dtypes: UnsafePointer<Int32>?,
                                  _ ranks: UnsafePointer<Int>?, _ shapes: UnsafePointer<Int64>?,
                                  _ data: UnsafePointer<UnsafeRawPointer?>?, _ bytes: UnsafePointer<Int>?,
                                  _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the outputs out-pointer is NULL") }
        out.pointee = nil
        let h = try model(p)
        out.pointee = try run(h, function, try borrowedArrays(count, names, dtypes, ranks, shapes, data, bytes))
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

/// Inputs given by parallel arrays (``kiln_model_run_arrays``), borrowed, by name.
func borrowedArrays(_ count: Int, _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ dtypes: UnsafePointer<Int32>?,
                    _ ranks: UnsafePointer<Int>?, _ shapes: UnsafePointer<Int64>?,
                    _ data: UnsafePointer<UnsafeRawPointer?>?, _ bytes: UnsafePointer<Int>?) throws -> [String: NDArray] {
    guard count >= 0, count == 0 || (names != nil && dtypes != nil && ranks != nil && data != nil && bytes != nil) else {
        throw StatusError(status: .invalidArgument, message: "\(count) inputs need names, dtypes, ranks, data and byte counts")
    }
    var arrays: [String: NDArray] = [:]
    arrays.reserveCapacity(count)
    var at = 0
    for i in 0 ..< count {
        let name = try string(names![i], "input name \(i)")
        let rank = ranks![i]
        guard rank >= 0, rank <= 32, rank == 0 || shapes != nil else {
            throw StatusError(status: .invalidArgument, message: "input '\(name)': rank \(rank) needs that many dimensions in shapes (0 to 32)")
        }
        let array: NDArray
        do {
            array = try tensorArray(dtypes![i], rank, shapes.map { $0 + at }, data![i], bytes![i], copy: false)
        } catch let e as StatusError {
            throw StatusError(status: e.status, message: "input '\(name)': \(e.message)")
        }
        at += rank
        try add(array, name, to: &arrays)
    }
    return arrays
}

/// Every output's dtype, rank, shape (concatenated into `shapes`, which holds `capacity`
/// entries), data and byte count, in output order, in one call.
@_cdecl("kiln_outputs_describe")
public func kiln_outputs_describe(_ p: OpaquePointer?, _ dtypes: UnsafeMutablePointer<Int32>?, _ ranks: UnsafeMutablePointer<Int>?,
                                  _ shapes: UnsafeMutablePointer<Int64>?, _ capacity: Int,
                                  _ data: UnsafeMutablePointer<UnsafeRawPointer?>?, _ bytes: UnsafeMutablePointer<Int>?) -> Int32 {
    do {
        guard let o = outputs(p) else { throw StatusError(status: .invalidArgument, message: "the outputs handle is NULL") }
        guard o.tensors.allSatisfy({ $0 != nil }) else { throw StatusError(status: .invalidArgument, message: "the outputs' tensors were taken") }
        guard o.tensors.isEmpty || (dtypes != nil && ranks != nil && data != nil && bytes != nil) else {
            throw StatusError(status: .invalidArgument, message: "\(o.tensors.count) outputs need dtypes, ranks, data and byte counts arrays")
        }
        let needed = o.tensors.reduce(0) { $0 + ($1.flatMap(tensor)?.array.rank ?? 0) }
        guard needed <= capacity, needed == 0 || shapes != nil else {
            throw StatusError(status: .invalidArgument, message: "the outputs' shapes need \(needed) entries; shapes holds \(capacity)")
        }
        var at = 0
        for (i, t) in o.tensors.enumerated() {
            let h = tensor(t!)!
            dtypes![i] = DTypeCode.code(h.array.scalarType)
            ranks![i] = h.array.rank
            for d in 0 ..< h.array.rank { shapes![at + d] = h.shape[d] }
            at += h.array.rank
            data![i] = kiln_tensor_data(t)
            bytes![i] = kiln_tensor_bytes(t)
        }
        return 0
    } catch {
        return fail(error)
    }
}
