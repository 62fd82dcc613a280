import KilnFormat

/// The example models committed under `examples/`.
enum Examples {
    /// An MLP: 64 features → 128 → 64 → 10 classes, ReLU between, softmax at the end.
    /// `fc1` and `fc2` hold 8192 weights each (above coremltools' default 2048
    /// compression threshold), `fc3` holds 640 (below it).
    static func tinyClassifier() throws -> PortableModel {
        var rng = SeededRandom(seed: 1)
        var b = ModelBuilder(name: "TinyClassifier")
        b.metadata.description = "A three-layer MLP that sorts 64 features into 10 classes."
        b.metadata.author = "Kiln examples"
        b.metadata.license = "Apache-2.0"
        b.metadata.version = "1.0"
        b.metadata.user = ["task": "classification", "classes": "10"]
        let sizes = [(64, 128), (128, 64), (64, 10)]
        var layers: [(Weight, Weight)] = []
        for (i, (fanIn, fanOut)) in sizes.enumerated() {
            let w = try b.addWeight("fc\(i + 1).weight", shape: [fanOut, fanIn], values: rng.weights(fanOut * fanIn, fanIn: fanIn))
            let bias = try b.addWeight("fc\(i + 1).bias", shape: [fanOut], values: rng.weights(fanOut, fanIn: fanIn))
            layers.append((w, bias))
        }
        var f = b.function("main")
        var h = f.input("features", TensorType(.float32, ["batch", 64]))
        for (i, (w, bias)) in layers.enumerated() {
            h = try f.apply1("linear", [h, f.use(w), f.use(bias)], name: "fc\(i + 1)")
            if i < layers.count - 1 { h = try f.apply1("relu", [h], name: "relu\(i + 1)") }
        }
        let p = try f.apply1("softmax", [h], ["axis": .int(-1)], name: "softmax")
        f.output("probabilities", p)
        try b.add(f)
        return try b.build()
    }

    /// One transformer encoder block over a dynamic sequence length `seq`, with two
    /// functions sharing the token embedding: `embed` (tokens → embeddings) and
    /// `encode` (tokens → contextual hidden states).
    static func tinyEncoder() throws -> PortableModel {
        let (vocab, d, heads, ff) = (256, 64, 2, 128)
        let dh = d / heads
        var rng = SeededRandom(seed: 2)
        var b = ModelBuilder(name: "TinyEncoder")
        b.metadata.description = "One transformer encoder block (2 heads, width 64) over a token sequence of any length."
        b.metadata.author = "Kiln examples"
        b.metadata.license = "Apache-2.0"
        b.metadata.version = "1.0"
        b.metadata.user = ["vocabulary": "\(vocab)", "sequence": "dynamic"]
        let embedding = try b.addWeight("embedding", shape: [vocab, d], values: rng.weights(vocab * d, fanIn: d))
        func linear(_ name: String, _ fanIn: Int, _ fanOut: Int) throws -> (Weight, Weight) {
            (try b.addWeight("\(name).weight", shape: [fanOut, fanIn], values: rng.weights(fanOut * fanIn, fanIn: fanIn)),
             try b.addWeight("\(name).bias", shape: [fanOut], values: rng.weights(fanOut, fanIn: fanIn)))
        }
        func norm(_ name: String) throws -> (Weight, Weight) {
            (try b.addWeight("\(name).scale", shape: [d], values: (0 ..< d).map { _ in 1 + rng.uniform(0.1) }),
             try b.addWeight("\(name).bias", shape: [d], values: (0 ..< d).map { _ in rng.uniform(0.1) }))
        }
        let ln1 = try norm("ln1")
        let (q, k, v, o) = (try linear("attention.query", d, d), try linear("attention.key", d, d),
                            try linear("attention.value", d, d), try linear("attention.output", d, d))
        let scale = try b.addWeight("attention.scale", shape: [], values: [1 / Float(dh).squareRoot()])
        let ln2 = try norm("ln2")
        let (up, down) = (try linear("mlp.up", d, ff), try linear("mlp.down", ff, d))

        let tokenType = TensorType(.int64, ["batch", "seq"])
        var embed = b.function("embed")
        let tokens0 = embed.input("tokens", tokenType)
        embed.output("embeddings", try embed.apply1("gather", [embed.use(embedding), tokens0], ["axis": .int(0)], name: "token_embedding"))
        try b.add(embed)

        var f = b.function("encode")
        let tokens = f.input("tokens", tokenType)
        let x = try f.apply1("gather", [f.use(embedding), tokens], ["axis": .int(0)], name: "token_embedding")
        let n1 = try f.apply1("layer_norm", [x, f.use(ln1.0), f.use(ln1.1)], ["epsilon": .float(1e-5)], name: "ln1")
        func project(_ p: (Weight, Weight), _ name: String, perm: [Int]) throws -> ValueRef {
            let y = try f.apply1("linear", [n1, f.use(p.0), f.use(p.1)], name: name)
            let split = try f.apply1("reshape", [y], ["shape": .ints([0, 0, heads, dh])], name: "\(name).heads")
            return try f.apply1("transpose", [split], ["perm": .ints(perm)], name: "\(name).transpose")
        }
        let qh = try project(q, "attention.query", perm: [0, 2, 1, 3])
        let kh = try project(k, "attention.key", perm: [0, 2, 3, 1])
        let vh = try project(v, "attention.value", perm: [0, 2, 1, 3])
        let scores = try f.apply1("matmul", [qh, kh], name: "attention.scores")
        let scaled = try f.apply1("mul", [scores, f.use(scale)], name: "attention.scaled")
        let probs = try f.apply1("softmax", [scaled], ["axis": .int(-1)], name: "attention.softmax")
        let ctx = try f.apply1("matmul", [probs, vh], name: "attention.context")
        let merged = try f.apply1("transpose", [ctx], ["perm": .ints([0, 2, 1, 3])], name: "attention.merge")
        let flat = try f.apply1("reshape", [merged], ["shape": .ints([0, 0, d])], name: "attention.flatten")
        let attn = try f.apply1("linear", [flat, f.use(o.0), f.use(o.1)], name: "attention.output")
        let r1 = try f.apply1("add", [x, attn], name: "residual1")
        let n2 = try f.apply1("layer_norm", [r1, f.use(ln2.0), f.use(ln2.1)], ["epsilon": .float(1e-5)], name: "ln2")
        let h = try f.apply1("linear", [n2, f.use(up.0), f.use(up.1)], name: "mlp.up")
        let g = try f.apply1("gelu", [h], name: "mlp.gelu")
        let m = try f.apply1("linear", [g, f.use(down.0), f.use(down.1)], name: "mlp.down")
        f.output("hidden", try f.apply1("add", [r1, m], name: "residual2"))
        try b.add(f)
        return try b.build()
    }
}
