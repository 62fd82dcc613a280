import Foundation
import XCTest
@testable import KilnFormat

/// The repository's root, found from this file's location.
let repositoryRoot: String = {
    var url = URL(fileURLWithPath: #filePath)
    for _ in 0 ..< 4 { url.deleteLastPathComponent() }
    return url.path
}()

/// A fresh temporary directory, removed when the test ends.
func temporaryDirectory(_ test: XCTestCase) throws -> String {
    let path = NSTemporaryDirectory() + "kiln-tests-" + UUID().uuidString
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    test.addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
    return path
}

func fileBytes(_ path: String) throws -> [UInt8] {
    [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// A small model exercising every encoding, attribute kind and dim kind.
func sampleModel() throws -> PortableModel {
    var b = ModelBuilder(name: "Sample")
    b.metadata.description = "sample"
    b.metadata.user = ["b": "2", "a": "1"]
    let w = try b.addWeight("w", shape: [4, 8], values: (0 ..< 32).map { Float($0) / 8 })
    let bias = try b.addWeight("bias", shape: [4], values: [0.5, -0.5, 1, -1])
    let q = Weight(name: "q", dtype: .float32, shape: [4, 8], encoding: .quantized(QuantizedWeight(
        data: WeightBlob(dtype: .int8, shape: [4, 8], data: ByteStorage((0 ..< 32).map { UInt8($0) })),
        scale: WeightBlob(dtype: .float32, shape: [4, 1], data: ByteStorage([UInt8](repeating: 0, count: 16))),
        zeroPoint: nil)))
    try b.add(q)
    let p = Weight(name: "p", dtype: .float16, shape: [2, 8], encoding: .palettized(PalettizedWeight(
        indices: WeightBlob(dtype: .uint2, shape: [2, 8], data: ByteStorage([1, 2, 3, 4])),
        lut: WeightBlob(dtype: .float32, shape: [1, 1, 4], data: ByteStorage([UInt8](repeating: 7, count: 16))),
        scale: nil)))
    try b.add(p)
    var f = b.function("main")
    let x = f.input("x", TensorType(.float32, ["batch", .unknown, 8]))
    let y = try f.apply1("linear", [x, f.use(w), f.use(bias)], name: "fc")
    let z = try f.apply1("gelu", [y], ["approximate": .string("tanh")], name: "act")
    let r = try f.apply1("reshape", [z], ["shape": .ints([0, -1])], name: "flatten")
    f.output("out", r)
    f.output("same", x)
    try b.add(f)
    var g = b.function("second")
    let a = g.input("a", TensorType(.float32, [2, 3]))
    g.output("b", try g.apply1("softmax", [a], ["axis": .int(0)]))
    try b.add(g)
    return try b.build()
}
