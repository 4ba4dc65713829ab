import IBeaconCore
import Logging
import Synchronization

/// What a consumer of sightings wants next.
public enum ScanControl: Sendable, Equatable {
    case proceed
    case stop
}

/// Where advertising reports come from: a controller this host programs to scan, the kernel's
/// management interface, or a capture read from a file. `scan`, `calibrate` and `monitor` are
/// written once against this protocol; each kind of source keeps its own loop (ticker, recovery,
/// end of the link or of the file) behind it.
///
/// Time is the source's time: seconds since the scan started, read from a live clock for a
/// receiver, from the record timestamps for a capture. Consumers never read a clock of their own,
/// so a capture's rates and stopping rules are the ones it was recorded with.
public protocol SightingSource: AsyncClosable {
    /// What to call the receiver in messages: `hci0`, `tcp:127.0.0.1:9000`, a capture's path.
    var name: String { get }

    /// False for a capture read from a file: its time is the recording's, and what it gives can
    /// be read as fast as the file allows (true by default).
    var isLive: Bool { get }

    /// The receiver's own address, when it can be known (recorded with a calibration).
    func receiverAddress() async throws -> BDAddress?

    /// Scans until a callback returns `.stop`, the source ends (the end of a capture), the task
    /// is cancelled, or the source fails (throws). Scanning is turned off again before it returns
    /// or throws.
    ///
    /// - `receive(sightings, time)` gets each batch of reports (the reports of one event) as soon
    ///   as they are decoded, possibly on a transport's reader thread: it must be quick and
    ///   thread-safe.
    /// - `reception(state, time)` says whether the receiver can hear, each time that changes:
    ///   `.deaf` (with the reason) while the adapter is powered off or removed, the controller
    ///   is being reset or recovered, the link is gone, a capture's own commands turned scanning
    ///   off, or the watchdog found nothing heard; `.hearing` when that is over. The receiver is
    ///   taken to hear when the scan starts. Called from the scan loop, in time order with `tick`.
    /// - `watchdog`: no advertisement of any device for that long makes the receiver deaf
    ///   (`Deafness.Cause.watchdog`) until something is heard; a live source restarts its scan
    ///   then (and again every `watchdog` while nothing comes). Nil: no watchdog.
    /// - `tick(time)` runs about every `tickInterval` of source time, for displays, deadlines and
    ///   stopping rules, and once more when the source ends.
    func scan(_ request: ScanRequest) async throws

    /// Releases the receiver (closes sockets and files). Safe to call more than once.
    func close() async
}

extension SightingSource {
    public var isLive: Bool { true }
}

/// What one `SightingSource.scan` reports to and how often (see the protocol's `scan(_:)`): the
/// one signature every source implements, so the five parts are declared in one place.
public struct ScanRequest: Sendable {
    public var tickInterval: Duration
    public var watchdog: Duration?
    /// Source time at which the scan stops (`--duration`), whatever the callbacks say: the
    /// batch or tick that reaches it is handled, then the scan stops. nil: no deadline.
    public var deadline: Double?
    public var receive: @Sendable ([Sighting], Double) -> ScanControl
    public var reception: @Sendable (Reception, Double) -> Void
    public var tick: @Sendable (Double) async throws -> ScanControl

    public init(
        tickInterval: Duration,
        watchdog: Duration? = nil,
        deadline: Double? = nil,
        receive: @escaping @Sendable ([Sighting], Double) -> ScanControl,
        reception: @escaping @Sendable (Reception, Double) -> Void = { _, _ in },
        tick: @escaping @Sendable (Double) async throws -> ScanControl
    ) {
        self.tickInterval = tickInterval
        self.watchdog = watchdog
        self.deadline = deadline
        self.reception = reception
        guard let deadline else {
            (self.receive, self.tick) = (receive, tick)
            return
        }
        self.receive = { sightings, t in
            let control = receive(sightings, t)
            return t >= deadline ? .stop : control
        }
        self.tick = { t in
            let control = try await tick(t)
            return t >= deadline ? .stop : control
        }
    }

