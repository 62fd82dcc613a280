import Foundation
import KilnFormat

/// The concat that grows a state kept in place (``StateExtent``): the state's old entries stay
/// where they are, and only the new inputs are copied, after them, into each run of the state's
/// buffer along the growing axis. The output is the state's buffer itself.
enum StateAppend {
    static func bind(_ inputs: [Operand?], _ out: Operand) throws -> BoundStep {
        guard let extent = out.extent, let past = inputs.first ?? nil, past.extent == extent, !out.dtype.isSubByte,
              inputs.dropFirst().allSatisfy({ $0 != nil && $0!.extent == nil && $0!.dtype == out.dtype && $0!.shape.count == out.shape.count }) else {
            throw OpError("a state append needs the state first and dense parts of its type after it")
        }
        let axis = extent.axis
        let size = out.dtype.bitWidth / 8
        let outer = out.shape[..<axis].reduce(1, *), inner = out.shape[(axis + 1)...].reduce(1, *) * size
        var parts: [(slot: Int, at: Int, length: Int)] = []
        var at = past.shape[axis]
        for x in inputs.dropFirst() {
            let x = x!
            parts.append((x.slot, at, x.shape[axis]))
            at += x.shape[axis]
        }
        guard at == out.shape[axis] else { throw OpError("a state append of \(at) entries gives \(out.shape[axis])") }
        let (fits, capacity, slot) = (at <= extent.capacity, extent.capacity, out.slot)
        return BoundStep { slots in
            guard fits else { throw OpError("the state has room for \(capacity) entries, the run needs \(at)") }
            let base = slots[slot]
            for (s, at, length) in parts where length > 0 {
                let source = UnsafeRawPointer(slots[s]), bytes = length * inner
                for o in 0 ..< outer {
                    (base + (o * capacity + at) * inner).copyMemory(from: source + o * bytes, byteCount: bytes)
                }
            }
        }
    }
}
