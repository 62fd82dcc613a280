import FuzzSupport
import KilnRuntime

import Foundation

/// The artifact `KILN_FUZZ_ARTIFACT` names, copied once beside the manifest.
let placed: Bool = {
    guard let source = ProcessInfo.processInfo.environment["KILN_FUZZ_ARTIFACT"],
          let bytes = FileManager.default.contents(atPath: source) else { return false }
    let name = (source as NSString).lastPathComponent
    bytes.withUnsafeBytes { _ = Scratch.write($0, "assets/\(name)") }
    return true
}()

/// An `assets.json` beside a fixed artifact: the directory's selection report (inputs of even
/// length) or its load (odd), which selects the same way and then verifies and maps the choice.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ input: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data = input else { return 0 }
    _ = placed
    let dir = "\(Scratch.directory)/assets"
    _ = Scratch.write(UnsafeRawBufferPointer(start: data, count: size), "assets/assets.json")
    var options = ModelLoadOptions()
    options.threads = 1
    options.rememberVerifiedFiles = false
    if size % 2 == 0 {
        _ = try? Model.explainSelection(inDirectory: dir, options: options)
        return 0
    }
    blocking { [options] in _ = try? await Model.load(contentsOf: .init(fileURLWithPath: dir), options: options) }
    return 0
}
