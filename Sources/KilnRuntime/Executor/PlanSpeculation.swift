import Dispatch
import Foundation
import KilnFormat
import KilnReference

/// Plans derived ahead for the signature a run is most likely followed by.
///
/// A language model's cache grows by the same rows every run: when the last two runs each grew the
/// input dims by the same amounts (none shrinking), the next run's are most likely grown by them
/// again. The plan for that signature is derived on another thread as soon as the run starts, so
/// the next run finds it ready instead of deriving it first. Derivation reads only shapes
/// (``Recording/derived(_:_:)``), so a plan derived ahead is the one that run would derive itself:
/// a wrong guess costs the work and a cache entry. It is done on any machine with more than one
/// core, whatever the function's thread count: a decode step's parallel loops leave the cores idle
/// between steps often enough that deriving beside them costs the run less than deriving before
/// it (Llama-style decode on 2 threads and 2 cores: 6.6 against 9.3 ms/token).
final class PlanSpeculation: @unchecked Sendable {
    /// Whether another core can derive while a run goes on.
    let enabled: Bool
    private let lock = NSLock()
    /// The previous run's signature and how the sizes grew into it.
    private var previous: ShapeKey?, lastGrowth: [[Int]]?
    /// The guess being derived.
    private var inFlight: (key: ShapeKey, done: DispatchGroup)?
    /// The newest plan derived ahead, until a run uses it.
    private var ready: ShapeKey?
    /// Plans derived ahead, and those a run found ready.
    private(set) var derivedAhead = 0, used = 0

    init() {
        enabled = ProcessInfo.processInfo.activeProcessorCount > 1
    }

    /// The signature after `key` when the last two runs' sizes grew by the same amounts (none
    /// shrinking): `key` grown by them again; `nil` otherwise, or when a guess is in flight.
    /// Remembers `key` as the previous run's.
    func guess(after key: ShapeKey) -> ShapeKey? {
        lock.withLock {
            if key == ready { (used, ready) = (used + 1, nil) }
            let growth = previous.flatMap { Self.growth(from: $0, to: key) }
            defer { (previous, lastGrowth) = (key, growth) }
            guard enabled, inFlight == nil, let growth, growth == lastGrowth else { return nil }
            var next = key
            next.shapes = zip(key.shapes, growth).map { a, d in zip(a, d).map(+) }
            return next
        }
    }

    /// How much each dim grew from `a` to `b`: `nil` unless types and ranks are the same, no dim
    /// shrank and one grew.
    static func growth(from a: ShapeKey, to b: ShapeKey) -> [[Int]]? {
        guard a.dtypes == b.dtypes, a != b, zip(a.shapes, b.shapes).allSatisfy({ $0.count == $1.count }) else { return nil }
        let d = zip(a.shapes, b.shapes).map { x, y in zip(x, y).map { $1 - $0 } }
        return d.allSatisfy({ $0.allSatisfy { $0 >= 0 } }) ? d : nil
    }

    /// Marks `key` as being derived; `nil` when a guess already is.
    func begin(_ key: ShapeKey) -> DispatchGroup? {
        lock.withLock {
            guard inFlight == nil else { return nil }
            let group = DispatchGroup()
            group.enter()
            inFlight = (key, group)
            return group
        }
    }

    func finish(_ group: DispatchGroup, derived: Bool) {
        lock.withLock {
            if derived { (derivedAhead, ready) = (derivedAhead + 1, inFlight?.key) }
            if inFlight?.done === group { inFlight = nil }
        }
        group.leave()
    }

    /// Waits for the plan being derived ahead, if one is.
    func settle() {
        lock.withLock { inFlight?.done }?.wait()
    }

    /// Waits for the plan being derived ahead for `key`, if it is; whether it was.
    func wait(for key: ShapeKey) -> Bool {
        guard let group = lock.withLock({ inFlight?.key == key ? inFlight?.done : nil }) else { return false }
        group.wait()
        return true
    }
}

extension FunctionExecutor {
    /// Starts deriving, on another thread, the plan for the signature likely to follow `key`'s
    /// (``PlanSpeculation``), from `plan` (the plan for `key`).
    func speculate(after key: ShapeKey, from plan: ShapePlan) {
        guard speculation.enabled, let next = speculation.guess(after: key), cachedEntry(next) == nil, symbolic.match(next) == nil, let group = speculation.begin(next) else { return }
        let args = zip(next.shapes, next.dtypes).map { shape, dtype in
            // Derivation reads shapes and types only: stand-ins whose bytes are never read.
            let bytes = dtype.byteCount(elements: shape.reduce(1, *)) ?? 0
            return NDArray(shape: shape, scalarType: dtype, borrowing: ByteStorage(borrowing: FunctionExecutor.unread, count: bytes, owner: ReferenceStep.Anchor.shared))
        }
        DispatchQueue.global(qos: .userInitiated).async {
            let derived = self.derive(next, args, from: plan) != nil
            self.speculation.finish(group, derived: derived)
        }
    }

    /// The address of every stand-in input (never read).
    nonisolated(unsafe) static let unread = UnsafeRawPointer(UnsafeMutableRawPointer.allocate(byteCount: 64, alignment: 64))
}
