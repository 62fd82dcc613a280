import KilnFormat

/// One op of the portable op set, prepared once (attributes parsed) and run many times.
/// Compiled plans use it for ops that have no specialized kernel.
public struct ReferenceKernel: Sendable {
    private let kernel: Kernel

    /// Prepares `op`.
    /// - Parameters:
    ///   - op: An op of specs/ops.md.
    ///   - subgraphs: Plans the bodies of a control-flow op (default: the reference interpreter).
    /// - Throws: ``OpError`` when the op type is unknown or an attribute is malformed.
    public init(_ op: Operation, subgraphs: SubgraphPlanner? = nil) throws {
        kernel = try KernelTable.kernel(for: op, subgraphs: subgraphs ?? ReferenceInterpreter.planSubgraph)
    }

    /// Runs the op.
    /// - Parameter inputs: Its inputs (`nil` for absent optional ones); float16 inputs are widened.
    /// - Returns: Its outputs.
    /// - Throws: ``OpError`` when the inputs do not fit the op.
    public func callAsFunction(_ inputs: [NDArray?]) throws -> [NDArray] {
        try kernel(try inputs.map { try $0.map { $0.scalarType == .float32 ? $0 : try Weights.widened($0.contiguous()) } })
    }
}

extension ReferenceKernel {
    /// float16, bfloat16 and float64 arrays as float32; others unchanged.
    /// - Parameter x: An array.
    /// - Returns: The widened array.
    /// - Throws: ``OpError`` when the array cannot be read.
    public static func widen(_ x: NDArray) throws -> NDArray { try Weights.widened(x.contiguous()) }

    /// A float32 result in the float type a function declares for it (values are held as
    /// float32 inside); anything else unchanged.
    /// - Parameters:
    ///   - x: The result.
    ///   - dtype: The declared dtype.
    /// - Returns: `x` as float16, bfloat16 or float64 when declared so.
    public static func narrow(_ x: NDArray, to dtype: DataType) -> NDArray {
        guard x.scalarType == .float32, dtype != .float32, dtype.isFloatingPoint else { return x }
        let c = x.contiguous()
        return withExtendedLifetime(c) {
            let p = c.contiguousElements(as: Float.self)!  // float32, checked above
            switch dtype {
            case .float16: return NDArray(shape: x.shape, scalars: p.map { Float16($0) })
            case .float64: return NDArray(shape: x.shape, scalars: p.map { Double($0) })
            default:
                var out = NDArray(shape: x.shape, scalarType: .bfloat16)
                out.withUnsafeMutableBytes { raw in
                    let q = raw.bindMemory(to: UInt16.self)
                    for i in 0 ..< p.count { q[i] = Precision.floatToBFloat16(p[i]) }
                }
                return out
            }
        }
    }
}
