/// A Swift type whose values an ``NDArray`` can hold.
public protocol NDArrayScalar: Sendable {
    /// The element type it corresponds to.
    static var scalarType: DataType { get }
}

extension Float: NDArrayScalar { public static var scalarType: DataType { .float32 } }
extension Double: NDArrayScalar { public static var scalarType: DataType { .float64 } }
#if !((os(macOS) || targetEnvironment(macCatalyst)) && arch(x86_64))
extension Float16: NDArrayScalar { public static var scalarType: DataType { .float16 } }
#endif
extension Int64: NDArrayScalar { public static var scalarType: DataType { .int64 } }
extension Int32: NDArrayScalar { public static var scalarType: DataType { .int32 } }
extension Int16: NDArrayScalar { public static var scalarType: DataType { .int16 } }
extension Int8: NDArrayScalar { public static var scalarType: DataType { .int8 } }
extension UInt8: NDArrayScalar { public static var scalarType: DataType { .uint8 } }
extension UInt16: NDArrayScalar { public static var scalarType: DataType { .uint16 } }
extension UInt32: NDArrayScalar { public static var scalarType: DataType { .uint32 } }
extension UInt64: NDArrayScalar { public static var scalarType: DataType { .uint64 } }
extension Bool: NDArrayScalar { public static var scalarType: DataType { .bool } }
