#if canImport(Glibc)
import Glibc
#endif

/// Why models cannot be merged into one.
public struct MergeError: Error, CustomStringConvertible {
    public var description: String
}

extension PortableModel {
    /// One model with the functions of `models`, in order, and one weight pool: a weight equal in
    /// content to one already pooled (the same type, shape, encoding and bytes, whatever its name)
    /// is stored once, and the functions that used it refer to the pooled one. A weight keeps its
    /// name unless another weight or a value of any function has it; it is then renamed
    /// `FUNCTION.NAME` (numbered when that is taken too) and its function's uses follow.
    ///
    /// The metadata, compute precision and format version are the first model's (the version
    /// raised to the newest of all). Function names must differ.
    public static func merging(_ models: [PortableModel]) throws -> PortableModel {
        guard let first = models.first else { throw MergeError(description: "no models to merge") }
        var functionNames = Set<String>()
        for f in models.flatMap(\.functions) where !functionNames.insert(f.name).inserted {
            throw MergeError(description: "two functions are called '\(f.name)'")
        }
        // A weight may not share its name with any function's input or op result.
        var taken = Set<String>()
        for f in models.flatMap(\.functions) {
            taken.formUnion(f.inputs.map(\.name))
            for op in f.operations { taken.formUnion(op.outputs.map(\.name)) }
        }
        var pool: [Weight] = []
        var byContent: [WeightContent: [Int]] = [:]
        var functions: [Function] = []
        for model in models {
            var renamed: [String: String] = [:]
            let owner = model.functions.first?.name ?? "weights"
            for w in model.weights {
                let key = WeightContent(w)
                if let j = byContent[key]?.first(where: { WeightContent.sameBytes(pool[$0], w) }) {
                    renamed[w.name] = pool[j].name
                    continue
                }
                var name = w.name
                if taken.contains(name) {
                    name = "\(owner).\(w.name)"
                    var n = 2
                    while taken.contains(name) { name = "\(owner).\(w.name).\(n)"; n += 1 }
                }
                taken.insert(name)
                var pooled = w
                pooled.name = name
                byContent[key, default: []].append(pool.count)
                pool.append(pooled)
                renamed[w.name] = name
            }
            for f in model.functions { functions.append(f.renamingUses(renamed)) }
        }
        return PortableModel(formatVersion: models.map(\.formatVersion).max(), metadata: first.metadata,
                             computePrecision: first.computePrecision, weights: pool, functions: functions)
    }
}

extension Function {
    /// The function with each use of a value named in `names` (op inputs, returned values)
    /// replaced by its new name. The names must not be defined in the function.
    func renamingUses(_ names: [String: String]) -> Function {
        var f = self
        for i in f.operations.indices {
            f.operations[i].inputs = f.operations[i].inputs.map { names[$0] ?? $0 }
        }
        for i in f.outputs.indices { f.outputs[i].value = names[f.outputs[i].value] ?? f.outputs[i].value }
        return f
    }
}

/// What two weights of equal content agree on, with a checksum of their bytes (equal keys are
/// then compared byte for byte).
private struct WeightContent: Hashable {
    var kind: String
    var dtype: DataType
    var shape: [Int]
    var blobs: [[Int]]

    init(_ w: Weight) {
        kind = w.encoding.kindName
        dtype = w.dtype
        shape = w.shape
        blobs = w.encoding.blobs.map { b in [b.dtype.hashValue, b.data.count, Int(crc32Parallel(b.data.bytes))] + b.shape }
    }

    static func sameBytes(_ a: Weight, _ b: Weight) -> Bool {
        let (x, y) = (a.encoding.blobs, b.encoding.blobs)
        return x.count == y.count && zip(x, y).allSatisfy { p, q in
            p.dtype == q.dtype && p.shape == q.shape && p.data.count == q.data.count
                && (p.data.count == 0 || memcmp(p.data.bytes.baseAddress!, q.data.bytes.baseAddress!, p.data.count) == 0)
        }
    }
}
