/// Facts about a model that tools show people: op counts and storage precisions.
extension PortableModel {
    /// How many ops of each type all functions hold, most frequent first (ties by name).
    public var operationHistogram: [(opType: String, count: Int)] {
        var counts: [String: Int] = [:]
        for f in functions {
            for op in f.operations { counts[op.opType, default: 0] += 1 }
        }
        return counts.map { (opType: $0.key, count: $0.value) }
            .sorted { $0.count != $1.count ? $0.count > $1.count : $0.opType < $1.opType }
    }

    /// Weights grouped by storage type (`float32`, `int8 quantized`, …), largest first.
    public var storagePrecisions: [(storage: String, weights: Int, parameters: Int, bytes: Int)] {
        var groups: [String: (Int, Int, Int)] = [:]
        for w in weights {
            let g = groups[w.storageDescription, default: (0, 0, 0)]
            groups[w.storageDescription] = (g.0 + 1, g.1 + w.elementCount, g.2 + w.storedBytes)
        }
        return groups.map { (storage: $0.key, weights: $0.value.0, parameters: $0.value.1, bytes: $0.value.2) }
            .sorted { $0.bytes != $1.bytes ? $0.bytes > $1.bytes : $0.storage < $1.storage }
    }
}
