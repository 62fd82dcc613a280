import KilnFormat

/// Matrix products: matmul, gemm, linear, einsum.
enum LinearAlgebra {
    /// `c[M×N] (+)= a[M×K] · b[K×N]`, row-major with leading dimensions; `bT` reads b as N×K.
    static func multiply(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ c: UnsafeMutablePointer<Float>,
                         m: Int, n: Int, k: Int, aRow: Int, aCol: Int, bRow: Int, bCol: Int) {
        // c[i, j] = Σ_p a[i*aRow + p*aCol] * b[p*bRow + j*bCol]
        if bCol == 1 {
            for i in 0 ..< m {
                let ci = c + i * n
                for j in 0 ..< n { ci[j] = 0 }
                for p in 0 ..< k {
                    let av = a[i * aRow + p * aCol]
                    if av == 0 { continue }
                    let bp = b + p * bRow
                    for j in 0 ..< n { ci[j] += av * bp[j] }
                }
            }
        } else {
            for i in 0 ..< m {
                for j in 0 ..< n {
                    var s: Float = 0
                    let bj = b + j * bCol
                    if aCol == 1 && bRow == 1 {
                        let ai = a + i * aRow
                        for p in 0 ..< k { s += ai[p] * bj[p] }
                    } else {
                        for p in 0 ..< k { s += a[i * aRow + p * aCol] * bj[p * bRow] }
                    }
                    c[i * n + j] = s
                }
            }
        }
    }

    /// NumPy `matmul` on float32, with 1-D operands promoted and batch dims broadcast.
    static func matmul(_ a: NDArray, _ b: NDArray) throws -> NDArray {
        guard a.scalarType == .float32, b.scalarType == .float32 else {
            if a.scalarType == b.scalarType, [.int64, .int32].contains(a.scalarType) {
                let r = try matmul(try Elementwise.cast(a, to: .float32), try Elementwise.cast(b, to: .float32))
                return try Elementwise.cast(r, to: a.scalarType)
            }
            throw OpError("matmul needs float32 operands, got \(a.scalarType.rawValue) and \(b.scalarType.rawValue)")
        }
        guard a.rank >= 1, b.rank >= 1 else { throw OpError("matmul operands need rank ≥ 1") }
        let aShape = a.rank == 1 ? [1] + a.shape : a.shape
        let bShape = b.rank == 1 ? b.shape + [1] : b.shape
        let (m, k) = (aShape[aShape.count - 2], aShape[aShape.count - 1])
        let (k2, n) = (bShape[bShape.count - 2], bShape[bShape.count - 1])
        guard k == k2 else { throw OpError("matmul inner dims differ: \(a.shape) × \(b.shape)") }
        let batch = try broadcastShapes([Array(aShape.dropLast(2)), Array(bShape.dropLast(2))])
        var outShape = batch
        if a.rank > 1 { outShape.append(m) }
        if b.rank > 1 { outShape.append(n) }
        let pa = try a.f32.baseAddress!, pb = try b.f32.baseAddress!
        let aBatch = broadcastStrides(Array(aShape.dropLast(2)), to: batch)
        let bBatch = broadcastStrides(Array(bShape.dropLast(2)), to: batch)
        return NDArray.make(outShape, Float.self) { out in
            guard let po = out.baseAddress else { return }
            if batch.isEmpty {
                multiply(pa, pb, po, m: m, n: n, k: k, aRow: k, aCol: 1, bRow: n, bCol: 1)
                return
            }
            forEachIndex(batch, [aBatch, bBatch]) { i, off in
                multiply(pa + off[0] * m * k, pb + off[1] * k * n, po + i * m * n, m: m, n: n, k: k, aRow: k, aCol: 1, bRow: n, bCol: 1)
            }
        }
    }

