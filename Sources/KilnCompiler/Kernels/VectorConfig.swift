import CKilnKernels

/// One ISA's entry points of the vector kernel families (`kiln_vector.inc`): a step reads its
/// ISA's config once when it is made and calls its fields; no call site chooses a variant.
/// An ISA without a row of a family (or not built on this host) has the family's scalar entry.
package struct VectorConfig {
    /// The C config.
    package let entries: kiln_vector_config

    /// The config of `isa`.
    package init(_ isa: ISA) {
        entries = kiln_vector_config_of(isa.code).pointee
    }

    // Every field is set: each ISA starts from the scalar rows (vector.c), so the entries unwrap.
    package var unary: kiln_f32_unary_fn { entries.unary! }
    package var binaryND: kiln_binary_nd_fn { entries.binary_nd! }
    package var reduce: kiln_f32_map_nd_fn { entries.reduce! }
    package var softmax: kiln_f32_map_nd_fn { entries.softmax! }
    package var layerNorm: kiln_f32_layer_norm_fn { entries.layer_norm! }
    package var attention: kiln_f32_attention_fn { entries.attention! }
    package var pool2d: kiln_f32_pool2d_fn { entries.pool2d! }
    package var pool2dNHWC: kiln_f32_pool2d_nhwc_fn { entries.pool2d_nhwc! }
    package var dwconv2d: kiln_f32_dwconv2d_fn { entries.dwconv2d! }
    package var dwconv2dNHWC: kiln_f32_dwconv2d_nhwc_fn { entries.dwconv2d_nhwc! }
    package var lstmGates: kiln_f32_lstm_gates_fn { entries.lstm_gates! }
    package var gruReset: kiln_f32_gru_reset_fn { entries.gru_reset! }
    package var gruGates: kiln_f32_gru_gates_fn { entries.gru_gates! }
    package var winograd: kiln_f32_winograd_fn { entries.winograd! }
    package var u8s8GEMM: kiln_u8s8_gemm_fn { entries.u8s8_gemm! }

    /// The `KILN_VECTOR_*` family of the kernel library that implements a catalog family, if any.
    package static func library(of family: KernelFamily) -> Int32? {
        switch family {
        case .unary: Int32(KILN_VECTOR_UNARY)
        case .binary: Int32(KILN_VECTOR_BINARY)
        case .softmax, .layerNorm, .attention, .reduce: Int32(KILN_VECTOR_NORMALIZATION)
        case .pool2d: Int32(KILN_VECTOR_POOL2D)
        case .pool2dNHWC: Int32(KILN_VECTOR_POOL2D_NHWC)
        case .depthwise: Int32(KILN_VECTOR_DWCONV2D)
        case .depthwiseNHWC: Int32(KILN_VECTOR_DWCONV2D_NHWC)
        case .integerGEMM: Int32(KILN_VECTOR_INTEGER)
        default: nil
        }
    }

    /// The ISAs `kiln_vector.inc` lists for a library family, on any host.
    package static func isas(ofLibrary family: Int32) -> [ISA] {
        let bits = kiln_vector_isas(family)
        return ISA.allCases.filter { bits >> UInt32($0.code) & 1 == 1 }
    }
}
