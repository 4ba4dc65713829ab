#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A beacon region as Core Location's `CLBeaconRegion` defines one: every beacon with a proximity
/// UUID, or with a UUID and major, or with a UUID, major and minor.
public struct BeaconRegion: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    public var proximityUUID: UUID
    public var major: UInt16?
    /// Only together with `major`, as in `CLBeaconRegion`.
    public var minor: UInt16?

    /// `name` defaults to the identity (`UUID[:MAJOR[:MINOR]]`).
    public init(name: String? = nil, proximityUUID: UUID, major: UInt16? = nil, minor: UInt16? = nil)
        throws(RegionError)
    {
        if minor != nil && major == nil {
            throw RegionError("a region with a minor needs a major too (UUID:MAJOR:MINOR)")
        }
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.name = ""
        self.name = name ?? identity
    }

    /// Parses `[NAME=]UUID[:MAJOR[:MINOR]]`, e.g. `bakery=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0:12:3`.
    public init(parsing text: String) throws(RegionError) {
        var rest = Substring(text)
        var name: String?
        if let eq = rest.firstIndex(of: "=") {
            name = String(rest[..<eq])
            rest = rest[rest.index(after: eq)...]
            if name!.isEmpty { throw RegionError("region \(text): the name before = is empty") }
        }
        let parts = rest.split(separator: ":", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count) else {
            throw RegionError("region \(text): expected [NAME=]UUID[:MAJOR[:MINOR]]")
        }
        guard let uuid = ParsedUUID(String(parts[0])) else {
            throw RegionError("region \(text): \(parts[0]) is not a UUID (8-4-4-4-12 hex digits)")
        }
        func number(_ what: String, _ s: Substring) throws(RegionError) -> UInt16 {
            guard let v = Int(s), (0...65535).contains(v) else {
                throw RegionError("region \(text): \(what) \(s) is not an integer in 0…65535")
            }
            return UInt16(v)
        }
        let major = parts.count > 1 ? try number("major", parts[1]) : nil
        let minor = parts.count > 2 ? try number("minor", parts[2]) : nil
        try self.init(name: name, proximityUUID: uuid.uuid, major: major, minor: minor)
    }

    /// `UUID`, `UUID:MAJOR` or `UUID:MAJOR:MINOR`, the UUID upper-case.
    public var identity: String {
        var s = proximityUUID.uuidString
        if let major { s += ":\(major)" }
        if let minor { s += ":\(minor)" }
        return s
    }

    public var description: String { name == identity ? name : "\(name) (\(identity))" }

    /// Whether `beacon` belongs to this region.
    public func contains(_ beacon: IBeacon) -> Bool {
        beacon.proximityUUID == proximityUUID && (major == nil || major == beacon.major)
            && (minor == nil || minor == beacon.minor)
    }
}