    /// Follows whether the receiver can hear, reporting each change to `reception`; its
    /// watchdog is the request's.
    public func receptionTracker() -> ReceptionTracker {
        ReceptionTracker(watchdog: watchdog, report: reception)
    }
}

/// Whether a receiver can hear right now: what `SightingSource.scan` reports as it changes.
public enum Reception: Sendable, Equatable {
    case hearing
    case deaf(Deafness)
}

/// What every source does to report `Reception`: the current deafness (the first reason wins
/// until it is over), and the watchdog — the time of the last report, kept on the reports' own
/// thread at the cost of one atomic store.
public final class ReceptionTracker: Sendable {
    private let lastReport = Atomic<UInt64>(0.0.bitPattern)
    private let deafByWatchdog = Atomic<Bool>(false)
    private let state = Mutex<(deafness: Deafness?, lastKick: Double)>((nil, 0))
    /// Seconds; nil: no watchdog.
    public let watchdog: Double?
    private let report: @Sendable (Reception, Double) -> Void

    public init(watchdog: Duration?, report: @escaping @Sendable (Reception, Double) -> Void) {
        self.watchdog = watchdog.map(\.seconds).flatMap { $0 > 0 ? $0 : nil }
        self.report = report
    }

    /// Reports arrived at `t`: a deafness the watchdog found is over. Call before handing them on.
    public func heard(at t: Double) {
        lastReport.store(t.bitPattern, ordering: .relaxed)
        if deafByWatchdog.load(ordering: .relaxed) { hears(at: t, only: .watchdog) }
    }

    /// The receiver cannot hear from `t` on. A second reason while deaf is not reported; one
    /// that says more than the watchdog's replaces it (a report then no longer ends it).
    public func deaf(_ deafness: Deafness, at t: Double) {
        let changed = state.withLock { s in
            if let d = s.deafness {
                if d.cause == .watchdog && deafness.cause != .watchdog { s.deafness = deafness }
                return false
            }
            s.deafness = deafness
            return true
        }
        deafByWatchdog.store(state.withLock { $0.deafness?.cause == .watchdog }, ordering: .relaxed)
        guard changed else { return }
        report(.deaf(deafness), t)
    }

    /// The receiver hears again from `t` on (when deaf for `only`, if given). The watchdog counts
    /// from here.
    public func hears(at t: Double, only cause: Deafness.Cause? = nil) {
        let changed = state.withLock { s in
            guard let d = s.deafness, cause == nil || d.cause == cause else { return false }
            s.deafness = nil
            s.lastKick = max(s.lastKick, t)
            return true
        }
        guard changed else { return }
        deafByWatchdog.store(false, ordering: .relaxed)
        report(.hearing, t)
    }

    /// Why the receiver cannot hear, nil while it hears.
    public var deafness: Deafness? { state.withLock { $0.deafness } }

    /// When the watchdog fires, at `t` or before: no report for `watchdog` seconds since the
    /// last report, hearing resumed or the watchdog last fired, while not deaf for another
    /// reason. Firing again restarts its count. Nil: not due.
    public func watchdogDue(at t: Double) -> Double? {
        guard let watchdog else { return nil }
        let last = Double(bitPattern: lastReport.load(ordering: .relaxed))
        return state.withLock { s in
            if let d = s.deafness, d.cause != .watchdog { return nil }
            let due = max(last, s.lastKick) + watchdog
            guard due <= t else { return nil }
            s.lastKick = due
            return due
        }
    }

    /// The words of a watchdog deafness.
    public func watchdogDeafness(restart: String) -> Deafness {
        Deafness(
            .watchdog,
            "no advertisement of any device for \((watchdog ?? 0).formattedWatchdog) s (--watchdog)\(restart)")
    }
}

