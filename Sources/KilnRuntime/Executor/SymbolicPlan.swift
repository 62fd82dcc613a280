import Dispatch
import Foundation
import KilnFormat
import KilnReference

/// One plan for a run of signatures that grow by the same amounts each time (a language model's
/// cache growing by one token per run), bound to each run's sizes instead of planned per size.
///
/// Once three consecutive runs have had plans derived one from the other
/// (``Recording/derived(_:_:extents:)``) for signatures `k₀`, `k₁ = k₀ + g`, `k₂ = k₀ + 2g`, the
/// sizes are modelled as functions of the step count `t`: every value's shape as
/// `shape₀ + t·Δ` (Δ ≥ 0, checked on all three records). The plan for the largest signature
/// covered, `k₀ + T·g`, is derived once and checked against the model too; its arena layout
/// holds every smaller run's buffers, since no buffer shrinks as `t` grows. A run with signature
/// `k₀ + t·g`, `t ≤ T`, then takes that plan and binds it to `t` in O(steps): the values folded
/// at planning time that depend on `t` (shape arithmetic, a causal mask built from shapes) are
/// computed again, and the steps reading or writing a value whose shape or folded value depends
/// on `t` are bound to their operands at `t`; every other step keeps its binding and every
/// buffer its arena offset. No run is recorded and no plan derived for such a run.
///
/// `T` is where the sizes stop fitting: the room of each state kept in place, and otherwise
/// about twice the growing input dims (at least 64 steps), so a longer run of growth takes
/// geometrically larger arenas, each once. A run outside every model plans as before.
final class SymbolicPlan: @unchecked Sendable {
    /// The plan for `t = limit`.
    let plan: ShapePlan
    /// The signature at `t = 0` and what one step of `t` adds to it.
    let origin: ShapeKey
    let growth: [[Int]]
    let limit: Int
    /// Per slot, its shape at `t = 0` and its growth per step (`nil` when fixed).
    private let shape0: [[Int]?], delta: [[Int]?]
    /// Per slot, its position among the folded values computed per run, or -1.
    private let foldedAt: [Int]
    /// The steps computing those values, in order.
    private let folding: [Int]
    private let foldedCount: Int
    /// The planned steps bound per run: their position in the plan and their operands at `limit`.
    private let rebound: [(position: Int, planned: PlanLayout.Planned)]

    /// The binding for the next `t`, made on another core while a run goes on.
    private final class Ahead: @unchecked Sendable {
        let t: Int
        let done = DispatchGroup()
        var bound: Bound?
        init(_ t: Int) { self.t = t }
    }
    private var ahead: Ahead?
    private let lock = NSLock()

    /// One run's binding of the plan: steps bound again (by position), slots pointed at the
    /// values folded for the run, output shapes, and the arrays those slots point into.
    struct Bound {
        var steps: [BoundStep?]
        var slots: [(Int, UnsafeMutableRawPointer)]
        /// Per output, its shape when it grows (it is then copied out of the arena), else `nil`.
        var outputShapes: [[Int]?]
        var stateShapes: [(output: Int, shape: [Int])]
        var values: [NDArray]
    }

    /// `t` for `key`, when a run with it is covered.
    func step(for key: ShapeKey) -> Int? {
        guard key.dtypes == origin.dtypes, key.capacities == origin.capacities, key.shapes.count == origin.shapes.count else { return nil }
        var t: Int? = nil
        for ((x, o), g) in zip(zip(key.shapes, origin.shapes), growth) {
            guard x.count == o.count else { return nil }
            for ((a, b), d) in zip(zip(x, o), g) {
                if d == 0 { if a != b { return nil } else { continue } }
                let (q, r) = (a - b).quotientAndRemainder(dividingBy: d)
                guard r == 0, q >= 0, q <= limit, t == nil || t == q else { return nil }
                t = q
            }
        }
        return t
    }

    private func shape(_ s: Int, _ t: Int) -> [Int]? {
        guard let base = shape0[s] else { return nil }
        guard let d = delta[s] else { return base }
        return zip(base, d).map { $0 + t * $1 }
    }

