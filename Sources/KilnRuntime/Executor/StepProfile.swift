import Dispatch
import Foundation

/// Accumulated nanoseconds per step, for `KILN_PROFILE` (the 25 slowest steps; `KILN_PROFILE_TOP=N` for N).
/// Planned runs and generic ones (a new shape signature worked out step by step, allocating) are
/// kept apart: the report is of the planned runs, the generic ones summed on a line of their own
/// (their steps are reported only when no run was planned).
final class StepProfile: @unchecked Sendable {
    private var nanoseconds: [UInt64], genericNanoseconds: [UInt64]
    private var runs = 0, genericRuns = 0, derived = 0, derivedNanoseconds: UInt64 = 0, bound = 0, boundNanoseconds: UInt64 = 0
    private let lock = NSLock()

    init(_ count: Int) {
        nanoseconds = [UInt64](repeating: 0, count: count)
        genericNanoseconds = nanoseconds
    }

    func add(_ step: Int, _ ns: UInt64, generic: Bool = false) {
        lock.withLock { if generic { genericNanoseconds[step] += ns } else { nanoseconds[step] += ns } }
    }

    func countRun(generic: Bool = false) { lock.withLock { if generic { genericRuns += 1 } else { runs += 1 } } }

    /// A plan derived for new sizes, and the time taken to derive and bind it.
    func countDerived(_ ns: UInt64) { lock.withLock { derived += 1; derivedNanoseconds += ns } }

    /// A run of a symbolic plan, and the time taken to bind the plan to its sizes.
    func countBound(_ ns: UInt64) { lock.withLock { bound += 1; boundNanoseconds += ns } }

    func report(_ names: [String], notes: [String]) {
        let planned = runs > 0 || genericRuns == 0
        let times = planned ? nanoseconds : genericNanoseconds
        let total = max(times.reduce(0, +), 1)
        let runs = max(planned ? self.runs : genericRuns, 1)
        func ms(_ ns: UInt64, _ n: Int) -> String { String(format: "%.3f", Double(ns) / 1e6 / Double(max(n, 1))) }
        var lines = "profile: \(planned ? self.runs : 0) planned runs, \(ms(planned ? total : 0, runs)) ms per run in steps\n"
        if genericRuns > 0 {
            lines += "  \(genericRuns) generic run\(genericRuns == 1 ? "" : "s") (shapes worked out step by step): \(ms(genericNanoseconds.reduce(0, +), genericRuns)) ms per run\(planned ? ", not counted below" : "; below")\n"
        }
        if derived > 0 {
            lines += "  \(derived) plan\(derived == 1 ? "" : "s") derived for new sizes: \(ms(derivedNanoseconds, derived)) ms each, not counted below\n"
        }
        if bound > 0 {
            lines += "  \(bound) run\(bound == 1 ? "" : "s") of a symbolic plan bound to their sizes (no plan derived): \(ms(boundNanoseconds, bound)) ms each to bind, not counted below\n"
        }
        let top = getenv("KILN_PROFILE_TOP").flatMap { Int(String(cString: $0)) } ?? 25
        for (i, ns) in times.enumerated().sorted(by: { $0.1 > $1.1 }).prefix(max(top, 0)) where ns > 0 {
            lines += String(format: "  %6.2f%%  %8.3f ms  ", Double(ns) * 100 / Double(total), Double(ns) / 1e6 / Double(runs)) + names[i] + "\n"
        }
        for n in notes { lines += "  \(n)\n" }
        FileHandle.standardError.write(Data(lines.utf8))
    }
}
