import Foundation
import KilnFormat
import KilnRuntime

// `kiln_tensor_*`: tensors made from (or wrapping) caller memory, and what they hold.

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

/// The tensor of a handle, or `nil` for NULL.
func tensor(_ p: OpaquePointer?) -> TensorHandle? {
    p.map { Unmanaged<TensorHandle>.fromOpaque(UnsafeRawPointer($0)).takeUnretainedValue() }
}

/// `kiln_tensor_create` (`copy`) and `kiln_tensor_wrap`: checks dtype, shape and byte count, then
/// hands out a new tensor in `out`; 0, or the failure's status.
func makeTensor(_ dtype: Int32, _ rank: Int, _ shape: UnsafePointer<Int64>?, _ data: UnsafeRawPointer?, _ bytes: Int,
                _ out: UnsafeMutablePointer<OpaquePointer?>?, copy: Bool) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the tensor out-pointer is NULL") }
        out.pointee = nil
        let array = try tensorArray(dtype, rank, shape, data, bytes, copy: copy)
        out.pointee = OpaquePointer(Unmanaged.passRetained(TensorHandle(array)).toOpaque())
        return 0
    } catch {
        return fail(error)
    }
}

/// An array of `bytes` at `data` (copied, or borrowed: the caller keeps it alive and unchanged
/// while the array is in use) after checking dtype, shape and byte count.
func tensorArray(_ dtype: Int32, _ rank: Int, _ shape: UnsafePointer<Int64>?, _ data: UnsafeRawPointer?, _ bytes: Int, copy: Bool) throws -> NDArray {
    guard let type = DTypeCode.type(dtype) else { throw StatusError(status: .invalidArgument, message: "unknown dtype \(dtype)") }
    guard rank >= 0, rank <= 32, rank == 0 || shape != nil else { throw StatusError(status: .invalidArgument, message: "rank \(rank) needs a shape of that many dimensions (0 to 32)") }
    var dims: [Int] = []
    dims.reserveCapacity(rank)
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
    if copy || bytes == 0 {
        return NDArray(shape: dims, scalarType: type, borrowing: ByteStorage(copying: UnsafeRawBufferPointer(start: data, count: bytes)))
    }
    return NDArray(shape: dims, scalarType: type, borrowing: ByteStorage(borrowing: data!, count: bytes, owner: Borrowed()))
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
