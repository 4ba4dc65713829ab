import IBeaconCore

/// What `ibeacon scan` knows about each transmitter it heard, with bounded memory: entries
/// not heard for `expiry` are dropped, and at `capacity` the longest-silent ones are evicted
/// (an eighth of the table at a time), so a scan among thousands of passing phones stays small. Recording a report is O(1) and
/// allocation-free once the transmitter is known.
public struct SightingTable: Sendable {
    public struct Entry: Sendable {
        public var address: BDAddress
        public var beacon: IBeacon?
        public var firstSeen: Double
        public var lastSeen: Double
        public var reports: Int
        /// Reports counted in the current rate window, and when it started.
        var windowStart: Double
        var windowCount = 0
        /// Reports per second over the last completed window.
        var lastRate: Double?
        var smoother: RSSISmoother
        public var lastRSSI: Int8?

        /// Smoothed RSSI (sliding median); nil until a report carried one.
        public var smoothedRSSI: Double? { smoother.value }

        /// Reports per second: over the last completed window, or since first heard.
        public func rate(now: Double, window: Double) -> Double {
            if let lastRate, now - windowStart < 2 * window { return lastRate }
            return Double(windowCount) / max(now - windowStart, 1)
        }

        mutating func record(_ s: Sighting, now: Double, window: Double) {
            if let b = s.beacon { beacon = b }
            lastSeen = now
            reports += 1
            if now - windowStart >= window {
                lastRate = Double(windowCount) / (now - windowStart)
                windowStart = now
                windowCount = 0
            }
            windowCount += 1
            if let rssi = s.rssi {
                lastRSSI = rssi
                _ = smoother.add(Double(rssi))
            }
        }
    }

    public private(set) var entries: [BDAddress: Entry] = [:]
    public let capacity: Int
    public let expiry: Double
    public let rateWindow: Double
    /// How RSSI is smoothed per transmitter.
    public let smoothing: RSSISmoother.Mode

    public init(
        capacity: Int = 1024, expiry: Double = 60, rateWindow: Double = 5,
        smoothing: RSSISmoother.Mode = .median(window: 10)
    ) {
        self.capacity = capacity
        self.expiry = expiry
        self.rateWindow = rateWindow
        self.smoothing = smoothing
    }

    /// Records one sighting at `now` (seconds on any monotonic clock).
    public mutating func record(_ s: Sighting, now: Double) {
        if entries[s.address] == nil {
            if entries.count >= capacity { makeRoom(now: now) }
            entries[s.address] = Entry(
                address: s.address, beacon: nil, firstSeen: now, lastSeen: now, reports: 0, windowStart: now,
                smoother: RSSISmoother(smoothing))
        }
        // Mutated in place through the subscript: no copy of the entry per report.
        entries[s.address]?.record(s, now: now, window: rateWindow)
    }

    /// Full: drops the expired entries, and if that is not enough, the longest-silent eighth of
    /// the table at once, so a crowd of new addresses costs one sort per `capacity / 8`
    /// newcomers instead of a pass over the whole table for each.
    mutating func makeRoom(now: Double) {
        prune(now: now)
        guard entries.count >= capacity else { return }
        let excess = entries.count - capacity + max(1, capacity / 8)
        for entry in entries.values.sorted(by: { $0.lastSeen < $1.lastSeen }).prefix(excess) {
            entries[entry.address] = nil
        }
    }

    /// Drops entries not heard for `expiry` seconds.
    public mutating func prune(now: Double) {
        entries = entries.filter { $0.value.lastSeen > now - expiry }
    }
}
