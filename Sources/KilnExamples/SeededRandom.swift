import KilnFormat

/// Example weights from ``SplitMix64``, so they are the same bytes on every machine.
struct SeededRandom {
    private var bits: SplitMix64

    init(seed: UInt64) { bits = SplitMix64(seed: seed) }

    mutating func next() -> UInt64 { bits.next() }

    /// Uniform in [-limit, limit), from the top 24 bits (exact in Float).
    mutating func uniform(_ limit: Float) -> Float {
        let u = Float(next() >> 40) / Float(1 << 24)
        return (2 * u - 1) * limit
    }

    /// `count` values uniform in ±1/sqrt(fanIn), the usual linear-layer initialization.
    mutating func weights(_ count: Int, fanIn: Int) -> [Float] {
        let limit = 1 / Float(fanIn).squareRoot()
        return (0 ..< count).map { _ in uniform(limit) }
    }
}
