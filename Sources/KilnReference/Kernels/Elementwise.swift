import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

/// Elementwise kernels: unary maps, broadcasting binary ops, comparisons, casts.
enum Elementwise {
    /// `f` applied to every float32 element.
    static func mapFloat(_ x: NDArray, _ f: (Float) -> Float) throws -> NDArray {
        let src = try x.f32
        return NDArray.make(x.shape, Float.self) { out in
            for i in 0 ..< src.count { out[i] = f(src[i]) }
        }
    }

    /// A float32 → bool test of every element.
    static func testFloat(_ x: NDArray, _ f: (Float) -> Bool) throws -> NDArray {
        guard x.scalarType == .float32 else { throw OpError("expected float32 input, got \(x.scalarType.rawValue)") }
        let src = try x.f32
        return NDArray.make(x.shape, Bool.self) { out in
            for i in 0 ..< src.count { out[i] = f(src[i]) }
        }
    }

    /// `f` over two broadcast operands of element type `T`, giving `R`.
    static func binary<T: NDArrayScalar, R: NDArrayScalar>(_ a: NDArray, _ b: NDArray, _: T.Type, _: R.Type,
                                                          _ f: (T, T) throws -> R) throws -> NDArray {
        let shape = try broadcastShapes([a.shape, b.shape])
        let pa = try a.elements(T.self), pb = try b.elements(T.self)
        var out = NDArray(shape: shape, scalarType: R.scalarType)
        try out.mutableView(as: R.self) { o in
            if a.shape == b.shape {
                for i in 0 ..< o.count { o[i] = try f(pa[i], pb[i]) }
            } else if pb.count == 1 {
                let v = pb[0]
                for i in 0 ..< o.count { o[i] = try f(pa[i], v) }
            } else if pa.count == 1 {
                let v = pa[0]
                for i in 0 ..< o.count { o[i] = try f(v, pb[i]) }
            } else {
                // Outer indices by odometer; the last axis in a plain loop.
                let sa = broadcastStrides(a.shape, to: shape), sb = broadcastStrides(b.shape, to: shape)
                let n = shape[shape.count - 1], (ia, ib) = (sa[sa.count - 1], sb[sb.count - 1])
                var failure: Error?
                forEachIndex(Array(shape.dropLast()), [Array(sa.dropLast()), Array(sb.dropLast())]) { i, off in
                    guard failure == nil else { return }
                    do {
                        for j in 0 ..< n { o[i * n + j] = try f(pa[off[0] + j * ia], pb[off[1] + j * ib]) }
                    } catch { failure = error }
                }
                if let failure { throw failure }
            }
        }
        return out
    }

    /// Arithmetic on float32, int64 or int32 operands.
    static func arithmetic(_ op: String, _ a: NDArray, _ b: NDArray) throws -> NDArray {
        guard a.scalarType == b.scalarType else {
            throw OpError("\(op) operands differ in dtype: \(a.scalarType.rawValue) and \(b.scalarType.rawValue)")
        }
        switch a.scalarType {
        case .float32:
            switch op {
            case "add", "sum", "mean": return try binary(a, b, Float.self, Float.self) { $0 + $1 }
            case "sub": return try binary(a, b, Float.self, Float.self) { $0 - $1 }
            case "mul": return try binary(a, b, Float.self, Float.self) { $0 * $1 }
            case "div": return try binary(a, b, Float.self, Float.self) { $0 / $1 }
            case "max": return try binary(a, b, Float.self, Float.self) { $0.isNaN || $1.isNaN ? .nan : Swift.max($0, $1) }
            case "min": return try binary(a, b, Float.self, Float.self) { $0.isNaN || $1.isNaN ? .nan : Swift.min($0, $1) }
            case "fmod": return try binary(a, b, Float.self, Float.self) { fmodf($0, $1) }
            // The remainder with the divisor's sign (NumPy's mod): fmod moved by one divisor when the signs differ.
            case "mod": return try binary(a, b, Float.self, Float.self) { x, y in
                let r = fmodf(x, y)
                if r == 0 { return Float(signOf: y, magnitudeOf: 0) }
                return (r < 0) != (y < 0) ? r + y : r
            }
            default: break
            }
        case .int64: return try integerArithmetic(op, a, b, Int64.self)
        case .int32: return try integerArithmetic(op, a, b, Int32.self)
        case .int16: return try integerArithmetic(op, a, b, Int16.self)
        case .int8: return try integerArithmetic(op, a, b, Int8.self)
        case .uint8: return try integerArithmetic(op, a, b, UInt8.self)
        case .uint16: return try integerArithmetic(op, a, b, UInt16.self)
        case .uint32: return try integerArithmetic(op, a, b, UInt32.self)
        case .uint64: return try integerArithmetic(op, a, b, UInt64.self)
        default: break
        }
        throw OpError("\(op) does not support \(a.scalarType.rawValue)")
    }

