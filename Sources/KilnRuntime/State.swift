import Foundation
import KilnFormat
import KilnReference

/// The state of one sequence of stateful runs of a function (Core ML's model state): for each
/// of the function's ``StatePair``s, the value the input reads in the next run.
///
/// ```swift
/// let state = try decode.makeState()
/// for token in prompt { let out = try await decode.run(inputs: ["input_ids": token, …], state: state) }
/// ```
///
/// A stateful run takes every input but the states' own and returns every output but theirs;
/// each state's output of a run becomes its value for the next. A fresh (or ``reset()``) state
/// is zero-length along the dims of its input that the other inputs leave unbound, except a dim
/// the values it is concatenated with fix (a head size an exporter left named), which takes
/// their size.
///
/// Where a compiled function's state output is its input with new entries appended (the
/// `concat` of a decoder's key/value cache) and only the fused attention reads it, the state is
/// kept in place: its buffer has room to grow (doubling when full), each run copies only the new
/// entries into it, and attention reads it where it is. Other states are the previous run's
/// output arrays, passed back without a copy. One state serves one run at a time; runs of
/// several states of one function may overlap.
public final class InferenceState: @unchecked Sendable {
    /// The pairs kept, in the order given.
    public let pairs: [StatePair]
    let functionName: String
    /// Sizes of symbolic dims a fresh state takes (others: from the run's inputs, else from what
    /// the state is concatenated with, else 0).
    let dims: [String: Int]
    let lock = NSLock()
    let entries: [Entry]
    /// Whether the next run starts from zero-length values.
    var fresh = true

    /// One state pair: where its input and output are, and its value.
    final class Entry {
        let pair: StatePair
        let input: Int, output: Int
        /// The axis a state kept in place grows on; `nil` for a state passed back as the output array.
        let axis: Int?
        /// Sizes of the input's symbolic dims that the values it is concatenated with fix (ONNX
        /// `concat` takes equal sizes off its axis), by dim: a head size an exporter left named.
        let joined: [Int: Int]
        var value: NDArray?
        var buffer: StateBuffer?

        init(pair: StatePair, input: Int, output: Int, axis: Int?, joined: [Int: Int]) {
            (self.pair, self.input, self.output, self.axis, self.joined) = (pair, input, output, axis, joined)
        }
    }

    /// The sizes a state input's dims off the concat axis take from the other inputs of the
    /// concats that read it, where those are fixed.
    static func joinedSizes(_ function: Function, input name: String) -> [Int: Int] {
        var types: [String: TensorType] = [:]
        for a in function.inputs { types[a.name] = a.type }
        for op in function.operations { for v in op.outputs { types[v.name] = v.type } }
        guard let rank = types[name]?.rank else { return [:] }
        var sizes: [Int: Int] = [:]
        for op in function.operations where op.opType == "concat" && op.inputs.contains(name) {
            guard let raw = try? op.attributes.int("axis", 0), let axis = try? OpSet.normalize(axis: raw, rank: rank) else { continue }
            for other in op.inputs where other != name {
                guard let t = types[other], t.rank == rank else { continue }
                for (d, dim) in t.shape.enumerated() where d != axis { if case .size(let n) = dim { sizes[d] = n } }
            }
        }
        return sizes
    }

    init(function: Function, pairs: [StatePair], dims: [String: Int], axes: [Int: Int]) throws {
        do {
            try function.checkStates(pairs)
        } catch let e as PackageError {
            throw InferenceError(function: function.name, reason: "state \(e.field.map { "\($0): " } ?? "")\(e.reason)")
        }
        guard !pairs.isEmpty else {
            throw InferenceError(function: function.name, reason: "declares no state (convert it with --state INPUT=OUTPUT, or name the pairs)")
        }
        functionName = function.name
        self.pairs = pairs
        self.dims = dims
        entries = pairs.map { pair in
            let i = function.inputs.firstIndex { $0.name == pair.input }!, k = function.outputs.firstIndex { $0.name == pair.output }!
            return Entry(pair: pair, input: i, output: k, axis: axes[i], joined: Self.joinedSizes(function, input: pair.input))
        }
    }

