/// Packing of sub-byte integers, least-significant bit first: element `i` occupies bits
/// `[i·b, (i+1)·b)` of the little-endian bit stream (specs/package-format.md).
public enum PackedBits {
    /// Packs `values` (each in `0 ..< 2^bits`, or two's complement for signed) into bytes.
    /// - Parameters:
    ///   - values: The integers.
    ///   - bits: Bits per element, 1–8.
    /// - Returns: `ceil(count · bits / 8)` bytes.
    public static func pack(_ values: [Int], bits: Int) -> [UInt8] {
        precondition((1 ... 8).contains(bits))
        var out = [UInt8](repeating: 0, count: (values.count * bits + 7) / 8)
        let mask = (1 << bits) - 1
        for (i, v) in values.enumerated() {
            let bit = i * bits
            let u = v & mask
            out[bit / 8] |= UInt8(truncatingIfNeeded: u << (bit % 8))
            if bit % 8 + bits > 8 { out[bit / 8 + 1] |= UInt8(truncatingIfNeeded: u >> (8 - bit % 8)) }
        }
        return out
    }

    /// Unpacks `count` elements of `bits` bits.
    /// - Parameters:
    ///   - bytes: The packed bytes (at least `ceil(count · bits / 8)`).
    ///   - bits: Bits per element, 1–8.
    ///   - count: How many elements.
    ///   - signed: Whether elements are two's complement.
    /// - Returns: The integers.
    public static func unpack(_ bytes: UnsafeRawBufferPointer, bits: Int, count: Int, signed: Bool) -> [Int] {
        precondition((1 ... 8).contains(bits) && bytes.count >= (count * bits + 7) / 8)
        let mask = (1 << bits) - 1
        let sign = 1 << (bits - 1)
        var out = [Int](repeating: 0, count: count)
        for i in 0 ..< count {
            let bit = i * bits
            var u = Int(bytes[bit / 8]) >> (bit % 8)
            if bit % 8 + bits > 8 { u |= Int(bytes[bit / 8 + 1]) << (8 - bit % 8) }
            u &= mask
            out[i] = signed && u & sign != 0 ? u - (1 << bits) : u
        }
        return out
    }
}
