import KilnFormat
import KilnReference

/// Drops the window taps of a 2-D `conv` that read only padding for every output pixel.
///
/// A dilated head on a small feature map (DeepLab's ASPP: a 3×3 window dilated by 12, 24 or 36 on
/// a 33×33 map) reads zeros at most of its taps: with dilation at least the map's size only the
/// centre tap ever lands inside, and the conv is a 1×1 conv in disguise doing nine times the work.
/// Before: `conv(x, W[M, C, 3, 3], dilations = [36, 36], pads = [36, 36, 36, 36])` on a 33×33 map —
/// after: `conv(x, W[:, :, 1:2, 1:2], pads = [0, 0, 0, 0])`. Needs static spatial dims, a dense
/// float weight and explicit pads; the live taps (those some output pixel reads inside the map)
/// form a range per axis, which becomes the new window, its pads shrunk by the dropped rows and
/// columns so the output keeps its size. The dropped taps only ever added `0 · w`, so the results
/// are those of the full window (finite weights).
public struct DeadTapPruning: CompilerPass {
    /// `dead_tap_pruning`.
    public static let name = "dead_tap_pruning"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            var types: [String: TensorType] = [:]
            for a in f.inputs { types[a.name] = a.type }
            for op in f.operations { for o in op.outputs { types[o.name] = o.type } }
            for (i, op) in f.operations.enumerated() where op.opType == "conv" && op.inputs.count >= 2 && op.outputs.count == 1 {
                guard let x = types[op.inputs[0]], let pruned = try Self.prune(op, input: x, unit: &unit) else { continue }
                f.operations[i] = pruned
            }
            unit.model.functions[fi] = f
        }
    }

    /// The live taps of one spatial axis: input size, window size, stride, dilation, pads before
    /// and after, output size; `nil` when every tap is live, no tap is, or the live ones are not a range.
    static func liveRange(size: Int, window: Int, stride: Int, dilation: Int, before: Int, output: Int) -> ClosedRange<Int>? {
        guard size > 0, window > 1, stride > 0, dilation > 0, output > 0 else { return nil }
        let live = (0 ..< window).map { k -> Bool in
            // Positions read: k·d − before + o·s for o in 0 ..< output; is one inside [0, size)?
            let first = k * dilation - before
            if first >= size { return false }
            if first >= 0 { return true }
            let steps = (-first + stride - 1) / stride
            return steps < output && first + steps * stride < size
        }
        guard let lo = live.firstIndex(of: true), let hi = live.lastIndex(of: true), live[lo ... hi].allSatisfy({ $0 }),
              lo > 0 || hi < window - 1 else { return nil }
        return lo ... hi
    }

    /// `op` with its window cut to the live taps and a new weight, or `nil` when nothing is dead
    /// or the conv is not of the supported form.
    static func prune(_ op: Operation, input x: TensorType, unit: inout CompilationUnit) throws -> Operation? {
        let a = op.attributes
        guard x.rank == 4, op.outputs[0].type.rank == 4, case .size(let h) = x.shape[2], case .size(let wd) = x.shape[3],
              case .size(let oh) = op.outputs[0].type.shape[2], case .size(let ow) = op.outputs[0].type.shape[3],
              (try? a.string("auto_pad", "NOTSET")) == "NOTSET", let w = unit.weight(op.inputs[1]), case .dense = w.encoding,
              w.dtype == .float32, w.shape.count == 4 else { return nil }
        let (kh, kw) = (w.shape[2], w.shape[3])
        let strides = (try? a.ints("strides")) ?? [1, 1], dilations = (try? a.ints("dilations")) ?? [1, 1]
        let pads = (try? a.ints("pads")) ?? [0, 0, 0, 0]
        guard strides.count == 2, dilations.count == 2, pads.count == 4 else { return nil }
        let rows = liveRange(size: h, window: kh, stride: strides[0], dilation: dilations[0], before: pads[0], output: oh) ?? 0 ... kh - 1
        let cols = liveRange(size: wd, window: kw, stride: strides[1], dilation: dilations[1], before: pads[1], output: ow) ?? 0 ... kw - 1
        guard rows != 0 ... kh - 1 || cols != 0 ... kw - 1 else { return nil }
        let newPads = [pads[0] - rows.lowerBound * dilations[0], pads[1] - cols.lowerBound * dilations[1],
                       pads[2] - (kh - 1 - rows.upperBound) * dilations[0], pads[3] - (kw - 1 - cols.upperBound) * dilations[1]]
        guard newPads.allSatisfy({ $0 >= 0 }) else { return nil }
        let name = "\(w.name).taps\(rows.lowerBound)\(cols.lowerBound)_\(rows.count)x\(cols.count)"
        if unit.weight(name) == nil {
            let values = try WeightDecoding.dense(w).scalars(as: Float.self)
            var cut: [Float] = []
            cut.reserveCapacity(w.shape[0] * w.shape[1] * rows.count * cols.count)
            for plane in 0 ..< w.shape[0] * w.shape[1] {
                for r in rows { for c in cols { cut.append(values[(plane * kh + r) * kw + c]) } }
            }
            let shape = [w.shape[0], w.shape[1], rows.count, cols.count]
            unit.model.weights.append(Weight(name: name, dtype: .float32, shape: shape,
                                             encoding: .dense(WeightBlob(dtype: .float32, shape: shape, data: ByteStorage(cut.withUnsafeBytes { Array($0) })))))
        }
        var out = op
        out.inputs[1] = name
        out.attributes["pads"] = .ints(newPads)
        out.attributes["dilations"] = .ints([rows.count == 1 ? 1 : dilations[0], cols.count == 1 ? 1 : dilations[1]])
        if a["kernel_shape"] != nil { out.attributes["kernel_shape"] = .ints([rows.count, cols.count]) }
        return out
    }
}