/// A region that cannot be built: the message says which part is wrong.
public struct RegionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Region monitoring as Core Location does it, as a pure state machine: fed sightings and the
/// passing of time (seconds on the sighting source's clock, never read from a clock here), it
/// says when each region is entered and exited.
///
/// - **enter**: the first sighting of any beacon of a region that is not inside.
/// - **exit**: a region that is inside and has heard none of its beacons for `exitAfter`
///   seconds; the event carries the time the silence reached `exitAfter`, and the beacon heard
///   last.
/// - **outside**: the initial state of a region that heard nothing in the first `exitAfter`
///   seconds after `start` (Core Location's `didDetermineState` at start).
///
/// A region stays inside while any of its beacons is heard. With `minRSSI`, sightings are judged
/// on the beacon's **smoothed** RSSI (an exponential moving average over its reports, weight
/// `smoothingWeight` per report, so one lucky packet from far away does not count) with
/// hysteresis: to enter, a beacon's smoothed RSSI must reach `minRSSI`; once inside, sightings
/// keep the region inside while the smoothed RSSI is at least `minRSSI - hysteresis`. A beacon
/// whose level wanders around the threshold therefore enters once and stays, instead of
/// flapping. Reports without RSSI (127, "not available") never count when `minRSSI` is set.
///
/// Events come out in time order provided times are fed in order; a time earlier than one
/// already seen is taken as that one (a capture's clock may step back).
public struct RegionMonitor: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Seconds of silence after which an inside region is exited (Core Location: about 30).
        public var exitAfter: Double
        /// Sightings weaker than this (smoothed, dBm) do not enter a region; nil: all count.
        public var minRSSI: Double?
        /// dB below `minRSSI` that still keep an inside region inside.
        public var hysteresis: Double
        /// Weight of each new report in the smoothed RSSI (1 = no smoothing).
        public var smoothingWeight: Double
        /// At most this many beacons' RSSI state is kept (a UUID region may match a crowd);
        /// beyond it the longest-silent are forgotten.
        public var beaconCapacity: Int

        public init(
            exitAfter: Double = 30, minRSSI: Double? = nil, hysteresis: Double = 6, smoothingWeight: Double = 0.125,
            beaconCapacity: Int = 4096
        ) {
            self.exitAfter = exitAfter
            self.minRSSI = minRSSI
            self.hysteresis = hysteresis
            self.smoothingWeight = smoothingWeight
            self.beaconCapacity = beaconCapacity
        }
    }

    public enum State: String, Sendable {
        case unknown, inside, outside
    }

    public struct Event: Sendable, Equatable, CustomStringConvertible {
        public enum Kind: String, Sendable {
            case enter, exit, outside
        }
        public var kind: Kind
        /// Index of the region in `regions`.
        public var regionIndex: Int
        public var region: BeaconRegion
        /// The beacon that entered the region, or the one heard last before the exit; nil for
        /// `outside`.
        public var beacon: IBeacon?
        /// RSSI of that beacon's report (the raw value, dBm), nil when unknown.
        public var rssi: Int8?
        /// When it happened, on the source's clock.
        public var time: Double
        /// For `exit`: when the region was last heard.
        public var lastHeard: Double?

        public var description: String {
            "\(kind.rawValue) \(region.name) at \(time)" + (beacon.map { " by \($0.major):\($0.minor)" } ?? "")
        }
    }

    struct RegionState: Sendable {
        var state: State = .unknown
        var lastHeard = -Double.infinity
        var lastBeacon: IBeacon?
        var lastRSSI: Int8?
    }

    /// What is known of one beacon that belongs to at least one region.
    struct BeaconState: Sendable {
        var regions: [Int]
        var smoothedRSSI: Double?
        var lastHeard: Double

        /// One report at `t`; returns the updated state.
        mutating func record(_ rssi: Int8?, at t: Double, exitAfter: Double, weight: Double) -> BeaconState {
            // Back after a silence longer than a region waits: its old level says nothing now.
            if t - lastHeard > exitAfter { smoothedRSSI = nil }
            lastHeard = t
            if let rssi {
                let x = Double(rssi)
                smoothedRSSI = smoothedRSSI.map { $0 + weight * (x - $0) } ?? x
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
    var regionStates: [RegionState]
    var beacons: [Identity: BeaconState] = [:]
    /// No exit or outside is due before this time (may be early, never late).
    var nextDue: Double

    public init(regions: [BeaconRegion], configuration: Configuration = .init(), start: Double = 0) {
        self.regions = regions
        self.configuration = configuration
        self.start = start
        self.now = start
        self.regionStates = Array(repeating: RegionState(), count: regions.count)
        self.nextDue = start + configuration.exitAfter
    }

    /// The state of each region, in the order of `regions`.
    public var states: [State] { regionStates.map(\.state) }

    /// The smoothed RSSI of a beacon, if it belongs to a region and has been heard with RSSI.
    public func smoothedRSSI(of beacon: IBeacon) -> Double? {
        beacons[Identity(uuid: beacon.proximityUUID, major: beacon.major, minor: beacon.minor)]?.smoothedRSSI
    }

    /// Number of beacons whose RSSI state is kept.
    public var trackedBeacons: Int { beacons.count }

    /// One report of `beacon` at `time`: the exits and initial states due by then, then the
    /// enters it causes.
    public mutating func observe(_ beacon: IBeacon, rssi: Int8?, at time: Double) -> [Event] {
        var events = advance(to: time)
        let t = now
        let id = Identity(uuid: beacon.proximityUUID, major: beacon.major, minor: beacon.minor)
        let exitAfter = configuration.exitAfter
        let weight = configuration.smoothingWeight
        // A known beacon is updated in place: one hash lookup, no copy of its state.
        var entry: BeaconState
        if let updated = beacons[id]?.record(rssi, at: t, exitAfter: exitAfter, weight: weight) {
            entry = updated
        } else {
            let matching = regions.indices.filter { regions[$0].contains(beacon) }
            if matching.isEmpty { return events }
            if beacons.count >= configuration.beaconCapacity { forgetSilentBeacons() }
            entry = BeaconState(regions: matching, smoothedRSSI: nil, lastHeard: t)
            _ = entry.record(rssi, at: t, exitAfter: exitAfter, weight: weight)
            beacons[id] = entry
        }
        for index in entry.regions {
            var region = regionStates[index]
            let inside = region.state == .inside
            if let minRSSI = configuration.minRSSI {
                guard let level = entry.smoothedRSSI, rssi != nil else { continue }
                let threshold = inside ? minRSSI - configuration.hysteresis : minRSSI
                guard level >= threshold else { continue }
            }
            region.lastHeard = t
            region.lastBeacon = beacon
            region.lastRSSI = rssi
            if !inside {
                region.state = .inside
                nextDue = min(nextDue, t + configuration.exitAfter)
                events.append(
                    Event(kind: .enter, regionIndex: index, region: regions[index], beacon: beacon, rssi: rssi, time: t)
                )
            }
            regionStates[index] = region
        }
        return events
    }

    /// Lets time pass to `time`: the exits and initial `outside` states due by then, in time order.
    public mutating func advance(to time: Double) -> [Event] {
        if time > now { now = time }
        guard now >= nextDue else { return [] }
        var events: [Event] = []
        var next = Double.infinity
        let exitAfter = configuration.exitAfter
        for index in regionStates.indices {
            let region = regionStates[index]
            switch region.state {
            case .inside:
                let due = region.lastHeard + exitAfter
                if due <= now {
                    regionStates[index].state = .outside
                    events.append(
                        Event(
                            kind: .exit, regionIndex: index, region: regions[index], beacon: region.lastBeacon,
                            rssi: region.lastRSSI, time: due, lastHeard: region.lastHeard))
                } else {
                    next = min(next, due)
                }
            case .unknown:
                let due = start + exitAfter
                if due <= now {
                    regionStates[index].state = .outside
                    events.append(Event(kind: .outside, regionIndex: index, region: regions[index], time: due))
                } else {
                    next = min(next, due)
                }
            case .outside:
                break
            }
        }
        nextDue = next
        // Beacons silent for longer than a region waits are of no further use.
        if beacons.count > configuration.beaconCapacity / 2 { forgetSilentBeacons() }
        return events.sorted { ($0.time, $0.regionIndex) < ($1.time, $1.regionIndex) }
    }

    /// Drops beacons not heard for `exitAfter`; if still at capacity, the longest-silent eighth.
    mutating func forgetSilentBeacons() {
        let horizon = now - configuration.exitAfter
        beacons = beacons.filter { $0.value.lastHeard > horizon }
        guard beacons.count >= configuration.beaconCapacity else { return }
        let excess = beacons.count - configuration.beaconCapacity + max(1, configuration.beaconCapacity / 8)
        for (id, _) in beacons.sorted(by: { $0.value.lastHeard < $1.value.lastHeard }).prefix(excess) {
            beacons[id] = nil
        }
    }
}
