import KilnFormat

extension KernelTable {
    /// Kernels of the matrix products and the layers built on them (attention, rotary embedding, the
    /// recurrent cells); `nil` for other ops.
    static func linearAlgebraKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "matmul": return { inputs in [try LinearAlgebra.matmul(try present(inputs, 0), try present(inputs, 1))] }
        case "gemm":
            let alpha = Float(try a.float("alpha", 1)), beta = Float(try a.float("beta", 1))
            let ta = try a.int("trans_a", 0) != 0, tb = try a.int("trans_b", 0) != 0
            return { inputs in
                [try LinearAlgebra.gemm(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                        alpha: alpha, beta: beta, transA: ta, transB: tb)]
            }
        case "linear":
            return { inputs in [try LinearAlgebra.linear(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil)] }
        case "einsum":
            let equation = try a.string("equation", "")
            return { inputs in [try LinearAlgebra.einsum(equation, try inputs.indices.map { try present(inputs, $0) })] }
        case "attention":
            let options = try Attention.Options(a), outputs = op.outputs.count
            return { inputs in try Attention.run(inputs, options, outputs: outputs) }
        case "rotary_embedding":
            let interleaved = try a.int("interleaved", 0) != 0, dim = try a.int("rotary_embedding_dim", 0), heads = try a.int("num_heads", 0)
            return { inputs in
                [try Rotary.run(try present(inputs, 0), cos: try present(inputs, 1), sin: try present(inputs, 2),
                                positions: inputs.count > 3 ? inputs[3] : nil, interleaved: interleaved, dim: dim, heads: heads)]
            }
        case "lstm", "gru", "rnn":
            let gates = op.opType == "lstm" ? 4 : op.opType == "gru" ? 3 : 1
            _ = try Recurrent.Config(a, gates: gates)
            return { inputs in try Recurrent.run(inputs, a, gates: gates) }
        case "dynamic_quantize_lstm":
            _ = try Recurrent.Config(a, gates: 4)
            return { inputs in try Recurrent.runDynamicQuantized(inputs, a) }
        default:
            return nil
        }
    }

    /// Kernels of convolution and pooling in the portable (planes-first) layout; `nil` for other ops.
    static func convolutionKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "conv":
            return { inputs in
                [try Convolution.adding(try Convolution.conv(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a),
                                        inputs.count > 3 ? inputs[3] : nil)]
            }
        case "conv_transpose":
            return { inputs in [try Convolution.convTranspose(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, a)] }
        case "max_pool" where op.outputs.count == 2:
            return { inputs in
                let r = try Convolution.poolWithIndices(try present(inputs, 0), a, max: true, indices: true)
                return [r.values, r.indices!]
            }
        case "max_pool": return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: true)] }
        case "average_pool": return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: false)] }
        case "global_average_pool": return { inputs in [try Convolution.globalPool(try present(inputs, 0), max: false)] }
        case "global_max_pool": return { inputs in [try Convolution.globalPool(try present(inputs, 0), max: true)] }
        case "lp_pool":
            let p = Float(try a.int("p", 2))
            return { inputs in [try Convolution.pool(try present(inputs, 0), a, max: false, lp: p)] }
        default:
            return nil
        }
    }

    /// Kernels of the normalization ops, softmax and hardmax; `nil` for other ops.
    static func normalizationKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "batch_norm":
            let eps = Float(try a.float("epsilon", 1e-5))
            return { inputs in
                [try Reduction.batchNorm(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2),
                                         try present(inputs, 3), try present(inputs, 4), epsilon: eps)]
            }
        case "instance_norm":
            let eps = Float(try a.float("epsilon", 1e-5))
            return { inputs in [try Reduction.instanceNorm(try present(inputs, 0), try present(inputs, 1), try present(inputs, 2), epsilon: eps)] }
        case "layer_norm":
            let eps = Float(try a.float("epsilon", 1e-5)), axis = try a.int("axis", -1)
            return { inputs in
                let x = try present(inputs, 0)
                return [try Reduction.layerNorm(x, try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                                axis: try OpSet.normalize(axis: axis, rank: x.rank), epsilon: eps)]
            }
        case "softmax", "log_softmax":
            let axis = try a.int("axis", -1), log = op.opType == "log_softmax"
            return { inputs in
                let x = try present(inputs, 0)
                return [try Reduction.softmax(x, axis: try OpSet.normalize(axis: axis, rank: x.rank), log: log)]
            }
        case "hardmax":
            let axis = try a.int("axis", -1)
            return { inputs in [try Indexing.hardmax(try present(inputs, 0), axis: axis)] }
        default:
            return nil
        }
    }
}