    /// The plan bound to `t`; `nil` when a value folded for `t` does not have the modelled shape
    /// or a step bound to `t` needs more scratch than the plan has (the run is then planned as before).
    func bind(_ t: Int, _ executor: FunctionExecutor) -> Bound? {
        var values = [NDArray?](repeating: nil, count: foldedCount)
        let known = plan.recording.known
        func value(_ s: Int) -> NDArray? { foldedAt[s] >= 0 ? values[foldedAt[s]] : known[s] ?? executor.constants[s] }
        // Exporters repeat the same shape arithmetic in every layer: computed once per inputs.
        var memo: [Recording.Memo: [NDArray]] = [:]
        for j in folding {
            let step = executor.steps[j]
            let operands = step.inputs.map { s -> Operand? in
                guard s >= 0, let shape = shape(s, t), let dtype = plan.recording.dtypes[s] ?? value(s)?.scalarType else { return nil }
                return Operand(slot: s, shape: shape, dtype: dtype, value: value(s))
            }
            let key = Recording.Memo(executor.stepSignature[j], step.inputs, operands)
            var results: [NDArray]
            if let key, let known = memo[key] {
                results = known
            } else if step.opType == "shape" || step.opType == "size" {
                let phantom = step.inputs.map { s -> NDArray? in
                    guard s >= 0, let shape = shape(s, t), let dtype = plan.recording.dtypes[s] ?? known[s]?.scalarType else { return nil }
                    return SymbolicPlan.standIn(shape, dtype)
                }
                guard let r = try? step.reference.kernel(phantom) else { return nil }
                results = r.map { $0.contiguous() }
            } else {
                guard let r = try? executor.runStep(step, step.inputs.map { $0 < 0 ? nil : value($0) }) else { return nil }
                results = r
            }
            if let key { memo[key] = results }
            for (s, r) in zip(step.outputs, results) where foldedAt[s] >= 0 {
                guard r.shape == shape(s, t) else { return nil }
                values[foldedAt[s]] = r
            }
        }
        func operand(_ x: Operand) -> Operand {
            var x = x
            if let shape = shape(x.slot, t), delta[x.slot] != nil { x.shape = shape }
            if foldedAt[x.slot] >= 0 { x.value = values[foldedAt[x.slot]] }
            return x
        }
        var steps = [BoundStep?](repeating: nil, count: plan.stepCount)
        for (position, p) in rebound {
            guard let binding = try? ShapePlan.bind(PlanLayout.Planned(p.index, p.inputs.map { $0.map(operand) }, p.outputs.map(operand)), executor),
                  binding.scratchBytes <= plan.scratchBytes else { return nil }
            steps[position] = binding.bound
        }
        var slots: [(Int, UnsafeMutableRawPointer)] = []
        slots.reserveCapacity(foldedCount)
        for s in foldedAt.indices where foldedAt[s] >= 0 {
            guard let v = values[foldedAt[s]] else { return nil }
            slots.append((s, v.unsafeBase + plan.layout.byteOffset[s]))
        }
        let outputShapes = plan.outputs.map { delta[$0.slot] == nil ? nil : shape($0.slot, t) }
        let stateShapes = plan.stateShapes.map { ($0.output, shape(executor.outputSlots[$0.output], t) ?? $0.shape) }
        return Bound(steps: steps, slots: slots, outputShapes: outputShapes, stateShapes: stateShapes, values: values.compactMap { $0 })
    }

    /// The binding for `t`: the one made ahead when it was, else made now.
    func bound(_ t: Int, _ executor: FunctionExecutor) -> Bound? {
        if let a = lock.withLock({ ahead?.t == t ? ahead : nil }) {
            a.done.wait()
            lock.withLock { if ahead === a { ahead = nil } }
            if let b = a.bound { return b }
        }
        return bind(t, executor)
    }

    /// Starts binding `t` on another thread, on a machine with a core to spare (as
    /// ``PlanSpeculation`` derives ahead): a decode step then finds its binding made.
    func bindAhead(_ t: Int, _ executor: FunctionExecutor) {
        guard executor.speculation.enabled, t <= limit else { return }
        let a = Ahead(t)
        guard lock.withLock({ () -> Bool in
            if ahead?.t == t { return false }
            ahead = a
            return true
        }) else { return }
        a.done.enter()
        DispatchQueue.global(qos: .userInitiated).async {
            a.bound = self.bind(t, executor)
            a.done.leave()
        }
    }

    static func standIn(_ shape: [Int], _ dtype: DataType) -> NDArray {
        let bytes = dtype.byteCount(elements: shape.reduce(1, *)) ?? 0
        return NDArray(shape: shape, scalarType: dtype, borrowing: ByteStorage(borrowing: FunctionExecutor.unread, count: bytes, owner: ReferenceStep.Anchor.shared))
    }

