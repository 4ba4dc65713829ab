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
    var filter: SightingFilter {
        SightingFilter(
            identity: BeaconIdentityPattern(
                proximityUUID: identity.uuid?.value?.uuid, major: identity.major?.value, minor: identity.minor?.value),
            all: all)
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            let publisher = try mqtt.makePublisher(command: "scan", logger: logger)
            publisher?.markAvailable()  // nothing retained to determine: ranging only
            publisher?.start()
            try await publisher.closing {
                try await runUntilSignalled { try await command.scan(logger: logger, mqtt: publisher) }
            }
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
        let failure = try await device.opener(logger: logger).withSightingSource(mode: mode) { source in
            // A capture's lines go out in blocks of 64 KiB; a receiver's as each event is heard.
            let flushSize = source.isLive ? 0 : 65536
            if output == .reports { return await printReports(source, flushSize: flushSize) }
            return await range(source, flushSize: flushSize, mqtt: mqtt)
        }
        if let failure { throw failure }
    }

    /// Ranges on `source`: the live table, a line per beacon per second, or `--json` updates.
    /// Returns the error that ended the scan, after the summary.
    func range(_ source: any SightingSource, flushSize: Int, mqtt: MQTTPublisher? = nil) async -> (any Error)? {
        let output = self.output
        let pending = Mutex(JSONLineBuffer())
        let filter = self.filter
        let run = RangingRun(
            configuration: .init(forgetAfter: forgetAfter), deadline: stopAfter.seconds,
            includes: { filter.matches($0) },
            updates: { updates in
                pending.withLock { pending in
                    if output == .json || output == .lines {
                        for update in updates { update.appendLines(json: output == .json, to: &pending) }
                    }
                    if pending.count >= flushSize { pending.flush() }
                }
                if let mqtt { for update in updates { mqtt.publishRanging(update) } }
            },
            tick: { t, latest in
                pending.withLock { $0.flush() }
                if output == .live {
                    // Home the cursor and clear the screen; laid out for the width now (it may change).
                    printTerminalControl(
                        "\u{1B}[H\u{1B}[2J", RangingUpdate.screen(latest, now: t, width: terminalWidth()))
                }
                return .proceed
            })
        let outcome = await run.run(on: source)
        pending.withLock { $0.flush() }
        if output == .lines { printOut(outcome.summary(all: all)) }
        return outcome.failure
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
}
