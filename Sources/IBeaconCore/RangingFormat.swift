/// How `scan --json` writes what it ranges: one line per ranged beacon per second.
extension RangedBeacon {
    /// One ranging update of one beacon as a JSON line: t (the end of the second), uuid, major,
    /// minor, measuredPower, rssi (the mean of the second, null when not heard), distance,
    /// proximity, count (reports in the second), addresses (most recent first), lastHeard.
    public func json(t: Double) -> String {
        let id = identity
        let b = self
        return jsonLine([
            ("t", t.rounded(decimals: 3)),
            ("uuid", id?.proximityUUID.uuidString), ("major", id.map { Int($0.major) }),
            ("minor", id.map { Int($0.minor) }), ("measuredPower", b.measuredPower.map { Int($0) }),
            ("rssi", b.rssi), ("distance", b.distance),
            ("proximity", id == nil ? nil : b.proximity.rawValue), ("count", b.count),
            ("addresses", b.addresses.map(\.description)), ("lastHeard", b.lastHeard.rounded(decimals: 3)),
        ])
    }
}
