import IBeaconCore

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// What a receiver 1 m from a beacon reports, as a model for the calibration simulations
/// (`ibeacon-calsim`, the unit tests, and the end-to-end runs through the emulated radio, which
/// replay lists made here). Each model yields integer RSSI with the receive time in seconds.
public struct RSSIModel: Sendable, CustomStringConvertible {
    public enum Kind: Sendable {
        /// Gaussian around `level` with standard deviation `sigma`.
        case gaussian(sigma: Double)
        /// Log-normal shadowing (Gaussian in dB, an AR(1) in time with correlation time
        /// `correlation` seconds) plus Rayleigh fading, independent per packet.
        case shadowingRayleigh(sigma: Double, correlation: Double)
        /// Rician fading with factor K (power of the direct path over the scattered power).
        case rician(k: Double)
        /// Gaussian, and a fraction of packets `depth` dB (uniform in the range) weaker.
        case deepFades(sigma: Double, fraction: Double, depth: ClosedRange<Double>)
        /// Gaussian plus a fixed offset per advertising channel 37/38/39, cycled per packet.
        case channels(sigma: Double, offsets: [Double])
        /// A person walking by: Gaussian, `drop` dB weaker for `seconds` s starting at a
        /// uniform time in `window`.
        case personWalkingBy(sigma: Double, drop: Double, seconds: Double, window: ClosedRange<Double>)
    }

    public var name: String
    public var kind: Kind
    /// Median power, dBm (before fading), deliberately not a whole number.
    public var level: Double
    /// Reports per second (100 ms advertising: 10, plus advDelay 0–10 ms per event).
    public var interval: Double = 0.1

    public init(name: String, kind: Kind, level: Double = -59.3, interval: Double = 0.1) {
        self.name = name
        self.kind = kind
        self.level = level
        self.interval = interval
    }

    public var description: String { name }

    /// The models of issue 14, in the order of the BENCHMARKS table.
    public static let all: [RSSIModel] = [
        RSSIModel(name: "gauss-2", kind: .gaussian(sigma: 2)),
        RSSIModel(name: "gauss-4", kind: .gaussian(sigma: 4)),
        RSSIModel(name: "gauss-6", kind: .gaussian(sigma: 6)),
        RSSIModel(name: "shadow-3s+rayleigh", kind: .shadowingRayleigh(sigma: 2, correlation: 3), level: -56.8),
        RSSIModel(name: "rician-k3", kind: .rician(k: 3)),
        RSSIModel(name: "rician-k10", kind: .rician(k: 10)),
        RSSIModel(name: "fades-15%", kind: .deepFades(sigma: 4, fraction: 0.15, depth: 10...20)),
        RSSIModel(name: "fades-30%", kind: .deepFades(sigma: 4, fraction: 0.30, depth: 10...20)),
        RSSIModel(name: "channels", kind: .channels(sigma: 4, offsets: [-3, 0, 2])),
        RSSIModel(name: "quantised", kind: .gaussian(sigma: 0.6), level: -59.4),
        RSSIModel(
            name: "person-walking-by", kind: .personWalkingBy(sigma: 4, drop: 6, seconds: 3, window: 2...12)),
    ]

    public static func named(_ name: String) -> RSSIModel? { all.first { $0.name == name } }

    /// `duration` seconds of reports: times from scan start (first report within one interval),
    /// integer RSSI clamped to −127…20 dBm as HCI reports it.
    public func samples(duration: Double, seed: UInt64) -> [(time: Double, rssi: Int)] {
        var rng = SplitMix64(seed: seed &* 0x9E37_79B9 &+ 0x5EED)
        var t = interval * rng.unit()
        var out: [(time: Double, rssi: Int)] = []
        out.reserveCapacity(Int(duration / interval) + 1)
        var shadow: Double?
        var lastTime = t
        var channel = Int(rng.next() % 3)
        var personStart = 0.0
        if case .personWalkingBy(_, _, _, let window) = kind {
            personStart = window.lowerBound + (window.upperBound - window.lowerBound) * rng.unit()
        }
        while t < duration {
            var x = level
            switch kind {
            case .gaussian(let sigma):
                x += sigma * rng.gaussian()
            case .shadowingRayleigh(let sigma, let correlation):
                let rho = exp(-(t - lastTime) / correlation)
                let s =
                    shadow.map { rho * $0 + sigma * (1 - rho * rho).squareRoot() * rng.gaussian() }
                    ?? sigma * rng.gaussian()
                shadow = s
                // |h|² of a unit-power Rayleigh channel is exponential with mean 1.
                x += s + 10 * log10(-log(rng.unit()))
            case .rician(let k):
                let direct = (k / (k + 1)).squareRoot()
                let scatter = (0.5 / (k + 1)).squareRoot()
                let re = direct + scatter * rng.gaussian()
                let im = scatter * rng.gaussian()
                x += 10 * log10(max(1e-12, re * re + im * im))
            case .deepFades(let sigma, let fraction, let depth):
                x += sigma * rng.gaussian()
                if rng.unit() <= fraction {
                    x -= depth.lowerBound + (depth.upperBound - depth.lowerBound) * rng.unit()
                }
            case .channels(let sigma, let offsets):
                x += sigma * rng.gaussian() + offsets[channel % offsets.count]
                channel += 1
            case .personWalkingBy(let sigma, let drop, let seconds, _):
                x += sigma * rng.gaussian()
                if t >= personStart && t < personStart + seconds { x -= drop }
            }
            out.append((t, Int(max(-127, min(20, x.rounded())))))
            lastTime = t
            // advDelay: 0–10 ms added to every advertising event (Core 5.4 Vol 6 Part B 4.4.2.2.1).
            t += interval + 0.010 * rng.unit()
        }
        return out
    }

    /// Apple's procedure on `lists` independent 10-minute lists, averaged: the truth the
    /// simulations compare with, and the standard error of that average.
    public func truth(lists: Int = 20, seed: UInt64 = 1_000_000) -> (value: Double, standardError: Double) {
        var values: [Double] = []
        for i in 0..<lists {
            if let v = appleMeasuredPower(samples(duration: 600, seed: seed + UInt64(i))) { values.append(v) }
        }
        let m = values.reduce(0, +) / Double(values.count)
        let v = values.map { ($0 - m) * ($0 - m) }.reduce(0, +) / Double(max(1, values.count - 1))
        return (m, (v / Double(values.count)).squareRoot())
    }
}
