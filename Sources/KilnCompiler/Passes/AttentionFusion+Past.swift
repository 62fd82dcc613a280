import KilnFormat

/// ONNX `Attention` (opset 23) with a past cache, as the `attention` op imports it, split into
/// what the compiled kernel runs: `present_key = concat(past_key, k, axis 2)` (likewise for
/// values), then `attention(q, present_key, present_value, mask)` with its scale explicit. The
/// presents are the op's own outputs when it has them, so a decoder that returns them can keep
/// them as state in place. Only the plain 4-D form is split: float32 `[B, H, S, D]` operands, a
/// float32 additive mask or none, no causal, window or softcap options, no score output and no
/// `nonpad_kv_seqlen`; any other form keeps running the reference kernel.
extension AttentionFusion {
    func splitPast(_ f: inout Function, runtime: RuntimeVersion) {
        guard runtime >= RuntimeVersion(0, 8), f.operations.contains(where: { $0.opType == "attention" && $0.inputs.count > 4 }) else { return }
        var types: [String: TensorType] = [:]
        for a in f.inputs { types[a.name] = a.type }
        for op in f.operations { for v in op.outputs { types[v.name] = v.type } }
        var rewritten: [Operation] = []
        for op in f.operations {
            guard let parts = split(op, types) else {
                rewritten.append(op)
                continue
            }
            rewritten += parts
        }
        f.operations = rewritten
    }

    private func split(_ op: Operation, _ types: [String: TensorType]) -> [Operation]? {
        let a = op.attributes
        func int(_ name: String, _ fallback: Int) -> Int? { try? a.int(name, fallback) }
        guard op.opType == "attention", op.inputs.count == 6, !op.inputs[4].isEmpty, !op.inputs[5].isEmpty, (1 ... 3).contains(op.outputs.count),
              int("is_causal", 0) == 0, int("qk_matmul_output_mode", 0) == 0, int("left_window_size", -1) == -1, int("right_window_size", -1) == -1,
              (try? a.float("softcap", 0)) == 0,
              Set(a.keys).isSubset(of: ["scale", "q_num_heads", "kv_num_heads", "is_causal", "softcap", "qk_matmul_output_mode",
                                        "left_window_size", "right_window_size", "softmax_precision"]) else { return nil }
        let (q, k, v, pastK, pastV) = (op.inputs[0], op.inputs[1], op.inputs[2], op.inputs[4], op.inputs[5])
        guard let qt = types[q], let kt = types[k], let vt = types[v], let pkt = types[pastK], let pvt = types[pastV],
              [qt, kt, vt, pkt, pvt].allSatisfy({ $0.rank == 4 && $0.dtype == .float32 }) else { return nil }
        let mask = op.inputs[3]
        if !mask.isEmpty { guard let mt = types[mask], mt.dtype == .float32, (1 ... 4).contains(mt.rank) else { return nil } }
        let scale: Double
        if a["scale"] != nil {
            guard let s = try? a.float("scale", 0) else { return nil }
            scale = s
        } else {
            guard let d = qt.shape[3].size, d > 0 else { return nil }
            scale = 1 / Double(d).squareRoot()
        }
        // The presents: the op's outputs, or values of the past's type grown along the sequence.
        func present(_ k: Int, _ past: TensorType, _ what: String) -> Value {
            if k < op.outputs.count, !op.outputs[k].name.isEmpty { return op.outputs[k] }
            var t = past
            t.shape[2] = .symbol("")
            return Value(name: "\(op.name)/present_\(what)", type: t)
        }
        let (presentK, presentV) = (present(1, pkt, "key"), present(2, pvt, "value"))
        return [
            Operation(opType: "concat", name: "\(op.name)/present_key", inputs: [pastK, k], outputs: [presentK], attributes: ["axis": .int(2)], source: op.source),
            Operation(opType: "concat", name: "\(op.name)/present_value", inputs: [pastV, v], outputs: [presentV], attributes: ["axis": .int(2)], source: op.source),
            Operation(opType: "attention", name: op.name, inputs: [q, presentK.name, presentV.name] + (mask.isEmpty ? [] : [mask]),
                      outputs: [op.outputs[0]], attributes: ["scale": .float(scale)], source: op.source),
        ]
    }
}
