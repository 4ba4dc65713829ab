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

extension CalibrationTarget {
    /// The beacon `calibrate` listens to: the profile's (`existing`), else the one given by
    /// UUID, major and minor (a random UUID and 0, 0 for what is not given); `address`: only
    /// that transmitter.
    public static func chosen(
        existing: Profile?, uuid: UUID?, major: UInt16?, minor: UInt16?, address: String?
    ) -> CalibrationTarget {
        let only = address.flatMap(BDAddress.init)
        if let existing {
            return CalibrationTarget(
                proximityUUID: existing.proximityUUID, major: existing.major, minor: existing.minor, address: only)
        }
        return CalibrationTarget(
            proximityUUID: uuid ?? ProximityUUID.random().uuid, major: major ?? 0, minor: minor ?? 0, address: only)
    }
}

public struct CalibrationSettings: Sendable {
    /// Give up after this long (the estimate so far is used if it has enough samples).
    public var maximumDuration: Duration = .seconds(180)
    /// Stop once the 95 % confidence half-width is at most this many dB.
    public var precision: Double = 1
    /// Which value to write.
    public var method: CalibrationMethod = .apple
    /// Never stop on precision before this many seconds (Apple: at least 10 s).
    public var minimumDuration: Double = 10
    /// How many of its own relative standard errors the half-width must clear the precision by
    /// (`.apple`); see docs/CALIBRATION.md for the simulation that set it.
    public var assurance: Double = 0
    /// `.apple`: the assurance once slow variation was seen. A run that stops on slow variation
    /// stops when its variance estimate (few degrees of freedom: one per ~6 s) happens to be
    /// low, which is when a wandering level is most likely off to one side; clearing the
    /// precision by 3 of the half-width's relative standard errors keeps ≥ 95 % of those runs
    /// within the precision (docs/CALIBRATION.md, "Slow variation").
    public var slowAssurance: Double = 3
    /// `.apple`: reports spread at least this much around their own second's mean (standard
    /// deviation, dB) mean strong fast fading (Rayleigh fading alone gives 5.6 dB), under which
    /// slow variation is not told apart from independent seconds in a few seconds…
    public var noisySpread: Double = 4.8
    /// …so such a run does not stop on precision before this many seconds.
    public var noisyMinimumDuration: Double = 60
    /// `.apple`: the estimator (its test for slow variation and transients).
    public var estimator = PhoneCalibrationEstimator()
    /// `.apple`: consecutive completed seconds the precision must hold for (a chance quiet
    /// moment, when the spread of the 1 Hz means looks small, is not enough).
    public var confirmations: Int = 3
    /// `.robust`: never stop on precision before this many samples.
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

    /// `calibrate`'s options: stop by `duration` seconds, at ± `precision` dB; give up on a beacon
    /// not heard within 10 s (or `duration`, when shorter).
    public init(duration: Double, precision: Double, offset: Double, method: CalibrationMethod) {
        maximumDuration = .seconds(duration)
        self.precision = precision
        self.offset = offset
        self.method = method
        notHeardTimeout = .seconds(min(duration, 10))
    }
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
            return "only \(count) RSSI samples in \(formatSeconds(seconds)) (at least \(needed), over at least one "
                + "whole second after the first, needed) — raise --duration or check the beacon's advertising interval"
        }
    }
}

/// Which value `ibeacon calibrate` writes.
public enum CalibrationMethod: String, Sendable, CaseIterable {
    /// Apple's: the long-run average of the 1 Hz mean RSSI, fades included (what phones expect).
    case apple
    /// The centre of the un-faded distribution (Tukey biweight, `MeasuredPowerEstimator`).
    case robust
}

/// The outcome of a calibration.
public struct CalibrationResult: Sendable {
    /// The estimate of the chosen method, offset applied, in dBm with decimals.
    public var estimate: Double
    public var halfWidth95: Double
    /// Standard deviation of the samples, dB.
    public var spread: Double
    public var method: String
    /// The RSSI samples, counted per dBm.
    public var histogram: Histogram
    public var sampleCount: Int { histogram.total }
    /// The precision was reached, after the minimum duration, with no large drift.
    public var precisionReached: Bool
    public var address: BDAddress
    /// Source time at the end, seconds since the scan started.
    public var seconds: Double
    public var offset: Double
    /// Apple's estimate (offset not applied); nil without a complete second.
    public var apple: PhoneCalibrationEstimate?
    /// The robust centre (offset not applied).
    public var robust: MeasuredPowerEstimate?
    /// `.apple`: how many of its own relative standard errors the half-width had to clear the
    /// precision by at the end (`settings.slowAssurance` once slow variation was seen); nil for
    /// `.robust`, which stops by `StoppingRule`.
    public var stoppingMargin: Double? = nil

    /// The integer dBm written as `measuredPower`.
    public var measuredPower: Int { Int(estimate.rounded()) }

    /// The level moved during the run by at least the precision (see `CalibrationDrift`).
    public var driftIsLarge: Bool { apple?.drift?.isLarge ?? false }
}

