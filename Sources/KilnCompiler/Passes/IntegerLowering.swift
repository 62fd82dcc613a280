import KilnFormat
import KilnReference

/// Runs `conv_integer` and `matmul_integer` with a stored 8-bit weight on the float32 kernels:
/// the input is cast to float32 less its zero point, the weight becomes its integers less their
/// zero points (a convolution's as dense float32, a matmul's as a quantized weight of scale 1),
/// and the float32 `conv` or `matmul` sums products of integers.
///
/// Before: `y = conv_integer(x, W, xz, wz)` (int32) — after: `y = cast(conv(cast(x) − cast(xz),
/// W − wz), int32)`, the casts pair (int32 → float32 → int32) left out when `y`'s only reader
/// casts it to float32, or adds an int32 bias whose sum's only reader does (the bias then cast
/// and added in float32).
///
/// Every value is exact: products of integers up to 255 · 255 summed in float32 are exact while a
/// partial sum stays below 2^24, and a float32 sum of integers is always an integer, so the
/// float32 result equals int32 accumulation whenever that does not wrap and is within float32
/// rounding of it (a relative 6e-8) beyond 2^24. Ops whose weight is not stored, whose zero points
/// are not one value (the input's) or one per output channel or column (the weight's), or whose
/// matmul weight is not 2-D keep their portable form (the reference kernel). A `matmul_integer`
/// the `u8s8_gemm` kernels run (``Lowering/integerGEMMFits(_:_:_:)``) stays as it is: those sum
/// 8-bit products in int32 at four times the float32 GEMM's rate.
public struct IntegerLowering: CompilerPass {
    /// `integer_lowering`.
    public static let name = "integer_lowering"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            guard f.operations.contains(where: { ["conv_integer", "matmul_integer"].contains($0.opType) }) else { continue }
            var names = Set(f.inputs.map(\.name) + f.operations.flatMap { $0.outputs.map(\.name) } + f.operations.map(\.name))
            func fresh(_ base: String) -> String {
                var name = base, i = 2
                while names.contains(name) || unit.weight(name) != nil { name = "\(base)\(i)"; i += 1 }
                names.insert(name)
                return name
            }
            let uses = UseIndex(f)
            var out: [Operation] = [], dropped = Set<Int>(), replaced: [Int: [Operation]] = [:]
            for (i, op) in f.operations.enumerated() {
                if dropped.contains(i) { continue }
                if let ops = replaced[i] {
                    out += ops
                    continue
                }
                // A matmul the 8-bit GEMM kernels run stays integer (an artifact for an older runtime lowers it).
                let integerKernel = unit.minimumRuntime >= KernelFamily.integerGEMM.sinceRuntime
                    && Lowering.integerGEMMFits(op, unit) { ResidualFusion.type(of: $0, in: f, unit) }
                guard ["conv_integer", "matmul_integer"].contains(op.opType), !integerKernel, let plan = Self.plan(op, f, unit) else {
                    out.append(op)
                    continue
                }
                let y = op.outputs[0]
                let floatType = TensorType(.float32, y.type.shape)
                // The int32 result's only reader casting it back to float32 (maybe after adding a stored
                // int32 bias): the float result is that cast's output, the bias added in float32.
                var result = Value(name: fresh("\(y.name).float"), type: floatType)
                var castBack = true, bias: (value: Value, output: Value, add: Int)?
                if let tail = Self.castBack(of: y.name, f, uses, unit) {
                    if let b = tail.bias {
                        bias = (b, f.operations[tail.cast].outputs[0], tail.add!)
                    } else {
                        result = f.operations[tail.cast].outputs[0]
                    }
                    dropped.insert(tail.cast)
                    castBack = false
                }
                let source = op.source
                let xf = Value(name: fresh("\(op.inputs[0]).float"), type: TensorType(.float32, plan.xType.shape))
                out.append(Operation(opType: "cast", name: fresh("\(op.name).cast_x"), inputs: [op.inputs[0]], outputs: [xf],
                                     attributes: ["to": .dtype(.float32)], source: source))
                var centered = xf
                if let xz = plan.xZero {
                    let zf = Value(name: fresh("\(xz.name).float"), type: TensorType(.float32, xz.type.shape))
                    out.append(Operation(opType: "cast", name: fresh("\(op.name).cast_x_zero_point"), inputs: [xz.name], outputs: [zf],
                                         attributes: ["to": .dtype(.float32)], source: source))
                    centered = Value(name: fresh("\(op.inputs[0]).centered"), type: xf.type)
                    out.append(Operation(opType: "sub", name: fresh("\(op.name).center_x"), inputs: [xf.name, zf.name], outputs: [centered],
                                         source: source))
                }
                let weightName = fresh("\(op.inputs[1]).centered")
                // A convolution's weight is small next to its work: dense float32, so every conv kernel
                // and layout is open to it. A matmul's stays 8-bit (decoded in the GEMM's registers).
                var centeredWeight = Weight(name: weightName, dtype: .float32, shape: plan.weight.shape, encoding: .quantized(plan.centeredWeight))
                if op.opType == "conv_integer" {
                    let dense = try WeightDecoding.dense(centeredWeight)
                    centeredWeight.encoding = .dense(WeightBlob(dtype: .float32, shape: dense.shape, data: ByteStorage(dense.bytes)))
                }
                unit.model.weights.append(centeredWeight)
                out.append(Operation(opType: op.opType == "conv_integer" ? "conv" : "matmul", name: op.name, inputs: [centered.name, weightName],
                                     outputs: [result], attributes: op.opType == "conv_integer" ? op.attributes : [:], source: source))
                if let bias {
                    // In float32 where the add stood (the bias may be computed after the op): integers
                    // below 2^24 exactly (a bias past that rounds as the sum would).
                    let biasFloat = Value(name: fresh("\(bias.value.name).float"), type: TensorType(.float32, bias.value.type.shape))
                    replaced[bias.add] = [
                        Operation(opType: "cast", name: fresh("\(op.name).cast_bias"), inputs: [bias.value.name], outputs: [biasFloat],
                                  attributes: ["to": .dtype(.float32)], source: source),
                        Operation(opType: "add", name: fresh("\(op.name).bias"), inputs: [result.name, biasFloat.name], outputs: [bias.output],
                                  source: source),
                    ]
                }
                if castBack {
                    out.append(Operation(opType: "cast", name: fresh("\(op.name).cast_y"), inputs: [result.name], outputs: [y],
                                         attributes: ["to": .dtype(.int32)], source: source))
                }
            }
            f.operations = out
            unit.model.functions[fi] = f
        }
    }

    /// The ops that turn the int32 result `y` back into float32: its only reader, a `cast` to
    /// float32, or an `add` of another int32 value (a bias) whose result's only reader is that cast.
    static func castBack(of y: String, _ f: Function, _ uses: UseIndex, _ unit: CompilationUnit) -> (add: Int?, bias: Value?, cast: Int)? {
        func castToFloat(_ value: String) -> Int? {
            guard uses.isPrivate(value), let r = uses.readers[value]?.first, f.operations[r].opType == "cast",
                  f.operations[r].attributes["to"] == .dtype(.float32) else { return nil }
            return r
        }
        if let r = castToFloat(y) { return (nil, nil, r) }
        guard uses.isPrivate(y), let a = uses.readers[y]?.first, f.operations[a].opType == "add", f.operations[a].inputs.count == 2,
              let other = f.operations[a].inputs.first(where: { $0 != y }), let t = ResidualFusion.type(of: other, in: f, unit), t.dtype == .int32,
              let r = castToFloat(f.operations[a].outputs[0].name) else { return nil }
        return (a, Value(name: other, type: t), r)
    }

    /// What the rewrite of one op needs.
    struct Plan {
        var xType: TensorType
        var xZero: Value?
        var weight: Weight
        var centeredWeight: QuantizedWeight
    }

    /// The rewrite of `op`, or `nil` when it keeps its portable form.
    static func plan(_ op: Operation, _ f: Function, _ unit: CompilationUnit) -> Plan? {
        let conv = op.opType == "conv_integer"
        guard op.outputs.count == 1, op.outputs[0].type.dtype == .int32, op.inputs.count >= 2,
              let xType = ResidualFusion.type(of: op.inputs[0], in: f, unit), [.int8, .uint8].contains(xType.dtype),
              let w = unit.weight(op.inputs[1]), case .dense(let data) = w.encoding, [.int8, .uint8].contains(data.dtype) else { return nil }
        let rank = w.shape.count
        guard conv ? rank >= 3 : rank == 2 else { return nil }
        // Zero points: the input's one value; the weight's one, or one per output channel (conv) or column (matmul).
        var xZero: Value?
        if op.inputs.count > 2, !op.inputs[2].isEmpty {
            guard let t = ResidualFusion.type(of: op.inputs[2], in: f, unit), t.dtype == xType.dtype, t.rank <= 1,
                  t.shape.allSatisfy({ $0.size == 1 }) else { return nil }
            xZero = Value(name: op.inputs[2], type: t)
        }
        let channels = conv ? w.shape[0] : w.shape[1]
        var zeroShape = [Int](repeating: 1, count: rank)
        var zero: WeightBlob?
        if op.inputs.count > 3, !op.inputs[3].isEmpty {
            guard let z = unit.weight(op.inputs[3]), case .dense(let zb) = z.encoding, zb.dtype == data.dtype, z.shape.count <= 1 else { return nil }
            let count = z.shape.reduce(1, *)
            guard count == 1 || count == channels else { return nil }
            if count > 1 { zeroShape[conv ? 0 : 1] = channels }
            zero = WeightBlob(dtype: zb.dtype, shape: zeroShape, data: zb.data)
        }
        let ones = [Float](repeating: 1, count: zeroShape.reduce(1, *))
        let scale = WeightBlob(dtype: .float32, shape: zeroShape, data: ByteStorage(ones.withUnsafeBytes { Array($0) }))
        return Plan(xType: xType, xZero: xZero, weight: w, centeredWeight: QuantizedWeight(data: data, scale: scale, zeroPoint: zero))
    }
}
