import CKilnKernels
import KilnCompiler
import KilnFormat
import XCTest

/// The op registry's unary rows against the C list (kiln_unary.inc) and against every C variant
/// that computes them: `f32_unary` kernels of each ISA and the epilogues of each GEMM
/// microkernel, compared with the registry's formula in Double (an oracle independent of the C
/// code). A variant this CPU cannot run is skipped with a message.
final class UnaryRegistryTests: XCTestCase {
    /// Inputs: zero, signs, the regions where piecewise forms switch, saturation, large values.
    static let inputs: [Float] = [0, -0.0, 1, -1, 0.5, -0.5, 2.5, -2.5, 3, -3, 6, -6, 0.01, -0.01, 1e-4, 20.5, -20.5, 30, -30, 88, -88, 100]
        + (0 ..< 97).map { Float($0) * 0.173 - 8.3 }

    /// Attribute sets each op is checked with: its defaults, then others that change its form.
    static let variants: [String: [[String: AttributeValue]]] = [
        "leaky_relu": [["alpha": .float(0.3)]],
        "hard_sigmoid": [["alpha": .float(0.1667), "beta": .float(0.4)]],
        "gelu": [["approximate": .string("tanh")]],
        "clip": [["min": .float(-1), "max": .float(6)], ["min": .float(0), "max": .float(0.5)], ["min": .float(2), "max": .float(1)]],
    ]

    /// Named error budgets, relative to max(1, |exact|): polynomial exp, tanh and erf forms.
    func budget(_ function: String) -> Double {
        switch function {
        case "gelu", "gelu_tanh", "erf", "tanh", "sigmoid", "silu", "softplus", "exp": return 4e-6
        default: return 1e-6
        }
    }

    /// Every unary op of the registry with a C kernel, and each attribute set to check.
    var cases: [(op: String, map: UnaryMap, attributes: OpAttributes)] {
        OpSet.schemas.values.sorted { $0.name < $1.name }.flatMap { schema -> [(op: String, map: UnaryMap, attributes: OpAttributes)] in
            guard let map = schema.unary, !map.functions.isEmpty else { return [] }
            return ([[:]] + (Self.variants[schema.name] ?? [])).map { (schema.name, map, OpAttributes($0, opType: schema.name)) }
        }
    }

    func check(_ got: [Float], _ x: [Float], _ exact: (Double) -> Double, _ function: String, _ label: String) {
        for (i, (g, v)) in zip(got, x).enumerated() {
            let want = exact(Double(v))
            if want.isNaN && g.isNaN || Float(want).isInfinite && g == Float(want) { continue }
            let error = abs(Double(g) - want)
            if !(error <= budget(function) * max(1, abs(want))) {
                XCTFail("\(label): input \(i) (\(v)) gave \(g), the formula \(want)")
                return
            }
        }
    }

    func testEveryCFunctionBelongsToARegistryOp() {
        let reached = Set(OpSet.schemas.values.compactMap(\.unary).flatMap(\.functions))
        XCTAssertFalse(UnaryFunction.all.isEmpty)
        for f in UnaryFunction.all { XCTAssertTrue(reached.contains(f.name), "kiln_unary.inc has \(f.name), which no registry op computes") }
        for name in reached { XCTAssertNotNil(UnaryFunction(named: name), "the registry names \(name), which kiln_unary.inc lacks") }
        // The fusable set is the registry's, and every op with a kernel maps its defaults to one.
        XCTAssertEqual(Set(UnaryFunction.activations.map(\.name)),
                       ["relu", "hard_swish", "hard_sigmoid", "gelu", "gelu_tanh", "clip", "sigmoid", "tanh", "leaky_relu", "silu"])
    }

    func testUnaryKernelsMatchTheRegistryFormulas() throws {
        let variants = vectorVariants(Int32(KILN_VECTOR_UNARY), "f32_unary").map { ($0.isa.rawValue, $0.config.unary) }
        for (op, map, attributes) in cases {
            let call = try map.call(attributes), exact = try map.formula(attributes)
            let f = try XCTUnwrap(UnaryFunction(named: call.function), op)
            for (isa, kernel) in variants {
                for n in [1, 7, 8, 9, 33, Self.inputs.count] {
                    let x = Array(Self.inputs.prefix(n))
                    var y = [Float](repeating: .nan, count: n)
                    kernel(f.code, n, x, &y, Float(call.alpha), Float(call.beta))
                    check(y, x, exact, call.function, "f32_unary__\(isa) \(op) \(attributes.values) n=\(n)")
                }
            }
        }
    }

    /// Each activation applied by each GEMM microkernel to its accumulators (or stored tile):
    /// A is a column of the inputs, B a row of ones, so C[i][j] is input i through the function.
    func testEpiloguesMatchTheRegistryFormulas() throws {
        for id in KernelID.catalog where id.family == .gemm {
            guard let ukernel = id.microkernel, let tile = id.tile else {
                print("skipped: \(id) (not runnable on this CPU)")
                continue
            }
            for (op, map, attributes) in cases where map.isActivation {
                let call = try map.call(attributes), exact = try map.formula(attributes)
                let f = try XCTUnwrap(UnaryFunction(named: call.function))
                var args = kiln_tile_args(col_bias: nil, row_bias: nil, activation: f.code, alpha: Float(call.alpha), beta: Float(call.beta), accumulate: 0)
                let ones = [Float](repeating: 1, count: tile.nr)
                for start in stride(from: 0, to: Self.inputs.count, by: tile.mr) {
                    let rows = min(tile.mr, Self.inputs.count - start)
                    let a = Array(Self.inputs[start ..< start + rows])
                    for nc in [tile.nr, tile.nr - 1] {
                        var c = [Float](repeating: .nan, count: rows * tile.nr)
                        ukernel(rows, nc, 1, a, 1, ones, tile.nr, &c, tile.nr, &args)
                        for j in [0, nc - 1] {
                            check((0 ..< rows).map { c[$0 * tile.nr + j] }, a, exact, call.function, "\(id) \(op) \(attributes.values) column \(j)")
                        }
                    }
                }
            }
        }
    }
}
