import IBeaconCore
import Logging
import Synchronization

/// Where region events go besides the output: a command run per event (`--exec`), one at a time
/// in event order. `HookRunner` (Transports) is the real one.
public protocol EventHooks: Sendable {
    /// Queues a run for an event; never blocks the caller.
    func submit(label: String, variables: [(String, String)])
    /// Lets what runs end within `grace` (starting what is queued only when `startQueued`).
    func finish(grace: Duration, startQueued: Bool) async
    /// What ran, for the run's summary: `N run, N failed, N dropped`.
    var summaryText: String { get }
}

/// Region monitoring on any `SightingSource`, beside `RangingRun`: the region monitor tied to
/// the output, the hooks and the MQTT publisher. Fed from the source's receive path (reports)
/// and its loop (time passing, the receiver's reception); every event is written and handed to
/// the hooks at once, in order. State lines (`stateEvery`, and the last word of the run) are
/// written, not handed to hooks.
public final class MonitorRun: Sendable {
    /// What the run needs besides its regions.
    public struct Settings: Sendable {
        public var configuration: RegionMonitor.Configuration
        /// One JSON object per event rather than a text line.
        public var json: Bool
        /// Seconds between state lines; 0: only at the end.
        public var stateEvery: Double
        /// The wall clock (Unix seconds), read once when the source starts.
        public var wallClock: @Sendable () -> Double

        public init(
            configuration: RegionMonitor.Configuration, json: Bool, stateEvery: Double = 0,
            wallClock: @escaping @Sendable () -> Double
        ) {
            self.configuration = configuration
            self.json = json
            self.stateEvery = stateEvery
            self.wallClock = wallClock
        }
    }

    let monitor: Mutex<RegionMonitor>
    let settings: Settings
    let hooks: (any EventHooks)?
    let output: @Sendable (String) -> Void
    let logger: Logger
    /// Wall-clock seconds (Unix time) at source time 0, and whether the source has started.
    let origin = Mutex<(wallClock: Double, started: Bool)>((0, false))
    /// False for a capture read from a file: its time is not the wall clock's.
    let live = Atomic<Bool>(true)
    let counts = Mutex<[RegionMonitor.Event.Kind: Int]>([:])
    public let regionCount: Int
    /// When the next state line is due.
    let nextStateLine: Mutex<Double>
    /// Set once the receiver is open (its address names the box).
    private let publisher = Mutex<MQTTPublisher?>(nil)
    var mqtt: MQTTPublisher? { publisher.withLock { $0 } }
    /// The receiver's health for MQTT (nil without), reports counted per window of
    /// `healthWindow` seconds of source time.
    let health = Mutex<(value: ReceiverHealth?, reports: Int, windowStart: Double)>((nil, 0, 0))
    static let healthWindow = 5.0

    public init(
        regions: [BeaconRegion], settings: Settings, hooks: (any EventHooks)?, logger: Logger,
        output: @escaping @Sendable (String) -> Void
    ) {
        monitor = Mutex(RegionMonitor(regions: regions, configuration: settings.configuration))
        regionCount = regions.count
        self.settings = settings
        self.hooks = hooks
        self.output = output
        self.logger = logger
        nextStateLine = Mutex(settings.stateEvery)
    }

    /// Publishes region states, events and the receiver's health from now on.
    public func attach(_ mqtt: MQTTPublisher, health initial: ReceiverHealth) {
        publisher.withLock { $0 = mqtt }
        health.withLock { $0.value = initial }
    }

    /// Marks the source as a capture read from a file: no wall-clock times.
    public func sourceIsNotLive() { live.store(false, ordering: .relaxed) }

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
    /// written from it). Returns true the first time.
    @discardableResult
    func start(at t: Double) -> Bool {
        origin.withLock { origin in
            if origin.started { return false }
            origin = (settings.wallClock() - t, true)
            return true
        }
    }

