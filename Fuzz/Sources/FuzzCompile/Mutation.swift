import KilnFormat

/// One structure-aware mutation of a converted model's main function, read from four input
/// bytes `(kind, a, b, c)`: `kind % 8` picks what changes, `a` and `b` pick where (each taken
/// modulo the count it indexes), `c` picks the new value.
///
/// | kind | change |
/// |---|---|
/// | 0 | a dim of input `a` (dim `b`) becomes a symbol, 0, 1, a small size or a large one |
/// | 1 | input `a` takes another element type |
/// | 2 | attribute `b` of op `a` (set, or one its schema knows) takes a value in or out of range |
/// | 3 | input slot `b` of op `a` reads another value defined before it (or none) |
/// | 4 | output `a` of the function returns another value |
/// | 5 | attribute `b` of op `a` is removed |
/// | 6 | a declared dim of op `a`'s first output changes (as kind 0) |
/// | 7 | op `a`'s inputs `b` and `c` trade places (a binary op's operands swap sides) |
struct Mutation {
    var kind: UInt8, a: UInt8, b: UInt8, c: UInt8

    /// The element types a value may take.
    static let dtypes: [DataType] = [.float32, .float16, .bfloat16, .float64, .int64, .int32, .int16, .int8,
                                     .uint8, .bool, .uint16, .uint32, .uint64]
    static let strings = ["", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "nearest", "linear", "cubic", "constant",
                          "reflect", "edge", "wrap", "NHWC", "NCHW", "asymmetric", "half_pixel", "align_corners",
                          "round_prefer_floor", "floor", "ceil", "DCR", "CRD", "tanh", "relu", "sigmoid", "none", "x"]

    /// Applies the mutation to `f`; one that finds nothing to change (no inputs, no ops) does nothing.
    func apply(to f: inout Function, weights: [String]) {
        switch kind % 8 {
        case 0:
            guard !f.inputs.isEmpty else { return }
            let i = Int(a) % f.inputs.count
            f.inputs[i].type.shape = mutateDim(of: f.inputs[i].type.shape, symbols: symbols(f))
        case 1:
            guard !f.inputs.isEmpty else { return }
            f.inputs[Int(a) % f.inputs.count].type.dtype = Mutation.dtypes[Int(b) % Mutation.dtypes.count]
        case 2:
            guard !f.operations.isEmpty else { return }
            let i = Int(a) % f.operations.count
            let op = f.operations[i]
            let spec = OpSet.schema(op.opType)?.attributes ?? [:]
            let keys = Set(op.attributes.keys).union(spec.keys).sorted()
            guard !keys.isEmpty else { return }
            let key = keys[Int(b) % keys.count]
            guard let old = op.attributes[key] ?? spec[key]?.defaultValue ?? spec[key].flatMap({ Mutation.zero($0.kind) }),
                  let new = perturb(old) else { return }
            f.operations[i].attributes[key] = new
        case 3:
            guard !f.operations.isEmpty else { return }
            let i = Int(a) % f.operations.count
            guard !f.operations[i].inputs.isEmpty else { return }
            let candidates = Mutation.defined(before: i, in: f, weights: weights)
            let k = Int(c) % (candidates.count + 1)
            f.operations[i].inputs[Int(b) % f.operations[i].inputs.count] = k < candidates.count ? candidates[k] : ""
        case 4:
            guard !f.outputs.isEmpty else { return }
            let candidates = Mutation.defined(before: f.operations.count, in: f, weights: weights)
            guard !candidates.isEmpty else { return }
            f.outputs[Int(a) % f.outputs.count].value = candidates[Int(c) % candidates.count]
        case 5:
            guard !f.operations.isEmpty else { return }
            let i = Int(a) % f.operations.count
            let keys = f.operations[i].attributes.keys.sorted()
            guard !keys.isEmpty else { return }
            f.operations[i].attributes[keys[Int(b) % keys.count]] = nil
        case 6:
            guard !f.operations.isEmpty else { return }
            let i = Int(a) % f.operations.count
            guard !f.operations[i].outputs.isEmpty else { return }
            f.operations[i].outputs[0].type.shape = mutateDim(of: f.operations[i].outputs[0].type.shape, symbols: symbols(f))
        default:
            guard !f.operations.isEmpty else { return }
            let i = Int(a) % f.operations.count
            let n = f.operations[i].inputs.count
            guard n >= 2 else { return }
            f.operations[i].inputs.swapAt(Int(b) % n, Int(c) % n)
        }
    }

