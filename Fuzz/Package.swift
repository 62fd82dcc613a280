// swift-tools-version:6.0
// libFuzzer targets for Kiln's readers of untrusted bytes and its compiler, each a module defining
// `LLVMFuzzerTestOneInput`. `make fuzz` builds them and Kiln's modules with
// `-sanitize=fuzzer,address` (C code with ASan and coverage too) and links one binary per target
// with libFuzzer's `main`; see specs/fuzzing.md.
import PackageDescription

func target(_ name: String, _ products: [String]) -> Target {
    .target(name: name, dependencies: ["FuzzSupport"] + products.map { .product(name: $0, package: "Kiln") })
}

let package = Package(
    name: "KilnFuzz",
    dependencies: [.package(name: "Kiln", path: "..")],
    targets: [
        .target(name: "FuzzSupport"),
        target("FuzzPackage", ["KilnFormat"]),
        target("FuzzONNX", ["KilnONNX", "KilnFormat"]),
        target("FuzzArtifact", ["KilnRuntime", "KilnFormat"]),
        target("FuzzNPY", ["KilnFormat"]),
        target("FuzzConfig", ["KilnCompression"]),
        target("FuzzAssets", ["KilnRuntime", "KilnFormat"]),
        target("FuzzDeploy", ["KilnStore", "KilnRuntime", "KilnFormat"]),
        target("FuzzCompile", ["KilnONNX", "KilnCompiler", "KilnRuntime", "KilnFormat"]),
    ]
)
