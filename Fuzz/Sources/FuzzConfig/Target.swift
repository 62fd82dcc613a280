import FuzzSupport
import Foundation
import KilnCompression

/// A compression config's JSON through its parser and checks.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    _ = try? CompressionConfig(data: Data(bytes: data, count: size), path: "config.json")
    return 0
}
