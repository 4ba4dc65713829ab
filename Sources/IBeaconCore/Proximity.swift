#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Distance from RSSI by the log-distance path-loss model:
/// RSSI(d) = measuredPower − 10·n·log10(d / 1 m), so d = 10^((measuredPower − RSSI) / (10·n)).
///
/// `n` is the path-loss exponent: 2 in free space (the default), roughly 1.6–1.8 along
/// corridors and 2.5–4 through shelving and people. Indoors the answer is a rough guide —
/// σ = 4 dB of RSSI scatter alone is a factor 1.6 in distance at n = 2 — which is why
/// `Proximity` zones are what apps should show.
public func estimatedDistance(rssi: Double, measuredPower: Double, pathLossExponent n: Double = 2.0) -> Double? {
    guard rssi.isFinite, measuredPower.isFinite, n > 0 else { return nil }
    return pow(10, (measuredPower - rssi) / (10 * n))
}

/// Coarse distance zones, as Core Location's `CLProximity` reports them.
///
/// Thresholds (Apple does not publish its own; these follow the commonly documented meaning of
/// the zones): immediate < 0.5 m, near 0.5…3 m, far > 3 m; unknown when there is no RSSI
/// (none received, or the controller reported 127 "not available").
public enum Proximity: String, Sendable, CaseIterable, CustomStringConvertible {
    case immediate
    case near
    case far
    case unknown

    public static let immediateLimit = 0.5
    public static let nearLimit = 3.0

    public init(distance: Double?) {
        guard let d = distance, d.isFinite, d >= 0 else {
            self = .unknown
            return
        }
        self = d < Self.immediateLimit ? .immediate : d <= Self.nearLimit ? .near : .far
    }

    public init(rssi: Double?, measuredPower: Double, pathLossExponent: Double = 2.0) {
        self.init(
            distance: rssi.flatMap {
                estimatedDistance(rssi: $0, measuredPower: measuredPower, pathLossExponent: pathLossExponent)
            })
    }

    public var description: String { rawValue }
}

/// Smooths a stream of RSSI readings before turning them into distance.
///
/// `.median(window:)` (default, 10 readings = 1 s at 100 ms) drops deep fades outright, which an
/// average would follow; `.exponential(alpha:)` reacts faster with less memory.
public struct RSSISmoother: Sendable {
    public enum Mode: Sendable, Equatable {
        /// Median of the last `window` readings.
        case median(window: Int)
        /// s ← s + alpha·(x − s), 0 < alpha ≤ 1.
        case exponential(alpha: Double)
    }

    public let mode: Mode
    /// The last `window` readings in arrival order, a ring once full: `oldest` is the next to go.
    private var recent: [Double] = []
    private var oldest = 0
    /// The same readings in ascending order, kept sorted as they come and go (O(window) per
    /// reading, no allocation once full): the median is read off it instead of sorting a copy
    /// per reading, which was a third of a live scan's work per report.
    private var ascending: [Double] = []
    private var average: Double?

    public init(_ mode: Mode = .median(window: 10)) {
        switch mode {
        case .median(let w): self.mode = .median(window: max(1, w))
        case .exponential(let a): self.mode = .exponential(alpha: a.isFinite ? min(1, max(0.001, a)) : 1)
        }
    }

    /// The smoothed value so far, nil before the first reading.
    public var value: Double? {
        switch mode {
        case .median:
            return ascending.isEmpty ? nil : median(ascending)
        case .exponential:
            return average
        }
    }

    /// Adds a reading (nil, e.g. RSSI 127 "not available", is ignored) and returns the
    /// smoothed value.
    @discardableResult
    public mutating func add(_ rssi: Double?) -> Double? {
        guard let rssi, rssi.isFinite else { return value }
        switch mode {
        case .median(let window):
            if recent.count < window {
                recent.append(rssi)
            } else {
                let gone = recent[oldest]
                recent[oldest] = rssi
                oldest = (oldest + 1) % window
                if let i = ascending.firstIndex(of: gone) { ascending.remove(at: i) }
            }
            // After every reading not greater than it: equal readings keep their order.
            var i = ascending.endIndex
            while i > 0 && ascending[i - 1] > rssi { i -= 1 }
            ascending.insert(rssi, at: i)
        case .exponential(let alpha):
            average = average.map { $0 + alpha * (rssi - $0) } ?? rssi
        }
        return value
    }

    public mutating func reset() {
        recent.removeAll()
        ascending.removeAll()
        oldest = 0
        average = nil
    }
}

/// The median of sorted, non-empty values (the mean of the middle two for an even count).
func median(_ sorted: [Double]) -> Double {
    let n = sorted.count
    return n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
}
