import Foundation
import KilnFormat

/// `kiln keygen -o FILE`: a new AES-256 key for `kiln compile --encrypt`.
enum KeygenCommand {
    static let spec = CommandSpec(
        name: "keygen",
        abstract: "Make a new key file for encrypting compiled artifacts (kiln compile --encrypt).",
        usage: "kiln keygen -o FILE [--force]",
        options: [
            OptionSpec(names: ["-o", "--output"], valueName: "FILE", help: "The key file to write (mode 0600)."),
            OptionSpec(names: ["--force"], valueName: nil, help: "Replace an existing file."),
        ],
        discussion: "Keep the key file out of the artifacts' distribution: whoever holds it can decrypt them. See specs/encryption.md.")

    static func run(_ args: ParsedArguments) throws {
        guard args.positionals.isEmpty else { throw UsageError(message: "takes no arguments", command: spec) }
        guard let output = args.value("--output") else { throw UsageError(message: "missing -o FILE", command: spec) }
        if FileManager.default.fileExists(atPath: output), !args.has("--force") {
            throw Failure(message: "\(output): already exists; a new key would make artifacts encrypted with the old one unreadable (use --force to replace it)")
        }
        let key = try ArtifactKey.generate()
        try FileSystem.writeSecret(Array(key.fileText.utf8), to: output)
        Console.out("\(output)  key id \(key.id)\n")
    }
}
