import KilnFormat

extension KernelTable {
    /// Kernels of quantization, dequantization and the integer matrix products; `nil` for other ops.
    static func quantizationKernel(for op: Operation) throws -> Kernel? {
        let a = op.attributes
        switch op.opType {
        case "dequantize_linear":
            let axis = try a.int("axis", 1), block = try a.int("block_size", 0)
            return { inputs in
                [try Quantization.dequantize(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil, axis: axis, block: block)]
            }
        case "quantize_linear":
            let axis = try a.int("axis", 1), block = try a.int("block_size", 0)
            var fixed: DataType?
            if case .dtype(let d)? = a["output_dtype"] { fixed = d }
            let output = fixed
            return { inputs in
                let zp = inputs.count > 2 ? inputs[2] : nil
                return [try Quantization.quantize(try present(inputs, 0), try present(inputs, 1), zp, axis: axis, block: block,
                                                  dtype: output ?? zp?.scalarType ?? .uint8)]
            }
        case "dynamic_quantize_linear":
            return { inputs in try Quantization.dynamicQuantize(try present(inputs, 0)) }
        case "matmul_integer":
            return { inputs in
                [try Quantization.matmulInteger(try present(inputs, 0), try present(inputs, 1), inputs.count > 2 ? inputs[2] : nil,
                                                inputs.count > 3 ? inputs[3] : nil)]
            }
        case "qlinear_matmul":
            return { inputs in [try Quantization.qlinearMatmul(inputs)] }
        default:
            return nil
        }
    }
}
