import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

/// monitor's `--uuid`, `--major`, `--minor`: a region.
enum RegionIdentityHelp: IdentityHelp {
    static let uuid = "A region by proximity UUID (with --major, --minor)."
    static let major = "Narrow the --uuid region to this major."
    static let minor = "Narrow the --uuid region to this minor (needs --major)."
}

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
        help: ArgumentHelp("Ignore beacons whose smoothed RSSI is below this (dBm).", valueName: "dbm"))
    var minRSSI: Int?

    @Option(help: ArgumentHelp("dB below --min-rssi that still keep a region inside.", valueName: "db"))
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

    @OptionGroup var device: DeviceOptions
    @OptionGroup var mqtt: MQTTOptions
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
        } catch {
            throw ValidationError("\(error)")
        }
        if let exec {
            do {
                _ = try Hook(command: exec, shell: execShell, timeout: .seconds(execTimeout))
            } catch {
                throw ValidationError(error.message)
            }
        }
    }

    /// The regions given by --region and --uuid/--major/--minor.
    func commandLineRegions() throws(RegionError) -> [BeaconRegion] {
        var out = try regions.map { text throws(RegionError) in try BeaconRegion(parsing: text) }
        if let uuid = identity.uuid?.value {
            out.append(
                try BeaconRegion(proximityUUID: uuid.uuid, major: identity.major?.value, minor: identity.minor?.value))
        }
        return out
    }

    /// Every region, profiles loaded; names must be distinct (they key the events).
    func allRegions() throws -> [BeaconRegion] {
        var out = try commandLineRegions()
        for path in profile {
            let p = try Profile.load(bytes: ProfileStore.read(path), file: path)
            let stem = path.split(separator: "/").last.map { String($0.split(separator: ".").first ?? $0) } ?? path
            out.append(
                try BeaconRegion(
                    name: p.name.flatMap { $0.isEmpty ? nil : $0 } ?? stem, proximityUUID: p.proximityUUID,
                    major: p.major, minor: p.minor))
        }
        var seen: Set<String> = []
        for r in out where !seen.insert(r.name).inserted {
            throw CLIError(
                "two regions are named \(r.name); name them apart with --region NAME=UUID… or the profiles' name",
                code: Exit.usage)
        }
        return out
    }

    func run() async throws {
        let logger = logging.makeLogger()
        let command = self
        try await reporting {
            let regions = try command.allRegions()
            var hooks: HookRunner?
            if let exec = command.exec {
                let hook = try Hook(command: exec, shell: command.execShell, timeout: .seconds(command.execTimeout))
                if !command.execShell {
                    do {
                        try hook.checkProgram()
                    } catch {
                        throw CLIError("\(error)", code: Exit.noInput)
                    }
                }
                // ibeacon spawns no other child: it can reap them all (and, as a subreaper,
                // what hooks leave running; also as PID 1, where every orphan comes to it).
                hooks = HookRunner(hook: hook, reaper: ChildReaper(), logger: logger)
            }
            let mqtt = try command.prepareMQTT(regions: regions, logger: logger)
            let session = MonitorSession(
                regions: regions,
                configuration: .init(
                    exitAfter: command.exitAfter, minRSSI: command.minRSSI.map(Double.init),
                    hysteresis: command.hysteresis, smoothing: command.smoothing),
                json: command.json, hooks: hooks, stateEvery: command.stateEvery, logger: logger)
            logger.notice(
                "monitoring \(regions.count) region(s) on \(command.device.deviceText): \(regions.map(\.description).joined(separator: ", ")); exit after \(command.exitAfter.clean) s of silence"
            )
            let grace = min(command.execTimeout, 5)
            // Hooks are stopped inside the signal handling, so that a second signal still ends
            // the monitor at once (killing what hooks run) instead of waiting for their grace.
            try await runUntilSignalled(
                cleanupSeconds: hooks == nil ? nil : grace + 2 + 4 + 1, reapsChildren: hooks != nil,
                onForcedExit: { [hooks] in hooks?.killNow() }
            ) {
                var failure: (any Error)?
                do {
                    try await command.monitor(session, mqtt: mqtt, regions: regions, logger: logger)
                } catch {
                    failure = error
                }
                // Stopped by a signal: what is queued is dropped, not started.
                await session.finish(grace: .seconds(grace), startQueued: !Task.isCancelled, logger: logger)
                if let failure { throw failure }
            }
        }
    }

    /// `--mqtt` checked, its files read; nil without --mqtt.
    func prepareMQTT(regions: [BeaconRegion], logger: Logger) throws -> PreparedMQTT? {
        guard let prepared = try mqtt.prepare(command: "monitor", logger: logger) else { return nil }
        do {
            try mqtt.layout(command: "monitor").checkRegionNames(regions.map(\.name))
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        return prepared
    }

    /// The publisher, named by the receiver's address, with the regions announced and connecting.
    func startMQTT(_ prepared: PreparedMQTT, source: any SightingSource, regions: [BeaconRegion], logger: Logger)
        async throws -> (MQTTPublisher, ReceiverHealth)
    {
        var address: BDAddress?
        do {
            address = try await source.receiverAddress()
        } catch {
            logger.debug("MQTT: the receiver's address could not be read: \(error)")
        }
        let publisher = try prepared.publisher(adapter: address?.description)
        publisher.addRegions(regions)
        let health = ReceiverHealth(device: device.deviceText, adapter: address?.description)
        publisher.publishHealth(health)
        publisher.start()
        return (publisher, health)
    }

    /// Scans and feeds the session until the duration, a signal or the end of the source.
    func monitor(_ session: MonitorSession, mqtt: PreparedMQTT?, regions: [BeaconRegion], logger: Logger)
        async throws
    {
        let source = try await device.opener(logger: logger).openSightingSource(mode: mode)
        if !source.isLive { session.live.store(false, ordering: .relaxed) }
        if let mqtt {
            do {
                let (publisher, health) = try await startMQTT(mqtt, source: source, regions: regions, logger: logger)
                session.attach(publisher, health: health)
            } catch {
                await source.close()
                throw error
            }
        }
        let deadline = stopAfter.seconds
        let deviceText = device.deviceText
        var failure: (any Error)?
        do {
            // Ticks drive exits and the initial outside: four a second keeps an exit within a
            // quarter of a second of its due time.
            try await source.scan(
                tickInterval: .milliseconds(250), watchdog: watchdog > 0 ? .seconds(watchdog) : nil,
                receive: { sightings, t in
                    session.observe(sightings, at: t)
                    if let deadline, t >= deadline { return .stop }
                    return .proceed
                },
                reception: { reception, t in session.receive(reception, at: t) },
                tick: { t in
                    if session.advance(to: t) {
                        SystemdNotifier.notify(
                            "READY=1\nSTATUS=monitoring \(session.regionCount) region(s) on \(deviceText.escapedForTerminal)"
                        )
                    }
                    if let deadline, t >= deadline { return .stop }
                    return .proceed
                })
        } catch {
            failure = error
        }
        await source.close()
        if let failure { throw failure }
    }
}

