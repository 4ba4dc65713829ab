import IBeaconCore

/// What `ibeacon scan` knows about each transmitter it heard, with bounded memory: entries
/// not heard for `expiry` are dropped, and past `capacity` the longest-silent one is evicted,
/// so a scan among thousands of passing phones stays small.
public struct SightingTable: Sendable {
    public struct Entry: Sendable {
        public var address: BDAddress
        public var beacon: IBeacon?
        public var firstSeen: Double
        public var lastSeen: Double
        public var reports: Int
        /// Report times within the rate window, for reports per second.
        var recent: [Double] = []
        /// Smoothed RSSI (sliding median); nil until a report carried one.
        public var smoothedRSSI: Double? { smoother.value }
        var smoother: RSSISmoother
        public var lastRSSI: Int8?

        /// Reports per second over the last `window` seconds.
        public func rate(now: Double, window: Double) -> Double {
            let inWindow = recent.filter { $0 > now - window }.count
            let span = min(window, max(now - firstSeen, 1e-3))
            return Double(inWindow) / max(span, 1)
        }
    }

    public private(set) var entries: [BDAddress: Entry] = [:]
    public let capacity: Int
    public let expiry: Double
    public let rateWindow: Double
    /// How RSSI is smoothed per transmitter.
    public let smoothing: RSSISmoother.Mode

    public init(
        capacity: Int = 1024, expiry: Double = 60, rateWindow: Double = 5, smoothing: RSSISmoother.Mode = .median(window: 10)
    ) {
        self.capacity = capacity
        self.expiry = expiry
        self.rateWindow = rateWindow
        self.smoothing = smoothing
    }

    /// Records one sighting at `now` (seconds on any monotonic clock).
    public mutating func record(_ s: Sighting, now: Double) {
        if entries[s.address] == nil, entries.count >= capacity {
            prune(now: now)
            if entries.count >= capacity, let oldest = entries.values.min(by: { $0.lastSeen < $1.lastSeen }) {
                entries[oldest.address] = nil
            }
        }
        var e =
            entries[s.address]
            ?? Entry(
                address: s.address, beacon: nil, firstSeen: now, lastSeen: now, reports: 0,
                smoother: RSSISmoother(smoothing))
        if let b = s.beacon { e.beacon = b }
        e.lastSeen = now
        e.reports += 1
        e.recent.append(now)
        if e.recent.count > 64 || (e.recent.first ?? now) <= now - rateWindow {
            e.recent.removeAll { $0 <= now - rateWindow }
        }
        if let rssi = s.rssi {
            e.lastRSSI = rssi
            _ = e.smoother.add(Double(rssi))
        }
        entries[s.address] = e
    }

    /// Drops entries not heard for `expiry` seconds.
    public mutating func prune(now: Double) {
        entries = entries.filter { $0.value.lastSeen > now - expiry }
    }
}
