import KilnFormat
import KilnReference

/// Folds a zero `pad` of the spatial dims into the `conv` that reads it.
///
/// Before: `p = pad(x, pads = [0, 1, 1, 0, 0, 1, 1, 0]); y = conv(p, W)` (a channels-last conv) —
/// after: `y = conv(x, W, pads = [1, 1, 1, 1])` (plus the conv's own pads).
/// Only a constant-mode pad of value 0 whose result the conv alone reads, with non-negative pads
/// on the two spatial dims of the conv's input layout and none elsewhere, and a conv without
/// `auto_pad`. Runs after ``ChannelsLastLayout``, which makes a TensorFlow export's
/// `pad → transpose → conv` adjacent.
public struct PadFolding: CompilerPass {
    /// `pad_folding`.
    public static let name = "pad_folding"

    /// Creates the pass.
    public init() {}

    /// Runs the pass.
    /// - Parameter unit: The unit to rewrite.
    public func apply(to unit: inout CompilationUnit) throws {
        for fi in unit.model.functions.indices {
            var f = unit.model.functions[fi]
            let uses = UseIndex(f)
            var removed = Set<Int>()
            for (ci, conv) in f.operations.enumerated() where conv.opType == "conv" && !conv.inputs.isEmpty {
                guard let pi = uses.producer[conv.inputs[0]], uses.isPrivate(conv.inputs[0]), !removed.contains(pi),
                      let spatial = Self.padding(f.operations[pi], unit, conv, unit.config(of: conv, in: f.name).layout) else { continue }
                let w = f.operations[pi].inputs[0]
                var fused = conv
                var pads = (try? conv.attributes.ints("pads")) ?? [0, 0, 0, 0]
                guard pads.count == 4 else { continue }
                for i in 0 ..< 4 { pads[i] += spatial[i] }
                fused.attributes["pads"] = .ints(pads)
                fused.inputs[0] = w
                f.operations[ci] = fused
                removed.insert(pi)
            }
            f.operations = f.operations.enumerated().filter { !removed.contains($0.offset) }.map(\.element)
            unit.model.functions[fi] = f
        }
    }

    /// The pad's spatial amounts as a conv's `pads` (top, left, bottom, right) when it can fold.
    static func padding(_ pad: Operation, _ unit: CompilationUnit, _ conv: Operation, _ layout: StepConfig.Layout) -> [Int]? {
        guard pad.opType == "pad", pad.outputs.count == 1, pad.outputs[0].type.rank == 4,
              (try? pad.attributes.string("mode", "constant")) == "constant",
              (try? conv.attributes.string("auto_pad", "NOTSET")) == "NOTSET" else { return nil }
        if let v = try? pad.attributes.float("value", 0), v != 0 { return nil }
        if pad.inputs.count > 2, !pad.inputs[2].isEmpty {
            guard let c = unit.weight(pad.inputs[2]), let v = try? WeightDecoding.dense(c), v.elementCount == 1,
                  v.scalarType == .float32, v.scalars(as: Float.self)[0] == 0 else { return nil }
        }
        var amounts: [Int]
        if let a = try? pad.attributes.ints("pads") {
            amounts = a
        } else if pad.inputs.count > 1, let p = unit.weight(pad.inputs[1]), let v = try? WeightDecoding.dense(p), v.scalarType == .int64 {
            amounts = v.scalars(as: Int64.self).map { Int($0) }
        } else {
            return nil
        }
        var axes = Array(0 ..< 4)
        if let a = try? pad.attributes.ints("axes") { axes = a.map { $0 < 0 ? $0 + 4 : $0 } }
        if pad.inputs.count > 3, !pad.inputs[3].isEmpty { return nil }
        guard amounts.count == 2 * axes.count, amounts.allSatisfy({ $0 >= 0 }) else { return nil }
        var begin = [0, 0, 0, 0], end = [0, 0, 0, 0]
        for (k, a) in axes.enumerated() where (0 ..< 4).contains(a) {
            begin[a] = amounts[k]
            end[a] = amounts[k + axes.count]
        }
        let (h, w) = layout.input ? (1, 2) : (2, 3)
        for a in 0 ..< 4 where a != h && a != w { guard begin[a] == 0, end[a] == 0 else { return nil } }
        return [begin[h], begin[w], end[h], end[w]]
    }
}
