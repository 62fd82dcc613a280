import FuzzSupport
import KilnFormat
import KilnRuntime

/// A compiled artifact: its checksums are recomputed after mutation (so the fuzzer gets past them
/// into the plan, the weight references and the kernels), then it is loaded, every function is
/// prepared, and each runs once on zero inputs (symbolic dims as 1).
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    var bytes = Array(UnsafeBufferPointer(start: data, count: size))
    fixChecksums(&bytes)
    let path = bytes.withUnsafeBytes { Scratch.write($0, "A.x86_64.compiled") }
    var options = ModelLoadOptions()
    options.threads = 1
    options.rememberVerifiedFiles = false
    blocking { [options] in
        guard let model = try? await Model.load(contentsOf: .init(fileURLWithPath: path), options: options) else { return }
        for name in model.functionNames {
            guard let f = try? await model.loadFunction(named: name) else { continue }
            var inputs: [String: NDArray] = [:]
            for d in f.descriptor.inputs {
                let shape = d.shape.map { dim -> Int in if case .size(let n) = dim { return min(n, 64) } else { return 1 } }
                // Counted without overflow: a declared shape may be anything the reader accepts.
                guard shape.reduce(1, { n, d in d == 0 || n <= (1 << 16) / max(d, 1) ? n * d : (1 << 16) + 1 }) <= 1 << 16 else { return }
                inputs[d.name] = NDArray(shape: shape, scalarType: d.scalarType)
            }
            _ = try? await f.run(inputs: inputs)
        }
    }
    return 0
}
