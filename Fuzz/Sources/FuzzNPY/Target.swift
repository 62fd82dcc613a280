import FuzzSupport
import KilnFormat

/// `.npy` bytes through the reader, and a successful read written back.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    if let a = try? NDArray(npyBytes: Array(UnsafeBufferPointer(start: data, count: size))) {
        _ = a.npyBytes()
    }
    return 0
}