    static func integerArithmetic<T: NDArrayScalar & FixedWidthInteger>(_ op: String, _ a: NDArray, _ b: NDArray, _: T.Type) throws -> NDArray {
        switch op {
        case "add", "sum", "mean": return try binary(a, b, T.self, T.self) { $0 &+ $1 }
        case "sub": return try binary(a, b, T.self, T.self) { $0 &- $1 }
        case "mul": return try binary(a, b, T.self, T.self) { $0 &* $1 }
        case "div": return try binary(a, b, T.self, T.self) {
            guard $1 != 0 else { throw OpError("integer division by zero") }
            return $0.dividedReportingOverflow(by: $1).partialValue
        }
        case "max": return try binary(a, b, T.self, T.self) { Swift.max($0, $1) }
        case "min": return try binary(a, b, T.self, T.self) { Swift.min($0, $1) }
        // The remainder with the divisor's sign (Python's %), or with the dividend's (C's fmod).
        case "mod", "fmod": return try binary(a, b, T.self, T.self) {
            guard $1 != 0 else { throw OpError("integer modulo by zero") }
            let r = $0.remainderReportingOverflow(dividingBy: $1).partialValue
            return op == "mod" && r != 0 && (r < 0) != ($1 < 0) ? r &+ $1 : r
        }
        case "bitwise_and": return try binary(a, b, T.self, T.self) { $0 & $1 }
        case "bitwise_or": return try binary(a, b, T.self, T.self) { $0 | $1 }
        case "bitwise_xor": return try binary(a, b, T.self, T.self) { $0 ^ $1 }
        // A shift out of range (negative, or the bit width or more) gives the full-width result: 0,
        // or -1 for a right shift of a negative value. Right shifts of signed types are arithmetic.
        case "shift_left": return try binary(a, b, T.self, T.self) { $1 < 0 || $1 >= T.bitWidth ? 0 : $0 << $1 }
        case "shift_right": return try binary(a, b, T.self, T.self) { x, n in
            guard n >= 0, n < T.bitWidth else { return x < 0 ? ~0 : 0 }
            return x >> n
        }
        default: throw OpError("\(op) does not support \(a.scalarType.rawValue)")
        }
    }