    private init(plan: ShapePlan, origin: ShapeKey, growth: [[Int]], limit: Int, shape0: [[Int]?], delta: [[Int]?],
                 folding: [Int], foldedAt: [Int], rebound: [(position: Int, planned: PlanLayout.Planned)]) {
        (self.plan, self.origin, self.growth, self.limit, self.shape0, self.delta) = (plan, origin, growth, limit, shape0, delta)
        (self.folding, self.foldedAt, self.rebound) = (folding, foldedAt, rebound)
        foldedCount = foldedAt.reduce(0) { $0 + ($1 >= 0 ? 1 : 0) }
    }

    /// The model of three plans for signatures growing alike, each derived from the one before;
    /// `nil` when their sizes are not modelled so (see the type's note).
    static func make(_ executor: FunctionExecutor, _ chain: [(key: ShapeKey, plan: ShapePlan)]) -> SymbolicPlan? {
        guard let growth = growth(chain) else { return nil }
        let records = chain.map(\.plan.recording)
        func shape(_ r: Recording, _ s: Int) -> [Int]? { r.shapes[s] ?? r.known[s]?.shape ?? executor.constants[s]?.shape }
        var shape0 = [[Int]?](repeating: nil, count: executor.slotCount), delta = shape0
        for s in 0 ..< executor.slotCount {
            let (a, b, c) = (shape(records[0], s), shape(records[1], s), shape(records[2], s))
            guard (a == nil) == (b == nil), (b == nil) == (c == nil),
                  (records[0].known[s] == nil) == (records[1].known[s] == nil), (records[1].known[s] == nil) == (records[2].known[s] == nil) else { return nil }
            guard let a, let b, let c else { continue }
            guard a.count == b.count, b.count == c.count else { return nil }
            let d = zip(a, b).map { $1 - $0 }
            guard d.allSatisfy({ $0 >= 0 }), zip(zip(b, d), c).allSatisfy({ $0.0 + $0.1 == $1 }) else { return nil }
            shape0[s] = a
            if d.contains(where: { $0 != 0 }) { delta[s] = d }
        }
        guard let limit = limit(executor, chain[0].key, growth, records[0], shape0, delta) else { return nil }
        // The plan for `limit`, derived from the newest; every value's shape there as modelled.
        var top = chain[0].key
        top.shapes = zip(top.shapes, growth).map { x, g in zip(x, g).map { $0 + limit * $1 } }
        let args = zip(top.shapes, top.dtypes).map { standIn($0, $1) }
        guard let record = try? records[2].derived(executor, args, extents: executor.stateExtents(top.capacities)),
              let plan = try? ShapePlan(executor, record, base: chain[2].plan), plan.layout.rebuilt != nil else { return nil }
        for s in 0 ..< executor.slotCount {
            guard (record.known[s] == nil) == (records[0].known[s] == nil) else { return nil }
            let modelled = shape0[s].map { base in delta[s].map { zip(base, $0).map { $0 + limit * $1 } } ?? base }
            guard shape(record, s) == modelled else { return nil }
        }
        // Values depending on `t`: a growing shape, a shape op reading one, a folded value computed from one.
        var varies = delta.map { $0 != nil }
        var folding: [Int] = []
        for (j, step) in executor.steps.enumerated() {
            let shapeOnly = step.opType == "shape" || step.opType == "size"
            let reads = step.inputs.contains { $0 >= 0 && (shapeOnly ? delta[$0] != nil : varies[$0]) }
            // A value computed at run time varies with `t` only by its shape (modelled already).
            guard reads, step.outputs.contains(where: { record.known[$0] != nil }) else { continue }
            for s in step.outputs { varies[s] = true }
            do {
                guard step.outputs.allSatisfy({ record.known[$0] != nil }), !(step.kernel is ControlFlowStep) else { return nil }
                folding.append(j)
            }
        }
        var foldedAt = [Int](repeating: -1, count: executor.slotCount), n = 0
        for j in folding { for s in executor.steps[j].outputs { foldedAt[s] = n; n += 1 } }
        let rebound = plan.layout.planned.enumerated().compactMap { position, p -> (position: Int, planned: PlanLayout.Planned)? in
            let slots = p.inputs.compactMap { $0?.slot } + p.outputs.map(\.slot)
            return slots.contains { varies[$0] } ? (position, p) : nil
        }
        guard plan.stepCount == plan.layout.planned.count else { return nil }
        return SymbolicPlan(plan: plan, origin: chain[0].key, growth: growth, limit: limit, shape0: shape0, delta: delta,
                            folding: folding, foldedAt: foldedAt, rebound: rebound)
    }

