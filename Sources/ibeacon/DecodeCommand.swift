import ArgumentParser
import IBeaconCore
import IBeaconHost

struct DecodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "decode",
        abstract: "Decode advertising data, or a whole HCI event packet (LE Advertising Report).",
        discussion: """
            HEX may use spaces, colons or 0x prefixes. An HCI event is recognised by its first \
            bytes: 04 3E … (H4, with the packet type) or 3E … (event code first); anything else \
            is read as advertising data. Every AD structure is shown, with the iBeacon fields \
            when present. Malformed input is reported with the offset, never guessed at.
            """)

    @Argument(help: ArgumentHelp("Bytes in hex.", valueName: "hex"))
    var hex: [String]

    @Option(help: "Read HEX as: auto, ad (advertising data) or event (HCI event).")
    var `as`: InputKind = .auto

    @Flag(help: "Print one JSON object.")
    var json = false

    enum InputKind: String, ExpressibleByArgument, CaseIterable {
        case auto, ad, event
    }

    func run() async throws {
        try await reporting {
            let bytes = try inputBytes()
            var kind = `as`
            if kind == .auto {
                kind = (bytes.count >= 2 && bytes[0] == 0x04 && bytes[1] == 0x3E) || bytes[0] == 0x3E ? .event : .ad
            }
            if kind == .ad {
                try decodeAdvertisingData(bytes)
            } else {
                try decodeEvent(bytes)
            }
        }
    }

    /// The HEX arguments as bytes; at least one.
    private func inputBytes() throws -> [UInt8] {
        let text = hex.joined(separator: " ")
        guard let bytes = [UInt8](hex: text) else {
            throw CLIError(
                "decode: '\(text.prefix(80))' is not hex (expected pairs of hex digits, optionally separated by spaces or colons)",
                code: Exit.dataError)
        }
        guard !bytes.isEmpty else { throw CLIError("decode: no bytes given", code: Exit.dataError) }
        return bytes
    }

    private func decodeAdvertisingData(_ bytes: [UInt8]) throws {
        // Core 5.4 Vol 4 Part E §7.8.7: legacy advertising data is at most 31 octets.
        guard bytes.count <= 31 else {
            throw CLIError(
                "decode: \(bytes.count) bytes of advertising data; legacy advertising data is at most 31 "
                    + "(Core 5.4 Vol 4 Part E §7.8.7) — for an extended advertisement pass the whole HCI event",
                code: Exit.dataError)
        }
        let structures = try parseAD(bytes, what: "advertising data")
        if json {
            printOut(jsonLine(["kind": "advertisingData"] + adJSON(bytes, structures)))
        } else {
            printAD(structures, indent: "")
        }
    }

    /// An HCI event (with or without the H4 packet type): its advertising reports, or a summary.
    private func decodeEvent(_ bytes: [UInt8]) throws {
        let body = bytes.first == 0x04 ? Array(bytes.dropFirst()) : bytes
        let event: HCIEvent
        do {
            event = try HCIEvent.decode(body)
        } catch {
            throw CLIError("decode: not a valid HCI event: \(error)", code: Exit.dataError)
        }
        let sightings = Sighting.all(in: event)
        if sightings.isEmpty {
            let summary = "\(event)"
            if json {
                printOut(jsonLine(["kind": "event", "event": summary]))
            } else {
                printOut("HCI event: \(summary)")
            }
            return
        }
        var reports: [JSONValue] = []
        for (i, s) in sightings.enumerated() {
            if json {
                reports.append(reportJSON(s))
            } else {
                printReport(s, number: i + 1, of: sightings.count)
            }
        }
        if json { printOut(jsonLine(["kind": "advertisingReport", "reports": reports])) }
    }

    /// Like scan: a report whose advertising data is malformed (common in the wild) is still a
    /// report; the problem is shown with it and it holds no iBeacon.
    private func parseReportAD(_ s: Sighting) -> (structures: [ADStructure], error: String?) {
        do {
            return (try ADStructure.parse(Array(s.data)), nil)
        } catch {
            return ([], "malformed advertising data: \(error)")
        }
    }

    private func reportJSON(_ s: Sighting) -> JSONValue {
        let (structures, adError) = parseReportAD(s)
        var pairs: JSONPairs = [
            ("address", s.address.description), ("addressType", s.addressType.description),
            ("rssi", s.rssi.map { Int($0) }), ("extended", s.extended),
        ]
        pairs += adJSON(Array(s.data), structures)
        if let adError { pairs.append(("adError", adError)) }
        return jsonObject(pairs)
    }

    private func printReport(_ s: Sighting, number: Int, of count: Int) {
        let (structures, adError) = parseReportAD(s)
        printOut(
            "report \(number) of \(count): \(s.address) (\(s.addressType)), RSSI \(s.rssi.map { "\($0) dBm" } ?? "not available")\(s.extended ? ", extended" : "")"
        )
        if let adError {
            printOut("  \(adError)")
            printOut("  data: \(Array(s.data).hexString)")
        } else {
            printAD(structures, indent: "  ")
        }
    }

    private func parseAD(_ bytes: [UInt8], what: String) throws -> [ADStructure] {
        do {
            return try ADStructure.parse(bytes)
        } catch {
            throw CLIError("decode: malformed \(what): \(error)", code: Exit.dataError)
        }
    }

    private func adJSON(_ bytes: [UInt8], _ structures: [ADStructure]) -> JSONPairs {
        let beacon = IBeacon.find(in: structures)
        return [
            ("data", bytes.hexString),
            (
                "structures",
                structures.map { s in
                    jsonObject([
                        "type": Int(s.type.rawValue), "name": s.type.name, "data": s.data.hexString,
                        "summary": s.summary,
                    ])
                }
            ),
            (
                "ibeacon",
                beacon.map {
                    jsonObject([
                        "uuid": $0.uuidString, "major": Int($0.major), "minor": Int($0.minor),
                        "measuredPower": Int($0.measuredPower),
                    ])
                }
            ),
        ]
    }

    private func printAD(_ structures: [ADStructure], indent: String) {
        if structures.isEmpty { printOut("\(indent)(no AD structures)") }
        for s in structures {
            printOut("\(indent)\(s.summary)")
        }
        if let b = IBeacon.find(in: structures) {
            printOut(
                "\(indent)iBeacon: UUID \(b.uuidString), major \(b.major) (0x\(String(b.major, radix: 16))), minor \(b.minor) (0x\(String(b.minor, radix: 16))), measured power \(b.measuredPower) dBm"
            )
        }
    }
}

func + (a: KeyValuePairs<String, (any JSONConvertible)?>, b: JSONPairs) -> JSONPairs {
    a.map { ($0.key, $0.value) } + b
}
