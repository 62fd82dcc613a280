import KilnFormat
import KilnReference

/// Quantization: QuantizeLinear and DequantizeLinear, and weight-only quantized initializers
/// kept as quantized weights.
extension NodeConverter {
    // MARK: Quantized weights

    /// The quantization family's handlers. `Mul` is also one to one (`direct`); this handler
    /// takes precedence.
    static let quantizedHandlers: [String: Handler] = [
        "QuantizeLinear": linearQuantization, "DequantizeLinear": dequantizeLinear, "Mul": mul,
    ]

    /// QuantizeLinear and DequantizeLinear: `quantize_linear` and `dequantize_linear`, a stated
    /// output_dtype carried (float64 held as float32).
    /// - Parameter node: A `QuantizeLinear` or `DequantizeLinear` node.
    /// - Throws: `ConvertError` for an output_dtype Kiln does not support.
    func linearQuantization(_ node: ONNXNode) throws {
        let op = node.opType
        var attrs = try attributes(node, only: ["axis", "block_size"])
        if case .int(let code)? = node.attributes["output_dtype"], code != 0 {
            guard let dtype = ONNXDecoder.dtypes[Int32(code)] else { throw c.fail("node '\(node.name)' (\(op)): unsupported output_dtype \(code)") }
            attrs["output_dtype"] = .dtype(dtype == .float64 ? .float32 : dtype)
        }
        try emit(node, op == "QuantizeLinear" ? "quantize_linear" : "dequantize_linear", Array(node.inputs.prefix(3)), attrs)
    }

