#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A beacon region as Core Location's `CLBeaconRegion` defines one: every beacon with a proximity
/// UUID, or with a UUID and major, or with a UUID, major and minor.
public struct BeaconRegion: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var proximityUUID: UUID
    public var major: UInt16?
    /// Only together with `major`, as in `CLBeaconRegion`.
    public var minor: UInt16?
    /// Seconds of silence before this region is exited; nil: the monitor's `exitAfter`.
    public var exitAfter: Double?

    /// `name` defaults to the identity (`UUID[:MAJOR[:MINOR]]`).
    public init(
        name: String? = nil, proximityUUID: UUID, major: UInt16? = nil, minor: UInt16? = nil, exitAfter: Double? = nil
    ) throws(RegionError) {
        if minor != nil && major == nil {
            throw RegionError("a region with a minor needs a major too (UUID:MAJOR:MINOR)")
        }
        if let exitAfter, !(Self.exitAfterRange ~= exitAfter) {
            throw RegionError("an exit delay must be a number of seconds within 0.1…86400, got \(exitAfter)")
        }
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.exitAfter = exitAfter
        self.name = ""
        self.name = name ?? identity
    }

    /// The exit delays a region may have, in seconds.
    public static let exitAfterRange = 0.1...86400.0

    /// Parses `[NAME=]UUID[:MAJOR[:MINOR]][@DELAY]`, e.g.
    /// `bakery=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:12:3@120s`; DELAY is seconds (`120`, `120s`)
    /// or minutes (`2m`).
    public init(parsing text: String) throws(RegionError) {
        var rest = Substring(text)
        var name: String?
        var exitAfter: Double?
        if let at = rest.lastIndex(of: "@") {
            exitAfter = try Self.delay(rest[rest.index(after: at)...], in: text)
            rest = rest[..<at]
        }
        if let eq = rest.firstIndex(of: "=") {
            name = String(rest[..<eq])
            rest = rest[rest.index(after: eq)...]
            if name!.isEmpty { throw RegionError("region \(text): the name before = is empty") }
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else {
            throw RegionError("region \(text): expected [NAME=]UUID[:MAJOR[:MINOR]][@SECONDS]")
        }
        guard let uuid = ParsedUUID(String(parts[0])) else {
            throw RegionError("region \(text): \(parts[0]) is not a UUID (8-4-4-4-12 hex digits)")
        }
        func number(_ what: String, _ s: Substring, _ range: FieldRange) throws(RegionError) -> UInt16 {
            guard let v = Int(s), range.contains(v) else {
                throw RegionError("region \(text): \(what) \(s) is not an integer in \(range.text)")
            }
            return UInt16(v)
        }
        let major = parts.count > 1 ? try number("major", parts[1], .major) : nil
        let minor = parts.count > 2 ? try number("minor", parts[2], .minor) : nil
        try self.init(name: name, proximityUUID: uuid.uuid, major: major, minor: minor, exitAfter: exitAfter)
    }

    /// `120`, `120s` or `2m`, within `exitAfterRange`.
    static func delay(_ s: Substring, in text: String) throws(RegionError) -> Double {
        var digits = s
        var unit = 1.0
        if s.hasSuffix("s") {
            digits = s.dropLast()
        } else if s.hasSuffix("m") {
            digits = s.dropLast()
            unit = 60
        }
        guard let v = Double(digits), v.isFinite, exitAfterRange ~= v * unit else {
            throw RegionError(
                "region \(text): exit delay @\(s) is not a number of seconds within 0.1…86400 (@120s, @2m)")
        }
        return v * unit
    }

    /// `UUID`, `UUID:MAJOR` or `UUID:MAJOR:MINOR`, the UUID upper-case.
    public var identity: String {
        var s = proximityUUID.uuidString
        if let major { s += ":\(major)" }
        if let minor { s += ":\(minor)" }
        return s
    }

    public var description: String { name == identity ? name : "\(name) (\(identity))" }

    /// The beacons of this region: its UUID, and its major and minor when it has them.
    public var pattern: BeaconIdentityPattern {
        BeaconIdentityPattern(proximityUUID: proximityUUID, major: major, minor: minor)
    }

    /// Whether `beacon` belongs to this region.
    public func contains(_ beacon: IBeacon) -> Bool { pattern.matches(beacon) }
}

