import IBeaconCore

/// What `encode` prints of a beacon: its advertising data and the HCI commands that put it on
/// the air, as `advertise` sends them after reading the controller's address and features.
public struct EncodeListing {
    public var spec: BeaconSpec
    /// `legacy` or `extended`.
    public var mode: String
    public var commands: [any HCICommand]

    /// The commands of one command set: legacy, or extended (advertising off, the set's
    /// commands, enable).
    public init(spec: BeaconSpec, extended: Bool) throws {
        self.spec = spec
        mode = extended ? "extended" : "legacy"
        commands =
            extended
            ? [try LESetExtendedAdvertisingEnable(enable: false, sets: [])]
                + (try Advertiser.extendedSetCommands(for: spec, handle: 0))
                + [try Advertiser.extendedEnableCommand(count: 1)]
            : try Advertiser.legacyCommands(for: spec)
    }

    /// `--json`: one object.
    public var json: String {
        let beacon = spec.beacon
        return jsonLine([
            "uuid": beacon.uuidString, "major": Int(beacon.major), "minor": Int(beacon.minor),
            "measuredPower": Int(beacon.measuredPower), "intervalMs": spec.intervalMilliseconds,
            "advertisingData": beacon.advertisingData.hexString, "mode": mode,
            "commands": commands.map { c in
                jsonObject([
                    "name": type(of: c).opcode.name, "opcode": type(of: c).opcode.hex, "h4": c.packet.bytes.hexString,
                ])
            },
        ])
    }

    /// The text: a comment line for the beacon, the advertising data, then one H4 packet in hex
    /// per command with its name.
    public var lines: [String] {
        let beacon = spec.beacon
        let data = beacon.advertisingData
        return [
            "# \(beacon.uuidString) major \(beacon.major) minor \(beacon.minor), measured power \(beacon.measuredPower) dBm, every \(spec.intervalMilliseconds) ms",
            "# advertising data (\(data.count) bytes):", data.hexString,
            "# HCI commands (\(mode) advertising), H4:",
        ] + commands.map { "\($0.packet.bytes.hexString)  # \(type(of: $0).opcode)" }
    }
}

extension Profile {
    /// `profile check --json`: one object for the valid profile read from `file`.
    public func checkJSON(file: String) -> String {
        let b = iBeacon
        return jsonLine([
            "file": file, "valid": true, "name": name, "uuid": b.uuidString, "major": Int(b.major),
            "minor": Int(b.minor), "measuredPower": Int(b.measuredPower), "intervalMs": intervalMs,
            "txPower": txPower, "advertisingData": b.advertisingData.hexString,
            "calibrated": calibrationRecord != nil,
        ])
    }

    /// `profile check`: what the valid profile read from `file` advertises, and whether it is
    /// calibrated (if not, how to).
    public func checkLines(file: String) -> [String] {
        let b = iBeacon
        var lines = [
            "\(file.escapedForTerminal): ok\(name.map { " — \($0.escapedForTerminal)" } ?? "")",
            "  \(b.uuidString) major \(b.major) minor \(b.minor), measured power \(b.measuredPower) dBm, every \(intervalMs) ms",
        ]
        if let tx = txPower { lines.append("  TX power \(tx) dBm (extended advertising)") }
        if let c = calibrationRecord {
            lines.append("  calibrated \(c.timestamp): \(c.samples) samples, ±\(c.interval95.fixed(2)) dB")
        } else {
            lines.append("  not calibrated: run `ibeacon calibrate --profile \(file)` with a receiver 1 m away")
        }
        lines.append("  advertising data: \(b.advertisingData.hexString)")
        return lines
    }
}
