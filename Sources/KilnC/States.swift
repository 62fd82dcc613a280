import Foundation
import KilnFormat
import KilnRuntime

// `kiln_state_*` and `kiln_model_run_state`: stateful runs (InferenceState).

/// A state of one function of a model, with the model it runs on.
final class StateHandle {
    let model: ModelHandle
    let function: InferenceFunction
    let state: InferenceState

    init(model: ModelHandle, function: InferenceFunction, state: InferenceState) {
        (self.model, self.function, self.state) = (model, function, state)
    }
}

func stateHandle(_ p: OpaquePointer?) throws -> StateHandle {
    guard let p else { throw StatusError(status: .invalidArgument, message: "the state handle is NULL") }
    return Unmanaged<StateHandle>.fromOpaque(UnsafeRawPointer(p)).takeUnretainedValue()
}

/// A fresh state of `function` (NULL: the first): the pairs the function declares, or those
/// `rule` names (`INPUT=OUTPUT`, as `kiln convert --state`).
@_cdecl("kiln_state_create")
public func kiln_state_create(_ p: OpaquePointer?, _ function: UnsafePointer<CChar>?, _ rule: UnsafePointer<CChar>?,
                              _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the state out-pointer is NULL") }
        out.pointee = nil
        let h = try model(p)
        let (f, _) = try h.function(function)
        let state = try rule.map { try f.makeState(rule: String(cString: $0)) } ?? f.makeState()
        out.pointee = OpaquePointer(Unmanaged.passRetained(StateHandle(model: h, function: f, state: state)).toOpaque())
        return 0
    } catch {
        return fail(error, model: try? model(p))
    }
}

@_cdecl("kiln_state_free")
public func kiln_state_free(_ p: OpaquePointer?) {
    guard let p else { return }
    Unmanaged<StateHandle>.fromOpaque(UnsafeRawPointer(p)).release()
}

@_cdecl("kiln_state_reset")
public func kiln_state_reset(_ p: OpaquePointer?) -> Int32 {
    do {
        try stateHandle(p).state.reset()
        return 0
    } catch {
        return fail(error)
    }
}

/// Bytes of state moved or written whole (``InferenceState/copiedBytes``); 0 for NULL.
@_cdecl("kiln_state_copied_bytes")
public func kiln_state_copied_bytes(_ p: OpaquePointer?) -> UInt64 { (try? UInt64(stateHandle(p).state.copiedBytes)) ?? 0 }

/// Bytes appended in place by planned runs (``InferenceState/appendedBytes``); 0 for NULL.
@_cdecl("kiln_state_appended_bytes")
public func kiln_state_appended_bytes(_ p: OpaquePointer?) -> UInt64 { (try? UInt64(stateHandle(p).state.appendedBytes)) ?? 0 }

/// `kiln_model_run_arrays` of the state's function with `state` supplying its state inputs;
/// the outputs leave out the states'.
@_cdecl("kiln_model_run_state")
public func kiln_model_run_state(_ s: OpaquePointer?, _ count: Int,
                                 _ names: UnsafePointer<UnsafePointer<CChar>?>?, _ dtypes: UnsafePointer<Int32>?,
                                 _ ranks: UnsafePointer<Int>?, _ shapes: UnsafePointer<Int64>?,
                                 _ data: UnsafePointer<UnsafeRawPointer?>?, _ bytes: UnsafePointer<Int>?,
                                 _ out: UnsafeMutablePointer<OpaquePointer?>?) -> Int32 {
    var handle: StateHandle?
    do {
        guard let out else { throw StatusError(status: .invalidArgument, message: "the outputs out-pointer is NULL") }
        out.pointee = nil
        let h = try stateHandle(s)
        handle = h
        let arrays = try borrowedArrays(count, names, dtypes, ranks, shapes, data, bytes)
        let (f, state) = (h.function, h.state)
        let result = try blocking { try await f.run(inputs: arrays, state: state) }
        out.pointee = OpaquePointer(Unmanaged.passRetained(OutputsHandle(result, inputs: Array(arrays.values))).toOpaque())
        return 0
    } catch {
        return fail(error, model: handle?.model)
    }
}
