import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

/// scan's `--uuid`, `--major`, `--minor`: filters.
enum ScanIdentityHelp: IdentityHelp {
    static let uuid = "Only beacons with this proximity UUID."
    static let major = "Only beacons with this major."
    static let minor = "Only beacons with this minor."
}

struct ScanCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scan",
        abstract: "Range the iBeacons nearby: identity, RSSI, estimated distance and proximity, once a second.",
        discussion: """
            Scans passively with duplicate filtering off, so every advertisement counts, and \
            ranges as Core Location does: once a second, one row per beacon (UUID, major, \
            minor; the addresses it was heard from are an attribute), nearest first. RSSI is \
            the mean of the reports of the last second (the quantity calibrate averages into \
            measured power); a beacon not heard in the last second has no RSSI and proximity \
            unknown, and leaves the list after --forget-after seconds of silence.

            On a terminal it shows a live table that fits the terminal's width; otherwise it \
            prints one line per beacon per second. --json prints each of those updates as a \
            JSON object, one per line; --json --reports prints one per advertisement heard \
            instead (the raw reports).

            Distance uses the log-distance model d = 10^((measured power - RSSI) / 20); \
            proximity is immediate below 0.5 m, near up to 3 m, far beyond, unknown without \
            RSSI.
            """)

    @OptionGroup var device: DeviceOptions<ReadsReports>

    @OptionGroup var identity: IdentityOptions<ScanIdentityHelp>
    @Flag(help: "Also show advertisements that are not iBeacons (one row per address).")
    var all = false
    @OptionGroup var stopAfter: DurationOption<UntilInterrupted>
    @Option(help: "Scanning commands: auto, legacy or extended.")
    var mode: AdvertisingMode = .auto
    @Option(
        help: ArgumentHelp(
            "Drop a beacon from the list after this many seconds without hearing it.", valueName: "seconds"))
    var forgetAfter: Double = 5
    @Flag(help: "One JSON object per beacon per second, one per line.")
    var json = false
    @Flag(help: "With --json: one JSON object per advertisement report instead (raw reports).")
    var reports = false
    @OptionGroup var mqtt: MQTTOptions<ScanMQTT>
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateSeconds("--forget-after", forgetAfter, 1...3600)
        if reports && !json {
            throw ValidationError("--reports changes what --json prints: use --json --reports")
        }
    }

    /// Which reports to show, read once from the options (an option's value is slow to read
    /// through its property wrapper, and this runs for every report).
    struct Filter: Sendable {
        var uuid: ProximityUUID?
        var major: Int?
        var minor: Int?
        var all: Bool
        var anyIdentity: Bool { uuid == nil && major == nil && minor == nil }

        func matches(_ s: Sighting) -> Bool {
            guard let b = s.beacon else { return all && anyIdentity }
            if let uuid, uuid.uuid != b.proximityUUID { return false }
            if let major, Int(b.major) != major { return false }
            if let minor, Int(b.minor) != minor { return false }
            return true
        }
    }

    var filter: Filter {
        Filter(
            uuid: identity.uuid?.value, major: identity.major?.number, minor: identity.minor?.number, all: all)
    }

    func matches(_ s: Sighting) -> Bool { filter.matches(s) }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            let publisher = try mqtt.makePublisher(command: "scan", logger: logger)
            publisher?.markAvailable()  // nothing retained to determine: ranging only
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

    /// How the scan shows what it ranges.
    enum Output: Sendable {
        /// A table redrawn in place each second (stdout is a terminal).
        case live
        /// One line per beacon per second (a pipe or a file).
        case lines
        /// One JSON object per beacon per second.
        case json
        /// One JSON object per report heard (`--json --reports`).
        case reports
    }

    var output: Output {
        if json { return reports ? .reports : .json }
        return stdoutIsTerminal ? .live : .lines
    }

    func scan(logger: Logger, mqtt: MQTTPublisher? = nil) async throws {
        let source = try await device.opener(logger: logger).openSightingSource(mode: mode)
        // A capture's lines go out in blocks of 64 KiB; a receiver's as each event is heard.
        let flushSize = source.isLive ? 0 : 65536
        let failure: (any Error)?
        if output == .reports {
            failure = await printReports(source, flushSize: flushSize)
        } else {
            failure = await range(source, flushSize: flushSize, mqtt: mqtt)
        }
        await source.close()
        if let failure { throw failure }
    }

    /// Ranges on `source`: the live table, a line per beacon per second, or `--json` updates.
    /// Returns the error that ended the scan, after the summary.
    func range(_ source: any SightingSource, flushSize: Int, mqtt: MQTTPublisher? = nil) async -> (any Error)? {
        let output = self.output
        let pending = Mutex(JSONLineBuffer())
        let filter = self.filter
        let command = self
        let run = RangingRun(
            configuration: .init(forgetAfter: forgetAfter), deadline: stopAfter.seconds,
            includes: { filter.matches($0) },
            updates: { updates in
                pending.withLock { pending in
                    for update in updates { Self.write(update, output, to: &pending) }
                    if pending.count >= flushSize { pending.flush() }
                }
                if let mqtt { for update in updates { mqtt.publishRanging(update) } }
            },
            tick: { t, latest in
                pending.withLock { $0.flush() }
                if output == .live { command.draw(latest, now: t) }
                return .proceed
            })
        let outcome = await run.run(on: source)
        pending.withLock { $0.flush() }
        if output == .lines { printOut(summary(outcome)) }
        return outcome.failure
    }

    /// An update as lines: JSON objects, or table rows after the time (pipes and files).
    static func write(_ update: RangingUpdate, _ output: Output, to pending: inout JSONLineBuffer) {
        for b in update.beacons {
            switch output {
            case .json: pending.append(b.json(t: update.time) + "\n")
            case .lines: pending.append(update.time.fixed(1) + " " + RangingTableLayout.full.row(b) + "\n")
            case .live, .reports: break
            }
        }
    }

    /// `--json --reports`: one JSON line per report heard. Returns the error that ended the scan.
    func printReports(_ source: any SightingSource, flushSize: Int) async -> (any Error)? {
        let pending = Mutex(JSONLineBuffer())
        let filter = self.filter
        let reportJSON = Sighting.ReportJSON.shared
        var failure: (any Error)?
        do {
            try await source.scan(
                ScanRequest(
                    tickInterval: .seconds(1), deadline: stopAfter.seconds,
                    receive: { sightings, t in
                        pending.withLock { pending in
                            for s in sightings where filter.matches(s) { reportJSON.append(s, t: t, to: &pending) }
                            if pending.count >= flushSize { pending.flush() }
                        }
                        return .proceed
                    },
                    tick: { t in
                        pending.withLock { $0.flush() }
                        return .proceed
                    }))
        } catch {
            failure = error
        }
        pending.withLock { $0.flush() }
        return failure
    }

    /// `N reports from B beacon(s)[ and O other transmitter(s)] in T s`.
    func summary(_ outcome: RangingRun.Outcome) -> String {
        let r = outcome.ranger
        var text = "\(r.reports) reports from \(r.beaconsHeard.count) beacon(s)"
        if all {
            text += " and \(r.othersOverflowed ? "over " : "")\(r.othersHeard.count) other transmitter(s)"
        }
        return text + " in \(outcome.time.fixed(1)) s"
    }

    /// Redraws the live table in place (home the cursor, clear the screen), laid out for the
    /// terminal's width now (it may have been resized).
    func draw(_ update: RangingUpdate?, now: Double) {
        let layout = RangingTableLayout.fitting(width: terminalWidth())
        var lines = [layout.header]
        let beacons = update?.beacons ?? []
        lines += beacons.map(layout.row)
        var footer = "\(beacons.count) transmitter(s), \(now.fixed(0)) s"
        if footer.count > layout.width ?? footer.count { footer = String(footer.prefix(layout.width ?? 0)) }
        printTerminalControl("\u{1B}[H\u{1B}[2J", lines.joined(separator: "\n") + "\n" + footer)
    }
}