    /// The pairs kept in place (their buffers grow in place) and the ones passed back as arrays.
    public var inPlaceInputs: [String] { entries.filter { $0.axis != nil }.map(\.pair.input) }

    /// Bytes of state moved or written whole: buffers grown (old entries moved to the larger
    /// buffer) and values taken from runs that were not planned (the first run of a new shape
    /// signature). Entries appended by planned runs are not counted; nor are states passed back
    /// as arrays (their runs' outputs are new arrays that the concat fills).
    public var copiedBytes: Int { lock.withLock { entries.reduce(0) { $0 + ($1.buffer?.copiedBytes ?? 0) } } }

    /// Bytes of the entries appended in place.
    public var appendedBytes: Int { lock.withLock { entries.reduce(0) { $0 + ($1.buffer?.appendedBytes ?? 0) } } }

    /// Empties the state: the next run starts from zero-length values (buffers are kept for reuse).
    public func reset() { lock.withLock { fresh = true } }

    /// The current value of the state read by `input` (a dense copy), or `nil` for no such state
    /// or before the first run.
    public func value(forInput input: String) -> NDArray? {
        lock.withLock {
            guard !fresh, let e = entries.first(where: { $0.pair.input == input }) else { return nil }
            return e.buffer?.dense() ?? e.value
        }
    }

    /// Sets up a fresh state's values for a run on `inputs` (the caller's): zero-length along the
    /// dims the inputs leave unbound. Called with the lock held.
    func begin(_ function: Function, _ inputs: [String: NDArray]) throws {
        guard fresh else { return }
        var sizes = dims
        let stateInputs = Set(entries.map(\.input))
        for (i, arg) in function.inputs.enumerated() where !stateInputs.contains(i) {
            guard let x = inputs[arg.name], x.rank == arg.type.rank else { continue }
            for (d, dim) in arg.type.shape.enumerated() {
                if case .symbol(let s) = dim, DimExpression.isPlainName(s), sizes[s] == nil { sizes[s] = x.shape[d] }
            }
        }
        for e in entries {
            let arg = function.inputs[e.input]
            let shape = arg.type.shape.enumerated().map { d, dim -> Int in
                switch dim {
                case .size(let n): return n
                case .symbol(let s): return sizes[s] ?? e.joined[d] ?? 0
                }
            }
            if let axis = e.axis {
                if let b = e.buffer, b.fits(shape) { b.clear(shape) } else { e.buffer = StateBuffer(shape: shape, axis: axis, dtype: arg.type.dtype) }
                e.value = nil
            } else {
                guard !arg.type.dtype.isSubByte else { throw InferenceError(function: functionName, reason: "state '\(arg.name)' is \(arg.type.dtype.rawValue), which a run cannot take") }
                e.value = NDArray(shape: shape, scalarType: arg.type.dtype)
            }
        }
        fresh = false
    }

    /// A run of a function whose states are all passed back as arrays (the reference interpreter's).
    func runPassingBack(_ runner: any FunctionRunner, _ inputs: [String: NDArray]) throws -> [String: NDArray] {
        try lock.withLock {
            try begin(runner.function, inputs)
            var all = inputs
            for e in entries {
                guard inputs[e.pair.input] == nil else {
                    throw InferenceError(function: functionName, reason: "input '\(e.pair.input)' is a state: a stateful run reads it from the state, not from the caller")
                }
                all[e.pair.input] = argument(e)
            }
            var out = try runner.run(all)
            for e in entries {
                guard let v = out.removeValue(forKey: e.pair.output) else {
                    throw InferenceError(function: functionName, reason: "state output '\(e.pair.output)' was not computed")
                }
                if let b = e.buffer {
                    do { try b.assign(v) } catch let error as OpError {
                        throw InferenceError(function: functionName, reason: "state output '\(e.pair.output)': \(error.reason)")
                    }
                } else {
                    e.value = v
                }
            }
            return out
        }
    }

    /// The value each state input reads in the next run: the array, or a stand-in for a buffer.
    func argument(_ e: Entry) -> NDArray { e.buffer?.view() ?? e.value! }
}