/// A region that cannot be built: the message says which part is wrong.
public struct RegionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Why a receiver cannot hear right now: the reason a region's state is `unknown` rather than
/// `outside` (Core Location: Bluetooth off makes every region's state unknown).
public struct Deafness: Sendable, Equatable, CustomStringConvertible {
    /// What kind of thing stopped the receiver, for programs (`--json` `cause`, MQTT).
    public struct Cause: RawRepresentable, Sendable, Hashable {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        /// The adapter was powered off (or went down).
        public static let poweredOff = Cause(rawValue: "powered-off")
        /// The adapter was removed (unplugged, driver unloaded).
        public static let removed = Cause(rawValue: "removed")
        /// The controller was reset or restarted and the scan is being started again.
        public static let reset = Cause(rawValue: "reset")
        /// The link to the controller (tcp:, serial) is gone or being re-established.
        public static let link = Cause(rawValue: "link")
        /// A capture's own LE Set (Extended) Scan Enable turned scanning off.
        public static let scanDisabled = Cause(rawValue: "scan-disabled")
        /// No advertisement of any device for `--watchdog` seconds.
        public static let watchdog = Cause(rawValue: "watchdog")
    }

    public var cause: Cause
    /// In words, for people: `hci1 was powered off`.
    public var reason: String

    public init(_ cause: Cause, _ reason: String) {
        self.cause = cause
        self.reason = reason
    }

    public var description: String { reason }
}

