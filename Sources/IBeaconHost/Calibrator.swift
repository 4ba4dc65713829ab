import IBeaconCore
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Which beacon to calibrate.
public struct CalibrationTarget: Sendable, Equatable {
    public var proximityUUID: UUID
    public var major: UInt16
    public var minor: UInt16
    /// Required when two transmitters carry the same identity.
    public var address: BDAddress?

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16, address: BDAddress? = nil) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.address = address
    }

    func matches(_ beacon: IBeacon) -> Bool {
        beacon.proximityUUID == proximityUUID && beacon.major == major && beacon.minor == minor
    }

    public var identity: String { "\(proximityUUID.uuidString) major \(major) minor \(minor)" }
}

public struct CalibrationSettings: Sendable {
    /// Give up after this long (the estimate so far is used if it has enough samples).
    public var maximumDuration: Duration = .seconds(30)
    /// Stop once the 95 % confidence half-width is at most this many dB.
    public var precision: Double = 1
    /// Never stop on precision before this many samples.
    public var minimumSamples: Int = 30
    /// Fewer samples than this at the end is a failure rather than an estimate.
    public var minimumUsableSamples: Int = 10
    /// dB added to every sample: how much weaker this receiver reads than a reference phone.
    public var offset: Double = 0
    /// Refuse when the beacon has not been heard at all after this long.
    public var notHeardTimeout: Duration = .seconds(10)
    /// Refuse when this many reports in a row came without RSSI (127, "not available").
    public var unavailableAfter: Int = 5

    public init() {}
}

/// Why a calibration did not produce a measured power.
public enum CalibrationError: Error, Sendable, Equatable, CustomStringConvertible {
    case notHeard(target: String, seconds: Double)
    case rssiNotAvailable(reports: Int)
    case ambiguous(target: String, addresses: [BDAddress])
    case tooFewSamples(count: Int, needed: Int, seconds: Double)

    public var description: String {
        switch self {
        case .notHeard(let target, let seconds):
            return "the beacon \(target) was not heard in \(formatSeconds(seconds)) — check that it is advertising "
                + "(ibeacon advertise), that the profile matches it, and that this receiver is within range"
        case .rssiNotAvailable(let reports):
            return "RSSI not available: the receiver reported \(reports) advertisements without signal strength "
                + "(RSSI 127); use a controller that reports RSSI"
        case .ambiguous(let target, let addresses):
            return "two or more beacons advertise \(target): \(addresses.map(\.description).joined(separator: ", ")) "
                + "— switch the others off, or pick one with --address"
        case .tooFewSamples(let count, let needed, let seconds):
            return "only \(count) RSSI samples in \(formatSeconds(seconds)) (at least \(needed) needed) — "
                + "raise --duration or check the beacon's advertising interval"
        }
    }
}

func formatSeconds(_ s: Double) -> String {
    s == s.rounded() ? "\(Int(s)) s" : "\(s.fixed(1)) s"
}

/// The outcome of a calibration.
public struct CalibrationResult: Sendable {
    /// The estimate, offset applied, in dBm with decimals.
    public var estimate: Double
    public var halfWidth95: Double
    public var spread: Double
    public var method: String
    public var samples: [Int]
    public var precisionReached: Bool
    public var address: BDAddress
    public var elapsed: Duration
    public var offset: Double

    /// The integer dBm written as `measuredPower`.
    public var measuredPower: Int { Int(estimate.rounded()) }
}

/// Collects RSSI for one beacon and decides when to stop. Pure: feed it sightings and the
/// elapsed time; no I/O, no clock.
public struct CalibrationCollector: Sendable {
    public let target: CalibrationTarget
    public let settings: CalibrationSettings
    public private(set) var samples: [Int] = []
    public private(set) var address: BDAddress?
    private var others: Set<BDAddress> = []
    private var reportsWithoutRSSI = 0
    public private(set) var lastEstimate: MeasuredPowerEstimate?
    private var rule: StoppingRule
    private var reachedPrecision = false

    public init(target: CalibrationTarget, settings: CalibrationSettings) {
        self.target = target
        self.settings = settings
        // The rule waits for the interval to stay within the precision for several samples and
        // to clear it by a margin: stopping the first time it dips below lets the 95th-percentile
        // error exceed the precision (see StoppingRule).
        rule = StoppingRule(precision: settings.precision, minimumSamples: settings.minimumSamples)
    }

    public enum Decision: Sendable, Equatable {
        case more
        case done
    }