    /// Comparisons giving bool.
    static func compare(_ op: String, _ a: NDArray, _ b: NDArray) throws -> NDArray {
        guard a.scalarType == b.scalarType else { throw OpError("\(op) operands differ in dtype") }
        func run<T: NDArrayScalar & Comparable>(_: T.Type) throws -> NDArray {
            switch op {
            case "equal": return try binary(a, b, T.self, Bool.self) { $0 == $1 }
            case "less": return try binary(a, b, T.self, Bool.self) { $0 < $1 }
            case "less_or_equal": return try binary(a, b, T.self, Bool.self) { $0 <= $1 }
            case "greater": return try binary(a, b, T.self, Bool.self) { $0 > $1 }
            default: return try binary(a, b, T.self, Bool.self) { $0 >= $1 }
            }
        }
        switch a.scalarType {
        case .float32: return try run(Float.self)
        case .int64: return try run(Int64.self)
        case .int32: return try run(Int32.self)
        case .int16: return try run(Int16.self)
        case .int8: return try run(Int8.self)
        case .uint8: return try run(UInt8.self)
        case .uint16: return try run(UInt16.self)
        case .uint32: return try run(UInt32.self)
        case .uint64: return try run(UInt64.self)
        case .float64: return try run(Double.self)
        case .bool:
            guard op == "equal" else { throw OpError("\(op) does not support bool") }
            return try binary(a, b, Bool.self, Bool.self) { $0 == $1 }
        default: throw OpError("\(op) does not support \(a.scalarType.rawValue)")
        }
    }

    /// `pow` with a float32 base; the exponent may be float32 or an integer type.
    static func pow(_ a: NDArray, _ b: NDArray) throws -> NDArray {
        if a.scalarType == .float32 {
            let e = b.scalarType == .float32 ? b : try cast(b, to: .float32)
            return try binary(a, e, Float.self, Float.self) { x, y in
                y == 2 ? x * x : y == 1 ? x : y == 0.5 ? x.squareRoot() : Glibc.powf(x, y)
            }
        }
        if a.scalarType == .int64 && b.scalarType != .float32 {
            let e = b.scalarType == .int64 ? b : try cast(b, to: .int64)
            return try binary(a, e, Int64.self, Int64.self) { x, y in
                var r: Int64 = 1
                if y < 0 { return x == 1 ? 1 : x == -1 ? (y % 2 == 0 ? 1 : -1) : 0 }
                for _ in 0 ..< min(y, 64) { r = r &* x }
                return r
            }
        }
        // Any other integer base: an integer exponent repeats the product in int64, a float
        // exponent is raised in double precision; the result is truncated to the base's type.
        if [.int32, .int16, .int8, .uint8, .uint16, .uint32, .uint64].contains(a.scalarType) || a.scalarType == .int64 {
            let wide = try cast(a, to: .int64)
            let raised: NDArray
            if b.scalarType == .float32 {
                raised = try binary(try cast(wide, to: .float64), try cast(b, to: .float64), Double.self, Int64.self) { x, y in
                    let r = Glibc.pow(x, y)
                    return r.isFinite && abs(r) < 9.2e18 ? Int64(r.rounded(.towardZero)) : 0
                }
            } else {
                raised = try pow(wide, b)
            }
            return try cast(raised, to: a.scalarType)
        }
        throw OpError("pow does not support \(a.scalarType.rawValue)")
    }

