#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A beacon as Core Location ranges it: proximity UUID, major and minor. Measured power and the
/// address are not part of it: a beacon (or a phone) that rotates its address, or is
/// re-calibrated, is still the same beacon.
public struct BeaconIdentity: Hashable, Sendable, Comparable, CustomStringConvertible {
    public var proximityUUID: UUID
    public var major: UInt16
    public var minor: UInt16

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
    }

    public init(_ beacon: IBeacon) {
        self.init(proximityUUID: beacon.proximityUUID, major: beacon.major, minor: beacon.minor)
    }

    /// `UUID:MAJOR:MINOR`, the UUID upper-case (the spelling of `--region`).
    public var description: String { "\(proximityUUID.uuidString):\(major):\(minor)" }

    public static func < (a: BeaconIdentity, b: BeaconIdentity) -> Bool {
        let (x, y) = (a.proximityUUID.bytes, b.proximityUUID.bytes)
        if x != y { return x.lexicographicallyPrecedes(y) }
        return (a.major, a.minor) < (b.major, b.minor)
    }
}

/// One ranged beacon in one second, as Core Location's `CLBeacon` reports it in
/// `didRangeBeacons` (once a second). The value `ibeacon scan` shows, prints with `--json`
/// and publishes.
public struct RangedBeacon: Sendable, Equatable {
    /// nil for a transmitter that is not an iBeacon (`scan --all`), ranged by its address.
    public var identity: BeaconIdentity?
    /// Measured power of the latest report (dBm at 1 m); nil when not an iBeacon.
    public var measuredPower: Int8?
    /// `CLBeacon.rssi`: the mean RSSI of the reports of the second (the quantity `calibrate`
    /// averages into measured power); nil when none carried one — not heard in the second, or
    /// only "RSSI not available" (Core Location says 0).
    public var rssi: Double?
    /// `CLBeacon.accuracy`: metres by the log-distance model from `rssi` and `measuredPower`;
    /// nil when unknown (Core Location says -1).
    public var distance: Double?
    /// From `distance`; `unknown` when the beacon was not heard in the second.
    public var proximity: Proximity
    /// Reports heard in the second (with or without RSSI): the rate in reports per second.
    public var count: Int
    /// The addresses the beacon was heard from lately (within the ranger's `forgetAfter`), the
    /// most recent first; at most `BeaconRanger.Configuration.addressLimit`.
    public var addresses: [BDAddress]
    /// Source time of the latest report.
    public var lastHeard: Double

    public init(
        identity: BeaconIdentity?, measuredPower: Int8?, rssi: Double?, count: Int, addresses: [BDAddress],
        lastHeard: Double
    ) {
        self.identity = identity
        self.measuredPower = measuredPower
        self.rssi = rssi
        self.count = count
        self.addresses = addresses
        self.lastHeard = lastHeard
        distance = rssi.flatMap { r in measuredPower.flatMap { estimatedDistance(rssi: r, measuredPower: Double($0)) } }
        proximity = Proximity(distance: distance)
    }

    /// Nearest first, as Core Location lists ranged beacons: beacons with a distance by
    /// distance, then other transmitters heard in the second by RSSI, then what was not heard
    /// (the most recently heard first); ties by identity, then address, so the order is stable.
    public static func nearerFirst(_ a: RangedBeacon, _ b: RangedBeacon) -> Bool {
        func rank(_ x: RangedBeacon) -> (Int, Double) {
            if let d = x.distance { return (0, d) }
            if let r = x.rssi { return (1, -r) }
            return (2, -x.lastHeard)
        }
        let (ra, rb) = (rank(a), rank(b))
        if ra != rb { return ra < rb }
        switch (a.identity, b.identity) {
        case (let x?, let y?) where x != y: return x < y
        case (.some, nil): return true
        case (nil, .some): return false
        default: return (a.addresses.first?.uint48 ?? 0) < (b.addresses.first?.uint48 ?? 0)
        }
    }
}

/// What a ranger says once a second: the beacons ranged in one second of source time, nearest
/// first (`didRangeBeacons`).
public struct RangingUpdate: Sendable, Equatable {
    /// The second reported: the reports at source times `second ..< second + 1`.
    public var second: Int
    /// When the update was due: the end of the second (`second + 1`), or for the last update of
    /// a run that ended inside a second, the end of the run.
    public var time: Double
    public var beacons: [RangedBeacon]

