import CKilnSpecs

/// The choke point between ``CompiledPlan`` and the protobuf-c code of `specs/kiln_compiled.proto`.
enum CompiledPlanCodec {
    static func encode(_ contents: ManifestContents, _ plan: CompiledPlan) -> [UInt8] {
        let arena = CArena()
        var p = Kiln__Compiled__Plan()
        kiln__compiled__plan__init(&p)
        p.model = arena.make(ManifestCodec.buildModel(contents, arena))
        p.arch = arena.string(plan.arch)
        p.n_functions = plan.functions.count
        p.functions = arena.messages(plan.functions.map { f -> UnsafeMutablePointer<Kiln__Compiled__FunctionPlan> in
            var m = Kiln__Compiled__FunctionPlan()
            kiln__compiled__function_plan__init(&m)
            m.name = arena.string(f.name)
            m.slot_count = UInt32(f.slotCount)
            m.n_input_slots = f.inputSlots.count
            m.input_slots = arena.array(f.inputSlots.map { Int32($0) })
            m.n_output_slots = f.outputSlots.count
            m.output_slots = arena.array(f.outputSlots.map { Int32($0) })
            m.n_weights = f.weights.count
            m.weights = arena.messages(f.weights.map { w in
                var s = Kiln__Compiled__WeightSlot()
                kiln__compiled__weight_slot__init(&s)
                s.slot = Int32(w.slot)
                s.weight = UInt32(w.weight)
                return arena.make(s)
            })
            m.n_steps = f.steps.count
            m.steps = arena.messages(f.steps.map { step in
                var s = Kiln__Compiled__Step()
                kiln__compiled__step__init(&s)
                s.kernel = arena.string(step.kernel)
                s.n_inputs = step.inputs.count
                s.inputs = arena.array(step.inputs.map { Int32($0) })
                s.n_outputs = step.outputs.count
                s.outputs = arena.array(step.outputs.map { Int32($0) })
                if !step.config.isPortable { s.config = arena.make(encode(step.config, arena)) }
                return arena.make(s)
            })
            m.n_lifetimes = f.lifetimes.count
            m.lifetimes = arena.messages(f.lifetimes.map { l in
                var s = Kiln__Compiled__Lifetime()
                kiln__compiled__lifetime__init(&s)
                s.slot = Int32(l.slot)
                s.first_step = UInt32(l.firstStep)
                s.last_step = UInt32(l.lastStep)
                return arena.make(s)
            })
            return arena.make(m)
        })
        if let source = plan.source { p.source = arena.make(encode(source, arena)) }
        var out = [UInt8](repeating: 0, count: kiln__compiled__plan__get_packed_size(&p))
        let written = out.withUnsafeMutableBufferPointer { kiln__compiled__plan__pack(&p, $0.baseAddress) }
        precondition(written == out.count, "protobuf-c packed \(written) of \(out.count) bytes")
        return out
    }

    static func encode(_ s: SourceSummary, _ arena: CArena) -> Kiln__Compiled__SourceSummary {
        var m = Kiln__Compiled__SourceSummary()
        kiln__compiled__source_summary__init(&m)
        m.format_version = UInt32(s.formatVersion)
        m.parameter_count = UInt64(s.parameterCount)
        m.compute_precision = arena.string(s.computePrecision)
        m.n_storage = s.storage.count
        m.storage = arena.messages(s.storage.map { x in
            var r = Kiln__Compiled__StorageSummary()
            kiln__compiled__storage_summary__init(&r)
            r.storage = arena.string(x.storage)
            r.weights = UInt64(x.weights)
            r.parameters = UInt64(x.parameters)
            r.bytes = UInt64(x.bytes)
            return arena.make(r)
        })
        m.n_operations = s.operations.count
        m.operations = arena.messages(s.operations.map { x in
            var r = Kiln__Compiled__OpCount()
            kiln__compiled__op_count__init(&r)
            r.op_type = arena.string(x.opType)
            r.count = UInt64(x.count)
            return arena.make(r)
        })
        m.n_functions = s.functions.count
        m.functions = arena.messages(s.functions.map { x in
            var r = Kiln__Compiled__FunctionSummary()
            kiln__compiled__function_summary__init(&r)
            r.name = arena.string(x.name)
            r.operation_count = UInt64(x.operationCount)
            return arena.make(r)
        })
        m.n_weights = s.weights.count
        m.weights = arena.messages(s.weights.map { x in
            var r = Kiln__Compiled__WeightSummary()
            kiln__compiled__weight_summary__init(&r)
            r.name = arena.string(x.name)
            r.dtype = arena.string(x.dtype)
            r.n_shape = x.shape.count
            r.shape = arena.array(x.shape.map { UInt64($0) })
            r.encoding = arena.string(x.encoding)
            r.storage = arena.string(x.storage)
            r.parameters = UInt64(x.parameters)
            r.bytes = UInt64(x.bytes)
            return arena.make(r)
        })
        return m
    }

    static func encode(_ c: StepConfig, _ arena: CArena) -> Kiln__Compiled__StepConfig {
        var m = Kiln__Compiled__StepConfig()
        kiln__compiled__step_config__init(&m)
        m.layout = Kiln__Compiled__TensorLayout(rawValue: UInt32(c.layout.rawValue))
        m.weight_layout = Kiln__Compiled__WeightLayout(rawValue: UInt32(c.weightLayout.rawValue))
        if let a = c.activation {
            var r = Kiln__Compiled__FusedActivation()
            kiln__compiled__fused_activation__init(&r)
            r.function = arena.string(a.function)
            r.alpha = a.alpha
            r.beta = a.beta
            m.activation = arena.make(r)
        }
        m.n_window = c.window.count
        m.window = arena.array(c.window.map { UInt32(clamping: $0) })
        return m
    }

