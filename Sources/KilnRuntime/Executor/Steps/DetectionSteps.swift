@preconcurrency import CKilnKernels
import Foundation
import KilnCompiler
import KilnFormat

/// `non_max_suppression` on float32 boxes and scores: per batch the boxes' corners and areas
/// once, per class the candidates above the score threshold sorted by score (ties by index),
/// then the greedy pass against the boxes kept so far, as the reference and onnxruntime select
/// them (a box is dropped when its IoU with a kept one is above the threshold). The count of
/// selected boxes comes from the data: a plan is bound to one count and a run selecting
/// another throws ``PlanMismatch``; generic runs call ``evaluate(_:)``.
struct NonMaxSuppressionStep: StepKernel {
    let id: KernelID
    let op: KilnFormat.Operation
    let centerPoint: Bool

    init(id: KernelID, op: KilnFormat.Operation) throws {
        self.id = id
        self.op = op
        centerPoint = try op.attributes.int("center_point_box", 0) != 0
    }

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    /// The selected (batch, class, box) triples of one run on `boxes` [B, N, 4] and `scores` [B, C, N].
    static func select(boxes: UnsafePointer<Float>, scores: UnsafePointer<Float>, batches: Int, classes: Int, count: Int, limit: Int,
                       iou: Float, scoreThreshold: Float?, centerPoint: Bool) -> [Int64] {
        var selected: [Int64] = []
        var y1 = [Float](repeating: 0, count: count), x1 = y1, y2 = y1, x2 = y1, area = y1
        var kept = [Int32](repeating: 0, count: count)
        let scratch = UnsafeMutableRawPointer.allocate(byteCount: kiln_nms_scratch_bytes(count), alignment: 64)
        defer { scratch.deallocate() }
        for b in 0 ..< batches {
            for i in 0 ..< count {
                let p = boxes + (b * count + i) * 4
                if centerPoint {
                    let (cx, cy, w, h) = (p[0], p[1], p[2], p[3])
                    (y1[i], x1[i], y2[i], x2[i]) = (cy - h / 2, cx - w / 2, cy + h / 2, cx + w / 2)
                } else {
                    (y1[i], x1[i], y2[i], x2[i]) = (min(p[0], p[2]), min(p[1], p[3]), max(p[0], p[2]), max(p[1], p[3]))
                }
                area[i] = (x2[i] - x1[i]) * (y2[i] - y1[i])
            }
            for k in 0 ..< classes where limit > 0 {
                let found = kiln_f32_nms_class(scores + (b * classes + k) * count, count, scoreThreshold == nil ? 0 : 1, scoreThreshold ?? 0,
                                               y1, x1, y2, x2, area, iou, limit, &kept, scratch)
                for i in kept[..<found] { selected.append(Int64(b)); selected.append(Int64(k)); selected.append(Int64(i)) }
            }
        }
        return selected
    }

    private func check(_ boxes: [Int], _ scores: [Int]) throws -> (batches: Int, classes: Int, count: Int) {
        guard boxes.count == 3, boxes[2] == 4, scores.count == 3, scores[0] == boxes[0], scores[2] == boxes[1] else {
            throw OpError("non_max_suppression needs boxes [B, S, 4] and scores [B, K, S], got \(boxes) and \(scores)")
        }
        guard boxes[1] <= Int(Int32.max) else { throw OpError("non_max_suppression of \(boxes[1]) boxes: at most \(Int32.max) per batch") }
        return (boxes[0], scores[1], boxes[1])
    }

    private func scalar(_ p: UnsafeRawPointer?, _ dtype: DataType?) throws -> Double? {
        guard let p, let dtype else { return nil }
        switch dtype {
        case .int64: return Double(p.load(as: Int64.self))
        case .int32: return Double(p.load(as: Int32.self))
        case .float32: return Double(p.load(as: Float.self))
        default: throw OpError("a \(dtype.rawValue) parameter has no kernel")
        }
    }

    /// Selects with the limit and thresholds read from their operands (absent: no boxes, 0, no
    /// score threshold); a limit past any box count (int64's maximum, as exporters write "no
    /// limit") is no limit.
    private func run(_ boxes: UnsafePointer<Float>, _ scores: UnsafePointer<Float>, _ dims: (batches: Int, classes: Int, count: Int),
                     _ params: [(UnsafeRawPointer, DataType)?]) throws -> [Int64] {
        let raw = try scalar(params[0]?.0, params[0]?.1)
        let limit = raw.map { $0 >= 0x1p53 ? Int.max : max(0, Int($0)) } ?? 0
        let iou = Float(try scalar(params[1]?.0, params[1]?.1) ?? 0), threshold = try scalar(params[2]?.0, params[2]?.1).map { Float($0) }
        return Self.select(boxes: boxes, scores: scores, batches: dims.batches, classes: dims.classes, count: dims.count, limit: limit, iou: iou,
                           scoreThreshold: threshold, centerPoint: centerPoint)
    }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        guard inputs.count >= 2, let b = inputs[0], let s = inputs[1], b.dtype == .float32, s.dtype == .float32, outputs.count == 1,
              outputs[0].dtype == .int64, outputs[0].shape.count == 2, outputs[0].shape[1] == 3 else { throw OpError("needs float32 boxes and scores") }
        let dims = try check(b.shape, s.shape)
        let params = (2 ..< 5).map { i in i < inputs.count ? inputs[i] : nil }
        for p in params { if let p { guard p.count == 1, [.int64, .int32, .float32].contains(p.dtype) else { throw OpError("needs scalar parameters") } } }
        let y = outputs[0], planned = y.shape[0]
        return BoundStep { slots in
            let selected = try run(UnsafePointer(b.floats(slots)), UnsafePointer(s.floats(slots)), dims,
                                   params.map { $0.map { (UnsafeRawPointer($0.pointer(slots)), $0.dtype) } })
            guard selected.count == planned * 3 else { throw PlanMismatch(reason: "selected \(selected.count / 3) boxes where the plan has \(planned)") }
            selected.withUnsafeBytes { y.pointer(slots).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        }
    }

    func evaluate(_ inputs: [NDArray?]) throws -> [NDArray]? {
        guard inputs.count >= 2, let b = inputs[0]?.contiguous(), let s = inputs[1]?.contiguous(), b.scalarType == .float32, s.scalarType == .float32 else { return nil }
        let params = try (2 ..< 5).map { i -> (NDArray)? in
            guard i < inputs.count, let v = inputs[i] else { return nil }
            guard v.elementCount == 1, [.int64, .int32, .float32].contains(v.scalarType) else { throw OpError("needs scalar parameters") }
            return v.contiguous()
        }
        let selected = try withExtendedLifetime((b, s, params)) {
            try run(UnsafePointer(b.unsafeBase.assumingMemoryBound(to: Float.self)), UnsafePointer(s.unsafeBase.assumingMemoryBound(to: Float.self)),
                    try check(b.shape, s.shape), params.map { $0.map { (UnsafeRawPointer($0.unsafeBase), $0.scalarType) } })
        }
        return [NDArray(shape: [selected.count / 3, 3], scalars: selected)]
    }
}