    /// DequantizeLinear: a quantized weight (`keepQuantized`), else `dequantize_linear`.
    /// - Parameter node: A `DequantizeLinear` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func dequantizeLinear(_ node: ONNXNode) throws {
        if try keepQuantized(node) { return }
        try linearQuantization(node)
    }

    /// Mul: a quantized weight when it scales cast integers (`keepScaledIntegers`), else one to one.
    /// - Parameter node: A `Mul` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func mul(_ node: ONNXNode) throws {
        if try keepScaledIntegers(node) { return }
        try oneToOne(node, as: "mul")
    }

    /// `DequantizeLinear` of an int8/uint8 initializer with constant float scale (and zero point)
    /// becomes a quantized weight of the package — the integers stay integers — instead of a
    /// float32 copy folded at convert time. Per tensor, per axis and blocked scales map to the
    /// package's block scales (specs/package-format.md). Returns false to convert the node as an op.
    func keepQuantized(_ node: ONNXNode) throws -> Bool {
        let source = input(node, 0)
        guard c.parent == nil, node.outputs.count == 1, let q = constant(source), c.initializerNames.contains(source),
              [.int8, .uint8].contains(q.scalarType), q.rank >= 1, let scale = constant(input(node, 1)),
              [.float32, .float16].contains(scale.scalarType) else { return false }
        if case .int(let code)? = node.attributes["output_dtype"], code != 0, code != 1 && code != 10 { return false }
        let zero = input(node, 2).isEmpty ? nil : constant(input(node, 2))
        if !input(node, 2).isEmpty && (zero == nil || zero!.scalarType != q.scalarType || zero!.shape != scale.shape) { return false }
        guard case .int(let rawAxis)? = node.attributes["axis"] ?? .int(1), rawAxis >= -q.rank, rawAxis < q.rank else { return false }
        let axis = rawAxis < 0 ? rawAxis + q.rank : rawAxis
        var blockSize = 0
        if case .int(let b)? = node.attributes["block_size"] { blockSize = b }
        // The scale's shape in the weight's rank: ones, the axis's size, or the axis's block count.
        var shape = [Int](repeating: 1, count: q.rank)
        if scale.elementCount == 1 && blockSize == 0 {
            // per tensor
        } else if blockSize == 0, scale.rank == 1, scale.shape[0] == q.shape[axis] {
            shape[axis] = q.shape[axis]
        } else if blockSize > 0, scale.rank == q.rank, q.shape[axis] % blockSize == 0,
                  (0 ..< q.rank).allSatisfy({ $0 == axis ? scale.shape[$0] == q.shape[axis] / blockSize : scale.shape[$0] == q.shape[$0] }) {
            shape = scale.shape
        } else {
            return false
        }
        // 4-bit integers stay 4-bit: packed two per byte, the first in the low nibble.
        let fourBit = c.fourBitInitializers.contains(source)
        if !input(node, 2).isEmpty, c.fourBitInitializers.contains(input(node, 2)) != fourBit { return false }
        let name = c.freshName(node.outputs[0])
        func blob(_ x: NDArray, _ shape: [Int]) -> WeightBlob { WeightBlob(dtype: x.scalarType, shape: shape, data: ByteStorage(x.bytes)) }
        func integers(_ x: NDArray, _ shape: [Int]) -> WeightBlob {
            guard fourBit else { return blob(x, shape) }
            let bytes = x.bytes
            var packed = [UInt8](repeating: 0, count: (bytes.count + 1) / 2)
            for (i, b) in bytes.enumerated() { packed[i / 2] |= (b & 0xF) << (i % 2 == 0 ? 0 : 4) }
            return WeightBlob(dtype: x.scalarType == .int8 ? .int4 : .uint4, shape: shape, data: ByteStorage(packed))
        }
        let weight = Weight(name: name, dtype: scale.scalarType, shape: q.shape, encoding: .quantized(QuantizedWeight(
            data: integers(q, q.shape), scale: blob(scale, shape), zeroPoint: zero.map { integers($0, shape) })))
        c.weights.append(weight)
        c.values[node.outputs[0]] = .value(name: name, type: TensorType(scale.scalarType, q.shape.map { .size($0) }), elements: nil)
        return true
    }

    /// Integer initializers cast to float, by the name of the cast's output: a `Mul` by a
    /// constant scale then makes them a quantized weight (the `Cast`/`Mul` form of dequantization).
    func recordIntegerCast(_ node: ONNXNode) throws -> Bool {
        let source = input(node, 0)
        guard c.parent == nil, node.outputs.count == 1, let q = constant(source), c.initializerNames.contains(source),
              [.int8, .uint8].contains(q.scalarType), q.rank >= 1,
              case .int(let code)? = node.attributes["to"], code == 1 else { return false }
        c.integerCasts[node.outputs[0]] = q
        return false // converted (folded) as usual; the record only matters to a `Mul` reading it
    }

    /// `Mul(Cast(q), scale)` with q an int8/uint8 initializer and a constant float32 scale that is
    /// one value or one per entry of a single axis: a symmetric quantized weight.
    func keepScaledIntegers(_ node: ONNXNode) throws -> Bool {
        guard c.parent == nil, node.inputs.count == 2, node.outputs.count == 1 else { return false }
        for (i, j) in [(0, 1), (1, 0)] {
            guard let q = c.integerCasts[node.inputs[i]], let scale = constant(node.inputs[j]), scale.scalarType == .float32,
                  scale.rank <= q.rank else { continue }
            // Right-aligned broadcast of the scale against the weight: at most one axis above 1.
            let aligned = [Int](repeating: 1, count: q.rank - scale.rank) + scale.shape
            let axes = aligned.indices.filter { aligned[$0] != 1 }
            guard axes.count <= 1, axes.allSatisfy({ aligned[$0] == q.shape[$0] }) else { continue }
            let name = c.freshName(node.outputs[0])
            let weight = Weight(name: name, dtype: .float32, shape: q.shape, encoding: .quantized(QuantizedWeight(
                data: WeightBlob(dtype: q.scalarType, shape: q.shape, data: ByteStorage(q.bytes)),
                scale: WeightBlob(dtype: .float32, shape: aligned, data: ByteStorage(scale.bytes)), zeroPoint: nil)))
            c.weights.append(weight)
            c.values[node.outputs[0]] = .value(name: name, type: TensorType(.float32, q.shape.map { .size($0) }), elements: nil)
            return true
        }
        return false
    }
}