    /// ONNX `Cast`: float → int truncates toward zero, nonzero → true, bool → 0/1.
    static func cast(_ x: NDArray, to: DataType) throws -> NDArray {
        if x.scalarType == to { return x }
        if to == .float32 {
            // Exact in float32 rounding: straight conversions.
            switch x.scalarType {
            case .bool: return try NDArray.make(x.shape, Float.self) { out in for (i, v) in try x.elements(Bool.self).enumerated() { out[i] = v ? 1 : 0 } }
            case .int32: return try NDArray.make(x.shape, Float.self) { out in for (i, v) in try x.elements(Int32.self).enumerated() { out[i] = Float(v) } }
            case .int64: return try NDArray.make(x.shape, Float.self) { out in for (i, v) in try x.elements(Int64.self).enumerated() { out[i] = Float(v) } }
            default: break
            }
        }
        // Floats (float16/bfloat16/float64 are held as float32 inside the interpreter).
        let values: [Double]
        switch x.scalarType {
        case .float32: values = try x.f32.map { Double($0) }
        case .float64: values = Array(try x.elements(Double.self))
        default: values = try x.doubleValues()
        }
        func ints<T: NDArrayScalar & FixedWidthInteger>(_: T.Type) -> NDArray {
            NDArray.make(x.shape, T.self) { out in
                for (i, v) in values.enumerated() {
                    let t = v.rounded(.towardZero)
                    out[i] = t.isNaN ? 0 : t >= Double(T.max) ? T.max : t <= Double(T.min) ? T.min : T(t)
                }
            }
        }
        switch to {
        case .float32, .float16, .bfloat16:
            return NDArray.make(x.shape, Float.self) { out in
                for (i, v) in values.enumerated() { out[i] = Precision.round(Float(v), to: to) }
            }
        case .float64: return NDArray(shape: x.shape, scalars: values)
        case .int64: return ints(Int64.self)
        case .int32: return ints(Int32.self)
        case .int16: return ints(Int16.self)
        case .int8: return ints(Int8.self)
        case .uint8: return ints(UInt8.self)
        case .uint16: return ints(UInt16.self)
        case .uint32: return ints(UInt32.self)
        case .uint64: return ints(UInt64.self)
        case .bool: return NDArray(shape: x.shape, scalars: values.map { $0 != 0 })
        default: throw OpError("cannot cast to \(to.rawValue)")
        }
    }

    /// `where(condition, x, y)` for any element type.
    static func select(_ c: NDArray, _ x: NDArray, _ y: NDArray) throws -> NDArray {
        guard c.scalarType == .bool else { throw OpError("condition must be bool") }
        guard x.scalarType == y.scalarType else { throw OpError("where branches differ in dtype") }
        let shape = try broadcastShapes([c.shape, x.shape, y.shape])
        let pc = try c.elements(Bool.self)
        var indices = [Int](repeating: 0, count: shape.reduce(1, *))
        var pick = [Bool](repeating: false, count: indices.count)
        forEachIndex(shape, [broadcastStrides(c.shape, to: shape), broadcastStrides(x.shape, to: shape),
                             broadcastStrides(y.shape, to: shape)]) { i, off in
            pick[i] = pc[off[0]]
            indices[i] = pick[i] ? off[1] : off[2]
        }
        // Gather from x and y separately, then merge by the condition.
        let fromX = gatherFlat(x, indices.enumerated().map { pick[$0.offset] ? $0.element : 0 }, shape: shape)
        let fromY = gatherFlat(y, indices.enumerated().map { pick[$0.offset] ? 0 : $0.element }, shape: shape)
        var out = fromY
        let size = x.elementSize
        fromX.withUnsafeBytes { src in
            out.withUnsafeMutableBytes { dst in
                for i in 0 ..< pick.count where pick[i] {
                    (dst.baseAddress! + i * size).copyMemory(from: src.baseAddress! + i * size, byteCount: size)
                }
            }
        }
        return out
    }

    static func sigmoid(_ x: Float) -> Float {
        x >= 0 ? 1 / (1 + Glibc.expf(-x)) : Glibc.expf(x) / (1 + Glibc.expf(x))
    }
}

/// Rounding float32 values to narrower float formats, so float16 and bfloat16 values
/// kept as float32 inside the interpreter carry exactly their narrow precision.
enum Precision {
    static func round(_ v: Float, to type: DataType) -> Float {
        switch type {
        case .float16: return Float(Float16(v))
        case .bfloat16: return bfloat16ToFloat(floatToBFloat16(v))
        default: return v
        }
    }

    /// Round-to-nearest-even conversion to bfloat16 bits.
    static func floatToBFloat16(_ v: Float) -> UInt16 {
        if v.isNaN { return 0x7FC0 }
        let bits = v.bitPattern
        let rounding = 0x7FFF + ((bits >> 16) & 1)
        return UInt16(truncatingIfNeeded: (bits &+ rounding) >> 16)
    }

    static func bfloat16ToFloat(_ b: UInt16) -> Float { Float(bitPattern: UInt32(b) << 16) }
}
