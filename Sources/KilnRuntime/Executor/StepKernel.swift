import KilnCompiler
import KilnFormat
import KilnReference

/// The base address of every slot for one run: operands are read through it, so a bound
/// step is fixed once and only the table changes between runs (arena, inputs, outputs).
typealias SlotTable = UnsafeMutablePointer<UnsafeMutableRawPointer>

/// One operand of a bound step: the slot whose address it reads, its concrete shape and
/// type, and its value when that is known before the run (a weight or a folded value).
struct Operand: @unchecked Sendable {
    var slot: Int
    var shape: [Int]
    var dtype: DataType
    var value: NDArray?
    /// Elements between consecutive rows (the last dim) when the operand is a slice of a wider
    /// tensor along its last dim (a concat's input written in place), else `nil` (dense).
    var rowStride: Int? = nil
    /// A concat input whose producer already wrote it into the concat's output (nothing to copy).
    var inPlace = false
    /// For a state kept in place (``StateExtent``): the operand's memory holds `capacity`
    /// entries along `axis`, of which the shape's are the first; `nil` for dense operands.
    var extent: StateExtent? = nil

    var count: Int { shape.reduce(1, *) }
    var byteCount: Int { count * dtype.bitWidth / 8 }

    /// The operand's address in a run.
    @inline(__always) func pointer(_ slots: SlotTable) -> UnsafeMutableRawPointer { slots[slot] }
    @inline(__always) func floats(_ slots: SlotTable) -> UnsafeMutablePointer<Float> { slots[slot].assumingMemoryBound(to: Float.self) }
}

extension Operand {
    /// Whether a step bound to `a` may run as bound to `b`: the same slots, shapes, types and
    /// row strides, and the very same known values.
    static func same(_ a: Operand?, _ b: Operand?) -> Bool {
        guard let a, let b else { return a == nil && b == nil }
        return a.slot == b.slot && a.dtype == b.dtype && a.rowStride == b.rowStride && a.inPlace == b.inPlace && a.shape == b.shape && a.extent == b.extent
            && a.value?.unsafeBase == b.value?.unsafeBase
    }

    static func same(_ a: [Operand?], _ b: [Operand?]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    }

    static func same(_ a: [Operand], _ b: [Operand]) -> Bool {
        a.count == b.count && zip(a, b).allSatisfy { same($0, $1) }
    }
}

/// How a state kept in place between runs is laid out: its buffer has room for `capacity`
/// entries along `axis` (the axis it grows on), and a value of it is the first entries of each
/// run along that axis: element strides are those of the shape with `capacity` at `axis`.
struct StateExtent: Hashable, Sendable {
    var axis: Int
    var capacity: Int
}

/// A step fixed for concrete shapes: it reads and writes only through the slot table and
/// allocates nothing. `scratch` is a slot holding per-run scratch memory of the requested size.
struct BoundStep: @unchecked Sendable {
    let run: (SlotTable) throws -> Void
}

/// Thrown by a planned step when a run's values give a shape other than the one its plan was
/// built for (a branch taken the other way, a loop run a different number of times, a
/// `non_zero` finding a different count, a shape tensor computed from data): the run is done
/// again generically, and a signature that keeps changing runs generically from then on.
struct PlanMismatch: Error, CustomStringConvertible {
    var reason: String
    var op: String? = nil

    var description: String { op.map { "op '\($0)': \(reason)" } ?? reason }
}

/// What binding may ask of the plan.
struct BindContext {
    /// Threads the step may use.
    let threads: Int
    /// The slot of the run's scratch memory.
    let scratchSlot: Int
    /// The largest scratch any bound step asked for, in bytes.
    var scratchBytes = 0

    /// Reserves `bytes` of scratch (shared by all steps: steps run one after another).
    mutating func scratch(_ bytes: Int) { scratchBytes = max(scratchBytes, (bytes + 63) / 64 * 64) }
}