    /// Reports heard at source time `t`.
    public func observe(_ sightings: [Sighting], at t: Double) {
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
    public func receive(_ reception: Reception, at t: Double) {
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

    /// Lets time pass (and writes the state lines due); returns true on the first call
    /// (scanning has started).
    public func advance(to t: Double) -> Bool {
        let first = start(at: t)
        countReports(at: t)
        monitor.withLock { m in
            for e in m.advance(to: t) { emit(e) }
            let every = settings.stateEvery
            guard every > 0,
                nextStateLine.withLock({ next in
                    guard t >= next else { return false }
                    next = max(next + every, t)
                    return true
                })
            else { return }
            for e in m.statusEvents() { writeState(e, final: false) }
        }
        return first
    }

    func emit(_ e: RegionMonitor.Event) {
        counts.withLock { $0[e.kind, default: 0] += 1 }
        let wall = wallClock(at: e.time)
        let mqtt = self.mqtt
        let jsonLine = settings.json || mqtt != nil ? e.json(wallClock: wall, origin: wallOrigin) : ""
        output(settings.json ? jsonLine : e.text(wallClock: wall, origin: wallOrigin))
        hooks?.submit(label: "\(e.kind.rawValue) of \(e.region.name)", variables: e.hookVariables(wallClock: wall))
        if let mqtt {
            mqtt.publishRegionState(
                e.region.name, e.presence, reason: e.reason,
                time: wall.map { iso8601(unixSeconds: $0, milliseconds: true) },
                identity: e.region.identity)
            mqtt.publishEvent(json: jsonLine)
        }
    }

    func writeState(_ e: RegionMonitor.Event, final: Bool) {
        let wall = wallClock(at: e.time)
        output(
            settings.json
                ? e.json(wallClock: wall, origin: wallOrigin, final: final)
                : e.text(wallClock: wall, origin: wallOrigin, final: final))
    }

    /// A capture's time is not today's: no wall-clock time for its events.
    var wallOrigin: Double? { live.load(ordering: .relaxed) ? origin.withLock { $0.wallClock } : nil }
    func wallClock(at t: Double) -> Double? { wallOrigin.map { $0 + t } }

    /// The end of the run: each region's final state written (if scanning started), the hooks
    /// given `grace`, the publisher closed, and the summary logged.
    public func finish(grace: Duration, startQueued: Bool) async {
        guard origin.withLock({ $0.started }) else {  // never got as far as scanning
            await hooks?.finish(grace: grace, startQueued: startQueued)
            await mqtt?.close()
            return
        }
        // The last word: each region's state as the run ends.
        for e in monitor.withLock({ $0.statusEvents() }) { writeState(e, final: true) }
        await hooks?.finish(grace: grace, startQueued: startQueued)
        await mqtt?.close()
        logger.notice("monitor: \(summary)")
    }

    /// Runs `body` (the scan), then `finish`es the run whether it returned or threw; stopped by
    /// a signal (the task cancelled), what hooks are queued is dropped, not started.
    public func finishing(grace: Duration, _ body: () async throws -> Void) async throws {
        let failure: (any Error)?
        do {
            try await body()
            failure = nil
        } catch {
            failure = error
        }
        await finish(grace: grace, startQueued: !Task.isCancelled)
        if let failure { throw failure }
    }

    /// `N inside, N outside, N enter, N exit, N unknown` and, with hooks, what they did.
    public var summary: String {
        let c = counts.withLock { $0 }
        let kinds: [RegionMonitor.Event.Kind] = [.inside, .outside, .enter, .exit, .unknown]
        var summary = kinds.map { "\(c[$0, default: 0]) \($0.rawValue)" }.joined(separator: ", ")
        if let hooks { summary += "; hooks: \(hooks.summaryText)" }
        return summary
    }
}

extension MonitorRun {
    /// The publisher `makePublisher` makes, named by the receiver's address (nil when it cannot
    /// be read), with the regions announced, the receiver's health published, and connecting.
    public func connectMQTT(
        source: any SightingSource, regions: [BeaconRegion], device: String,
        makePublisher: (_ adapter: String?) throws -> MQTTPublisher
    ) async throws {
        var address: BDAddress?
        // A capture's receiver is the phone (or box) that recorded it: its address names no
        // adapter of this box and must not leave it; the device is named after the host, as scan's.
        do {
            if source.isLive { address = try await source.receiverAddress() }
        } catch {
            logger.debug("MQTT: the receiver's address could not be read: \(error)")
        }
        let publisher = try makePublisher(address?.description)
        publisher.addRegions(regions)
        let health = ReceiverHealth(device: device, adapter: address?.description)
        publisher.publishHealth(health)
        publisher.start()
        attach(publisher, health: health)
    }

    /// Scans `source` and feeds the run until `deadline` (source time), the end of the source,
    /// cancellation or a failure; `started` runs once, when scanning has started. The source is
    /// left open (the caller closes it).
    public func scan(
        _ source: any SightingSource, deadline: Double?, watchdog: Duration?,
        started: @escaping @Sendable () -> Void
    ) async throws {
        if !source.isLive { sourceIsNotLive() }
        // `started` (READY=1 under systemd) once, at the first report or the first tick,
        // whichever comes first: a beacon already in range at start-up is heard before the
        // first tick, and `observe` then starts the run, so `advance` never saw the start and
        // READY=1 was never sent (make deb-boot: ibeacon-monitor@ timed out after 90 s,
        // restarted, forever, whenever the store's beacon was on the air).
        let notified = Mutex(false)
        let startedOnce: @Sendable () -> Void = {
            let first = notified.withLock { done in
                let first = !done
                done = true
                return first
            }
            if first { started() }
        }
        // Ticks drive exits and the initial outside: four a second keeps an exit within a
        // quarter of a second of its due time.
        try await source.scan(
            ScanRequest(
                tickInterval: .milliseconds(250), watchdog: watchdog, deadline: deadline,
                receive: { [self] sightings, t in
                    observe(sightings, at: t)
                    startedOnce()
                    return .proceed
                },
                reception: { [self] reception, t in receive(reception, at: t) },
                tick: { [self] t in
                    _ = advance(to: t)
                    startedOnce()
                    return .proceed
                }))
    }
}

extension MonitorRun {
    /// The line the monitor logs as it starts: the regions, each with its own exit delay
    /// (`door=…@10s`), and the delay of the others (`--exit-after`).
    public static func startLine(regions: [BeaconRegion], device: String, exitAfter: Double) -> String {
        let described = regions.map { region in
            region.exitAfter.map { "\(region.description) exit after \($0.clean) s of silence" } ?? region.description
        }
        let own = regions.filter { $0.exitAfter != nil }.count
        let others =
            own == regions.count
            ? "" : "; \(own > 0 ? "the others exit" : "exit") after \(exitAfter.clean) s of silence"
        return "monitoring \(regions.count) region(s) on \(device): \(described.joined(separator: ", "))\(others)"
    }
}
