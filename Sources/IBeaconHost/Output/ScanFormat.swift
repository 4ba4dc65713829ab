import IBeaconCore

/// How `scan --json --reports` writes what it hears: one line per report.
extension Sighting {
    /// Writes `--json` report lines, one per report: t, address, addressType, rssi, uuid, major,
    /// minor, measuredPower, distance, proximity, data (hex). The parts that depend on one octet
    /// or on the measured power − RSSI difference alone are spelled once per value by
    /// `JSONWriter` and copied into each line, so the text is the writer's (and so
    /// `jsonLine`'s) in every case.
    public struct ReportJSON: Sendable {
        /// `"distance":…,"proximity":"…"` for each measured power − RSSI difference, −255…255.
        let distanceMembers: JSONTextTable
        /// The quoted description of each address type, 0…255.
        let addressTypes: JSONTextTable

        public static let shared = ReportJSON()

        init() {
            distanceMembers = JSONTextTable(-255...255, maximumLength: 80) { difference, line in
                let distance = estimatedDistance(rssi: 0, measuredPower: Double(difference))
                line.number("distance", distance)
                line.string("proximity", Proximity(distance: distance).rawValue)
            }
            addressTypes = JSONTextTable(0...255, maximumLength: 512) { raw, line in
                line.string("addressType", LEAddressType(rawValue: UInt8(raw)).description)
            }
        }

        public func append(_ s: Sighting, t: Double, to buffer: inout JSONLineBuffer) {
            let b = s.beacon
            // Keys and fixed values ~250 bytes, data in hex; the address type may be escaped.
            let maximum = 300 + 6 * 80 + 2 * s.data.count
            buffer.appendLine(maximumLength: maximum) { line in
                line.number("t", t.rounded(decimals: 3), decimals: 3)
                line.address("address", s.address)
                addressTypes.withEntry(Int(s.addressType.rawValue)) { line.members($0) }
                line.integer("rssi", s.rssi.map { Int($0) })
                line.uuid("uuid", b?.proximityUUID)
                line.integer("major", b.map { Int($0.major) })
                line.integer("minor", b.map { Int($0.minor) })
                line.integer("measuredPower", b.map { Int($0.measuredPower) })
                if let b, let rssi = s.rssi {
                    distanceMembers.withEntry(Int(b.measuredPower) - Int(rssi) + 255) { line.members($0) }
                } else {
                    line.number("distance", nil)
                    line.string("proximity", b == nil ? nil : Proximity(distance: nil).rawValue)
                }
                line.hex("data", s.data)
            }
        }
    }
}

extension MQTTPublisher {
    /// Each ranged beacon's distance to `mqtt_room`: one update a second (beacons not heard in
    /// the second have no distance and are left out).
    public func publishRanging(_ update: RangingUpdate) {
        for b in update.beacons {
            guard let identity = b.identity, let distance = b.distance else { continue }
            let id = MQTTPayload.rangingID(identity)
            publishRanging(id: id, name: id, distance: distance, at: update.time)
        }
    }
}

extension RangingUpdate {
    /// Scan's lines for this update on a pipe or file: one JSON object per beacon (`json`), or
    /// a table row after the time.
    public func appendLines(json: Bool, to buffer: inout JSONLineBuffer) {
        for b in beacons {
            buffer.append(json ? b.json(t: time) + "\n" : time.fixed(1) + " " + RangingTableLayout.full.row(b) + "\n")
        }
    }

    /// The live table as a screen: the header, a row per beacon and a footer, laid out for a
    /// terminal `width` columns wide (`update` nil: nothing ranged yet).
    public static func screen(_ update: RangingUpdate?, now: Double, width: Int) -> String {
        let layout = RangingTableLayout.fitting(width: width)
        let beacons = update?.beacons ?? []
        let lines = [layout.header] + beacons.map(layout.row)
        var footer = "\(beacons.count) transmitter(s), \(now.fixed(0)) s"
        if footer.count > layout.width ?? footer.count { footer = String(footer.prefix(layout.width ?? 0)) }
        return lines.joined(separator: "\n") + "\n" + footer
    }
}

extension RangingRun.Outcome {
    /// `N reports from B beacon(s)[ and O other transmitter(s)] in T s`; the others with `all`.
    public func summary(all: Bool) -> String {
        var text = "\(ranger.reports) reports from \(ranger.beaconsHeard.count) beacon(s)"
        if all {
            text += " and \(ranger.othersOverflowed ? "over " : "")\(ranger.othersHeard.count) other transmitter(s)"
        }
        return text + " in \(time.fixed(1)) s"
    }
}
