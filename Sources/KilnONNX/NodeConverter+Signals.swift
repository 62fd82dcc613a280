import KilnFormat

/// Signal processing and text features: windows, mel filters, Fourier transforms and n-gram
/// counts.
extension NodeConverter {
    /// The signal family's handlers.
    static let signalHandlers: [String: Handler] = [
        "HannWindow": window, "HammingWindow": window, "BlackmanWindow": window, "MelWeightMatrix": melWeightMatrix,
        "DFT": dft, "STFT": stft, "TfIdfVectorizer": tfIdfVectorizer,
    ]

    /// HannWindow, HammingWindow and BlackmanWindow: `window` of that kind.
    /// - Parameter node: A window node.
    /// - Throws: `ConvertError` for an output_datatype Kiln does not support.
    func window(_ node: ONNXNode) throws {
        let op = node.opType
        let kind = op == "HannWindow" ? "hann" : op == "HammingWindow" ? "hamming" : "blackman"
        var attrs: [String: AttributeValue] = ["kind": .string(kind), "periodic": .int(int(node, "periodic", 1))]
        attrs["dtype"] = .dtype(try outputDType(node, "output_datatype"))
        try emit(node, "window", [input(node, 0)], attrs)
    }

    /// MelWeightMatrix: `mel_weight_matrix`, output_datatype as its dtype.
    /// - Parameter node: A `MelWeightMatrix` node.
    /// - Throws: `ConvertError` for an output_datatype Kiln does not support.
    func melWeightMatrix(_ node: ONNXNode) throws {
        try emit(node, "mel_weight_matrix", node.inputs, ["dtype": .dtype(try outputDType(node, "output_datatype"))])
    }

    /// DFT: `dft`, a known length and axis as attributes. Opsets 17–19 give the axis as an
    /// attribute (default 1), opset 20 as an input (default −2).
    /// - Parameter node: A `DFT` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func dft(_ node: ONNXNode) throws {
        var attrs = try attributes(node, only: ["inverse", "onesided"])
        var inputs = [input(node, 0), "", ""]
        if c.opset < 20 || node.attributes["axis"] != nil {
            attrs["axis"] = .int(int(node, "axis", 1))
        } else if let a = try staticInts(node, 2), a.count == 1 {
            attrs["axis"] = .int(a[0])
        } else if !input(node, 2).isEmpty {
            inputs[2] = input(node, 2)
        } else {
            attrs["axis"] = .int(-2)
        }
        if let l = try staticInts(node, 1), l.count == 1 { attrs["dft_length"] = .int(l[0]) } else { inputs[1] = input(node, 1) }
        try emit(node, "dft", inputs, attrs)
    }

    /// STFT: `stft`.
    /// - Parameter node: An `STFT` node.
    /// - Throws: `ConvertError` when the op refuses the node.
    func stft(_ node: ONNXNode) throws {
        try emit(node, "stft", node.inputs, try attributes(node, only: ["onesided"]))
    }

    /// TfIdfVectorizer: `tfidf_vectorizer` over integer pools; string pools are refused (Kiln has
    /// no string tensors).
    /// - Parameter node: A `TfIdfVectorizer` node.
    /// - Throws: `ConvertError` for string pools, or when the op refuses the node.
    func tfIdfVectorizer(_ node: ONNXNode) throws {
        guard node.attributes["pool_strings"] == nil else {
            throw c.fail("node '\(node.name)' (TfIdfVectorizer): string pools are not supported (Kiln has no string tensors)")
        }
        try emit(node, "tfidf_vectorizer", node.inputs, try attributes(node, only: ["max_gram_length", "max_skip_count", "min_gram_length", "mode",
                                                                                    "ngram_counts", "ngram_indexes", "pool_int64s", "weights"]))
    }
}
