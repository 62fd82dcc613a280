import KilnFormat
import KilnReference
import XCTest

/// The op registry against the reference interpreter: every op type has a reference kernel.
final class RegistryCoverageTests: XCTestCase {
    /// A value of each attribute kind, for required attributes.
    func sample(_ kind: AttributeKind) -> AttributeValue {
        switch kind {
        case .int: return .int(1)
        case .float: return .float(1)
        case .string: return .string("")
        case .ints: return .ints([1])
        case .floats: return .floats([1])
        case .strings: return .strings([""])
        case .tensor: return .tensor(TensorLiteral(dtype: .float32, shape: [], bytes: [0, 0, 0, 0]))
        case .dtype: return .dtype(.float32)
        case .graph: return .graph(Function(name: "body", inputs: [], outputs: [], operations: []))
        }
    }

    func testEveryOpHasAReferenceKernel() {
        for schema in OpSet.schemas.values.sorted(by: { $0.name < $1.name }) {
            var attributes: [String: AttributeValue] = [:]
            for (name, spec) in schema.attributes where spec.required { attributes[name] = sample(spec.kind) }
            let op = Operation(opType: schema.name, name: "op", inputs: schema.inputs.map { $0.optional ? "" : $0.name },
                               outputs: (0 ..< schema.outputCount.lowerBound).map { Value(name: "y\($0)", type: TensorType(.float32, [])) },
                               attributes: attributes)
            // Preparing may reject the sample attributes; it must never lack the kernel.
            do { _ = try ReferenceKernel(op) } catch {
                XCTAssertFalse("\(error)".contains("has no kernel"), "\(schema.name): \(error)")
            }
        }
    }

    /// Every attribute default the registry states has the attribute's kind.
    func testDefaultsHaveTheirAttributesKind() {
        for schema in OpSet.schemas.values {
            for (name, spec) in schema.attributes {
                guard let d = spec.defaultValue else { continue }
                XCTAssertEqual(d.kind, spec.kind, "\(schema.name).\(name)")
                XCTAssertFalse(spec.required, "\(schema.name).\(name) is required but has a default")
            }
        }
    }
}
