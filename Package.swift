// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Kiln",
    products: [
        .executable(name: "kiln", targets: ["kiln"]),
        .library(name: "KilnFormat", targets: ["KilnFormat"]),
        .library(name: "KilnReference", targets: ["KilnReference"]),
        .library(name: "KilnRuntime", targets: ["KilnRuntime"]),
        .library(name: "KilnCompiler", targets: ["KilnCompiler"]),
        .library(name: "KilnONNX", targets: ["KilnONNX"]),
        .library(name: "KilnCompression", targets: ["KilnCompression"]),
        .library(name: "KilnStore", targets: ["KilnStore"]),
        // The C API (include/kiln.h, specs/c-api.md): libKilnC.so.
        .library(name: "KilnC", type: .dynamic, targets: ["KilnC"]),
    ],
    targets: [
        .systemLibrary(
            name: "CProtobufC",
            pkgConfig: "libprotobuf-c",
            providers: [.apt(["libprotobuf-c-dev"])]
        ),
        .systemLibrary(
            name: "CZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"])]
        ),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .target(
            name: "CKilnSpecs",
            dependencies: ["CProtobufC"]
        ),
        .target(
            name: "CKilnKernels"
        ),
        .target(
            name: "CKilnCompression"
        ),
        .target(
            name: "CKilnHash"
        ),
        .target(
            name: "KilnFormat",
            dependencies: ["CKilnSpecs", "CZlib", "CKilnHash", "COpenSSL"]
        ),
        .target(
            name: "KilnReference",
            dependencies: ["KilnFormat"]
        ),
        .target(
            name: "KilnCompiler",
            dependencies: ["KilnFormat", "KilnReference", "CKilnKernels"]
        ),
        .target(
            name: "KilnCompression",
            dependencies: ["KilnFormat", "CKilnKernels", "CKilnCompression"]
        ),
        .target(
            name: "KilnONNX",
            dependencies: ["KilnFormat", "KilnReference", "CKilnSpecs"]
        ),
        .target(
            name: "KilnRuntime",
            dependencies: ["KilnCompiler", "KilnReference", "KilnFormat", "CKilnKernels"]
        ),
        .target(
            name: "KilnStore",
            dependencies: ["KilnRuntime", "KilnCompiler", "KilnFormat"]
        ),
        .target(
            name: "KilnC",
            dependencies: ["KilnRuntime", "KilnFormat"]
        ),
        .executableTarget(
            name: "kiln",
            dependencies: ["KilnStore", "KilnRuntime", "KilnCompiler", "KilnReference", "KilnONNX", "KilnCompression", "KilnFormat"]
        ),
        .executableTarget(
            name: "KilnConformance",
            dependencies: ["KilnRuntime", "KilnCompiler", "KilnReference", "KilnONNX", "KilnFormat"]
        ),
        .executableTarget(
            name: "KilnExamples",
            dependencies: ["KilnFormat", "CKilnSpecs"]
        ),
        .target(
            name: "KilnTestSupport",
            dependencies: ["KilnFormat"],
            path: "Tests/Support"
        ),
        .testTarget(
            name: "KilnFormatTests",
            dependencies: ["KilnFormat", "CKilnSpecs"]
        ),
        .testTarget(
            name: "KilnReferenceTests",
            dependencies: ["KilnReference", "KilnFormat", "KilnTestSupport"]
        ),
        .testTarget(
            name: "KilnONNXTests",
            dependencies: ["KilnONNX", "KilnReference", "KilnFormat", "CKilnSpecs", "KilnTestSupport"]
        ),
        .testTarget(
            name: "KilnCompressionTests",
            dependencies: ["KilnCompression", "KilnReference", "KilnONNX", "KilnFormat", "KilnTestSupport"]
        ),
        .testTarget(
            name: "KilnCompilerTests",
            dependencies: ["KilnCompiler", "KilnRuntime", "KilnCompression", "KilnONNX", "KilnReference", "KilnFormat",
                           "CKilnKernels", "KilnTestSupport"]
        ),
        .testTarget(
            name: "KilnRuntimeTests",
            dependencies: ["KilnRuntime", "KilnCompiler", "KilnFormat"]
        ),
        .testTarget(
            name: "KilnStoreTests",
            dependencies: ["KilnStore", "KilnRuntime", "KilnCompiler", "KilnFormat"]
        ),
        .testTarget(
            name: "KilnCLITests",
            dependencies: ["KilnFormat", "KilnTestSupport"]
        ),
    ]
)