/// Ties the region monitor to the output and the hooks. Fed from the scanning thread (reports)
/// and the command's loop (time passing, the receiver's reception); every event is printed and
/// handed to the hook runner at once, in order. State lines (`--state-every`, and the last
/// word of the run) are printed, not handed to hooks.
final class MonitorSession: Sendable {
    let monitor: Mutex<RegionMonitor>
    let json: Bool
    let hooks: HookRunner?
    let logger: Logger
    /// Wall-clock seconds (Unix time) at source time 0, and whether the source has started.
    let origin = Mutex<(wallClock: Double, started: Bool)>((0, false))
    /// False for a capture read from a file: its time is not the wall clock's.
    let live = Atomic<Bool>(true)
    let counts = Mutex<[RegionMonitor.Event.Kind: Int]>([:])
    let regionCount: Int
    /// Seconds between state lines (0: none), and when the next is due.
    let stateEvery: Double
    let nextStateLine: Mutex<Double>
    /// Set once the receiver is open (its address names the box).
    private let publisher = Mutex<MQTTPublisher?>(nil)
    var mqtt: MQTTPublisher? { publisher.withLock { $0 } }

    init(
        regions: [BeaconRegion], configuration: RegionMonitor.Configuration, json: Bool, hooks: HookRunner?,
        stateEvery: Double = 0, logger: Logger
    ) {
        monitor = Mutex(RegionMonitor(regions: regions, configuration: configuration))
        regionCount = regions.count
        self.json = json
        self.hooks = hooks
        self.stateEvery = stateEvery
        self.logger = logger
        nextStateLine = Mutex(stateEvery)
    }

