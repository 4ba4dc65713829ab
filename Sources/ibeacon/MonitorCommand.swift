import ArgumentParser
import Glibc
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

struct MonitorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "monitor",
        abstract: "Watch beacon regions and report when each is entered and exited.",
        discussion: """
            Region monitoring as Core Location does it. A region is every beacon with a \
            proximity UUID, or a UUID and major, or a UUID, major and minor. It is entered when \
            any of its beacons is first heard, and exited when none has been heard for \
            --exit-after seconds (default 30, as on iOS); a region not heard in the first \
            --exit-after seconds is reported outside. Regions come from --region (repeatable), \
            from --uuid/--major/--minor, and from profiles (--profile, named by the profile's \
            name).

            --min-rssi ignores beacons weaker than a level, judged on each beacon's smoothed \
            RSSI (an average over its last reports, so one lucky packet does not count). With \
            hysteresis: entering needs the smoothed RSSI at --min-rssi or above; once inside, \
            the region stays inside while it is at least --min-rssi minus --hysteresis (default \
            6 dB), so a beacon at the edge does not flap. Reports without RSSI do not count then.

            Prints one line per event (--json: one object with event, region, uuid, major, \
            minor, rssi, time, t; t counts seconds from the start of the scan, or of a \
            capture, where time, the UTC wall clock, is null). --exec runs a command per \
            event with IBEACON_EVENT, IBEACON_REGION, IBEACON_UUID, IBEACON_MAJOR, \
            IBEACON_MINOR, IBEACON_RSSI and IBEACON_TIME in its environment; it is split into \
            words like a shell would, but not run by one unless --exec-shell is given. Hooks run one at a time in event order and \
            never hold up scanning: at most 64 wait, later ones are dropped and logged; one that \
            runs longer than --exec-timeout is stopped. Its output goes to stderr.

            Keeps scanning through controller resets like scan; a btsnoop:FILE capture is read \
            in its own time. SIGINT or SIGTERM end it (exit 0).
            """)

    @Option(
        name: .customLong("region"), parsing: .singleValue,
        help: ArgumentHelp("A region: [NAME=]UUID[:MAJOR[:MINOR]]; repeatable.", valueName: "region"))
    var regions: [String] = []

    @Option(help: ArgumentHelp("A region by proximity UUID (with --major, --minor).", valueName: "uuid"))
    var uuid: String?
    @Option(help: ArgumentHelp("Narrow the --uuid region to this major.", valueName: "n"))
    var major: Int?
    @Option(help: ArgumentHelp("Narrow the --uuid region to this minor (needs --major).", valueName: "n"))
    var minor: Int?

    @Option(
        name: .long, parsing: .singleValue,
        help: ArgumentHelp("The region of a profile's beacon, named by its name; repeatable.", valueName: "file"))
    var profile: [String] = []

    @Option(help: ArgumentHelp("Seconds of silence before a region is exited.", valueName: "seconds"))
    var exitAfter: Double = 30

    @Option(
        name: .customLong("min-rssi"), parsing: .unconditional,
        help: ArgumentHelp("Ignore beacons whose smoothed RSSI is below this (dBm).", valueName: "dbm"))
    var minRSSI: Int?

    @Option(help: ArgumentHelp("dB below --min-rssi that still keep a region inside.", valueName: "db"))
    var hysteresis: Double = 6

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
        try validateSeconds("--exec-timeout", execTimeout, 0.1...3600)
        guard hysteresis.isFinite, (0...40).contains(hysteresis) else {
            throw ValidationError("--hysteresis must be a number of dB within 0…40, got \(hysteresis)")
        }
        if let minRSSI, !(-127...20).contains(minRSSI) {
            throw ValidationError("--min-rssi must be in -127…20 dBm, got \(minRSSI)")
        }
        if execShell && exec == nil { throw ValidationError("--exec-shell needs --exec COMMAND") }
        if uuid == nil && (major != nil || minor != nil) {
            throw ValidationError("--major and --minor narrow a --uuid region: give --uuid too")
        }
        if minor != nil && major == nil {
            throw ValidationError("--minor needs --major (a region is UUID[:MAJOR[:MINOR]])")
        }
        try validateMajorMinor(major, minor)
        if regions.isEmpty && uuid == nil && profile.isEmpty {
            throw ValidationError(
                "give at least one region: --region UUID[:MAJOR[:MINOR]], --uuid UUID or --profile FILE")
        }
        do {
            let names = try commandLineRegions().map(\.name)
            if mqtt.url != nil { try MQTTTopic.checkDistinct(names, kind: "region") }
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
        if let uuid {
            var text = uuid
            if let major { text += ":\(major)" }
            if let minor { text += ":\(minor)" }
            out.append(try BeaconRegion(parsing: text))
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
            let publisher = try command.mqttPublisher(regions: regions, logger: logger)
            let session = MonitorSession(
                regions: regions,
                configuration: .init(
                    exitAfter: command.exitAfter, minRSSI: command.minRSSI.map(Double.init),
                    hysteresis: command.hysteresis),
                json: command.json, hooks: hooks, mqtt: publisher)
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
                    try await command.monitor(session, logger: logger)
                } catch {
                    failure = error
                }
                // Stopped by a signal: what is queued is dropped, not started.
                await session.finish(grace: .seconds(grace), startQueued: !Task.isCancelled, logger: logger)
                if let failure { throw failure }
            }
        }
    }

    /// The publisher with the regions announced and connecting; nil without --mqtt.
    func mqttPublisher(regions: [BeaconRegion], logger: Logger) throws -> MQTTPublisher? {
        guard let publisher = try mqtt.makePublisher(command: "monitor", logger: logger) else { return nil }
        do {
            try MQTTTopic.checkDistinct(regions.map(\.name), kind: "region")
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        publisher.addRegions(regions)
        publisher.start()
        return publisher
    }

    /// Scans and feeds the session until the duration, a signal or the end of the source.
    func monitor(_ session: MonitorSession, logger: Logger) async throws {
        let source = try await device.openSightingSource(mode: mode, logger: logger)
        if source.name.hasPrefix("btsnoop:") { session.live.store(false, ordering: .relaxed) }
        let deadline = stopAfter.seconds
        let deviceText = device.deviceText
        var failure: (any Error)?
        do {
            // Ticks drive exits and the initial outside: four a second keeps an exit within a
            // quarter of a second of its due time.
            try await source.scan(
                tickInterval: .milliseconds(250),
                receive: { sightings, t in
                    session.observe(sightings, at: t)
                    if let deadline, t >= deadline { return .stop }
                    return .proceed
                },
                tick: { t in
                    if session.advance(to: t) {
                        SystemdNotifier.notify(
                            "READY=1\nSTATUS=monitoring \(session.regionCount) region(s) on \(deviceText.escapedForTerminal)",
                            environment: processEnvironment())
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
/// and the command's loop (time passing); every event is printed and handed to the hook runner
/// at once, in order.
final class MonitorSession: Sendable {
    let monitor: Mutex<RegionMonitor>
    let json: Bool
    let hooks: HookRunner?
    /// Wall-clock seconds (Unix time) at source time 0, and whether the source has started.
    let origin = Mutex<(wallClock: Double, started: Bool)>((0, false))
    /// False for a capture read from a file: its time is not the wall clock's.
    let live = Atomic<Bool>(true)
    let counts = Mutex<[RegionMonitor.Event.Kind: Int]>([:])
    let regionCount: Int
    let mqtt: MQTTPublisher?

    init(
        regions: [BeaconRegion], configuration: RegionMonitor.Configuration, json: Bool, hooks: HookRunner?,
        mqtt: MQTTPublisher? = nil
    ) {
        monitor = Mutex(RegionMonitor(regions: regions, configuration: configuration))
        regionCount = regions.count
        self.json = json
        self.hooks = hooks
        self.mqtt = mqtt
    }

    /// The first time the source gives fixes the wall clock of its time 0 (event times are
    /// printed from it). Returns true the first time.
    @discardableResult
    func start(at t: Double) -> Bool {
        origin.withLock { origin in
            if origin.started { return false }
            origin = (wallClockNow() - t, true)
            return true
        }
    }

    func observe(_ sightings: [Sighting], at t: Double) {
        start(at: t)
        monitor.withLock { m in
            for s in sightings {
                guard let beacon = s.beacon else { continue }
                for e in m.observe(beacon, rssi: s.rssi, at: t) { emit(e) }
            }
        }
    }

    /// Lets time pass; returns true on the first call (scanning has started).
    func advance(to t: Double) -> Bool {
        let first = start(at: t)
        monitor.withLock { m in
            for e in m.advance(to: t) { emit(e) }
        }
        return first
    }

    func emit(_ e: RegionMonitor.Event) {
        counts.withLock { $0[e.kind, default: 0] += 1 }
        // A capture's time is not today's: no wall-clock time for its events.
        let wall = live.load(ordering: .relaxed) ? origin.withLock { $0.wallClock } + e.time : nil
        let jsonLine = json || mqtt != nil ? e.json(wallClock: wall) : ""
        printOut(json ? jsonLine : e.text(wallClock: wall))
        hooks?.submit(label: "\(e.kind.rawValue) of \(e.region.name)", variables: e.hookVariables(wallClock: wall))
        if let mqtt {
            mqtt.publishRegionState(
                e.region.name, e.presence, reason: e.reason,
                time: wall.map { iso8601(unixSeconds: $0, milliseconds: true) },
                identity: e.region.identity)
            mqtt.publishEvent(json: jsonLine)
        }
    }

    func finish(grace: Duration, startQueued: Bool, logger: Logger) async {
        await hooks?.finish(grace: grace, startQueued: startQueued)
        await mqtt?.close()
        guard origin.withLock({ $0.started }) else { return }  // never got as far as scanning
        let c = counts.withLock { $0 }
        var summary = "\(c[.enter, default: 0]) enter, \(c[.exit, default: 0]) exit, \(c[.outside, default: 0]) outside"
        if let hooks {
            let h = hooks.summary
            summary += "; hooks: \(h.run) run, \(h.failed) failed, \(h.dropped) dropped"
        }
        logger.notice("monitor: \(summary)")
    }
}

extension RegionMonitor.Event {
    /// For `outside` the identity is the region's (no beacon caused it).
    var identity: (uuid: String, major: UInt16?, minor: UInt16?) {
        if let beacon { return (beacon.uuidString, beacon.major, beacon.minor) }
        return (region.proximityUUID.uuidString, region.major, region.minor)
    }

    /// The region's state after this event, as MQTT publishes it.
    var presence: RegionPresence {
        switch kind {
        case .enter: .inside
        case .exit, .outside: .outside
        }
    }

    /// Why the region is in that state, in words (the MQTT attributes' `reason`).
    var reason: String {
        let id = identity
        let who = "\(id.uuid) \(id.major.map(String.init) ?? "*") \(id.minor.map(String.init) ?? "*")"
        switch kind {
        case .enter: return "heard \(who)" + (rssi.map { " at \($0) dBm" } ?? "")
        case .exit: return "no beacon heard for \(lastHeard.map { (time - $0).fixed(1) } ?? "?") s"
        case .outside: return "not heard in the first \(time.fixed(1)) s"
        }
    }

    /// A wall-clock time to the millisecond, `2026-11-24T07:12:03.123Z`.
    private static func stamp(_ unixSeconds: Double) -> String { iso8601(unixSeconds: unixSeconds, milliseconds: true) }

    /// One compact JSON object, keys in a fixed order; times with exactly 3 decimals.
    func json(wallClock: Double?) -> String {
        func string(_ s: String?) -> String { s.map(jsonString) ?? "null" }
        func decimal(_ v: Double, _ digits: Int) -> String { JSONValue.decimal(v, fractionDigits: digits).description }
        func integer(_ v: (some BinaryInteger)?) -> String { v.map { String($0) } ?? "null" }
        let id = identity
        var members = [
            ("event", string(kind.rawValue)), ("region", string(region.name)), ("uuid", string(id.uuid)),
            ("major", integer(id.major)), ("minor", integer(id.minor)), ("rssi", integer(rssi)),
            ("time", string(wallClock.map(Self.stamp))), ("t", decimal(time, 3)),
        ]
        if let lastHeard { members.append(("lastHeard", decimal(lastHeard, 3))) }
        return "{" + members.map { jsonString($0.0) + ":" + $0.1 }.joined(separator: ",") + "}"
    }

    func text(wallClock: Double?) -> String {
        let head =
            (wallClock.map(Self.stamp) ?? "t+\(time.fixed(3)) s") + " " + kind.rawValue.padded(7) + " "
            + region.name.escapedForTerminal
        let id = identity
        let who = "\(id.uuid) \(id.major.map(String.init) ?? "*") \(id.minor.map(String.init) ?? "*")"
        let level = rssi.map { "\($0) dBm" } ?? "RSSI n/a"
        switch kind {
        case .enter:
            return "\(head): \(who) at \(level)"
        case .exit:
            let silent = lastHeard.map { (time - $0).fixed(1) } ?? "?"
            return "\(head): silent for \(silent) s; last heard \(who) at \(level)"
        case .outside:
            return "\(head): not heard in the first \(time.fixed(1)) s"
        }
    }

    func hookVariables(wallClock: Double?) -> [(String, String)] {
        let id = identity
        return [
            ("IBEACON_EVENT", kind.rawValue), ("IBEACON_REGION", region.name), ("IBEACON_UUID", id.uuid),
            ("IBEACON_MAJOR", id.major.map(String.init) ?? ""), ("IBEACON_MINOR", id.minor.map(String.init) ?? ""),
            ("IBEACON_RSSI", rssi.map(String.init) ?? ""), ("IBEACON_TIME", wallClock.map(Self.stamp) ?? ""),
        ]
    }
}

/// Unix time now, in seconds (`clock_gettime(CLOCK_REALTIME)`).
func wallClockNow() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_REALTIME, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
}

/// This process's environment as a dictionary.
func processEnvironment() -> [String: String] {
    var out: [String: String] = [:]
    var p = environ
    while let entry = p.pointee {
        let s = String(cString: entry)
        if let eq = s.firstIndex(of: "=") { out[String(s[..<eq])] = String(s[s.index(after: eq)...]) }
        p += 1
    }
    return out
}

extension Double {
    /// `30` rather than `30.0`; other values as they are.
    var clean: String { self == rounded() && abs(self) < 1e15 ? String(Int64(self)) : String(self) }
}