    /// The names an op at index `i` may read: the function's inputs, the weights and the outputs
    /// of the ops before it.
    static func defined(before i: Int, in f: Function, weights: [String]) -> [String] {
        f.inputs.map(\.name) + weights + f.operations[..<i].flatMap { $0.outputs.map(\.name) }
    }

    /// The symbols the function's inputs use, and a few of its own: a mutated dim can join an
    /// existing symbol (so broadcasting lines up at run time) or stand alone.
    func symbols(_ f: Function) -> [String] {
        var names = ["", "n", "h", "w"]
        for a in f.inputs {
            for case .symbol(let s) in a.type.shape where !s.isEmpty && !names.contains(s) { names.append(s) }
        }
        return names
    }

    /// `shape` with dim `b` changed as `c` says (a rank-0 shape is unchanged).
    func mutateDim(of shape: [Dimension], symbols: [String]) -> [Dimension] {
        guard !shape.isEmpty else { return shape }
        var s = shape
        let v = Int(c >> 3)
        switch c % 5 {
        case 0: s[Int(b) % s.count] = .symbol(symbols[v % symbols.count])
        case 1: s[Int(b) % s.count] = .size(0)
        case 2: s[Int(b) % s.count] = .size(1)
        case 3: s[Int(b) % s.count] = .size([64, 4096, 1 << 20, 1 << 31, 1 << 40][v % 5])
        default: s[Int(b) % s.count] = .size(2 + v % 8)
        }
        return s
    }

    /// A value of an attribute kind, for an attribute the op does not set and whose schema
    /// states no default.
    static func zero(_ kind: AttributeKind) -> AttributeValue? {
        switch kind {
        case .int: return .int(0)
        case .float: return .float(0)
        case .string: return .string("")
        case .ints: return .ints([])
        case .floats: return .floats([])
        case .strings: return .strings([])
        case .dtype: return .dtype(.float32)
        case .tensor, .graph: return nil
        }
    }

    /// An integer near `v`, or one at the edges of every range an attribute might have.
    func int(_ v: Int, _ pick: Int) -> Int {
        let choices = [0, 1, -1, 2, -2, 3, 4, v &+ 1, v &- 1, 0 &- v, v &* 2, 64, 1 << 20, Int(Int32.max), Int(Int32.min),
                       Int.max, Int.min, -(1 << 40)]
        return choices[pick % choices.count]
    }

    func float(_ v: Double, _ pick: Int) -> Double {
        let choices = [0, 1, -1, 0.5, .nan, .infinity, -.infinity, 1e-30, 1e30, v * 2, -v, Double(Float.greatestFiniteMagnitude) * 2]
        return choices[pick % choices.count]
    }

    /// `old` changed as `b` and `c` say; `nil` for a subgraph (left alone).
    func perturb(_ old: AttributeValue) -> AttributeValue? {
        let pick = Int(c >> 2)
        switch old {
        case .int(let v): return .int(int(v, Int(c)))
        case .float(let v): return .float(float(v, Int(c)))
        case .string: return .string(Mutation.strings[Int(c) % Mutation.strings.count])
        case .dtype: return .dtype(Mutation.dtypes[Int(c) % Mutation.dtypes.count])
        case .ints(var v):
            switch c % 4 {
            case 0 where !v.isEmpty: v[pick % v.count] = int(v[pick % v.count], pick / max(v.count, 1))
            case 1: v.append(int(0, pick))
            case 2 where !v.isEmpty: v.removeLast()
            default: v = pick % 2 == 0 ? v.reversed() : []
            }
            return .ints(v)
        case .floats(var v):
            switch c % 4 {
            case 0 where !v.isEmpty: v[pick % v.count] = float(v[pick % v.count], pick / max(v.count, 1))
            case 1: v.append(float(1, pick))
            case 2 where !v.isEmpty: v.removeLast()
            default: v = []
            }
            return .floats(v)
        case .strings(var v):
            let s = Mutation.strings[pick % Mutation.strings.count]
            if c % 2 == 0, !v.isEmpty { v[pick % v.count] = s } else { v.append(s) }
            return .strings(v)
        case .tensor(var t):
            switch c % 3 {
            case 0:
                // A scalar of the first element (or of nothing: a literal whose bytes do not fit).
                t.bytes = Array(t.bytes.prefix(max(t.dtype.bitWidth / 8, 1)))
                t.shape = []
            case 1:
                t.shape = [0]
                t.bytes = []
            default:
                t.shape.reverse()
                t.dtype = Mutation.dtypes[pick % Mutation.dtypes.count]
            }
            return .tensor(t)
        case .graph: return nil
        }
    }
}