    /// The receiver's health for MQTT (nil without), reports counted per window of
    /// `healthWindow` seconds of source time.
    let health = Mutex<(value: ReceiverHealth?, reports: Int, windowStart: Double)>((nil, 0, 0))
    static let healthWindow = 5.0

    func attach(_ mqtt: MQTTPublisher, health initial: ReceiverHealth) {
        publisher.withLock { $0 = mqtt }
        health.withLock { $0.value = initial }
    }

    /// Changes the health and publishes it when it changed.
    private func updateHealth(_ change: (inout ReceiverHealth) -> Void) {
        let changed: ReceiverHealth? = health.withLock { h in
            guard var value = h.value else { return nil }
            let old = value
            change(&value)
            h.value = value
            return value == old ? nil : value
        }
        if let changed, let mqtt { mqtt.publishHealth(changed) }
    }

    /// Every `healthWindow` seconds: the reports heard per minute in the last window.
    private func countReports(at t: Double) {
        let rate: Int? = health.withLock { h in
            guard h.value != nil, t - h.windowStart >= Self.healthWindow else { return nil }
            defer { (h.reports, h.windowStart) = (0, t) }
            return Int((Double(h.reports) * 60 / (t - h.windowStart)).rounded())
        }
        if let rate { updateHealth { $0.reportsPerMinute = rate } }
    }

    /// The first time the source gives fixes the wall clock of its time 0 (event times are
    /// printed from it). Returns true the first time.
    @discardableResult
    func start(at t: Double) -> Bool {
        origin.withLock { origin in
            if origin.started { return false }
            origin = (ProcessContext.unixTime - t, true)
            return true
        }
    }

    func observe(_ sightings: [Sighting], at t: Double) {
        start(at: t)
        health.withLock { $0.reports += sightings.count }
        monitor.withLock { m in
            for s in sightings {
                guard let beacon = s.beacon else { continue }
                for e in m.observe(beacon, rssi: s.rssi, at: t) { emit(e) }
            }
            if !m.intervalWarnings.isEmpty {
                for w in m.intervalWarnings { logger.warning("\(w)") }
                m.intervalWarnings.removeAll()
            }
        }
    }

    /// The receiver can or cannot hear from `t` on.
    func receive(_ reception: Reception, at t: Double) {
        start(at: t)
        monitor.withLock { m in
            switch reception {
            case .deaf(let deafness):
                for e in m.receiverDeaf(deafness, at: t) { emit(e) }
                let when = wallClock(at: t).map { iso8601(unixSeconds: $0, milliseconds: true) }
                updateHealth { h in
                    h.deafness = deafness
                    (h.lastRecovery, h.lastRecoveryCause) = (when, deafness.reason)
                }
            case .hearing:
                guard let was = m.deafness else { return }
                updateHealth { $0.deafness = nil }
                logger.debug("the receiver hears again (it could not: \(was.reason))")
                for e in m.receiverHears(at: t) { emit(e) }
            }
        }
    }

