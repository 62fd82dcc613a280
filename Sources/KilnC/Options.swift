import Foundation
import KilnFormat
import KilnRuntime

// `kiln_options_*`: the load options a C caller builds before `kiln_model_load`.

/// The load options behind a `kiln_options` handle.
final class OptionsHandle {
    var options = ModelLoadOptions()
}

/// The options of a handle.
/// - Throws: ``StatusError`` when it is NULL.
func optionsHandle(_ p: OpaquePointer?) throws -> OptionsHandle {
    guard let p else { throw StatusError(status: .invalidArgument, message: "options is NULL") }
    return Unmanaged<OptionsHandle>.fromOpaque(UnsafeRawPointer(p)).takeUnretainedValue()
}

@_cdecl("kiln_options_create")
public func kiln_options_create() -> OpaquePointer? {
    OpaquePointer(Unmanaged.passRetained(OptionsHandle()).toOpaque())
}

@_cdecl("kiln_options_free")
public func kiln_options_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<OptionsHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}

/// Sets an option through `body`: 0, or the status of what it throws.
func setOption(_ p: OpaquePointer?, _ body: (OptionsHandle) throws -> Void) -> Int32 {
    do {
        try body(try optionsHandle(p))
        return 0
    } catch {
        return fail(error)
    }
}

@_cdecl("kiln_options_set_model")
public func kiln_options_set_model(_ p: OpaquePointer?, _ name: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.model = name.map { String(cString: $0) } }
}

@_cdecl("kiln_options_set_threads")
public func kiln_options_set_threads(_ p: OpaquePointer?, _ threads: Int32) -> Int32 {
    setOption(p) {
        guard threads >= 1 else { throw StatusError(status: .invalidArgument, message: "threads must be at least 1, not \(threads)") }
        $0.options.threads = Int(threads)
    }
}

@_cdecl("kiln_options_set_key_file")
public func kiln_options_set_key_file(_ p: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { h in
        let key = try ArtifactKey.read(at: try string(path, "the key file path"))
        h.options.useKeys([key])
    }
}

@_cdecl("kiln_options_set_cache_dir")
public func kiln_options_set_cache_dir(_ p: OpaquePointer?, _ path: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.cache = SpecializationCache(directory: try string(path, "the cache directory")) }
}

@_cdecl("kiln_options_set_max_arch")
public func kiln_options_set_max_arch(_ p: OpaquePointer?, _ arch: UnsafePointer<CChar>?) -> Int32 {
    setOption(p) { $0.options.maxArchitecture = arch.map { String(cString: $0) } }
}

@_cdecl("kiln_options_set_frequent_reshapes")
public func kiln_options_set_frequent_reshapes(_ p: OpaquePointer?, _ frequent: Int32) -> Int32 {
    setOption(p) { $0.options.expectFrequentReshapes = frequent != 0 }
}

@_cdecl("kiln_options_set_verify")
public func kiln_options_set_verify(_ p: OpaquePointer?, _ verify: Int32) -> Int32 {
    setOption(p) { $0.options.verifyChecksums = verify != 0 }
}
