import Foundation
import KilnCompiler
import KilnFormat
import KilnReference
@testable import KilnRuntime
import KilnTestSupport
import XCTest

/// The compiled executor's kernels against the reference interpreter on built graphs: edge
/// shapes, broadcasting, negative axes and steps, work large enough to split across threads;
/// each graph runs with no `reference` step, twice (generic run, then its shape plan).
final class ExecutorTests: XCTestCase {
    func ints(_ b: inout ModelBuilder, _ name: String, _ values: [Int64], shape: [Int]? = nil) throws -> Weight {
        let bytes = values.flatMap { v in withUnsafeBytes(of: v.littleEndian) { Array($0) } }
        return try b.addWeight(name, dtype: .int64, shape: shape ?? [values.count], bytes: bytes)
    }

    func floats(_ n: Int, _ seed: Double) -> [Float] { (0 ..< n).map { Float(sin(Double($0) * 0.37 + seed) * 3) } }

    func testTensorKernels() async throws {
        var b = ModelBuilder(name: "tensor")
        let row = try b.addWeight("row", shape: [5], values: floats(5, 1))
        let column = try b.addWeight("column", shape: [3, 1], values: floats(3, 2))
        let scalar = try b.addWeight("scalar", shape: [], values: [0.75])
        let middle = try b.addWeight("middle", shape: [1, 3, 1], values: floats(3, 3))
        let gamma = try b.addWeight("gamma", shape: [5], values: floats(5, 4).map { 1 + $0 / 10 })
        let table = try b.addWeight("table", shape: [7, 4], values: floats(28, 5))
        let starts = try ints(&b, "starts", [-1, 1]), ends = try ints(&b, "ends", [Int64.min, 5]), axes = try ints(&b, "axes", [2, 1])
        let steps = try ints(&b, "steps", [-2, 1])
        let pads = try ints(&b, "pads", [0, 1, -1, 0, 2, 1])
        let expandShape = try ints(&b, "expand_shape", [2, 3, 5])
        let reshapeShape = try ints(&b, "reshape_shape", [-1, 5])
        let gatherIndices = try ints(&b, "gather_indices", [-1, 0, 2])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [2, 3, 5]))
        let ids = f.input("ids", TensorType(.int64, [4]))
        let big = f.input("big", TensorType(.float32, [64, 1100]))
        var n = 0
        func out(_ v: ValueRef) { n += 1; f.output("y\(n)", v) }
        out(try f.apply1("add", [x, f.use(row)]))
        out(try f.apply1("sub", [f.use(column), x]))
        out(try f.apply1("div", [x, f.use(scalar)]))
        out(try f.apply1("max", [x, f.use(middle)]))
        out(try f.apply1("min", [x, f.use(row)]))
        let positive = try f.apply1("greater", [x, f.use(scalar)])
        out(try f.apply1("cast", [positive], ["to": .dtype(.float32)]))
        out(try f.apply1("where", [positive, x, try f.apply1("neg", [x])]))
        out(try f.apply1("cast", [x], ["to": .dtype(.int64)]))
        out(try f.apply1("add", [ids, try f.apply1("mul", [ids, ids])]))
        out(try f.apply1("reduce_sum", [x], ["axes": .ints([1]), "keepdims": .int(1)]))
        out(try f.apply1("reduce_mean", [x], ["axes": .ints([-1]), "keepdims": .int(0)]))
        out(try f.apply1("reduce_max", [x], ["axes": .ints([0, 1]), "keepdims": .int(0)]))
        out(try f.apply1("softmax", [x], ["axis": .int(1)]))
        out(try f.apply1("log_softmax", [x], ["axis": .int(-1)]))
        out(try f.apply1("layer_norm", [x, f.use(gamma), f.use(row)], ["axis": .int(-1), "epsilon": .float(1e-5)]))
        out(try f.apply1("argmax", [x], ["axis": .int(2), "keepdims": .int(0)]))
        out(try f.apply1("transpose", [x], ["perm": .ints([2, 0, 1])]))
        out(try f.apply1("slice", [x, f.use(starts), f.use(ends), f.use(axes), f.use(steps)]))
        out(try f.apply1("concat", [x, x], ["axis": .int(-2)]))
        for v in try f.apply("split", [x], ["axis": .int(2), "split": .ints([2, 3])], outputNames: ["s0", "s1"]) { out(v) }
        out(try f.apply1("pad", [x, f.use(pads)], ["mode": .string("constant")]))
        out(try f.apply1("expand", [f.use(column), f.use(expandShape)]))
        out(try f.apply1("tile", [x], ["repeats": .ints([1, 2, 1])]))
        out(try f.apply1("gather", [x, f.use(gatherIndices)], ["axis": .int(1)]))
        out(try f.apply1("gather", [f.use(table), ids], ["axis": .int(0)]))
        let flat = try f.apply1("reshape", [x, f.use(reshapeShape)])
        out(try f.apply1("exp", [try f.apply1("unsqueeze", [flat], ["axes": .ints([0])])]))
        out(try f.apply1("leaky_relu", [x], ["alpha": .float(0.1)]))
        out(try f.apply1("softmax", [big], ["axis": .int(-1)]))
        out(try f.apply1("tanh", [try f.apply1("mul", [big, big])]))
        try b.add(f)
        let model = try b.build()
        let inputs: [String: NDArray] = [
            "x": NDArray(shape: [2, 3, 5], scalars: floats(30, 0)), "ids": NDArray(shape: [4], scalars: [Int64(3), -1, 0, 6]),
            "big": NDArray(shape: [64, 1100], scalars: floats(64 * 1100, 7)),
        ]
        try await assertCompilesWithoutReference(model, inputs, "tensor kernels")
    }

    func testPoolingAndShapeSubgraph() async throws {
        var b = ModelBuilder(name: "pool")
        let zero = try ints(&b, "zero", [0]), minus = try ints(&b, "minus", [-1])
        var f = b.function("main")
        let image = f.input("image", TensorType(.float32, ["n", 3, 9, 11]))
        f.output("max", try f.apply1("max_pool", [image], ["kernel_shape": .ints([3, 3]), "strides": .ints([2, 2]), "pads": .ints([1, 1, 1, 1])]))
        f.output("avg", try f.apply1("average_pool", [image], ["kernel_shape": .ints([3, 2]), "strides": .ints([2, 3]),
                                                            "pads": .ints([0, 0, 1, 1]), "count_include_pad": .int(1), "ceil_mode": .int(1)]))
        f.output("avg2", try f.apply1("average_pool", [image], ["kernel_shape": .ints([2, 2]), "pads": .ints([1, 0, 0, 1])]))
        f.output("gmax", try f.apply1("global_max_pool", [image]))
        f.output("gavg", try f.apply1("global_average_pool", [image]))
        // A BERT-style shape subgraph: [n, 3 * 9 * 11] from Shape/Gather/Concat.
        let shape = try f.apply1("shape", [image])
        let batch = try f.apply1("gather", [shape, f.use(zero)], ["axis": .int(0)])
        let target = try f.apply1("concat", [batch, f.use(minus)], ["axis": .int(0)])
        let flat = try f.apply("reshape", [image, target], outputTypes: [TensorType(.float32, ["n", 297])])[0]
        f.output("flat", try f.apply1("relu", [flat]))
        try b.add(f)
        let model = try b.build()
        for batch in [1, 2] {
            let inputs = ["image": NDArray(shape: [batch, 3, 9, 11], scalars: floats(batch * 297, Double(batch)))]
            try await assertCompilesWithoutReference(model, inputs, "pooling batch \(batch)")
        }
    }

    /// Empty and size-1 batches through every family that takes them.
    func testEmptyAndSingleRows() async throws {
        var b = ModelBuilder(name: "edges")
        let row = try b.addWeight("row", shape: [3], values: [0.5, -1, 2])
        let w = try b.addWeight("w", shape: [3, 4], values: floats(12, 1))
        let columns = try ints(&b, "columns", [2, 0])
        let pads = try ints(&b, "pads", [1, 0, 0, 1])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 3]))
        f.output("add", try f.apply1("relu", [try f.apply1("add", [x, f.use(row)])]))
        f.output("softmax", try f.apply1("softmax", [x], ["axis": .int(-1)]))
        f.output("sum", try f.apply1("reduce_sum", [x], ["axes": .ints([1]), "keepdims": .int(0)]))
        f.output("transposed", try f.apply1("transpose", [x], ["perm": .ints([1, 0])]))
        f.output("concat", try f.apply1("concat", [x, x], ["axis": .int(0)]))
        f.output("gathered", try f.apply1("gather", [x, f.use(columns)], ["axis": .int(1)]))
        f.output("normed", try f.apply1("layer_norm", [x, f.use(row)], ["axis": .int(-1)]))
        f.output("projected", try f.apply1("matmul", [x, f.use(w)]))
        f.output("padded", try f.apply1("pad", [x, f.use(pads)], ["mode": .string("constant")]))
        f.output("flags", try f.apply1("cast", [try f.apply1("less", [x, f.use(row)])], ["to": .dtype(.int64)]))
        try b.add(f)
        let model = try b.build()
        for rows in [0, 1] {
            try await assertCompilesWithoutReference(model, ["x": NDArray(shape: [rows, 3], scalars: floats(rows * 3, 2))], "\(rows) rows")
        }
    }

    /// Contiguous slices take their source's memory in a shape plan (of an arena value, of a
    /// slice, of an input); elementwise ops may then run in place inside that memory.
    func testContiguousSlicesAsViews() async throws {
        var b = ModelBuilder(name: "views")
        let one = try ints(&b, "one", [1]), three = try ints(&b, "three", [3]), two = try ints(&b, "two", [2]), zero = try ints(&b, "zero", [0])
        let minusTwo = try ints(&b, "minus_two", [-2]), big = try ints(&b, "big", [Int64.max]), last = try ints(&b, "last", [1])
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, [5, 6]))
        let y = try f.apply1("add", [x, x])
        let rows = try f.apply1("slice", [y, f.use(one), f.use(three), f.use(zero)])           // rows 1..<3: a view at an offset
        let row = try f.apply1("slice", [rows, f.use(one), f.use(two), f.use(zero)])           // a slice of the slice
        f.output("rows", rows)
        f.output("relu", try f.apply1("relu", [try f.apply1("neg", [row])]))
        f.output("tail", try f.apply1("slice", [x, f.use(minusTwo), f.use(big), f.use(zero)])) // a view of the input
        f.output("columns", try f.apply1("slice", [x, f.use(one), f.use(three), f.use(last)]))  // not contiguous: a copy
        try b.add(f)
        try await assertCompilesWithoutReference(try b.build(), ["x": NDArray(shape: [5, 6], scalars: floats(30, 3))], "slices")
    }

    /// One function serves many shapes: a plan per shape signature (bounded), or one generic
    /// plan with `expectFrequentReshapes`; both agree with the interpreter.
    func testShapePlansAndFrequentReshapes() async throws {
        var b = ModelBuilder(name: "shapes")
        var f = b.function("main")
        let x = f.input("x", TensorType(.float32, ["n", 4]))
        f.output("y", try f.apply1("softmax", [try f.apply1("add", [x, x])], ["axis": .int(-1)]))
        try b.add(f)
        let model = try b.build()
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = try compiledForHost(model, in: dir)
        let reference = try ReferenceInterpreter(model: model, function: "main")
        for frequent in [false, true] {
            var options = ModelLoadOptions()
            options.expectFrequentReshapes = frequent
            let loaded = try await Model.load(contentsOf: URL(fileURLWithPath: path), options: options)
            let function = try await loaded.loadFunction(named: "main")!
            for rows in [1, 3, 0, 3, 5, 1] {
                let input = NDArray(shape: [rows, 4], scalars: floats(rows * 4, Double(rows)))
                let got = try await function.run(inputs: ["x": input])
                assertMatches(got["y"], try reference.run(["x": input])["y"]!, "rows \(rows) frequent \(frequent)")
            }
        }
    }
}
