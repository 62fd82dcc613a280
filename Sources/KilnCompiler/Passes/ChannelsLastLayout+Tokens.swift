import KilnFormat

/// Token sequences read as images and back (a vision transformer's convolutional feed-forward:
/// `transpose(x, [0, 2, 1])` to `[B, C, L]`, `reshape` to `[B, C, H, W]`, a convolution, then
/// `reshape` to `[B, C, H·W]` and `transpose` back). Tokens `[B, H·W, C]` already are the
/// channels-last image `[B, H, W, C]`: the image's twin is a view of the tokens, and the tokens
/// after the convolution a view of its twin, so both transposes go.
extension ChannelsLastLayout.Walk {
    /// `reshape(transpose(x, [0, 2, 1]), [B, C, H, W])` with x `[B, H·W, C]`: the result's twin is
    /// `reshape(x, [B, H, W, C])`.
    mutating func tokensAsImage(_ op: Operation) -> Bool {
        let y = op.outputs[0].type
        guard op.inputs.count >= 1, let x = channelsOfTokens[op.inputs[0]], let tokens = types[x], tokens.rank == 3, y.rank == 4,
              case .size(let l) = tokens.shape[1], case .size(let c) = tokens.shape[2], tokens.shape[0] == y.shape[0],
              case .size(let h) = y.shape[2], case .size(let w) = y.shape[3], y.shape[1] == .size(c), h * w == l else { return false }
        emitLast(op, inputs: [x], attributes: ["shape": .ints([0, h, w, c])])
        return true
    }

    /// Notes `reshape(u, [B, C, H·W])` of a value with a twin (the way back to tokens); false: the
    /// reshape itself is left channels-first.
    mutating func noteMergedPlanes(_ op: Operation) -> Bool {
        let y = op.outputs[0].type
        guard op.inputs.count >= 1, twin[op.inputs[0]] != nil, let u = types[op.inputs[0]], u.rank == 4, y.rank == 3,
              u.shape[0] == y.shape[0], u.shape[1] == y.shape[1], case .size(let h) = u.shape[2], case .size(let w) = u.shape[3],
              y.shape[2] == .size(h * w) else { return false }
        mergedPlanes[op.outputs[0].name] = op.inputs[0]
        return false
    }

    /// `transpose(reshape(u, [B, C, H·W]), [0, 2, 1])` of a value u with a twin t: the tokens are
    /// `reshape(t, [B, H·W, C])`, a view (the channels-first reshape is left without readers).
    mutating func imageAsTokens(_ op: Operation) -> Bool {
        guard (try? op.attributes.ints("perm")) == [0, 2, 1], let u = mergedPlanes[op.inputs[0]], let t = twin[u],
              let type = types[op.inputs[0]], case .size(let l) = type.shape[2], case .size(let c) = type.shape[1] else { return false }
        let name = fresh("\(op.name).tokens")
        names.insert(name)
        out.append(Operation(opType: "reshape", name: name, inputs: [t], outputs: op.outputs, attributes: ["shape": .ints([0, l, c])],
                             source: op.source))
        for o in op.outputs { present.insert(o.name) }
        return true
    }
}