/// One step of a function, prepared once when the function loads: attributes parsed,
/// weights packed or decoded, the kernel chosen. Binding fixes it to concrete shapes.
protocol StepKernel: Sendable {
    /// The kernel, as the plan names it.
    var id: KernelID { get }
    /// Output shapes and types for these inputs, or `nil` when they depend on input values
    /// the step cannot read here (the generic path then runs the reference kernel).
    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]?
    /// Binds to concrete operands.
    /// - Throws: ``OpError`` when the operands do not fit this kernel.
    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep
    /// Results of a step whose output shapes only its data decides (`non_zero`,
    /// `non_max_suppression`), computed on arrays for generic runs; `nil` when the step has no
    /// such path (the generic run then uses the reference kernel).
    func evaluate(_ inputs: [NDArray?]) throws -> [NDArray]?
}

extension StepKernel {
    func evaluate(_ inputs: [NDArray?]) throws -> [NDArray]? { nil }
}

/// Throws unless the plan gives output `index` the shape a kernel writes. A kernel that works
/// out its output's dims itself (a window, a packed weight, another layout) checks them here:
/// when a damaged plan and the op disagree, the step falls back or fails instead of writing
/// past the output.
func expectOutput(_ outputs: [Operand], _ shape: [Int], index: Int = 0) throws {
    guard index < outputs.count else { throw OpError("the plan has no output \(index)") }
    guard outputs[index].shape == shape else { throw OpError("the kernel writes \(shape), the plan has \(outputs[index].shape)") }
}

extension StepKernel {
    /// Output types from the op's schema with concrete input types; `nil` when a dim is unknown.
    static func inferred(_ op: KilnFormat.Operation, _ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? {
        guard let schema = OpSet.schema(op.opType) else { return nil }
        let ctx = OpSchema.Context(inputs: inputs.map { $0.map { TensorType($0.dtype, $0.shape.map { .size($0) }) } },
                                   attributes: op.attributes, outputCount: op.outputs.count)
        let types = try schema.infer(ctx)
        var out: [(shape: [Int], dtype: DataType)] = []
        for t in types {
            guard let t, let shape = t.staticShape else { return nil }
            out.append((shape, t.dtype))
        }
        return out.count == op.outputs.count ? out : nil
    }
}

/// `if`, `loop` or `scan` with bodies compiled ahead (``CompiledSubgraph``): run as a reference
/// step runs its op — inputs borrowed, results copied into the plan's memory, their shapes
/// checked against the plan's (``PlanMismatch``).
struct ControlFlowStep: StepKernel {
    let id: KernelID
    let step: ReferenceStep

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        try step.bind(inputs, outputs, &context)
    }
}

/// An op the reference interpreter runs: inputs are wrapped without copying, outputs copied
/// into the plan's memory.
struct ReferenceStep: StepKernel {
    let id = KernelID.reference
    let kernel: LoweredReference
    /// Why a specialized kernel was not used, when one was planned.
    let fallback: String?

    func outputTypes(_ inputs: [Operand?]) throws -> [(shape: [Int], dtype: DataType)]? { nil }

    func run(_ inputs: [NDArray?]) throws -> [NDArray] { try kernel(inputs) }

    func bind(_ inputs: [Operand?], _ outputs: [Operand], _ context: inout BindContext) throws -> BoundStep {
        let kernel = self.kernel
        return BoundStep { slots in
            let args: [NDArray?] = inputs.map { op in
                guard let op else { return nil }
                if let v = op.value { return v }
                let storage = ByteStorage(borrowing: op.pointer(slots), count: op.byteCount, owner: Anchor.shared)
                return NDArray(shape: op.shape, scalarType: op.dtype, borrowing: storage)
            }
            let results = try kernel(args)
            guard results.count == outputs.count else { throw OpError("produced \(results.count) outputs, planned \(outputs.count)") }
            for (r, o) in zip(results, outputs) {
                guard r.shape == o.shape, r.scalarType == o.dtype else {
                    throw PlanMismatch(reason: "produced \(r.scalarType.rawValue)\(r.shape) where the plan has \(o.dtype.rawValue)\(o.shape)")
                }
                let c = r.contiguous()
                o.pointer(slots).copyMemory(from: c.unsafeBase, byteCount: o.byteCount)
            }
        }
    }

    /// Owner of borrowed run memory (the run keeps it alive while the kernel runs).
    final class Anchor: Sendable { static let shared = Anchor() }
}
