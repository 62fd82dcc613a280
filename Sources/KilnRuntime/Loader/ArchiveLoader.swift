import Foundation
import KilnCompiler
import KilnFormat

extension Model {
    /// A `Name.kilnarchive`: the best artifact member the host runs, read in place (or decrypted
    /// into memory), checked against the archive index's SHA-256 and its own weight CRC-32.
    static func loadArchive(_ path: String, _ options: ModelLoadOptions) throws -> Model {
        let archive = try ModelArchive(at: path)
        let target = try targetArchitecture(options, path: path)
        var explanation = LoadExplanation(host: Architecture.host?.name)
        if let target, target != Architecture.host { explanation.maxArchitecture = target.name }
        let artifacts = archive.members.compactMap { m in ArtifactSelection.parse(m.name).map { (m, $0.name, $0.arch) } }
        let names = Set(artifacts.map(\.1)).sorted()
        let name: String
        if let wanted = options.model {
            guard names.contains(wanted) else {
                throw RuntimeError(path: path, reason: names.isEmpty ? "holds no compiled artifact"
                    : "holds no model '\(wanted)'; it holds \(names.map { "'\($0)'" }.joined(separator: ", "))")
            }
            name = wanted
        } else {
            guard let only = names.first else { throw RuntimeError(path: path, reason: "holds no compiled artifact") }
            guard names.count == 1 else {
                throw RuntimeError(path: path, reason: "holds \(names.count) models (\(names.map { "'\($0)'" }.joined(separator: ", "))); choose one with --model NAME (ModelLoadOptions.model)")
            }
            name = only
        }
        explanation.model = options.model
        var usable: [(Architecture, ModelArchive.Member)] = []
        for (member, n, archName) in artifacts where n == name {
            let label = "\(path)#\(member.name)"
            switch ArtifactSelection.judgeArch(archName, host: target) {
            case .failure(let r): explanation.candidates.append(.init(path: label, arch: archName, refusal: r))
            case .success(let arch): usable.append((arch, member))
            }
        }
        usable.sort { $0.0.level > $1.0.level }
        var keyRefusals: [String] = []
        for (_, member) in usable {
            let label = "\(path)#\(member.name)"
            do {
                if options.verifyChecksums { try archive.verify(member) }
                let artifact = try CompiledArtifact.read(in: archive, member: member, verifyWeights: options.verifyChecksums,
                                                         keys: options.keyProvider)
                guard artifact.header.minimumRuntime <= CompiledFormat.runtimeVersion else {
                    throw RuntimeError(path: label, reason: "needs runtime \(artifact.header.minimumRuntime) or newer; this is \(CompiledFormat.runtimeVersion)")
                }
                guard ArtifactSelection.parse(member.name)?.arch == artifact.header.arch else {
                    throw RuntimeError(path: label, reason: "header says '\(artifact.header.arch)', the name says otherwise")
                }
                explanation.candidates.insert(.init(path: label, arch: artifact.header.arch, refusal: nil), at: 0)
                explanation.chosen = label
                explanation.verification = options.verifyChecksums
                    ? "SHA-256 matches the archive index; weights verified (CRC-32)\(artifact.encryptionKeyID.map { "; decrypted with key \($0)" } ?? "")"
                    : "weights not verified (verification turned off)"
                return Model(backend: .compiled(artifact), url: URL(fileURLWithPath: path), options: options, explanation: explanation)
            } catch let e as ArtifactKeyError {
                keyRefusals.append(e.reason)
                explanation.candidates.append(.init(path: label, arch: nil, refusal: .init(.needsKey, e.reason)))
            } catch {
                explanation.candidates.append(.init(path: label, arch: nil, refusal: .init(reading: error)))
            }
        }
        if !keyRefusals.isEmpty {
            throw ArtifactKeyError(path: path, reason: "no artifact runs without a key: " + keyRefusals.joined(separator: "; "))
        }
        let reasons = explanation.candidates.map { "\($0.path): \($0.refusal?.reason ?? "usable")" }
        throw RuntimeError(path: path, reason: "no artifact of '\(name)' runs on this host (\(target?.name ?? "unsupported CPU")): " + reasons.joined(separator: "; "))
    }
}