    /// Lets time pass (and prints the state lines due); returns true on the first call
    /// (scanning has started).
    func advance(to t: Double) -> Bool {
        let first = start(at: t)
        countReports(at: t)
        monitor.withLock { m in
            for e in m.advance(to: t) { emit(e) }
            guard stateEvery > 0,
                nextStateLine.withLock({ next in
                    guard t >= next else { return false }
                    next = max(next + stateEvery, t)
                    return true
                })
            else { return }
            for e in m.statusEvents() { printState(e, final: false) }
        }
        return first
    }

    func emit(_ e: RegionMonitor.Event) {
        counts.withLock { $0[e.kind, default: 0] += 1 }
        let wall = wallClock(at: e.time)
        let mqtt = self.mqtt
        let jsonLine = json || mqtt != nil ? e.json(wallClock: wall, origin: wallOrigin) : ""
        printOut(json ? jsonLine : e.text(wallClock: wall, origin: wallOrigin))
        hooks?.submit(label: "\(e.kind.rawValue) of \(e.region.name)", variables: e.hookVariables(wallClock: wall))
        if let mqtt {
            mqtt.publishRegionState(
                e.region.name, e.presence, reason: e.reason,
                time: wall.map { iso8601(unixSeconds: $0, milliseconds: true) },
                identity: e.region.identity)
            mqtt.publishEvent(json: jsonLine)
        }
    }

    func printState(_ e: RegionMonitor.Event, final: Bool) {
        let wall = wallClock(at: e.time)
        printOut(
            json
                ? e.json(wallClock: wall, origin: wallOrigin, final: final)
                : e.text(wallClock: wall, origin: wallOrigin, final: final))
    }

    /// A capture's time is not today's: no wall-clock time for its events.
    var wallOrigin: Double? { live.load(ordering: .relaxed) ? origin.withLock { $0.wallClock } : nil }
    func wallClock(at t: Double) -> Double? { wallOrigin.map { $0 + t } }

    func finish(grace: Duration, startQueued: Bool, logger: Logger) async {
        guard origin.withLock({ $0.started }) else {  // never got as far as scanning
            await hooks?.finish(grace: grace, startQueued: startQueued)
            await mqtt?.close()
            return
        }
        // The last word: each region's state as the run ends.
        for e in monitor.withLock({ $0.statusEvents() }) { printState(e, final: true) }
        await hooks?.finish(grace: grace, startQueued: startQueued)
        await mqtt?.close()
        let c = counts.withLock { $0 }
        let kinds: [RegionMonitor.Event.Kind] = [.inside, .outside, .enter, .exit, .unknown]
        var summary = kinds.map { "\(c[$0, default: 0]) \($0.rawValue)" }.joined(separator: ", ")
        if let hooks {
            let h = hooks.summary
            summary += "; hooks: \(h.run) run, \(h.failed) failed, \(h.dropped) dropped"
        }
        logger.notice("monitor: \(summary)")
    }
}

extension RegionMonitor.Event {
    /// For `outside` and `unknown` the identity is the region's (no beacon caused it).
    var identity: (uuid: String, major: UInt16?, minor: UInt16?) {
        if let beacon { return (beacon.uuidString, beacon.major, beacon.minor) }
        return (region.proximityUUID.uuidString, region.major, region.minor)
    }

    /// The region's state after this event, as MQTT publishes it.
    var presence: RegionPresence { RegionPresence(rawValue: state.rawValue) ?? .unknown }

    /// Why the region is in that state, in words (the MQTT attributes' `reason`).
    var reason: String {
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
    func json(wallClock: Double?, origin: Double?, final: Bool = false) -> String {
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

    func text(wallClock: Double?, origin: Double?, final: Bool = false) -> String {
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

    func hookVariables(wallClock: Double?) -> [(String, String)] {
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
