import KilnFormat

/// Operators converted one to one: the registry's ONNX names, and the operators whose listed
/// attributes carry over.
extension NodeConverter {
    /// Operators whose attributes carry over unchanged: the op registry's ONNX names.
    static let direct: [String: String] = OpSet.onnxDirect

    /// Operators converted one to one with the listed attributes (others ignored: stash types,
    /// tuning hints).
    static let filtered: [String: (op: String, attributes: Set<String>)] = [
        "GridSample": ("grid_sample", ["mode", "padding_mode", "align_corners"]),
        "AffineGrid": ("affine_grid", ["align_corners"]),
        "Col2Im": ("col2im", ["dilations", "pads", "strides"]),
        "DeformConv": ("deform_conv", ["dilations", "group", "kernel_shape", "offset_group", "pads", "strides"]),
        "MaxUnpool": ("max_unpool", ["kernel_shape", "pads", "strides"]),
        "NonMaxSuppression": ("non_max_suppression", ["center_point_box"]),
        "CenterCropPad": ("center_crop_pad", ["axes"]),
        "LRN": ("lrn", ["alpha", "beta", "bias", "size"]),
        "MeanVarianceNormalization": ("mean_variance_normalization", ["axes"]),
        "LinearAttention": ("linear_attention", ["q_num_heads", "kv_num_heads", "scale", "update_rule", "chunk_size"]),
        "CausalConvWithState": ("causal_conv_with_state", ["activation"]),
        "TensorScatter": ("tensor_scatter", ["axis", "mode"]),
        "ReverseSequence": ("reverse_sequence", ["batch_axis", "time_axis"]),
        "Unique": ("unique", ["axis", "sorted"]),
        "NonZero": ("non_zero", []),
        "Det": ("det", []),
        "RoiAlign": ("roi_align", ["coordinate_transformation_mode", "mode", "output_height", "output_width", "sampling_ratio", "spatial_scale"]),
        "SwiGLU": ("swiglu", ["alpha"]),
        "ConvInteger": ("conv_integer", ["strides", "pads", "dilations", "auto_pad", "group", "kernel_shape"]),
        "QLinearConv": ("qlinear_conv", ["strides", "pads", "dilations", "auto_pad", "group", "kernel_shape"]),
    ]

    /// A handler for each operator of `direct` and of `filtered`.
    static let oneToOneHandlers: [String: Handler] = {
        var table: [String: Handler] = [:]
        for (onnx, kiln) in direct {
            table[onnx] = { converter in { try converter.oneToOne($0, as: kiln) } }
        }
        for (onnx, (kiln, keys)) in filtered {
            let handler: Handler = { converter in { try converter.filteredOneToOne($0, as: kiln, keeping: keys) } }
            precondition(table.updateValue(handler, forKey: onnx) == nil, "ONNX \(onnx) is both direct and filtered")
        }
        return table
    }()

    /// Emits `kiln` with the node's inputs and attributes. An arithmetic op on shape vectors whose
    /// entries are all known, although computed at run time, becomes a constant instead.
    /// - Parameters:
    ///   - node: A node of an operator of `direct`.
    ///   - kiln: The Kiln op it becomes.
    /// - Throws: `ConvertError` when the first input is missing or the op refuses the node.
    func oneToOne(_ node: ONNXNode, as kiln: String) throws {
        let op = node.opType
        let needed = kiln == "where" ? 3 : 1
        guard node.inputs.count >= needed, !node.inputs[0].isEmpty else {
            throw c.fail("node '\(node.name)' (\(op)) has \(node.inputs.count) input\(node.inputs.count == 1 ? "" : "s"); it takes at least \(needed)")
        }
        let e = symbolic(kiln, node.inputs)
        if let e, let ints = Optional(e.compactMap(\.int)), ints.count == e.count, let t = try type(node.inputs[0]) {
            // Every entry is known although the inputs are computed at run time.
            let outType: DataType = ["equal", "less", "greater"].contains(kiln) ? .bool : (kiln == "where" ? (try type(node.inputs[1]))?.dtype ?? t.dtype : t.dtype)
            let rank0 = try node.inputs.allSatisfy { (try type($0))?.rank ?? 0 == 0 }
            let shape = rank0 ? [] : [ints.count]
            switch outType {
            case .bool: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { $0 != 0 }))
            case .int32: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { Int32($0) }))
            default: c.values[node.outputs[0]] = .constant(NDArray(shape: shape, scalars: ints.map { Int64($0) }))
            }
            return
        }
        try emit(node, kiln, node.inputs, try attributes(node), elements: [e])
    }

    /// Emits `kiln` with the node's inputs and the attributes of `keys`.
    /// - Parameters:
    ///   - node: A node of an operator of `filtered`.
    ///   - kiln: The Kiln op it becomes.
    ///   - keys: The attributes that carry over.
    /// - Throws: `ConvertError` when the op refuses the node.
    func filteredOneToOne(_ node: ONNXNode, as kiln: String, keeping keys: Set<String>) throws {
        try emit(node, kiln, node.inputs, try attributes(node, only: keys))
    }
}