    static func decode(_ m: Kiln__Compiled__StepConfig, _ field: String) throws -> StepConfig {
        guard let layout = StepConfig.Layout(rawValue: Int(m.layout.rawValue)) else {
            throw PackageError(field: "\(field).layout", reason: "unknown tensor layout \(m.layout.rawValue)")
        }
        guard let weightLayout = StepConfig.WeightLayout(rawValue: Int(m.weight_layout.rawValue)) else {
            throw PackageError(field: "\(field).weight_layout", reason: "unknown weight layout \(m.weight_layout.rawValue)")
        }
        let activation = try m.activation.map { a in
            StepConfig.Activation(function: try ManifestCodec.string(a.pointee.function, "\(field).activation.function"),
                                  alpha: a.pointee.alpha, beta: a.pointee.beta)
        }
        guard m.n_window <= 3 else { throw PackageError(field: "\(field).window", reason: "\(m.n_window) dims; a window has at most 3") }
        let window = (0 ..< m.n_window).map { Int(m.window[$0]) }
        return StepConfig(layout: layout, activation: activation, weightLayout: weightLayout, window: window)
    }

    static func decode(_ m: Kiln__Compiled__SourceSummary) throws -> SourceSummary {
        func int(_ v: UInt64, _ field: String) throws -> Int {
            guard v <= UInt64(Int.max) else { throw PackageError(field: field, reason: "\(v) is out of range") }
            return Int(v)
        }
        return SourceSummary(
            formatVersion: Int(m.format_version),
            parameterCount: try int(m.parameter_count, "plan.source.parameter_count"),
            computePrecision: try ManifestCodec.string(m.compute_precision, "plan.source.compute_precision"),
            storage: try ManifestCodec.each(m.n_storage, m.storage, "plan.source.storage") { r, f in
                SourceSummary.Storage(storage: try ManifestCodec.string(r.storage, "\(f).storage"), weights: try int(r.weights, f),
                                      parameters: try int(r.parameters, f), bytes: try int(r.bytes, f))
            },
            operations: try ManifestCodec.each(m.n_operations, m.operations, "plan.source.operations") { r, f in
                (opType: try ManifestCodec.string(r.op_type, "\(f).op_type"), count: try int(r.count, f))
            },
            functions: try ManifestCodec.each(m.n_functions, m.functions, "plan.source.functions") { r, f in
                (name: try ManifestCodec.string(r.name, "\(f).name"), operationCount: try int(r.operation_count, f))
            },
            weights: try ManifestCodec.each(m.n_weights, m.weights, "plan.source.weights") { r, f in
                SourceSummary.Weight(name: try ManifestCodec.string(r.name, "\(f).name"), dtype: try ManifestCodec.string(r.dtype, "\(f).dtype"),
                                     shape: try (0 ..< r.n_shape).map { try int(r.shape[$0], "\(f).shape") },
                                     encoding: try ManifestCodec.string(r.encoding, "\(f).encoding"),
                                     storage: try ManifestCodec.string(r.storage, "\(f).storage"),
                                     parameters: try int(r.parameters, f), bytes: try int(r.bytes, f))
            })
    }

    static func decode(_ bytes: UnsafeRawBufferPointer) throws -> (ManifestContents, [CompiledPlan.FunctionPlan], String, SourceSummary?) {
        let base = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
        guard !ProtobufNesting.tooDeep(bytes, root: .plan, limit: ProtobufNesting.kilnLimit, child: ProtobufNesting.kilnChild) else {
            throw PackageError(field: "plan", reason: "nests subgraphs deeper than 16 levels")
        }
        guard let p = kiln__compiled__plan__unpack(nil, bytes.count, base) else {
            throw PackageError(field: "plan", reason: "protobuf is malformed (truncated or corrupt)")
        }
        defer { kiln__compiled__plan__free_unpacked(p, nil) }
        guard let model = p.pointee.model else { throw PackageError(field: "plan.model", reason: "missing") }
        let contents = try ManifestCodec.decodeModel(model.pointee)
        func ints(_ n: Int, _ q: UnsafeMutablePointer<Int32>?) -> [Int] {
            guard n > 0, let q else { return [] }
            return (0 ..< n).map { Int(q[$0]) }
        }
        let functions = try ManifestCodec.each(p.pointee.n_functions, p.pointee.functions, "plan.functions") { f, field in
            CompiledPlan.FunctionPlan(
                name: try ManifestCodec.string(f.name, "\(field).name"),
                slotCount: Int(f.slot_count),
                inputSlots: ints(f.n_input_slots, f.input_slots),
                outputSlots: ints(f.n_output_slots, f.output_slots),
                weights: try ManifestCodec.each(f.n_weights, f.weights, "\(field).weights") { w, _ in
                    (slot: Int(w.slot), weight: Int(w.weight))
                },
                steps: try ManifestCodec.each(f.n_steps, f.steps, "\(field).steps") { s, sf in
                    CompiledPlan.Step(kernel: try ManifestCodec.string(s.kernel, "\(sf).kernel"),
                                      inputs: ints(s.n_inputs, s.inputs), outputs: ints(s.n_outputs, s.outputs),
                                      config: try s.config.map { try decode($0.pointee, "\(sf).config") } ?? .portable)
                },
                lifetimes: try ManifestCodec.each(f.n_lifetimes, f.lifetimes, "\(field).lifetimes") { l, _ in
                    CompiledPlan.Lifetime(slot: Int(l.slot), firstStep: Int(l.first_step), lastStep: Int(l.last_step))
                })
        }
        let source = try p.pointee.source.map { try decode($0.pointee) }
        return (contents, functions, try ManifestCodec.string(p.pointee.arch, "plan.arch"), source)
    }
}