    /// How the signatures of three plans grow, when alike from one to the next (with the same
    /// room in every state), each plan derived from the one before with the same layout.
    static func growth(_ chain: [(key: ShapeKey, plan: ShapePlan)]) -> [[Int]]? {
        guard chain.count == 3, let growth = PlanSpeculation.growth(from: chain[0].key, to: chain[1].key),
              PlanSpeculation.growth(from: chain[1].key, to: chain[2].key) == growth,
              chain[1].key.capacities == chain[0].key.capacities, chain[2].key.capacities == chain[0].key.capacities,
              chain[1].plan.recording.derivedFrom == ObjectIdentifier(chain[0].plan.recording),
              chain[2].plan.recording.derivedFrom == ObjectIdentifier(chain[1].plan.recording),
              chain.allSatisfy({ $0.plan.layout.rebuilt != nil }) else { return nil }
        return growth
    }

    /// The largest `t` modelled: the room of the states kept in place, else about twice the
    /// growing input dims (at least 64 steps); `nil` below 3.
    private static func limit(_ executor: FunctionExecutor, _ origin: ShapeKey, _ growth: [[Int]], _ record: Recording,
                              _ shape0: [[Int]?], _ delta: [[Int]?]) -> Int? {
        var limit = 64
        for (x, g) in zip(origin.shapes, growth) {
            for (a, d) in zip(x, g) where d > 0 { limit = max(limit, 2 * a / d) }
        }
        for s in executor.outputSlots {
            guard let e = record.stateExtents[s], let base = shape0[s], let d = delta[s], e.axis < base.count else { continue }
            if d[e.axis] > 0 { limit = min(limit, (e.capacity - base[e.axis]) / d[e.axis]) }
        }
        return limit >= 3 ? limit : nil
    }
}

/// A function's symbolic plans and the chain of derived plans that may become the next one.
final class SymbolicPlans: @unchecked Sendable {
    private let lock = NSLock()
    private var models: [SymbolicPlan] = []
    private var chain: [(key: ShapeKey, plan: ShapePlan)] = []
    /// Chains seen before the next attempt after one failed (doubling).
    private var wait = 0, backoff = 4
    /// Models made, and models that could not be.
    private(set) var made = 0, refused = 0
    /// Runs bound to their sizes through a model.
    let runs = Counter()

    static let kept = 4

    /// The newest model covering `key`, with `t`.
    func match(_ key: ShapeKey) -> (SymbolicPlan, Int)? {
        lock.withLock {
            for m in models.reversed() { if let t = m.step(for: key) { return (m, t) } }
            return nil
        }
    }

    /// Notes a run planned for `key` with `plan`; makes a model when the last three such runs
    /// grew alike, each plan derived from the one before.
    func note(_ key: ShapeKey, _ plan: ShapePlan, _ executor: FunctionExecutor) {
        let candidate: [(key: ShapeKey, plan: ShapePlan)]? = lock.withLock {
            guard plan.recording.derived else { chain = []; return nil }
            if let last = chain.last, last.key == key { return nil }
            chain.append((key, plan))
            if chain.count > 3 { chain.removeFirst() }
            guard chain.count == 3, SymbolicPlan.growth(chain) != nil else { return nil }
            if wait > 0 { wait -= 1; return nil }
            return chain
        }
        guard let candidate else { return }
        let model = SymbolicPlan.make(executor, candidate)
        lock.withLock {
            chain = []
            guard let model else { (refused, wait, backoff) = (refused + 1, backoff, min(backoff * 2, 256)); return }
            made += 1
            models.append(model)
            if models.count > SymbolicPlans.kept { models.removeFirst() }
        }
    }
}

extension FunctionExecutor {
    enum SymbolicRun {
        case ran([String: NDArray])
        /// A state's buffer grew: the signature changed.
        case grew
        /// No symbolic plan covers the signature, or it could not be bound to it.
        case unbound
    }

    /// Runs `args` through the symbolic plan covering their signature.
    func runSymbolic(_ key: ShapeKey, _ args: [NDArray], state: StateRun?) throws -> SymbolicRun {
        guard let (model, t) = symbolic.match(key) else { return .unbound }
        let started = profile == nil ? 0 : DispatchTime.now().uptimeNanoseconds
        guard let bound = model.bound(t, self) else { return .unbound }
        if let state, state.makeRoom(bound.stateShapes) { return .grew }
        profile?.countBound(DispatchTime.now().uptimeNanoseconds - started)
        model.bindAhead(t + 1, self)
        let out = try model.plan.run(args, executor: self, bound: bound)
        state?.advance(bound.stateShapes)
        symbolic.runs.next()
        return .ran(out)
    }
}
