import FuzzSupport
import KilnONNX

/// An ONNX file through the importer (decode, shape inference, conversion, validation).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    let path = Scratch.write(UnsafeRawBufferPointer(start: data, count: size), "m.onnx")
    _ = try? ONNXImporter.convert(contentsOf: path)
    return 0
}