/// Region monitoring as Core Location does it, as a pure state machine: fed sightings, what the
/// receiver can hear, and the passing of time (seconds on the sighting source's clock, never
/// read from a clock here), it keeps each region's state — `inside`, `outside` or `unknown` —
/// and says when it changes.
///
/// - Every region starts `unknown`. Its first determination is a *state*, not a crossing
///   (`didDetermineState`): event `inside` at the first sighting, or `outside` once `exitAfter`
///   seconds of scanning passed without one. The same after any unknown period: a restarted
///   monitor, or a receiver that could not hear, never announces `enter` for a beacon that was
///   there all along.
/// - **enter**: outside -> inside, at a sighting. **exit**: inside -> outside, once none of the
///   region's beacons has been heard for its exit delay (`BeaconRegion.exitAfter`, or
///   `exitAfter`) while the receiver could hear; the event carries the time the silence
///   reached it and the beacon heard last.
/// - **unknown**: the receiver cannot hear (`receiverDeaf`): every region becomes unknown at
///   once, with the reason. No exit timer runs while deaf; once it hears again
///   (`receiverHears`), a region needs a whole exit delay of scanning before it can be judged
///   outside.
///
/// A region stays inside while any of its beacons is heard. With `minRSSI`, sightings are
/// judged on the beacon's **smoothed** RSSI — an exponential average over *time* (weight
/// `1 - exp(-dt / smoothing)` for a report `dt` seconds after the one before), so the gate
/// reacts alike to a 1 Hz and a 10 Hz beacon and one lucky packet from far away does not count —
/// with hysteresis: to count while not inside, the smoothed RSSI must reach `minRSSI`; once
/// inside, sightings keep the region inside while it is at least `minRSSI - hysteresis`.
/// Reports without RSSI (127, "not available") never count when `minRSSI` is set.
///
/// Events come out in time order provided times are fed in order; a time earlier than one
/// already seen is taken as that one (a capture's clock may step back).
public struct RegionMonitor: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Seconds of silence after which an inside region is exited (Core Location: about 30),
        /// for regions without an exit delay of their own.
        public var exitAfter: Double
        /// Sightings weaker than this (smoothed, dBm) do not count; nil: all count.
        public var minRSSI: Double?
        /// dB below `minRSSI` that still keep an inside region inside.
        public var hysteresis: Double
        /// Time constant of the smoothed RSSI, in seconds (0: no smoothing).
        public var smoothing: Double
        /// At most this many beacons' RSSI state is kept (a UUID region may match a crowd);
        /// beyond it the longest-silent are forgotten.
        public var beaconCapacity: Int

        public init(
            exitAfter: Double = 30, minRSSI: Double? = nil, hysteresis: Double = 6, smoothing: Double = 5,
            beaconCapacity: Int = 4096
        ) {
            self.exitAfter = exitAfter
            self.minRSSI = minRSSI
            self.hysteresis = hysteresis
            self.smoothing = smoothing
            self.beaconCapacity = beaconCapacity
        }
    }

    /// A region's state, as `CLRegionState`.
    public enum State: String, Sendable, Equatable {
        case unknown, inside, outside
    }

    public struct Event: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable {
            /// First determinations (after the start or an unknown period), and unknown.
            case inside, outside, unknown
            /// Crossings: outside -> inside, inside -> outside.
            case enter, exit
            /// The state as it is (`statusEvents`): a heartbeat, or the last word of a run.
            case state
        }
        public var kind: Kind
        /// The region's state after the event.
        public var state: State
        /// Index of the region in `regions`.
        public var regionIndex: Int
        public var region: BeaconRegion
        /// The beacon heard (inside, enter), or the one heard last (exit, state); nil when none.
        public var beacon: IBeacon?
        /// RSSI of that beacon's report (the raw value, dBm), nil when unknown.
        public var rssi: Int8?
        /// When it happened, on the source's clock.
        public var time: Double
        /// When the region was last heard (a sighting that counted), if ever.
        public var lastHeard: Double?
        /// Since when the region has been in `state`.
        public var since: Double
        /// For `unknown` (and a state that is unknown): why the receiver cannot hear; nil for a
        /// region not yet determined while the receiver hears.
        public var deafness: Deafness?
        /// The smoothed RSSI of a beacon of the region heard *below* `minRSSI` since it last
        /// counted (outside and exit: it was heard, just not near enough).
        public var belowGate: Double?
        /// The region's exit delay.
        public var exitAfter: Double

        /// For `exit`: how long the region was silent.
        public var silent: Double? { kind == .exit ? lastHeard.map { time - $0 } : nil }

        public var description: String {
            "\(kind.rawValue) \(region.name) at \(time)" + (beacon.map { " by \($0.major):\($0.minor)" } ?? "")
        }
    }

    /// A region's exit delay shorter than about three advertising intervals observed for one
    /// of its beacons: a few missed packets are then enough to exit.
    public struct IntervalWarning: Sendable, Equatable, CustomStringConvertible {
        public var region: BeaconRegion
        public var exitAfter: Double
        public var beacon: IBeacon
        /// Mean seconds between reports of that beacon.
        public var interval: Double

        public var description: String {
            "region \(region.name): exit delay \(exitAfter.fixed(1)) s is shorter than 3 advertising intervals of its beacon \(beacon.major):\(beacon.minor) (heard every \(interval.fixed(2)) s): a few missed packets will exit it; give it at least \((3 * interval).rounded(.up).fixed(0)) s (--exit-after, or NAME=UUID…@SECONDS)"
        }
    }

    struct RegionState: Sendable {
        var state: State = .unknown
        var since: Double
        var exitAfter: Double
        var lastHeard = -Double.infinity
        var lastBeacon: IBeacon?
        var lastRSSI: Int8?
        var belowGate: Double?
        var warned = false
    }

    /// What is known of one beacon that belongs to at least one region.
    struct BeaconState: Sendable {
        var regions: [Int]
        var smoothedRSSI: Double?
        /// Time of the last report (`levelTime`: of the last report with RSSI).
        var lastHeard: Double
        var levelTime = -Double.infinity
        /// Mean seconds between reports (exponential, weight 1/8), and how many gaps it holds.
        var interval = 0.0
        var gaps = 0

        /// One report at `t`; returns the updated state.
        mutating func record(_ rssi: Int8?, at t: Double, smoothing: Double) -> BeaconState {
            let gap = t - lastHeard
            if gap > 0 && gap < 600 {
                interval = gaps == 0 ? gap : interval + (gap - interval) / 8
                gaps &+= 1
            }
            lastHeard = t
            if let rssi {
                let x = Double(rssi)
                if let level = smoothedRSSI, smoothing > 0 {
                    let weight = 1 - exp(-(t - levelTime) / smoothing)
                    smoothedRSSI = level + weight * (x - level)
                } else {
                    smoothedRSSI = x
                }
                levelTime = t
            }
            return self
        }
    }

    struct Identity: Hashable, Sendable {
        var uuid: UUID
        var major: UInt16
        var minor: UInt16
    }

    public let regions: [BeaconRegion]
    public let configuration: Configuration
    public let start: Double
    public private(set) var now: Double
    /// Why the receiver cannot hear; nil while it hears.
    public private(set) var deafness: Deafness?
    /// Since when the receiver has heard without a break (the start, or the end of the last
    /// deaf period): exit delays count from here at the earliest.
    public private(set) var hearingSince: Double
    /// Exit delays too short for the advertising intervals observed; the caller takes them.
    public var intervalWarnings: [IntervalWarning] = []
    var regionStates: [RegionState]
    var beacons: [Identity: BeaconState] = [:]
    /// No exit or outside is due before this time (may be early, never late).
    var nextDue: Double
    /// The longest exit delay: beacons silent for longer are forgotten.
    let longestExitAfter: Double

    public init(regions: [BeaconRegion], configuration: Configuration = .init(), start: Double = 0) {
        self.regions = regions
        self.configuration = configuration
        self.start = start
        self.now = start
        self.hearingSince = start
        self.regionStates = regions.map {
            RegionState(since: start, exitAfter: $0.exitAfter ?? configuration.exitAfter)
        }
        self.nextDue = start + (regionStates.map(\.exitAfter).min() ?? configuration.exitAfter)
        self.longestExitAfter = regionStates.map(\.exitAfter).max() ?? configuration.exitAfter
    }

    /// The state of each region, in the order of `regions`.
    public var states: [State] { regionStates.map(\.state) }

    /// The smoothed RSSI of a beacon, if it belongs to a region and has been heard with RSSI.
    public func smoothedRSSI(of beacon: IBeacon) -> Double? {
        beacons[Identity(uuid: beacon.proximityUUID, major: beacon.major, minor: beacon.minor)]?.smoothedRSSI
    }

    /// Number of beacons whose RSSI state is kept.
    public var trackedBeacons: Int { beacons.count }

    /// One report of `beacon` at `time`: the exits and states due by then, then the state
    /// changes it causes.
    public mutating func observe(_ beacon: IBeacon, rssi: Int8?, at time: Double) -> [Event] {
        var events = advance(to: time)
        let t = now
        let id = Identity(uuid: beacon.proximityUUID, major: beacon.major, minor: beacon.minor)
        let smoothing = configuration.smoothing
        // A known beacon is updated in place: one hash lookup, no copy of its state.
        var entry: BeaconState
        if let updated = beacons[id]?.record(rssi, at: t, smoothing: smoothing) {
            entry = updated
        } else {
            let matching = regions.indices.filter { regions[$0].contains(beacon) }
            if matching.isEmpty { return events }
            if beacons.count >= configuration.beaconCapacity { forgetSilentBeacons() }
            entry = BeaconState(regions: matching, smoothedRSSI: nil, lastHeard: t)
            _ = entry.record(rssi, at: t, smoothing: smoothing)
            beacons[id] = entry
        }
        if entry.gaps & 63 == 8 { checkInterval(of: entry, beacon: beacon) }
        for index in entry.regions {
            let state = regionStates[index].state
            if let minRSSI = configuration.minRSSI {
                guard let level = entry.smoothedRSSI, rssi != nil else { continue }
                let threshold = state == .inside ? minRSSI - configuration.hysteresis : minRSSI
                guard level >= threshold else {
                    regionStates[index].belowGate = level
                    continue
                }
            }
            regionStates[index].lastHeard = t
            regionStates[index].lastBeacon = beacon
            regionStates[index].lastRSSI = rssi
            regionStates[index].belowGate = nil
            guard state != .inside else { continue }
            regionStates[index].state = .inside
            regionStates[index].since = t
            nextDue = min(nextDue, t + regionStates[index].exitAfter)
            events.append(event(state == .outside ? .enter : .inside, index, time: t))
        }
        return events
    }

    /// Lets time pass to `time`: the exits and `outside` states due by then, in time order.
    /// Nothing is due while the receiver cannot hear.
    public mutating func advance(to time: Double) -> [Event] {
        if time > now { now = time }
        guard deafness == nil, now >= nextDue else { return [] }
        var events: [Event] = []
        var next = Double.infinity
        for index in regionStates.indices {
            let region = regionStates[index]
            let due: Double
            switch region.state {
            case .inside: due = max(region.lastHeard, hearingSince) + region.exitAfter
            case .unknown: due = hearingSince + region.exitAfter
            case .outside: continue
            }
            guard due <= now else {
                next = min(next, due)
                continue
            }
            regionStates[index].state = .outside
            regionStates[index].since = due
            events.append(event(region.state == .inside ? .exit : .outside, index, time: due))
        }
        nextDue = next
        // Beacons silent for longer than a region waits are of no further use.
        if beacons.count > configuration.beaconCapacity / 2 { forgetSilentBeacons() }
        return events.sorted { ($0.time, $0.regionIndex) < ($1.time, $1.regionIndex) }
    }

    /// The receiver cannot hear from `time` on: what was due before, then every region that
    /// was inside or outside becomes `unknown`, with the reason (a region not determined yet is
    /// unknown already: no event, as a state that does not change). Nothing more while it
    /// stays deaf (a second reason changes nothing).
    public mutating func receiverDeaf(_ deafness: Deafness, at time: Double) -> [Event] {
        var events = advance(to: time)
        guard self.deafness == nil else { return events }
        self.deafness = deafness
        for index in regionStates.indices where regionStates[index].state != .unknown {
            regionStates[index].state = .unknown
            regionStates[index].since = now
            events.append(event(.unknown, index, time: now))
        }
        return events
    }

    /// The receiver hears again from `time` on: each region's exit delay counts from here.
    /// No event: a region stays unknown until it is determined again.
    public mutating func receiverHears(at time: Double) -> [Event] {
        if time > now { now = time }
        guard deafness != nil else { return [] }
        deafness = nil
        hearingSince = now
        nextDue = now
        return advance(to: now)
    }

    /// One `state` event per region: its state now, since when, and why when unknown.
    public func statusEvents() -> [Event] {
        regionStates.indices.map { event(.state, $0, time: now) }
    }

    func event(_ kind: Event.Kind, _ index: Int, time: Double) -> Event {
        let region = regionStates[index]
        let heard = region.lastHeard > -Double.infinity
        let carriesBeacon = kind != .outside && kind != .unknown && heard
        return Event(
            kind: kind, state: region.state, regionIndex: index, region: regions[index],
            beacon: carriesBeacon ? region.lastBeacon : nil, rssi: carriesBeacon ? region.lastRSSI : nil, time: time,
            lastHeard: heard ? region.lastHeard : nil, since: region.since,
            deafness: region.state == .unknown ? deafness : nil,
            belowGate: region.state == .outside || kind == .exit ? region.belowGate : nil, exitAfter: region.exitAfter)
    }

    /// Warns (once per region) when a beacon's observed interval makes its regions' exit delay
    /// shorter than three intervals.
    mutating func checkInterval(of entry: BeaconState, beacon: IBeacon) {
        for index in entry.regions where !regionStates[index].warned {
            let exitAfter = regionStates[index].exitAfter
            guard exitAfter < 3 * entry.interval else { continue }
            regionStates[index].warned = true
            intervalWarnings.append(
                IntervalWarning(region: regions[index], exitAfter: exitAfter, beacon: beacon, interval: entry.interval))
        }
    }

    /// Drops beacons not heard for the longest exit delay; if still at capacity, the
    /// longest-silent eighth.
    mutating func forgetSilentBeacons() {
        let horizon = now - longestExitAfter
        beacons = beacons.filter { $0.value.lastHeard > horizon }
        guard beacons.count >= configuration.beaconCapacity else { return }
        let excess = beacons.count - configuration.beaconCapacity + max(1, configuration.beaconCapacity / 8)
        for (id, _) in beacons.sorted(by: { $0.value.lastHeard < $1.value.lastHeard }).prefix(excess) {
            beacons[id] = nil
        }
    }
}
