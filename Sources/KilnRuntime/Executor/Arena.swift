import Foundation

/// One run's memory: an arena and the slot table pointing into it, filled for the plan that last
/// used it (``ShapePlan/serial``). Arenas belong to the function, not to a plan: a plan for new
/// sizes takes one already mapped and touched, and refills only its slot table.
final class Arena {
    let memory: UnsafeMutableRawPointer
    let capacity: Int
    let slots: SlotTable
    /// The serial of the plan the slot table holds, or -1.
    private(set) var prepared = -1
    private let ledger: ArenaLedger?

    init(capacity: Int, slotCount: Int, ledger: ArenaLedger? = nil) {
        self.capacity = capacity
        self.ledger = ledger
        memory = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: 64)
        slots = SlotTable.allocate(capacity: slotCount + 1)
        slots.initialize(repeating: memory, count: slotCount + 1)
        ledger?.allocated(capacity)
    }

    deinit {
        memory.deallocate()
        slots.deallocate()
        ledger?.freed(capacity)
    }

    /// Points the slot table at `plan`'s constants and arena offsets (inputs and direct outputs
    /// are set per run).
    func prepare(_ plan: ShapePlan) {
        guard prepared != plan.serial else { return }
        for (s, p) in plan.fixed { slots[s] = p }
        for (s, o) in plan.arenaSlots { slots[s] = memory + o }
        slots[plan.slotCount] = memory + plan.scratchOffset
        prepared = plan.serial
    }
}

/// A function's arenas not in use, so overlapping runs each have one and steady runs allocate
/// none. An arena too small for a plan is replaced by one grown geometrically (at least half
/// again the largest so far), so sizes that grow run after run reallocate O(log n) times.
/// At most ``ArenaPool/kept`` arenas are kept; while runs overlap, more exist.
final class ArenaPool: @unchecked Sendable {
    static let kept = 4
    private var free: [Arena] = []
    private var largest = 0
    private let slotCount: Int
    private let lock = NSLock()
    /// The bytes of this function's arenas alive (kept or in a run), and their peak.
    let ledger = ArenaLedger()

    /// The bound on ``ArenaLedger/peakBytes``: the kept arenas and one per overlapping run, each at
    /// most the largest arena made (specs/loading.md).
    func bound(overlappingRuns: Int) -> Int { lock.withLock { (ArenaPool.kept + overlappingRuns) * largest } }

    init(slotCount: Int) { self.slotCount = slotCount }

    /// An arena of at least `plan.arenaBytes`, its slot table filled for `plan`: one already
    /// filled for it when there is one, else the smallest that fits, else a new one.
    func take(for plan: ShapePlan) -> Arena {
        let arena: Arena = lock.withLock {
            // No allocation on this path: every planned run comes through it.
            var best = -1
            for i in free.indices where free[i].capacity >= plan.arenaBytes {
                if free[i].prepared == plan.serial { best = i; break }
                if best < 0 || free[i].capacity < free[best].capacity { best = i }
            }
            if best >= 0 { return free.remove(at: best) }
            let capacity = plan.arenaBytes <= largest ? plan.arenaBytes : max(plan.arenaBytes, largest + largest / 2)
            largest = max(largest, capacity)
            // The new arena takes the place of the smallest kept one (it is larger than all of them).
            if free.count >= ArenaPool.kept, let i = free.indices.min(by: { free[$0].capacity < free[$1].capacity }) { free.remove(at: i) }
            largest = max(largest, 64)
            return Arena(capacity: max(capacity, 64), slotCount: slotCount, ledger: ledger)
        }
        arena.prepare(plan)
        return arena
    }

    func give(_ a: Arena) {
        lock.withLock {
            guard free.count >= ArenaPool.kept else { free.append(a); return }
            // Keep the larger arenas.
            if let i = free.indices.min(by: { free[$0].capacity < free[$1].capacity }), free[i].capacity < a.capacity { free[i] = a }
        }
    }
}

/// The bytes a function's arenas hold: what is alive now and the most ever alive at once.
final class ArenaLedger: @unchecked Sendable {
    private let lock = NSLock()
    private var live = 0
    private var peak = 0

    func allocated(_ bytes: Int) {
        lock.withLock {
            live += bytes
            peak = max(peak, live)
        }
    }

    func freed(_ bytes: Int) { lock.withLock { live -= bytes } }

    var liveBytes: Int { lock.withLock { live } }
    var peakBytes: Int { lock.withLock { peak } }
}

extension ShapePlan {
    private static let serials = Counter()

    static func nextSerial() -> Int { serials.next() }
}

/// A count shared by overlapping runs.
final class Counter: @unchecked Sendable {
    private var count = 0
    private let lock = NSLock()

    var value: Int { lock.withLock { count } }

    /// Counts one; returns the new count.
    @discardableResult
    func next() -> Int { lock.withLock { count += 1; return count } }
}
