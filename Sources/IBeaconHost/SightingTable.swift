import Foundation
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
        /// Exponentially smoothed RSSI; nil until a report carried one.
        public var smoothedRSSI: Double?
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
    /// Weight of a new sample in the smoothed RSSI (0…1).
    public let smoothing: Double

    public init(capacity: Int = 1024, expiry: Double = 60, rateWindow: Double = 5, smoothing: Double = 0.2) {
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
        var e = entries[s.address] ?? Entry(address: s.address, beacon: nil, firstSeen: now, lastSeen: now, reports: 0)
        if let b = s.beacon { e.beacon = b }
        e.lastSeen = now
        e.reports += 1
        e.recent.append(now)
        if e.recent.count > 64 || (e.recent.first ?? now) <= now - rateWindow {
            e.recent.removeAll { $0 <= now - rateWindow }
        }
        if let rssi = s.rssi {
            e.lastRSSI = rssi
            e.smoothedRSSI = e.smoothedRSSI.map { $0 + smoothing * (Double(rssi) - $0) } ?? Double(rssi)
        }
        entries[s.address] = e
    }

    /// Drops entries not heard for `expiry` seconds.
    public mutating func prune(now: Double) {
        entries = entries.filter { $0.value.lastSeen > now - expiry }
    }
}

/// Distance from RSSI with the log-distance path-loss model: d = 10^((P - RSSI) / (10 n)),
/// where P is the measured power (RSSI at 1 m) and n the path-loss exponent (2 in free space;
/// 2–4 indoors).
public func estimatedDistance(rssi: Double, measuredPower: Int8, pathLossExponent: Double = 2) -> Double {
    pow(10, (Double(measuredPower) - rssi) / (10 * pathLossExponent))
}

/// Core Location's proximity classes. Thresholds (by estimated distance): immediate below
/// 0.5 m, near up to 3 m, far beyond; unknown without RSSI.
public enum Proximity: String, Sendable {
    case immediate, near, far, unknown

    public init(distance: Double?) {
        guard let d = distance, d.isFinite else {
            self = .unknown
            return
        }
        self = d < 0.5 ? .immediate : d <= 3 ? .near : .far
    }
}
