/// A sum of doubles carried as an unevaluated pair (`hi + lo`), so that a cluster's mean
/// is the correctly rounded `Float` of its exact mean whatever order the values were added in.
struct PreciseSum: Sendable {
    var hi = 0.0
    var lo = 0.0

    /// Adds `x` exactly (Knuth's two-sum; the rounding error goes to `lo`).
    @inline(__always) mutating func add(_ x: Double) {
        let s = hi + x
        let b = s - hi
        lo += (hi - (s - b)) + (x - b)
        hi = s
    }

    /// Adds `count · x` (the product's rounding error is kept too).
    @inline(__always) mutating func add(_ x: Double, times count: Double) {
        let p = count * x
        let e = (-p).addingProduct(count, x)
        add(p)
        lo += e
    }

    /// Adds another partial sum.
    mutating func add(_ other: PreciseSum) {
        add(other.hi)
        lo += other.lo
    }

    /// The mean of `count` values whose sum this is, as a `Float`.
    func mean(_ count: Double) -> Float {
        let q = hi / count
        // The remainder of the division, exactly, plus the low part.
        let r = hi.addingProduct(-q, count) + lo
        return Float(q + r / count)
    }
}
