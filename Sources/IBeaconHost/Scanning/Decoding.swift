import IBeaconCore

/// What `ibeacon decode` makes of bytes: legacy advertising data, or a whole HCI event packet
/// (with or without the H4 packet type) whose advertising reports are shown one by one. Every
/// AD structure is shown, with the iBeacon fields when present; malformed input is a
/// `DecodeFailure` naming what and where, never guessed at.
public enum AdvertisingDecoder {
    /// How the bytes are read.
    public enum InputKind: String, Sendable, CaseIterable {
        case auto, ad, event
    }

    /// Why bytes could not be decoded (exit 65).
    public struct DecodeFailure: Error, Sendable, CustomStringConvertible {
        public var description: String
    }

    /// What the bytes are: an event when they start with the H4 event type and LE Meta
    /// (`04 3E`) or with LE Meta (`3E`), advertising data otherwise.
    public static func kind(of bytes: [UInt8]) -> InputKind {
        let leMeta = HCIEventCode.leMeta.rawValue
        let h4Event = bytes.count >= 2 && bytes[0] == H4PacketType.event.rawValue && bytes[1] == leMeta
        return h4Event || bytes.first == leMeta ? .event : .ad
    }

    /// The decoded bytes: text lines, or one JSON object.
    public static func decode(_ bytes: [UInt8], as kind: InputKind, json: Bool) throws(DecodeFailure) -> String {
        let kind = kind == .auto ? Self.kind(of: bytes) : kind
        return kind == .ad ? try advertisingData(bytes, json: json) : try event(bytes, json: json)
    }

    static func advertisingData(_ bytes: [UInt8], json: Bool) throws(DecodeFailure) -> String {
        // Core 5.4 Vol 4 Part E §7.8.7: legacy advertising data is at most 31 octets.
        guard bytes.count <= 31 else {
            throw DecodeFailure(
                description: "decode: \(bytes.count) bytes of advertising data; legacy advertising data is at most 31 "
                    + "(Core 5.4 Vol 4 Part E §7.8.7) — for an extended advertisement pass the whole HCI event")
        }
        let structures: [ADStructure]
        do {
            structures = try ADStructure.parse(bytes)
        } catch {
            throw DecodeFailure(description: "decode: malformed advertising data: \(error)")
        }
        if json { return jsonLine([("kind", "advertisingData")] + adJSON(bytes, structures)) }
        return adLines(structures, indent: "").joined(separator: "\n")
    }

    static func event(_ bytes: [UInt8], json: Bool) throws(DecodeFailure) -> String {
        let body = bytes.first == H4PacketType.event.rawValue ? Array(bytes.dropFirst()) : bytes
        let event: HCIEvent
        do {
            event = try HCIEvent.decode(body)
        } catch {
            throw DecodeFailure(description: "decode: not a valid HCI event: \(error)")
        }
        let sightings = Sighting.all(in: event)
        if sightings.isEmpty {
            return json ? jsonLine(["kind": "event", "event": "\(event)"]) : "HCI event: \(event)"
        }
        if json { return jsonLine(["kind": "advertisingReport", "reports": sightings.map(reportJSON)]) }
        return sightings.enumerated().flatMap { i, s in reportLines(s, number: i + 1, of: sightings.count) }
            .joined(separator: "\n")
    }

    static func parseReportAD(_ s: Sighting) -> (structures: [ADStructure], error: String?) {
        do {
            return (try ADStructure.parse(Array(s.data)), nil)
        } catch {
            return ([], "malformed advertising data: \(error)")
        }
    }

    static func reportJSON(_ s: Sighting) -> JSONValue {
        let (structures, adError) = parseReportAD(s)
        var pairs: JSONPairs = [
            ("address", s.address.description), ("addressType", s.addressType.description),
            ("rssi", s.rssi.map { Int($0) }), ("extended", s.extended),
        ]
        pairs += adJSON(Array(s.data), structures)
        if let adError { pairs.append(("adError", adError)) }
        return jsonObject(pairs)
    }

    static func reportLines(_ s: Sighting, number: Int, of count: Int) -> [String] {
        let (structures, adError) = parseReportAD(s)
        let rssi = s.rssi.map { "\($0) dBm" } ?? "not available"
        let head =
            "report \(number) of \(count): \(s.address) (\(s.addressType)), RSSI \(rssi)\(s.extended ? ", extended" : "")"
        if let adError { return [head, "  \(adError)", "  data: \(Array(s.data).hexString)"] }
        return [head] + adLines(structures, indent: "  ")
    }

    static func adJSON(_ bytes: [UInt8], _ structures: [ADStructure]) -> JSONPairs {
        let beacon = IBeacon.find(in: structures)
        let ibeacon = beacon.map {
            jsonObject([
                "uuid": $0.uuidString, "major": Int($0.major), "minor": Int($0.minor),
                "measuredPower": Int($0.measuredPower),
            ])
        }
        let list = structures.map { s in
            jsonObject([
                "type": Int(s.type.rawValue), "name": s.type.name, "data": s.data.hexString, "summary": s.summary,
            ])
        }
        return [("data", bytes.hexString), ("structures", list), ("ibeacon", ibeacon)]
    }

    static func adLines(_ structures: [ADStructure], indent: String) -> [String] {
        var lines = structures.isEmpty ? ["\(indent)(no AD structures)"] : structures.map { "\(indent)\($0.summary)" }
        if let b = IBeacon.find(in: structures) {
            lines.append(
                "\(indent)iBeacon: UUID \(b.uuidString), major \(b.major) (0x\(String(b.major, radix: 16))), "
                    + "minor \(b.minor) (0x\(String(b.minor, radix: 16))), measured power \(b.measuredPower) dBm")
        }
        return lines
    }
}
