import Foundation

/// Directory listing and existence checks for the loader and cache.
enum FileManagerShim {
    static func contents(of directory: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory)
    }

    static func exists(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path) }
}
