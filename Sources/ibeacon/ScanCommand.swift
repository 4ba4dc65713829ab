import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Show the iBeacons nearby: identity, rate, RSSI, estimated distance and proximity.",
        discussion: """
            Scans passively with duplicate filtering off, so every advertisement counts. On a \
            terminal it shows a live table; otherwise it prints one line per beacon per second. \
            --json prints one JSON object per report heard, for scripts.

            Distance uses the log-distance model d = 10^((measured power - RSSI) / 20) on the \
            smoothed RSSI; proximity is immediate below 0.5 m, near up to 3 m, far beyond, \
            unknown when the receiver reports no RSSI.
            """)

    @OptionGroup var device: DeviceOptions

    @Option(help: ArgumentHelp("Only beacons with this proximity UUID.", valueName: "uuid"))
    var uuid: String?
    @Option(help: ArgumentHelp("Only beacons with this major.", valueName: "n"))
    var major: Int?
    @Option(help: ArgumentHelp("Only beacons with this minor.", valueName: "n"))
    var minor: Int?
    @Flag(help: "Also show advertisements that are not iBeacons.")
    var all = false
    @OptionGroup var stopAfter: DurationOption<UntilInterrupted>
    @Option(help: "Scanning commands: auto, legacy or extended.")
    var mode: AdvertisingMode = .auto
    @Flag(help: "One JSON object per report, one per line.")
    var json = false
    @OptionGroup var mqtt: MQTTOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if let uuid, UUID(uuidString: uuid) == nil { throw ValidationError("--uuid \(uuid) is not a UUID") }
        try validateMajorMinor(major, minor)
    }

    /// Which reports to show, read once from the options (an option's value is slow to read
    /// through its property wrapper, and this runs for every report).
    struct Filter: Sendable {
        var uuid: UUID?
        var major: Int?
        var minor: Int?
        var all: Bool
        var anyIdentity: Bool { uuid == nil && major == nil && minor == nil }

        func matches(_ s: Sighting) -> Bool {
            guard let b = s.beacon else { return all && anyIdentity }
            if let uuid, uuid != b.proximityUUID { return false }
            if let major, Int(b.major) != major { return false }
            if let minor, Int(b.minor) != minor { return false }
            return true
        }
    }

    var filter: Filter {
        Filter(uuid: uuid.flatMap { UUID(uuidString: $0) }, major: major, minor: minor, all: all)
    }

    func matches(_ s: Sighting) -> Bool { filter.matches(s) }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            let publisher = try mqtt.makePublisher(command: "scan", logger: logger)
            publisher?.start()
            do {
                try await runUntilSignalled {
                    try await command.scan(logger: logger, mqtt: publisher)
                }
            } catch {
                await publisher?.close()
                throw error
            }
            await publisher?.close()
        }
    }

    /// Each beacon heard, with its distance, to `mqtt_room` (at most once a second each).
    static func publishRanging(_ table: SightingTable, now: Double, to mqtt: MQTTPublisher) {
        for e in table.entries.values {
            guard let b = e.beacon, let rssi = e.smoothedRSSI,
                let distance = estimatedDistance(rssi: rssi, measuredPower: Double(b.measuredPower))
            else { continue }
            let id = MQTTPayload.rangingID(b)
            mqtt.publishRanging(id: id, name: id, distance: distance, at: now)
        }
    }

    /// What the scan has heard; updated on the controller client's executor as reports are
    /// decoded, read by the display once a second.
    struct State: Sendable {
        var table = SightingTable()
        var reports = 0
        /// The source's time of the latest report or tick.
        var time: Double = 0
        /// --json lines not yet written (a capture is read faster than line-by-line writes).
        var pending = PendingOutput()
    }

    func scan(logger: Logger, mqtt: MQTTPublisher? = nil) async throws {
        let source = try await device.openSightingSource(mode: mode, logger: logger)
        let live = stdoutIsTerminal && !json
        let deadline = stopAfter.seconds
        let state = Mutex(State())
        let command = self
        let filter = self.filter
        let json = self.json
        let reportJSON = ReportJSON.shared
        // A capture's lines go out in blocks of 64 KiB; a receiver's as each event is heard.
        var buffered = false
        if case .btsnoop = try device.spec() { buffered = true }
        let flushSize = buffered ? 65536 : 0
        var failure: (any Error)?
        do {
            try await source.scan(
                tickInterval: .seconds(1),
                receive: { sightings, t in
                    state.withLock { state in
                        for s in sightings where filter.matches(s) {
                            state.reports += 1
                            if json {
                                reportJSON.append(s, t: t, to: &state.pending)
                            }
                            if !json || mqtt != nil {
                                state.table.record(s, now: t)
                            }
                        }
                        state.time = max(state.time, t)
                        if state.pending.count >= flushSize { state.pending.flush() }
                    }
                    // The batch that reaches --duration is shown, then the scan stops (a live
                    // scan's clock includes setting the controller up).
                    if let deadline, t >= deadline { return .stop }
                    return .proceed
                },
                tick: { t in
                    let table = state.withLock { state in
                        state.pending.flush()
                        state.time = max(state.time, t)
                        state.table.prune(now: t)
                        return state.table
                    }
                    if !json { command.render(table, now: t, live: live) }
                    if let mqtt { Self.publishRanging(table, now: t, to: mqtt) }
                    if let deadline, t >= deadline { return .stop }
                    return .proceed
                })
        } catch {
            failure = error
        }
        state.withLock { state in
            state.pending.flush()
        }
        if !json && !live {
            let (table, reports, t) = state.withLock { ($0.table, $0.reports, $0.time) }
            render(table, now: t, live: false)
            printOut("\(reports) reports from \(table.entries.count) transmitter(s) in \(t.fixed(1)) s")
        }
        await source.close()
        if let failure { throw failure }
    }

    /// Writes `--json` report lines, one per report: t, address, addressType, rssi, uuid, major,
    /// minor, measuredPower, distance, proximity, data (hex). The parts that depend on one octet
    /// or on the measured power − RSSI difference alone are spelled once per value by
    /// `JSONLineBuilder` and copied into each line, so the text is the builder's (and so
    /// `jsonLine`'s) in every case.
    struct ReportJSON: Sendable {
        /// `"distance":…,"proximity":"…"` for each measured power − RSSI difference, −255…255.
        let distanceMembers: JSONTextTable
        /// The quoted description of each address type, 0…255.
        let addressTypes: JSONTextTable

        static let shared = ReportJSON()

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

        func append(_ s: Sighting, t: Double, to buffer: inout PendingOutput) {
            let b = s.beacon
            // Keys and fixed values ~250 bytes, data in hex; the address type may be escaped.
            let maximum = 300 + 6 * 80 + 2 * s.data.count
            buffer.appendLine(maximumLength: maximum) { line in
                line.number("t", (t * 1000).rounded() / 1000, decimals: 3)
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

    func render(_ table: SightingTable, now: Double, live: Bool) {
        let rows = table.entries.values.sorted {
            ($0.beacon?.major ?? 0, $0.beacon?.minor ?? 0, $0.address) < (
                $1.beacon?.major ?? 0, $1.beacon?.minor ?? 0, $1.address
            )
        }
        var lines: [String] = []
        if live {
            lines.append(
                "ADDRESS            UUID                                  MAJOR MINOR  RPT/S   RSSI  POWER  DIST(m) PROXIMITY"
            )
        }
        for e in rows {
            let b = e.beacon
            let rssi = e.smoothedRSSI.map { $0.fixed(1, width: 6) } ?? "   n/a"
            let distance = b.flatMap { beacon in
                e.smoothedRSSI.flatMap { estimatedDistance(rssi: $0, measuredPower: Double(beacon.measuredPower)) }
            }
            let prox = b == nil ? "-" : Proximity(distance: distance).rawValue
            let uuid = b?.uuidString ?? "(not an iBeacon)                    "
            let line = [
                e.address.description.padded(17), uuid.padded(36),
                (b.map { "\($0.major)" } ?? "-").padded(5, left: true),
                (b.map { "\($0.minor)" } ?? "-").padded(5, left: true),
                e.rate(now: now, window: table.rateWindow).fixed(1, width: 6), rssi,
                (b.map { "\($0.measuredPower)" } ?? "-").padded(6, left: true),
                (distance.map { $0.fixed(2) } ?? "-").padded(8, left: true), prox,
            ].joined(separator: " ")
            lines.append(line)
        }
        if live {
            // Redraw in place: home the cursor, clear the screen.
            printOut(
                "\u{1B}[H\u{1B}[2J" + lines.joined(separator: "\n")
                    + "\n\(rows.count) transmitter(s), \(now.fixed(0)) s")
        } else {
            for l in lines { printOut("\(now.fixed(1)) " + l) }
        }
    }
}

extension DeviceSpec {
    /// True for transports this host has to itself (serial, TCP): it may Reset the controller
    /// and set event masks. A BlueZ adapter is shared with the kernel.
    var isExclusive: Bool {
        switch self {
        case .hci, .btsnoop: false
        case .serial, .tcp: true
        }
    }
}

extension String {
    /// Pads with spaces to `width` (right-aligned when `left` is set); never truncates.
    func padded(_ width: Int, left: Bool = false) -> String {
        let pad = String(repeating: " ", count: max(0, width - count))
        return left ? pad + self : self + pad
    }
}
