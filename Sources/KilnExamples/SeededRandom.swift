/// SplitMix64: a small, fully specified generator, so example weights are the
/// same bytes on every machine.
struct SeededRandom {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

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
