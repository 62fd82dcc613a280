import CKilnSpecs
import Foundation
import KilnFormat

/// Broken packages, each with one defect, for the tests of the reader's errors.
/// Each starts from a valid package and changes one thing in its manifest or weights.
enum MalformedCorpus {
    typealias Patch = (UnsafeMutablePointer<Kiln__Model>) -> Void

    struct Case {
        var name: String
        var contents: (inout ManifestContents) -> Void = { _ in }
        var patch: Patch? = nil
        var manifest: (inout [UInt8]) -> Void = { _ in }
        var weights: (inout [UInt8]) -> Void = { _ in }
    }

    static func op(_ contents: inout ManifestContents, _ name: String, _ change: (inout KilnFormat.Operation) -> Void) {
        for f in contents.functions.indices {
            for o in contents.functions[f].operations.indices where contents.functions[f].operations[o].name == name {
                change(&contents.functions[f].operations[o])
            }
        }
    }

    static var cases: [Case] { [
        Case(name: "truncated-manifest", manifest: { $0.removeLast($0.count / 2) }),
        Case(name: "bad-manifest-magic", manifest: { $0[0] = UInt8(ascii: "X") }),
        Case(name: "manifest-checksum", manifest: { $0[$0.count - 3] ^= 0x40 }),
        Case(name: "newer-format-version", manifest: { $0[8] = 3 }),
        Case(name: "blob-past-end", contents: { c in
            if case .dense(var b) = c.weights[0].encoding {
                b.location.offset = (c.weightsFileSize / 64 + 4) * 64
                c.weights[0].encoding = .dense(b)
            }
        }),
        Case(name: "misaligned-blob", contents: { c in
            if case .dense(var b) = c.weights[1].encoding {
                b.location.offset += 4
                c.weights[1].encoding = .dense(b)
            }
        }),
        Case(name: "crc-mismatch", weights: { $0[$0.count - 5] ^= 0x01 }),
        Case(name: "truncated-weights", weights: { $0.removeLast(100) }),
        Case(name: "unknown-dtype", patch: { m in m.pointee.weights[2]!.pointee.dtype = Kiln__DataType(rawValue: 99) }),
        Case(name: "cycle", contents: { c in op(&c, "relu1") { $0.inputs = ["relu2"] } }),
        Case(name: "use-before-definition", contents: { c in
            c.functions[0].operations.swapAt(1, 2)
        }),
        Case(name: "duplicate-value-name", contents: { c in op(&c, "relu2") { $0.outputs[0].name = "relu1" } }),
        Case(name: "huge-dimension", contents: { c in
            c.functions[0].inputs[0].type.shape = [.symbol("batch"), .size(1 << 62)]
        }),
        Case(name: "unknown-op-type", contents: { c in op(&c, "relu1") { $0.opType = "frobnicate" } }),
        Case(name: "attribute-type", contents: { c in op(&c, "softmax") { $0.attributes["axis"] = .string("last") } }),
        Case(name: "undefined-output", contents: { c in c.functions[0].outputs[0].value = "nowhere" }),
        Case(name: "weights-file-escapes", contents: { c in c.weightsFile = "../weights.bin" }),
    ] }

    /// Writes every case as `DIR/<case>.kiln`, replacing what is there.
    /// - Returns: The case names.
    static func write(to dir: String, base: PortableModel) throws -> [String] {
        let fm = FileManager.default
        try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let valid = "\(dir)/.valid.kiln"
        try PackageWriter.write(base, to: valid)
        defer { try? fm.removeItem(atPath: valid) }
        let weights = [UInt8](try Data(contentsOf: URL(fileURLWithPath: "\(valid)/\(PackageFormat.weightsFileName)")))
        let (contents, _) = PackageWriter.layout(base)
        for c in cases {
            var changed = contents
            c.contents(&changed)
            var manifest = PackageWriter.frameManifest(ManifestCodec.encode(changed, patch: c.patch), version: changed.formatVersion)
            c.manifest(&manifest)
            var w = weights
            c.weights(&w)
            let path = "\(dir)/\(c.name).kiln"
            try? fm.removeItem(atPath: path)
            try fm.createDirectory(atPath: path, withIntermediateDirectories: true)
            try Data(manifest).write(to: URL(fileURLWithPath: "\(path)/\(PackageFormat.manifestFileName)"))
            try Data(w).write(to: URL(fileURLWithPath: "\(path)/\(PackageFormat.weightsFileName)"))
        }
        return cases.map(\.name)
    }
}
