import IBeaconCore

extension BeaconRanger {
    /// Records the report `s` heard at source time `t` (`record(beacon:address:rssi:at:)`).
    public mutating func record(_ s: Sighting, at t: Double) {
        record(beacon: s.beacon, address: s.address, rssi: s.rssi, at: t)
    }
}
