/// How a region event is shown: one text line, one JSON object, a hook's environment, and the
/// MQTT attributes' reason. `monitor` prints and publishes these; the formats are pinned by the
/// end-to-end tests on the real captures.
extension RegionMonitor.Event {
    /// For `outside` and `unknown` the identity is the region's (no beacon caused it).
    public var identity: (uuid: String, major: UInt16?, minor: UInt16?) {
        if let beacon { return (beacon.uuidString, beacon.major, beacon.minor) }
        return (region.proximityUUID.uuidString, region.major, region.minor)
    }

    /// The region's state after this event, as MQTT publishes it.
    public var presence: RegionPresence { state }

    /// Why the region is in that state, in words (the MQTT attributes' `reason`).
    public var reason: String {
        let id = identity
        let who = "\(id.uuid) \(id.major.map(String.init) ?? "*") \(id.minor.map(String.init) ?? "*")"
        switch state {
        case .inside: return "heard \(who)" + (rssi.map { " at \($0) dBm" } ?? "")
        case .unknown: return deafness.map { "the receiver cannot hear: \($0)" } ?? "not determined yet"
        case .outside:
            if let belowGate { return "heard only below --min-rssi (smoothed \(belowGate.fixed(1)) dBm)" }
            if let silent { return "no beacon heard for \(silent.fixed(1)) s" }
            return "not heard for \(exitAfter.clean) s"
        }
    }

    /// A wall-clock time to the millisecond, `2026-11-24T07:12:03.123Z`.
    private static func stamp(_ unixSeconds: Double) -> String { iso8601(unixSeconds: unixSeconds, milliseconds: true) }

    /// A time for text: the wall clock, or `t+SECONDS s` in a capture.
    private static func when(_ t: Double, origin: Double?) -> String {
        origin.map { stamp($0 + t) } ?? "t+\(t.fixed(3)) s"
    }

    /// One compact JSON object, keys in a fixed order; times with exactly 3 decimals. `final`
    /// marks the state lines at the end of a run.
    public func json(wallClock: Double?, origin: Double?, final: Bool = false) -> String {
        func decimal(_ v: Double, _ digits: Int) -> JSONValue { .decimal(v, fractionDigits: digits) }
        let id = identity
        var members: JSONPairs = [
            ("event", kind.rawValue), ("state", state.rawValue), ("region", region.name), ("uuid", id.uuid),
            ("major", id.major), ("minor", id.minor), ("rssi", rssi), ("time", wallClock.map(Self.stamp)),
            ("t", decimal(time, 3)),
        ]
        if let lastHeard, kind == .exit || kind == .state { members.append(("lastHeard", decimal(lastHeard, 3))) }
        if let silent { members.append(("silent", decimal(silent, 3))) }
        if let belowGate { members.append(("belowGate", decimal(belowGate, 1))) }
        if let deafness { members += [("cause", deafness.cause.rawValue), ("reason", deafness.reason)] }
        if kind == .state {
            members += [
                ("since", decimal(since, 3)), ("sinceTime", origin.map { Self.stamp($0 + since) }), ("final", final),
            ]
        }
        return jsonLine(members)
    }

    public func text(wallClock: Double?, origin: Double?, final: Bool = false) -> String {
        let label = kind == .state && final ? "final" : kind.rawValue
        let head =
            (wallClock.map(Self.stamp) ?? "t+\(time.fixed(3)) s") + " " + label.padded(7) + " "
            + region.name.escapedForTerminal
        let id = identity
        let who = "\(id.uuid) \(id.major.map(String.init) ?? "*") \(id.minor.map(String.init) ?? "*")"
        let level = rssi.map { "\($0) dBm" } ?? "RSSI n/a"
        let gate = belowGate.map { "heard only below --min-rssi (smoothed \($0.fixed(1)) dBm)" }
        switch kind {
        case .enter, .inside:
            return "\(head): \(who) at \(level)"
        case .exit:
            let silent = silent.map { $0.fixed(1) } ?? "?"
            if let gate { return "\(head): \(gate) for \(silent) s; last counted \(who) at \(level)" }
            return "\(head): silent for \(silent) s; last heard \(who) at \(level)"
        case .outside:
            return "\(head): \(gate ?? "not heard") in \(exitAfter.fixed(1)) s of scanning"
        case .unknown:
            return "\(head): \((deafness?.reason ?? "the receiver cannot hear").escapedForTerminal)"
        case .state:
            var line = "\(head): \(state.rawValue) since \(Self.when(since, origin: origin))"
            if let deafness { line += " (\(deafness.reason.escapedForTerminal))" }
            if state == .unknown && deafness == nil { line += " (not determined yet)" }
            if let lastHeard { line += "; last heard at \(Self.when(lastHeard, origin: origin))" }
            return line
        }
    }

    public func hookVariables(wallClock: Double?) -> [(String, String)] {
        let id = identity
        return [
            ("IBEACON_EVENT", kind.rawValue), ("IBEACON_STATE", state.rawValue), ("IBEACON_REGION", region.name),
            ("IBEACON_UUID", id.uuid), ("IBEACON_MAJOR", id.major.map(String.init) ?? ""),
            ("IBEACON_MINOR", id.minor.map(String.init) ?? ""), ("IBEACON_RSSI", rssi.map(String.init) ?? ""),
            ("IBEACON_TIME", wallClock.map(Self.stamp) ?? ""), ("IBEACON_T", time.fixed(3)),
            ("IBEACON_SILENT_S", silent.map { $0.fixed(3) } ?? ""), ("IBEACON_REASON", deafness?.reason ?? ""),
        ]
    }
}
