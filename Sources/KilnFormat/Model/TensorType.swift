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

    /// The number of elements when every dimension is fixed, else `nil`. A validated type's
    /// count never overflows (see ``shapeExtent(_:)``).
    public var elementCount: Int? { staticShape.flatMap(KilnFormat.elementCount) }

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

/// The most elements a tensor may hold: 2^48 (a petabyte of float32, far past any memory).
///
/// Validation refuses a fixed shape whose ``shapeExtent(_:)`` passes it, so every product of
/// any subset of a valid shape's fixed dims stays below 2^48, and the compiler's and runtime's
/// dim arithmetic (such products times a tile, a byte size or a small factor) cannot overflow
/// `Int`. Dims bound at run time come from tensors that exist in memory.
public let maximumTensorElements = 1 << 48

/// The product of a shape's dims with zero dims counted as one: the largest product of any
/// subset of them.
/// - Parameter shape: Dimension sizes.
/// - Returns: The product, or `nil` when a size is negative or the product passes
///   ``maximumTensorElements``.
public func shapeExtent(_ shape: [Int]) -> Int? {
    var total = 1
    for d in shape {
        guard d >= 0 else { return nil }
        let (p, overflow) = total.multipliedReportingOverflow(by: max(d, 1))
        guard !overflow, p <= maximumTensorElements else { return nil }
        total = p
    }
    return total
}