    /// `alpha · op(a) · op(b) + beta · c`.
    static func gemm(_ a: NDArray, _ b: NDArray, _ c: NDArray?, alpha: Float, beta: Float, transA: Bool, transB: Bool) throws -> NDArray {
        guard a.rank == 2, b.rank == 2 else { throw OpError("gemm needs rank-2 operands") }
        let (m, k) = transA ? (a.shape[1], a.shape[0]) : (a.shape[0], a.shape[1])
        let (k2, n) = transB ? (b.shape[1], b.shape[0]) : (b.shape[0], b.shape[1])
        guard k == k2 else { throw OpError("gemm inner dims differ: \(k) vs \(k2)") }
        let pa = try a.f32, pb = try b.f32
        var out = NDArray.make([m, n], Float.self) { o in
            guard let po = o.baseAddress else { return }
            multiply(pa.baseAddress!, pb.baseAddress!, po, m: m, n: n, k: k,
                     aRow: transA ? 1 : a.shape[1], aCol: transA ? a.shape[1] : 1,
                     bRow: transB ? 1 : b.shape[1], bCol: transB ? b.shape[1] : 1)
            if alpha != 1 { for i in 0 ..< o.count { o[i] *= alpha } }
        }
        if let c, beta != 0 {
            let scaled = beta == 1 ? c : try Elementwise.mapFloat(c, { $0 * beta })
            out = try Elementwise.arithmetic("add", out, scaled)
            guard out.shape == [m, n] else { throw OpError("gemm c of shape \(c.shape) does not broadcast to [\(m), \(n)]") }
        }
        return out
    }

    /// `x · weightᵀ + bias` over the last dim of `x`.
    static func linear(_ x: NDArray, _ w: NDArray, _ bias: NDArray?) throws -> NDArray {
        guard w.rank == 2, x.rank >= 1, x.shape.last == w.shape[1] else {
            throw OpError("linear: x \(x.shape) does not fit weight \(w.shape)")
        }
        let (n, k) = (w.shape[0], w.shape[1])
        if let bias, bias.shape != [n] { throw OpError("linear: bias \(bias.shape) does not fit \(n) outputs") }
        let m = x.elementCount / max(k, 1)
        let pb = try bias?.f32, px = try x.f32, pw = try w.f32
        return NDArray.make(Array(x.shape.dropLast()) + [n], Float.self) { o in
            guard let po = o.baseAddress, m > 0 else { return }
            multiply(px.baseAddress!, pw.baseAddress!, po, m: m, n: n, k: k, aRow: k, aCol: 1, bRow: 1, bCol: k)
            if let pb {
                for i in 0 ..< m { for j in 0 ..< n { po[i * n + j] += pb[j] } }
            }
        }
    }

    /// Einsum by explicit summation over all labels (clear, and fast enough for the
    /// common two-operand forms at the sizes models use).
    static func einsum(_ equation: String, _ inputs: [NDArray]) throws -> NDArray {
        let eq = try Einsum(equation, ranks: inputs.map(\.rank))
        var size: [Character: Int] = [:]
        for (x, labels) in zip(inputs, eq.inputs) {
            for (d, l) in zip(x.shape, labels) {
                if let s = size[l], s != d, s != 1, d != 1 { throw OpError("einsum label '\(l)' is \(s) and \(d)") }
                size[l] = max(size[l] ?? 1, d)
            }
        }
        let all = eq.output + size.keys.filter { !eq.output.contains($0) }.sorted()
        let extents = all.map { size[$0]! }
        let outShape = eq.output.map { size[$0]! }
        let ops = try inputs.map { x -> NDArray in x.scalarType == .float32 ? x : try Elementwise.cast(x, to: .float32) }
        // Each operand's stride for each label of the full iteration space.
        let strides: [[Int]] = zip(ops, eq.inputs).map { x, labels in
            let own = stridesOf(x.shape)
            return all.map { l in
                labels.indices.filter { labels[$0] == l }.reduce(0) { $0 + (x.shape[$1] == 1 ? 0 : own[$1]) }
            }
        }
        let outStrides = all.map { l in eq.output.firstIndex(of: l).map { stridesOf(outShape)[$0] } ?? 0 }
        defer { withExtendedLifetime(ops) {} }
        let ptrs = try ops.map { try $0.f32 }
        return NDArray.make(outShape, Float.self) { o in
            forEachIndex(extents, strides + [outStrides]) { _, off in
                var p: Float = 1
                for (k, ptr) in ptrs.enumerated() { p *= ptr[off[k]] }
                o[off[ops.count]] += p
            }
        }
    }
}
