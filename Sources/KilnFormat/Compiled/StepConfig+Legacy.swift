/// Reading plans of formats 3–5, which kept what is now a ``StepConfig`` in the lowered ops:
/// the `channels_last` attribute (0, 1 or 2), `kiln.activation` with `kiln.alpha` and
/// `kiln.beta`, and the packed weight's layout in its name (`<weight>@pt16`, `@p16`, `@pl16`,
/// `@pc16`, `@g16`, `@w16`, `@r6`, `@taps`; specs/compiled-format.md, version history).
/// The attributes are moved into each step's config, so the runtime sees one form.
extension CompiledPlan {
    /// The attribute names formats 3–5 used on lowered ops.
    static let legacyAttributes = ["channels_last", "kiln.activation", "kiln.alpha", "kiln.beta"]

    /// Moves format 3–5 step attributes into step configs.
    /// - Throws: ``PackageError`` naming the op for a malformed attribute.
    mutating func adoptLegacyStepAttributes() throws {
        for fi in functions.indices where fi < model.functions.count {
            var f = model.functions[fi]
            for (k, op) in f.operations.enumerated() where k < functions[fi].steps.count {
                guard Self.legacyAttributes.contains(where: { op.attributes[$0] != nil }) || op.inputs.count > 1 && op.inputs[1].contains("@") else { continue }
                let field = "functions[\(fi)] '\(f.name)' op '\(op.name)'"
                var config = StepConfig()
                do {
                    switch try op.attributes.int("channels_last", 0) {
                    case 0: break
                    case 1: config.layout = .channelsLast
                    case 2: config.layout = .planesToChannelsLast
                    case let v: throw OpError("channels_last must be 0, 1 or 2, got \(v)")
                    }
                    let name = try op.attributes.string("kiln.activation", "")
                    if !name.isEmpty {
                        config.activation = .init(function: name, alpha: Float(try op.attributes.float("kiln.alpha", 0)),
                                                  beta: Float(try op.attributes.float("kiln.beta", 0)))
                    }
                } catch let e as OpError {
                    throw PackageError(field: field, reason: e.reason)
                }
                if op.inputs.count > 1 { config.weightLayout = Self.legacyWeightLayout(op.inputs[1]) }
                if op.opType == "conv", [.channelsLastRows, .channelsFirstRows, .groupPanels, .winograd].contains(config.weightLayout) {
                    // Formats 4–5 wrote kernel_shape on channels-last convs; a channels-first packed conv without it ran as 1×1.
                    config.window = (try? op.attributes.ints("kernel_shape")) ?? [1, 1]
                }
                for a in Self.legacyAttributes { f.operations[k].attributes[a] = nil }
                functions[fi].steps[k].config = config
            }
            model.functions[fi] = f
        }
    }

    /// The layout a format 3–5 packed weight's name says (`asStored` for any other name).
    static func legacyWeightLayout(_ name: String) -> StepConfig.WeightLayout {
        guard let at = name.lastIndex(of: "@") else { return .asStored }
        let suffix = name[name.index(after: at)...]
        if suffix == "taps" { return .taps }
        let label = suffix.prefix { !$0.isNumber }
        guard !label.isEmpty, label.count < suffix.count, suffix.dropFirst(label.count).allSatisfy(\.isNumber) else { return .asStored }
        switch label {
        case "p": return .panels
        case "pt": return .transposedPanels
        case "pl": return .channelsLastRows
        case "pc": return .channelsFirstRows
        case "g": return .groupPanels
        case "w": return .winograd
        case "r": return .rowTiles
        default: return .asStored
        }
    }
}
