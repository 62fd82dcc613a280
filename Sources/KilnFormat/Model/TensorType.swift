/// One dimension of a tensor shape: a fixed size or a symbol bound at run time.
public enum Dimension: Sendable, Hashable {
    /// A size known ahead of time.
    case size(Int)
    /// A dynamic size named by a symbol (for example `batch` or `seq`).
    /// The empty symbol is an anonymous dynamic size, printed as `?`.
    case symbol(String)

    /// An anonymous dynamic dimension.
    public static let unknown = Dimension.symbol("")

    /// The fixed size, or `nil` for a dynamic dimension.
    public var size: Int? {
        if case .size(let n) = self { return n }
        return nil
    }

    /// The dimension as printed: the number, the symbol, or `?`.
    public var displayText: String {
        switch self {
        case .size(let n): return String(n)
        case .symbol(let s): return s.isEmpty ? "?" : s
        }
    }
}

extension Dimension: ExpressibleByIntegerLiteral, ExpressibleByStringLiteral {
    public init(integerLiteral value: Int) { self = .size(value) }
    public init(stringLiteral value: String) { self = .symbol(value) }
}

/// The type of a tensor value: its element type and shape.
public struct TensorType: Sendable, Hashable, CustomStringConvertible {
    /// The element type.
    public var dtype: DataType
    /// The dimensions, outermost first; empty for a scalar.
    public var shape: [Dimension]

    /// Creates a tensor type.
    /// - Parameters:
    ///   - dtype: The element type.
    ///   - shape: The dimensions, outermost first.
    public init(_ dtype: DataType, _ shape: [Dimension]) {
        self.dtype = dtype
        self.shape = shape
    }

    /// The rank (number of dimensions).
    public var rank: Int { shape.count }

    /// The fixed sizes of every dimension, or `nil` when any is dynamic.
    public var staticShape: [Int]? {
        var dims: [Int] = []
        dims.reserveCapacity(shape.count)
        for d in shape {
            guard let n = d.size else { return nil }
            dims.append(n)
        }
        return dims
    }

    /// `float32[batch, 64]`.
    public var description: String {
        "\(dtype.rawValue)[\(shape.map(\.displayText).joined(separator: ", "))]"
    }
}

/// Element count of a fixed shape.
/// - Parameter shape: Non-negative dimension sizes.
/// - Returns: The product, or `nil` when a size is negative or the product overflows `Int`.
public func elementCount(_ shape: [Int]) -> Int? {
    var total = 1
    for d in shape {
        guard d >= 0 else { return nil }
        let (p, overflow) = total.multipliedReportingOverflow(by: d)
        if overflow { return nil }
        total = p
    }
    return total
}