extension Double {
    fileprivate var formattedWatchdog: String { self == rounded() ? String(Int64(self)) : String(self) }
}

/// A controller this host talks HCI to (a BlueZ raw socket, H4 over a UART or TCP): programs it
/// to scan passively with duplicate filtering off, takes the reports on the transport's reader
/// thread, and starts the scan again when a reset or another program stops it (`Scanner.recover`).
/// Its time and ticks are read from the scanner's clock, the one the recovery waits on.
public struct ControllerSightingSource: SightingSource {
    public let client: ControllerClient
    public let scanner: Scanner

    public init(client: ControllerClient, scanner: Scanner) {
        self.client = client
        self.scanner = scanner
    }

    public var name: String { client.transport.name }

    public func receiverAddress() async throws -> BDAddress? {
        try await client.execute(ReadBDAddr())
    }

    public func close() async { await client.close() }

    public func scan(_ request: ScanRequest) async throws {
        let run = LiveScanLoop(clock: scanner.clock)
        let now = run.now
        let client = self.client
        let scanner = self.scanner
        let stopRequested = Atomic<Bool>(false)
        let tracker = request.receptionTracker()
        // Reports are handled as they are decoded: no hand-over between tasks per report.
        await client.setEventHandler { event in
            let sightings = Sighting.all(in: event)
            guard !sightings.isEmpty else { return false }
            if stopRequested.load(ordering: .relaxed) { return true }
            let t = now()
            tracker.heard(at: t)
            if request.receive(sightings, t) == .stop {
                stopRequested.store(true, ordering: .relaxed)
                client.wake()
            }
            return true
        }
        var commandSet: LECommandSet
        do {
            commandSet = try await scanner.start(on: client)
        } catch {
            await client.setEventHandler(nil)
            throw error
        }
        // The events left are wake-ups (every tick, and when `receive` asks to stop), the end of
        // the link, and what a reset or another program does to the scan.
        try await run.run(
            tickInterval: request.tickInterval, wake: { client.wake() },
            loop: {
                loop: for await input in client.events {
                    if stopRequested.load(ordering: .relaxed) || Task.isCancelled { break }
                    switch input {
                    case .wake:
                        if try await request.tick(now()) == .stop { break loop }
                        if let due = tracker.watchdogDue(at: now()) {
                            // Firmware that stopped reporting while it still answers commands.
                            let deafness = tracker.watchdogDeafness(restart: "; scan restarted")
                            tracker.deaf(deafness, at: due)
                            commandSet = try await scanner.restart(because: deafness.reason, on: client)
                        }
                    case .linkClosed(nil):
                        _ = try await request.tick(now())
                        break loop  // closed
                    case .linkClosed(let error?):
                        tracker.deaf(Deafness(.link, "the link to \(client.transport.name) was lost"), at: now())
                        throw error
                    case .event(let event):
                        if let restarted = try await restart(after: event, tracker: tracker, now: now) {
                            commandSet = restarted
                        }
                    }
                }
            },
            cleanup: { _ in
                await client.setEventHandler(nil)
                await scanner.stop(on: client, commandSet: commandSet)
            })
    }

    /// A reset or another program stopped the scan: starts it again and returns the command set
    /// it now uses; nil when `event` did not stop it, or the adapter is down (scanning resumes
    /// when it is back up).
    private func restart(
        after event: HCIEvent, tracker: ReceptionTracker, now: @Sendable () -> Double
    ) async throws -> LECommandSet? {
        guard let (deafness, restart) = Scanner.interruption(by: event, on: client.transport.name) else { return nil }
        tracker.deaf(deafness, at: now())
        guard restart else {
            scanner.logger.warning("\(deafness.reason); scanning resumes when it is back up")
            return nil
        }
        let commandSet = try await scanner.restart(because: deafness.reason, on: client)
        tracker.hears(at: now())
        return commandSet
    }
}
