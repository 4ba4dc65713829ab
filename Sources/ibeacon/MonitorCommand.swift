import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

struct MonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Watch beacon regions: their state (inside, outside, unknown), entries and exits.",
        discussion: """
            Region monitoring as Core Location does it. A region is every beacon with a \
            proximity UUID, or a UUID and major, or a UUID, major and minor, optionally with its \
            own exit delay (NAME=UUID:MAJOR:MINOR@120s). Regions come from --region \
            (repeatable), from --uuid/--major/--minor, and from profiles (--profile, named by \
            the profile's name).

            Each region is inside, outside or unknown. Its first determination (after the start, \
            and after any unknown period) is a state: inside when one of its beacons is heard, \
            outside when none was in --exit-after seconds of scanning. Then enter is outside to \
            inside, and exit inside to outside, when none has been heard for --exit-after \
            seconds (default 30, as on iOS). A region is unknown, with the reason, whenever the \
            receiver cannot hear: the adapter powered off, removed or reset, the controller being \
            recovered, the link lost, a capture's own scan enable off, or nothing at all heard \
            for --watchdog seconds (default 90; the scan is restarted then; 0 turns it off). No \
            exit timer runs while unknown. A warning says when an exit delay is shorter than \
            three advertising intervals observed for the region's beacons.

            --min-rssi ignores beacons weaker than a level, judged on each beacon's RSSI \
            averaged over time (time constant --smoothing, default 5 s), so one lucky packet \
            does not count. With hysteresis: counting needs the smoothed RSSI at --min-rssi or \
            above; once inside, the region stays inside while it is at least --min-rssi minus \
            --hysteresis (default 6 dB). Reports without RSSI do not count then.

            Prints one line per event (--json: one object with event, state, region, uuid, \
            major, minor, rssi, time, t, and cause and reason when unknown; t counts seconds \
            from the start of the scan, or of a capture, where time, the UTC wall clock, is \
            null), each region's final state when the run ends, and with --state-every a \
            state line per region that often. --exec runs a command per event with \
            IBEACON_EVENT (inside, outside, unknown, enter, exit), IBEACON_STATE, \
            IBEACON_REGION, IBEACON_UUID, IBEACON_MAJOR, IBEACON_MINOR, IBEACON_RSSI, \
            IBEACON_TIME, IBEACON_T (the source's clock), IBEACON_SILENT_S (exit) and \
            IBEACON_REASON (unknown) in its environment; it is split into words like a shell \
            would, but not run by one unless --exec-shell is given. Hooks run one at a time in \
            event order and never hold up scanning: at most 64 wait, later ones are dropped and \
            logged; one that runs longer than --exec-timeout is stopped. Its output goes to stderr.

            Keeps scanning through controller resets like scan; a btsnoop:FILE capture is read \
            in its own time. SIGINT or SIGTERM end it (exit 0).
            """)

    @Option(
        name: .customLong("region"), parsing: .singleValue,
        help: ArgumentHelp("A region: [NAME=]UUID[:MAJOR[:MINOR]][@SECONDS]; repeatable.", valueName: "region"))
    var regions: [String] = []

    @OptionGroup var identity: IdentityOptions<RegionIdentityHelp>

    @Option(
        name: .long, parsing: .singleValue,
        help: ArgumentHelp("The region of a profile's beacon, named by its name; repeatable.", valueName: "file"))
    var profile: [String] = []

    @Option(
        help: ArgumentHelp(
            "Seconds of silence before a region is exited (a region's own: NAME=UUID…@SECONDS).",
            valueName: "seconds"))
    var exitAfter: Double = 30

    @Option(
        name: .customLong("min-rssi"), parsing: .unconditional,
        help: ArgumentHelp("Ignore beacons whose smoothed RSSI is below this (dBm).", valueName: "dBm"))
    var minRSSI: Int?

    @Option(help: ArgumentHelp("dB below --min-rssi that still keep a region inside.", valueName: "dB"))
    var hysteresis: Double = 6

    @Option(help: ArgumentHelp("Time constant of the smoothed RSSI --min-rssi judges.", valueName: "seconds"))
    var smoothing: Double = 5

    @Option(
        help: ArgumentHelp(
            "Restart the scan when no device at all was heard for this long; 0: never.", valueName: "seconds"))
    var watchdog: Double = 90

    @Option(help: ArgumentHelp("Print every region's state this often; 0: never.", valueName: "seconds"))
    var stateEvery: Double = 0

    @OptionGroup var stopAfter: DurationOption<UntilInterrupted>

    @Option(help: "Scanning commands: auto, legacy or extended.")
    var mode: AdvertisingMode = .auto

    @Flag(help: "One JSON object per event, one per line.")
    var json = false

    @Option(help: ArgumentHelp("Run this command for each event.", valueName: "command"))
    var exec: String?

    @Flag(help: "Run the --exec command through /bin/sh -c.")
    var execShell = false

    @Option(help: ArgumentHelp("Stop a hook that runs longer than this.", valueName: "seconds"))
    var execTimeout: Double = 30

    @OptionGroup var device: DeviceOptions<ReadsReports>
    @OptionGroup var mqtt: MQTTOptions<MonitorMQTT>
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        try validateSeconds("--exit-after", exitAfter, 0.1...86400)
        try validateSeconds("--smoothing", smoothing, 0.1...3600, zeroAllowed: "judge each report alone")
        try validateSeconds("--watchdog", watchdog, 1...86400, zeroAllowed: "turn it off")
        try validateSeconds("--state-every", stateEvery, 1...86400, zeroAllowed: "print states only at the end")
        try validateSeconds("--exec-timeout", execTimeout, 0.1...3600)
        guard hysteresis.isFinite, (0...40).contains(hysteresis) else {
            throw ValidationError("--hysteresis must be a number of dB within 0…40, got \(hysteresis)")
        }
        if let minRSSI, !FieldRange.rssi.contains(minRSSI) {
            throw ValidationError("--min-rssi must be in \(FieldRange.rssi.text), got \(minRSSI)")
        }
        if execShell && exec == nil { throw ValidationError("--exec-shell needs --exec COMMAND") }
        if identity.uuid == nil && !identity.isEmpty {
            throw ValidationError("--major and --minor narrow a --uuid region: give --uuid too")
        }
        if identity.minor != nil && identity.major == nil {
            throw ValidationError("--minor needs --major (a region is UUID[:MAJOR[:MINOR]])")
        }
        if regions.isEmpty && identity.uuid == nil && profile.isEmpty {
            throw ValidationError(
                "give at least one region: --region UUID[:MAJOR[:MINOR]], --uuid UUID or --profile FILE")
        }
        do {
            let names = try commandLineRegions().map(\.name)
            if mqtt.url != nil { try mqtt.layout(command: "monitor").checkRegionNames(names) }
            if let exec { _ = try Hook(command: exec, shell: execShell, timeout: .seconds(execTimeout)) }
        } catch {
            throw ValidationError("\(error)")
        }
    }

    /// The regions given by --region and --uuid/--major/--minor.
    func commandLineRegions() throws(RegionError) -> [BeaconRegion] {
        try BeaconRegion.parsing(
            regions, uuid: identity.uuid?.value?.uuid, major: identity.major?.value, minor: identity.minor?.value)
    }

    /// Every region, profiles loaded; names must be distinct (they key the events).
    func allRegions() throws -> [BeaconRegion] {
        let out = try commandLineRegions() + profile.map { try BeaconRegion(profileAt: $0) }
        do {
            try BeaconRegion.checkNamesApart(out)
            if mqtt.url != nil { try mqtt.layout(command: "monitor").checkRegionNames(out.map(\.name)) }
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        return out
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            let regions = try command.allRegions()
            let hooks = try command.makeHooks(logger: logger)
            let mqtt = try command.mqtt.prepare(command: "monitor", logger: logger)
            let record = SessionRecorder(.monitor, device: device.deviceText, profiles: profile, logger: logger)
            defer { record.remove() }
            let session = MonitorRun(
                regions: regions,
                settings: .init(
                    configuration: .init(
                        exitAfter: command.exitAfter, minRSSI: command.minRSSI.map(Double.init),
                        hysteresis: command.hysteresis, smoothing: command.smoothing),
                    json: command.json, stateEvery: command.stateEvery, wallClock: { ProcessContext.unixTime }),
                hooks: hooks, logger: logger, output: { printOut($0) })
            logger.notice(
                "\(MonitorRun.startLine(regions: regions, device: command.device.deviceText, exitAfter: command.exitAfter))"
            )
            let grace = min(command.execTimeout, 5)
            // Hooks are stopped inside the signal handling, so that a second signal still ends
            // the monitor at once (killing what hooks run) instead of waiting for their grace.
            try await runUntilSignalled(
                cleanupSeconds: hooks == nil ? nil : grace + 2 + 4 + 1, reapsChildren: hooks != nil,
                onForcedExit: { [hooks] in hooks?.killNow() }
            ) {
                try await session.finishing(grace: .seconds(grace)) {
                    try await command.monitor(session, mqtt: mqtt, regions: regions, logger: logger)
                }
            }
        }
    }

    /// The `--exec` hook runner; nil without --exec. A program that is not there is 66 (`HookError`).
    func makeHooks(logger: Logger) throws -> HookRunner? {
        guard let exec else { return nil }
        return try HookRunner.checked(command: exec, shell: execShell, timeout: .seconds(execTimeout), logger: logger)
    }

    /// Scans and feeds the session until the duration, a signal or the end of the source.
    func monitor(_ session: MonitorRun, mqtt: MQTTOpener?, regions: [BeaconRegion], logger: Logger)
        async throws
    {
        let deviceText = device.deviceText
        let regionCount = regions.count
        try await device.opener(logger: logger, reading: profile).withSightingSource(mode: mode) { source in
            if let mqtt {
                try await session.connectMQTT(source: source, regions: regions, device: deviceText) { adapter in
                    try mqtt.publisherForCLI(adapter: adapter, logger: logger)
                }
            }
            try await session.scan(
                source, deadline: stopAfter.seconds, watchdog: watchdog > 0 ? .seconds(watchdog) : nil,
                started: {
                    SystemdNotifier.notify(
                        "READY=1\nSTATUS=monitoring \(regionCount) region(s) on \(deviceText.escapedForTerminal)")
                })
        }
    }
}