    public init(second: Int, time: Double, beacons: [RangedBeacon]) {
        self.second = second
        self.time = time
        self.beacons = beacons
    }
}

/// Ranging as Core Location does it, as a pure state machine: fed reports and the passing of
/// time (seconds on the sighting source's clock; never read from a clock here), it gives one
/// `RangingUpdate` per second of source time.
///
/// - One entry per beacon identity (UUID, major, minor), whatever address it is heard from;
///   a transmitter that is not an iBeacon is one entry per address.
/// - Its RSSI in an update is the mean of the reports of that whole second (`SecondSum`, the
///   sum `calibrate` averages), and distance and proximity come from it. A beacon not heard in
///   the second has no RSSI and proximity `unknown`.
/// - A beacon not heard for `forgetAfter` seconds is dropped (Core Location lists a silent
///   beacon as unknown for a few seconds; the Android Beacon Library drops it after 5–10 s).
/// - Memory is bounded: at most `capacity` entries (the longest-silent eighth is evicted at
///   once when full, so a crowd of passing phones under `--all` stays small).
///
/// Seconds are whole seconds of source time. An update for second `k` is made once a report or
/// `advance(to:)` reaches `k + 1`; seconds in which nothing was listed are skipped. A time
/// earlier than one already seen counts as that one (a capture's clock may step back).
public struct BeaconRanger: Sendable {
    public struct Configuration: Sendable, Equatable {
        /// Seconds without a report after which a beacon leaves the list (at least 1).
        public var forgetAfter: Double
        /// At most this many transmitters are kept.
        public var capacity: Int
        /// At most this many addresses are kept per beacon (a beacon rotating its address
        /// every few minutes has one or two; a spoofed identity cannot grow the list).
        public var addressLimit: Int

        public init(forgetAfter: Double = 5, capacity: Int = 1024, addressLimit: Int = 8) {
            self.forgetAfter = max(1, forgetAfter)
            self.capacity = max(1, capacity)
            self.addressLimit = max(1, addressLimit)
        }
    }

    enum Key: Hashable, Sendable {
        case beacon(BeaconIdentity)
        case address(BDAddress)
    }

    struct Entry: Sendable {
        var identity: BeaconIdentity?
        var measuredPower: Int8?
        /// The second in progress for this entry, its RSSI sum and its report count.
        var second: Int
        var sum = SecondSum()
        var count = 0
        var lastHeard: Double
        /// (address, last heard), most recent first.
        var addresses: [(BDAddress, Double)] = []

        mutating func heard(from address: BDAddress, at t: Double, limit: Int) {
            if let i = addresses.firstIndex(where: { $0.0 == address }) {
                if i == 0 {
                    addresses[0].1 = t
                    return
                }
                addresses.remove(at: i)
            } else if addresses.count >= limit {
                addresses.removeLast()
            }
            addresses.insert((address, t), at: 0)
        }
    }

    public let configuration: Configuration
    private(set) var entries: [Key: Entry] = [:]
    /// The next second to report; nil before the first report.
    private var nextSecond: Int?
    /// The latest source time seen.
    public private(set) var time: Double = 0
    private var pending: [RangingUpdate] = []
    /// Reports recorded.
    public private(set) var reports = 0
    /// Every beacon identity heard in the run.
    public private(set) var beaconsHeard: Set<BeaconIdentity> = []
    /// Addresses of the other transmitters heard (`--all`), up to `otherLimit`.
    public private(set) var othersHeard: Set<BDAddress> = []
    /// More other transmitters were heard than `othersHeard` holds.
    public private(set) var othersOverflowed = false
    public static let otherLimit = 65536

