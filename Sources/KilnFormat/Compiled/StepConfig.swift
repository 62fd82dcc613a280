/// What the compiler decided for one step beyond the portable op it runs: the tensor layout,
/// the activation fused into its epilogue, and how its weight was packed
/// (`StepConfig` of specs/kiln_compiled.proto, format 6). None of it is an attribute of the op:
/// a portable op has one layout, channels-first, and no epilogue of its own.
public struct StepConfig: Sendable, Hashable {
    /// Where a convolution or pool keeps channels.
    public enum Layout: Int, Sendable, CaseIterable {
        /// Reads and writes `[N, C, …spatial]`, the portable op's layout.
        case channelsFirst = 0
        /// Reads and writes `[N, …spatial, C]`.
        case channelsLast = 1
        /// Reads `[N, C, …spatial]` planes and writes `[N, …spatial, C]` (a network's first convolution).
        case planesToChannelsLast = 2

        /// Whether input 0 is channels-last.
        public var input: Bool { self == .channelsLast }
        /// Whether the output is channels-last.
        public var output: Bool { self != .channelsFirst }
    }

    /// How input 1, a weight, lies after packing (specs/compiled-format.md, Plan).
    public enum WeightLayout: Int, Sendable, CaseIterable {
        /// As the source package stores it.
        case asStored = 0
        /// B = W `[K, N]` (a matmul weight) in panels of the tile's NR columns.
        case panels = 1
        /// B = Wᵀ of a linear weight `[N, K]`, in panels.
        case transposedPanels = 2
        /// A convolution's im2col rows in (ky, kx, c) order (channels-last input), in panels.
        case channelsLastRows = 3
        /// A convolution's im2col rows in (c, ky, kx) order, in panels.
        case channelsFirstRows = 4
        /// Per group the channels-last B: blob `[groups, panels, K, NR]`.
        case groupPanels = 5
        /// Winograd F(2×2, 3×3) transforms: blob `[16, panels, C, NR]`.
        case winograd = 6
        /// Depthwise taps: blob `[kh, kw, C]`.
        case taps = 7
        /// A channels-first convolution's A operand in row tiles: blob `[groups, tiles, K, MR]`.
        case rowTiles = 8
        /// An 8-bit matmul weight `[K, N]` as int8 panels of 32 columns, four k per column entry:
        /// blob `[panels, ⌈K/4⌉, 128]` (uint8 weights less 128); input 3 becomes int32 `[2, N]`,
        /// each column's sum of packed values and its zero point less the same 128.
        case s8Panels = 9
    }

    /// An activation of the kernel library's unary list, applied in the epilogue.
    public struct Activation: Sendable, Hashable {
        /// The function's name (`kiln_unary.inc`), e.g. `relu`.
        public var function: String
        /// Its first parameter (leaky ReLU's slope, clip's low bound, …), 0 when it has none.
        public var alpha: Float
        /// Its second parameter, 0 when it has none.
        public var beta: Float

        /// Creates an activation.
        /// - Parameters:
        ///   - function: The function's name.
        ///   - alpha: First parameter.
        ///   - beta: Second parameter.
        public init(function: String, alpha: Float = 0, beta: Float = 0) {
            self.function = function
            self.alpha = alpha
            self.beta = beta
        }
    }

    /// The tensor layout.
    public var layout: Layout
    /// The fused activation, `nil` when none.
    public var activation: Activation?
    /// The packed weight's layout.
    public var weightLayout: WeightLayout
    /// The spatial window (`[kh, kw]`) of a convolution whose packed weight no longer shows it; empty otherwise.
    public var window: [Int]

    /// Creates a configuration (every field defaults to what a portable op means).
    /// - Parameters:
    ///   - layout: The tensor layout.
    ///   - activation: The fused activation.
    ///   - weightLayout: The packed weight's layout.
    ///   - window: The convolution window, when the weight no longer shows it.
    public init(layout: Layout = .channelsFirst, activation: Activation? = nil, weightLayout: WeightLayout = .asStored, window: [Int] = []) {
        self.layout = layout
        self.activation = activation
        self.weightLayout = weightLayout
        self.window = window
    }

    /// The configuration of a step that runs its op as the op set defines it.
    public static let portable = StepConfig()

    /// Whether every field has its default (the plan then stores no config for the step).
    public var isPortable: Bool { self == .portable }
}

extension StepConfig: CustomStringConvertible {
    /// The non-default fields, e.g. `channels_last, relu, weight channels_last_rows`; empty for a portable step.
    public var description: String {
        var parts: [String] = []
        switch layout {
        case .channelsFirst: break
        case .channelsLast: parts.append("channels_last")
        case .planesToChannelsLast: parts.append("planes_to_channels_last")
        }
        if let a = activation {
            parts.append(a.alpha == 0 && a.beta == 0 ? a.function : "\(a.function)(\(a.alpha), \(a.beta))")
        }
        if weightLayout != .asStored { parts.append("weight \(weightLayout.name)") }
        if !window.isEmpty { parts.append("window \(window.map(String.init).joined(separator: "x"))") }
        return parts.joined(separator: ", ")
    }
}

extension StepConfig.WeightLayout {
    /// The layout's name as `kiln inspect` prints it.
    public var name: String {
        switch self {
        case .asStored: "as_stored"
        case .panels: "panels"
        case .transposedPanels: "transposed_panels"
        case .channelsLastRows: "channels_last_rows"
        case .channelsFirstRows: "channels_first_rows"
        case .groupPanels: "group_panels"
        case .winograd: "winograd"
        case .taps: "taps"
        case .rowTiles: "row_tiles"
        case .s8Panels: "s8_panels"
        }
    }
}
