import Foundation
import KilnFormat

/// Decoding of the JSON fixtures written by tools/*.py, shared by the test targets.
public enum FixtureJSON {
    /// The repository's root.
    public static let repositoryRoot: String = {
        var url = URL(fileURLWithPath: #filePath)
        for _ in 0 ..< 3 { url.deleteLastPathComponent() }
        return url.path
    }()

    /// A number, or one of the strings `nan`, `inf`, `-inf`.
    public static func number(_ v: Any) -> Double {
        if let s = v as? String { return s == "nan" ? .nan : s == "inf" ? .infinity : -.infinity }
        if let b = v as? Bool { return b ? 1 : 0 }
        return (v as! NSNumber).doubleValue
    }

    /// `{"dtype", "shape", "data"}` as an array.
    public static func array(_ json: [String: Any]) -> NDArray {
        let dtype = DataType(rawValue: json["dtype"] as! String)!
        let shape = json["shape"] as! [Int]
        let data = json["data"] as! [Any]
        switch dtype {
        case .float32: return NDArray(shape: shape, scalars: data.map { Float(number($0)) })
        case .float16: return NDArray(shape: shape, scalars: data.map { Float16(Float(number($0))) })
        case .float64: return NDArray(shape: shape, scalars: data.map { number($0) })
        case .int64: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).int64Value })
        case .int32: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).int32Value })
        case .int16: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).int16Value })
        case .int8: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).int8Value })
        case .uint8: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).uint8Value })
        case .bool: return NDArray(shape: shape, scalars: data.map { ($0 as! NSNumber).boolValue })
        default: fatalError("unsupported fixture dtype \(dtype)")
        }
    }

    /// `{"int": …}`, `{"floats": […]}`, `{"tensor": {…}}`, … as an attribute value.
    public static func attribute(_ json: [String: Any]) -> AttributeValue {
        let (kind, value) = json.first!
        switch kind {
        case "int": return .int((value as! NSNumber).intValue)
        case "float": return .float(number(value))
        case "string": return .string(value as! String)
        case "ints": return .ints((value as! [NSNumber]).map(\.intValue))
        case "floats": return .floats((value as! [Any]).map(number))
        case "dtype": return .dtype(DataType(rawValue: value as! String)!)
        case "strings": return .strings(value as! [String])
        default:
            let t = array(value as! [String: Any])
            return .tensor(TensorLiteral(dtype: t.scalarType, shape: t.shape, bytes: t.bytes))
        }
    }
}