    public init(_ configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    /// Transmitters in the list now.
    public var count: Int { entries.count }

    /// Records one report heard at source time `t` (seconds): `beacon` is the iBeacon in it,
    /// nil for another advertisement; `rssi` nil when the controller said "not available".
    /// Makes the updates of the seconds `t` completes first (`takeUpdates()`).
    public mutating func record(beacon: IBeacon?, address: BDAddress, rssi: Int8?, at t: Double) {
        let t = t.isFinite ? max(t, time) : time
        advance(to: t)
        let k = Self.second(t)
        if nextSecond == nil { nextSecond = k }
        reports += 1
        let key: Key = beacon.map { .beacon(BeaconIdentity($0)) } ?? .address(address)
        if entries[key] == nil { add(key, second: k, at: t) }
        entries[key]?.record(beacon: beacon, address: address, rssi: rssi, second: k, at: t, configuration)
    }

    private mutating func add(_ key: Key, second: Int, at t: Double) {
        if entries.count >= configuration.capacity { makeRoom() }
        var identity: BeaconIdentity?
        switch key {
        case .beacon(let id):
            identity = id
            beaconsHeard.insert(id)
        case .address(let address):
            if othersHeard.count < Self.otherLimit {
                othersHeard.insert(address)
            } else if !othersHeard.contains(address) {
                othersOverflowed = true
            }
        }
        entries[key] = Entry(identity: identity, second: second, lastHeard: t)
    }

    /// Full: the longest-silent eighth of the table goes at once.
    private mutating func makeRoom() {
        let excess = entries.count - configuration.capacity + max(1, configuration.capacity / 8)
        for (key, _) in entries.sorted(by: { $0.value.lastHeard < $1.value.lastHeard }).prefix(excess) {
            entries[key] = nil
        }
    }

    /// Makes the updates of every second completed by source time `t`.
    public mutating func advance(to t: Double) {
        if t.isFinite && t > time { time = t }
        guard var next = nextSecond else { return }
        let done = Self.second(time)
        while next < done {
            if entries.isEmpty {
                next = done
                break
            }
            pending.append(update(second: next, time: Double(next + 1)))
            next += 1
        }
        nextSecond = next
    }

    /// The end of the run at source time `t`: the updates of the completed seconds, then one
    /// for the second in progress when anything was heard in it (due at `t`).
    public mutating func finish(at t: Double) {
        advance(to: t)
        guard let next = nextSecond, entries.values.contains(where: { $0.second == next && $0.count > 0 }) else {
            return
        }
        pending.append(update(second: next, time: time))
        nextSecond = next + 1
    }

    /// The updates made since the last call, oldest first.
    public mutating func takeUpdates() -> [RangingUpdate] {
        defer { pending.removeAll(keepingCapacity: true) }
        return pending
    }

    /// Whether updates are waiting for `takeUpdates()`.
    public var hasUpdates: Bool { !pending.isEmpty }

    /// The update for `second`: drops what has been silent for `forgetAfter` by `time`.
    private mutating func update(second: Int, time: Double) -> RangingUpdate {
        let horizon = time - configuration.forgetAfter
        entries = entries.filter { $0.value.lastHeard >= horizon }
        var beacons: [RangedBeacon] = []
        beacons.reserveCapacity(entries.count)
        for e in entries.values {
            let current = e.second == second
            beacons.append(
                RangedBeacon(
                    identity: e.identity, measuredPower: e.measuredPower, rssi: current ? e.sum.mean : nil,
                    count: current ? e.count : 0, addresses: e.addresses.filter { $0.1 >= horizon }.map(\.0),
                    lastHeard: e.lastHeard))
        }
        beacons.sort(by: RangedBeacon.nearerFirst)
        return RangingUpdate(second: second, time: time, beacons: beacons)
    }

    static func second(_ t: Double) -> Int {
        guard t.isFinite, t > 0 else { return 0 }
        return t < 1e15 ? Int(t.rounded(.down)) : Int(1e15)
    }
}

extension BeaconRanger.Entry {
    mutating func record(
        beacon: IBeacon?, address: BDAddress, rssi: Int8?, second k: Int, at t: Double,
        _ configuration: BeaconRanger.Configuration
    ) {
        if second != k {
            second = k
            sum = SecondSum()
            count = 0
        }
        if let beacon { measuredPower = beacon.measuredPower }
        count += 1
        if let rssi { sum.add(Int(rssi)) }
        lastHeard = t
        heard(from: address, at: t, limit: configuration.addressLimit)
    }
}