    /// Adds one report. Throws when calibration cannot succeed (ambiguous, RSSI not available).
    public mutating func add(_ sighting: Sighting) throws(CalibrationError) -> Decision {
        guard let beacon = sighting.beacon, target.matches(beacon) else { return .more }
        if let wanted = target.address {
            guard sighting.address == wanted else { return .more }
        } else if let address, address != sighting.address {
            others.insert(sighting.address)
            throw .ambiguous(target: target.identity, addresses: ([address] + others.sorted()))
        }
        address = sighting.address
        guard let rssi = sighting.rssi else {
            reportsWithoutRSSI += 1
            if samples.isEmpty && reportsWithoutRSSI >= settings.unavailableAfter {
                throw .rssiNotAvailable(reports: reportsWithoutRSSI)
            }
            return .more
        }
        samples.append(Int(rssi))
        guard samples.count >= settings.minimumSamples else { return .more }
        lastEstimate = MeasuredPowerEstimator().estimate(samples)
        if let e = lastEstimate, rule.update(with: e) == .precisionReached {
            reachedPrecision = true
            return .done
        }
        return .more
    }

    /// Checks the clock: throws when the beacon was never heard in time.
    public func check(elapsed: Duration) throws(CalibrationError) -> Decision {
        let seconds = elapsed.seconds
        if address == nil && elapsed >= min(settings.notHeardTimeout, settings.maximumDuration) {
            throw .notHeard(target: target.identity, seconds: seconds)
        }
        if samples.isEmpty && reportsWithoutRSSI > 0 && elapsed >= settings.maximumDuration {
            throw .rssiNotAvailable(reports: reportsWithoutRSSI)
        }
        return elapsed >= settings.maximumDuration ? .done : .more
    }

    /// The current estimate, for progress display.
    public func estimate() -> MeasuredPowerEstimate? { MeasuredPowerEstimator().estimate(samples) }

    /// The result once `add` or `check` said `.done`.
    public func result(elapsed: Duration) throws(CalibrationError) -> CalibrationResult {
        guard let address else {
            throw .notHeard(target: target.identity, seconds: elapsed.seconds)
        }
        guard samples.count >= settings.minimumUsableSamples, let e = MeasuredPowerEstimator().estimate(samples) else {
            if samples.isEmpty && reportsWithoutRSSI > 0 { throw .rssiNotAvailable(reports: reportsWithoutRSSI) }
            throw .tooFewSamples(count: samples.count, needed: settings.minimumUsableSamples, seconds: elapsed.seconds)
        }
        return CalibrationResult(
            estimate: e.value + settings.offset, halfWidth95: e.halfWidth95, spread: e.spread, method: e.method,
            samples: samples,
            precisionReached: reachedPrecision,
            address: address, elapsed: elapsed, offset: settings.offset)
    }
}

extension Duration {
    public var seconds: Double {
        let (s, attos) = components
        return Double(s) + Double(attos) / 1e18
    }
}

/// Runs a calibration on a source of sightings (a scanning controller, the kernel, a capture).
public struct Calibrator: Sendable {
    public var target: CalibrationTarget
    public var settings: CalibrationSettings
    public var logger: Logger
    /// How often `progress` is called, in the source's time.
    public var progressInterval: Duration

    public init(
        target: CalibrationTarget, settings: CalibrationSettings, progressInterval: Duration = .milliseconds(500),
        logger: Logger
    ) {
        self.target = target
        self.settings = settings
        self.progressInterval = progressInterval
        self.logger = logger
    }

    /// What the scan has gathered so far; shared between the report callback and the ticks.
    private struct Progress: Sendable {
        var collector: CalibrationCollector
        var failure: CalibrationError?
        var time: Double = 0
    }

    /// Scans until the estimate is precise enough, the time is up, the source ends, or
    /// calibration cannot succeed; the source stops scanning in every case.
    public func run(
        on source: any SightingSource,
        progress: @escaping @Sendable (CalibrationCollector, Duration) -> Void = { _, _ in }
    ) async throws -> CalibrationResult {
        let state = Mutex(Progress(collector: CalibrationCollector(target: target, settings: settings)))
        try await source.scan(
            tickInterval: progressInterval,
            receive: { sightings, time in
                state.withLock { state in
                    state.time = max(state.time, time)
                    do throws(CalibrationError) {
                        for s in sightings where try state.collector.add(s) == .done { return .stop }
                    } catch {
                        state.failure = error
                        return .stop
                    }
                    return .proceed
                }
            },
            tick: { time in
                let (collector, elapsed) = state.withLock { state -> (CalibrationCollector, Duration) in
                    state.time = max(state.time, time)
                    return (state.collector, .seconds(state.time))
                }
                progress(collector, elapsed)
                do throws(CalibrationError) {
                    return try collector.check(elapsed: elapsed) == .done ? .stop : .proceed
                } catch {
                    state.withLock { $0.failure = error }
                    return .stop
                }
            })
        // Cancelled (the user interrupted): the samples so far are no result.
        try Task.checkCancellation()
        let (collector, failure, time) = state.withLock { ($0.collector, $0.failure, $0.time) }
        if let failure { throw failure }
        return try collector.result(elapsed: .seconds(time))
    }
}