/// Collects RSSI for one beacon and decides when to stop. Pure: feed it sightings with the
/// source's time (seconds since the scan started; a replayed capture's own time) and ticks of
/// the same time; no I/O, no clock.
///
/// Memory does not grow with the reports: the samples are kept as counts per dBm (`histogram`,
/// what the robust estimate and the result need) and sums per second of source time
/// (`SecondMeans`, what Apple's estimate needs; at most a day of seconds), never one by one.
///
/// Stopping: never before `settings.minimumDuration` (Apple's 10 s) after the first report
/// heard, for `.apple` never before `settings.noisyMinimumDuration` once the reports spread
/// `settings.noisySpread` dB or more within the seconds; then, for `.apple`, at the first completed second where
/// the 95 % half-width of the 1 Hz mean, enlarged by `settings.assurance` (once slow variation
/// was seen, `settings.slowAssurance`) of its own relative standard errors, has been within the
/// precision for `settings.confirmations` seconds and the level has not drifted by more than
/// the precision; for `.robust`, when `StoppingRule` says so; otherwise at
/// `settings.maximumDuration`.
public struct CalibrationCollector: Sendable {
    public let target: CalibrationTarget
    public let settings: CalibrationSettings
    /// The RSSI samples, counted per dBm.
    public private(set) var histogram = Histogram()
    public var sampleCount: Int { histogram.total }
    /// How many numbers the collector keeps for its samples (for the test that they stay bounded).
    public var storedValues: Int { histogram.counts.count * 2 + seconds.storedValues }
    public private(set) var address: BDAddress?
    private var others: Set<BDAddress> = []
    private var reportsWithoutRSSI = 0
    private var seconds = SecondMeans()
    /// The last estimates computed (at each completed second, and per sample for the robust one).
    public private(set) var lastApple: PhoneCalibrationEstimate?
    public private(set) var lastEstimate: MeasuredPowerEstimate?
    private var rule: StoppingRule
    private var reachedPrecision = false
    private var evaluatedSeconds = 0
    /// Consecutive completed seconds with the precision reached and no large drift.
    private var streak = 0
    /// Source time of the first sample: the 1 Hz seconds and the minimum duration count from it.
    private var firstTime: Double?
    /// An estimate of this run saw slow variation: later ones allow for it (`assumeSlow`). Each
    /// second is one more look at the data; without this, the run stops on the first quiet
    /// stretch of a level that wanders, exactly when its spread looks smallest.
    private var slowSeen = false
    /// An estimate of this run saw the reports spread `settings.noisySpread` or more within the
    /// seconds: the run keeps the longer minimum (its spread estimate wanders too).
    private var noisySeen = false

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

    /// Adds one report received at `time` (source time, seconds since the scan started).
    /// Throws when calibration cannot succeed (ambiguous, RSSI not available).
    public mutating func add(_ sighting: Sighting, at time: Double) throws(CalibrationError) -> Decision {
        guard let beacon = sighting.beacon, target.matches(beacon) else { return try check(at: time) }
        if let wanted = target.address {
            guard sighting.address == wanted else { return try check(at: time) }
        } else if let address, address != sighting.address {
            others.insert(sighting.address)
            throw .ambiguous(target: target.identity, addresses: ([address] + others.sorted()))
        }
        address = sighting.address
        guard let rssi = sighting.rssi else {
            reportsWithoutRSSI += 1
            if histogram.total == 0 && reportsWithoutRSSI >= settings.unavailableAfter {
                throw .rssiNotAvailable(reports: reportsWithoutRSSI)
            }
            return try check(at: time)
        }
        // A second is complete when a later report arrives: evaluate it before adding this one.
        if try check(at: time) == .done { return .done }
        // Seconds count from the first report heard, as ranging callbacks start when the phone
        // first hears the beacon (not when this receiver's scan was set up; a capture's time
        // starts at its first report too).
        let first = firstTime ?? time
        firstTime = first
        histogram.add(Int(rssi))
        seconds.add(Int(rssi), at: time - first)
        if settings.method == .robust, histogram.total >= settings.minimumSamples {
            lastEstimate = MeasuredPowerEstimator().estimate(histogram)
            if let e = lastEstimate, rule.update(with: e) == .precisionReached,
                time - first >= settings.minimumDuration
            {
                reachedPrecision = true
                return .done
            }
        }
        return .more
    }