/// The memory of a state kept in place: the dense layout of its shape with `capacity` entries
/// along `axis`, of which the first `shape[axis]` of each run along the axis are the value.
final class StateBuffer: @unchecked Sendable {
    let axis: Int
    let dtype: DataType
    private(set) var shape: [Int]
    private(set) var capacity: Int
    private(set) var base: UnsafeMutableRawPointer
    private(set) var copiedBytes = 0, appendedBytes = 0
    /// Runs along the axis, and the bytes of one entry of a run.
    private var outer: Int { shape[..<axis].reduce(1, *) }
    private var inner: Int { shape[(axis + 1)...].reduce(1, *) * dtype.bitWidth / 8 }

    init(shape: [Int], axis: Int, dtype: DataType) {
        (self.shape, self.axis, self.dtype, capacity) = (shape, axis, dtype, shape[axis])
        base = UnsafeMutableRawPointer.allocate(byteCount: max(64, shape.reduce(1, *) * dtype.bitWidth / 8), alignment: 64)
    }

    deinit { base.deallocate() }

    /// Whether a value of `shape` fits this buffer's layout (all dims but the axis equal).
    func fits(_ shape: [Int]) -> Bool {
        shape.count == self.shape.count && shape.indices.allSatisfy { $0 == axis || shape[$0] == self.shape[$0] }
    }

    /// Empties the buffer to `shape` (which fits it).
    func clear(_ shape: [Int]) { self.shape = shape }

    /// Makes room for `length` entries along the axis: the buffer at least doubles, its entries
    /// moved over. Returns whether it grew.
    @discardableResult
    func reserve(_ length: Int) -> Bool {
        guard length > capacity else { return false }
        let grown = max(length, capacity * 2, 64)
        let (runs, entry) = (outer, inner)
        let fresh = UnsafeMutableRawPointer.allocate(byteCount: max(64, runs * grown * entry), alignment: 64)
        let held = shape[axis] * entry
        for o in 0 ..< runs where held > 0 {
            (fresh + o * grown * entry).copyMemory(from: base + o * capacity * entry, byteCount: held)
        }
        copiedBytes += runs * held
        base.deallocate()
        (base, capacity) = (fresh, grown)
        return true
    }

    /// The value after a planned run appended to it in place.
    func advance(to shape: [Int]) {
        appendedBytes += max(0, shape[axis] - self.shape[axis]) * outer * inner
        self.shape = shape
    }

    /// Takes `x` (a run's whole output for this state) as the value, copied in.
    /// - Throws: ``OpError`` when `x` differs from the state in a dim other than the growing one.
    func assign(_ x: NDArray) throws {
        let x = x.contiguous()
        guard fits(x.shape), x.scalarType == dtype else {
            throw OpError("the run gave the state \(x.scalarType.rawValue)\(x.shape), which does not extend its \(dtype.rawValue)\(shape) along axis \(axis)")
        }
        reserve(x.shape[axis])
        shape = x.shape
        let (runs, entry) = (outer, inner), held = shape[axis] * entry
        for o in 0 ..< runs where held > 0 {
            (base + o * capacity * entry).copyMemory(from: x.unsafeBase + o * held, byteCount: held)
        }
        copiedBytes += runs * held
    }

    /// A stand-in of the value's shape at the buffer's address: planned runs read it through
    /// the state's layout; its bytes are not the value's dense layout.
    func view() -> NDArray {
        NDArray(shape: shape, scalarType: dtype, borrowing: ByteStorage(borrowing: base, count: shape.reduce(1, *) * dtype.bitWidth / 8, owner: self))
    }

    /// The value, dense.
    func dense() -> NDArray {
        let y = NDArray(uninitializedShape: shape, scalarType: dtype)
        let (runs, entry) = (outer, inner), held = shape[axis] * entry
        for o in 0 ..< runs where held > 0 {
            (y.unsafeBase + o * held).copyMemory(from: base + o * capacity * entry, byteCount: held)
        }
        return y
    }
}
