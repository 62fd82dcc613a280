import Foundation

/// A fresh temporary directory, removed by the caller.
func temporaryDirectory() throws -> String {
    let dir = NSTemporaryDirectory() + "kiln-runtime-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    return dir
}
