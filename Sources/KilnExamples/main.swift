import KilnFormat

#if canImport(Glibc)
import Glibc
#endif

// Regenerates Kiln's committed example packages and the malformed-package corpus.
//
//   KilnExamples examples DIR    writes DIR/TinyClassifier.kiln and DIR/TinyEncoder.kiln
//   KilnExamples malformed DIR   writes the corpus of broken packages the tests read

let args = CommandLine.arguments
guard args.count == 3, ["examples", "malformed"].contains(args[1]) else {
    FileHandleStderr.write("usage: KilnExamples examples|malformed DIR\n")
    exit(64)
}
do {
    let dir = args[2]
    if args[1] == "examples" {
        try PackageWriter.write(try Examples.tinyClassifier(), to: "\(dir)/TinyClassifier.kiln")
        try PackageWriter.write(try Examples.tinyEncoder(), to: "\(dir)/TinyEncoder.kiln")
        // An input for `make run`: one feature vector, seeded.
        var rng = SeededRandom(seed: 2024)
        try NDArray(shape: [1, 64], scalars: (0 ..< 64).map { _ in rng.uniform(1) })
            .writeNPY(to: "\(dir)/TinyClassifier.features.npy")
        print("wrote \(dir)/TinyClassifier.kiln, \(dir)/TinyEncoder.kiln, \(dir)/TinyClassifier.features.npy")
    } else {
        let names = try MalformedCorpus.write(to: dir, base: try Examples.tinyClassifier())
        print("wrote \(names.count) malformed packages to \(dir)")
    }
} catch {
    FileHandleStderr.write("error: \(error)\n")
    exit(1)
}

enum FileHandleStderr {
    static func write(_ s: String) {
        let bytes = Array(s.utf8)
        _ = bytes.withUnsafeBytes { Glibc.write(2, $0.baseAddress, $0.count) }
    }
}