    /// Checks the time (source time, seconds since the scan started): throws when the beacon was
    /// never heard in time; says `.done` when the precision is reached at a completed second or
    /// the duration is over.
    public mutating func check(at time: Double) throws(CalibrationError) -> Decision {
        let maximum = settings.maximumDuration.seconds
        if address == nil && time >= min(settings.notHeardTimeout.seconds, maximum) {
            throw .notHeard(target: target.identity, seconds: time)
        }
        if histogram.total == 0 && reportsWithoutRSSI > 0 && time >= maximum {
            throw .rssiNotAvailable(reports: reportsWithoutRSSI)
        }
        let heard = firstTime.map { time - $0 } ?? 0
        let completed = heard.isFinite ? max(0, Int(heard.rounded(.down))) : 0
        if completed > evaluatedSeconds {
            evaluatedSeconds = completed
            lastApple = settings.estimator.estimate(
                seconds.means(completedBy: Double(completed)), precision: settings.precision, assumeSlow: slowSeen)
            if lastApple?.slowVariation == true { slowSeen = true }
            // From Apple's minimum on: over fewer seconds the spread itself is too uncertain.
            if let e = lastApple, Double(completed) >= settings.minimumDuration,
                e.withinSecondSpread >= settings.noisySpread
            {
                noisySeen = true
            }
            if let e = lastApple,
                e.halfWidth95 * (1 + currentAssurance * e.halfWidthRelativeError) <= settings.precision,
                e.drift?.isLarge != true, !e.transientOngoing
            {
                streak += 1
            } else {
                streak = 0
            }
            if settings.method == .apple, Double(completed) >= minimumDuration, streak >= settings.confirmations {
                reachedPrecision = true
                return .done
            }
        }
        return time >= maximum ? .done : .more
    }

    /// How many of its own relative standard errors the half-width must clear the precision by
    /// now (`.apple`): `settings.slowAssurance` once slow variation was seen.
    var currentAssurance: Double {
        slowSeen ? max(settings.assurance, settings.slowAssurance) : settings.assurance
    }

    /// The shortest run that may stop on precision now: Apple's minimum, or
    /// `settings.noisyMinimumDuration` once the reports spread `settings.noisySpread` dB or more
    /// within the seconds (an estimate's `withinSecondSpread`).
    public var minimumDuration: Double {
        noisySeen ? max(settings.minimumDuration, settings.noisyMinimumDuration) : settings.minimumDuration
    }

    /// The estimate of the chosen method so far, offset not applied, for progress display.
    public func current() -> (value: Double, halfWidth95: Double)? {
        switch settings.method {
        case .apple: lastApple.map { ($0.value, $0.halfWidth95) }
        case .robust: MeasuredPowerEstimator().estimate(histogram).map { ($0.value, $0.halfWidth95) }
        }
    }

    /// The result once `add` or `check` said `.done`, over the seconds completed by `time`.
    public func result(at time: Double) throws(CalibrationError) -> CalibrationResult {
        guard let address else {
            throw .notHeard(target: target.identity, seconds: time)
        }
        let completed = (time - (firstTime ?? time)).rounded(.down)
        let apple = settings.estimator.estimate(
            seconds.means(completedBy: completed), precision: settings.precision, assumeSlow: slowSeen)
        let robust = MeasuredPowerEstimator().estimate(histogram)
        let chosen: (value: Double, halfWidth95: Double, method: String)?
        switch settings.method {
        case .apple: chosen = apple.map { ($0.value, $0.halfWidth95, PhoneCalibrationEstimator.methodName) }
        case .robust: chosen = robust.map { ($0.value, $0.halfWidth95, $0.method) }
        }
        guard histogram.total >= settings.minimumUsableSamples, let chosen else {
            if histogram.total == 0 && reportsWithoutRSSI > 0 { throw .rssiNotAvailable(reports: reportsWithoutRSSI) }
            throw .tooFewSamples(
                count: histogram.total, needed: settings.minimumUsableSamples, seconds: time)
        }
        let spread = histogram.meanAndSpread?.spread ?? 0
        return CalibrationResult(
            estimate: chosen.value + settings.offset, halfWidth95: chosen.halfWidth95, spread: spread,
            method: chosen.method, histogram: histogram, precisionReached: reachedPrecision, address: address,
            seconds: time, offset: settings.offset, apple: apple, robust: robust,
            stoppingMargin: settings.method == .apple ? currentAssurance : nil)
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
            ScanRequest(
                tickInterval: progressInterval,
                receive: { sightings, time in
                    state.withLock { state in
                        state.time = max(state.time, time)
                        do throws(CalibrationError) {
                            for s in sightings where try state.collector.add(s, at: time) == .done { return .stop }
                        } catch {
                            state.failure = error
                            return .stop
                        }
                        return .proceed
                    }
                },
                tick: { time in
                    let (collector, elapsed, decision) = state.withLock {
                        state -> (CalibrationCollector, Duration, ScanControl) in
                        state.time = max(state.time, time)
                        do throws(CalibrationError) {
                            let done = try state.collector.check(at: state.time) == .done
                            return (state.collector, .seconds(state.time), done ? .stop : .proceed)
                        } catch {
                            state.failure = error
                            return (state.collector, .seconds(state.time), .stop)
                        }
                    }
                    progress(collector, elapsed)
                    return decision
                }))
        // Cancelled (the user interrupted): the samples so far are no result.
        try Task.checkCancellation()
        let (collector, failure, time) = state.withLock { ($0.collector, $0.failure, $0.time) }
        if let failure { throw failure }
        return try collector.result(at: time)
    }
}
