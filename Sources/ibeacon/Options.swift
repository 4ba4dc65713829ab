import ArgumentParser
import Dispatch
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
#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// `--verbose` / `--quiet`, shared by every command; configures swift-log for the process.
struct LoggingOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "More detail on stderr (-v debug, -vv every HCI packet).")
    var verbose: Int

    @Flag(name: .shortAndLong, help: "Only errors on stderr.")
    var quiet = false

    var level: Logger.Level {
        if quiet { return .error }
        switch verbose {
        case 0: return .notice
        case 1: return .debug
        default: return .trace
        }
    }

    func makeLogger(_ label: String = "ibeacon") -> Logger {
        bootstrapLogging()
        var logger = Logger(label: label)
        logger.logLevel = level
        if let note = ProcessEnvironment.current.ignoredNote("IBEACON_RUNTIME_DIR") { logger.notice("\(note)") }
        return logger
    }
}

private let loggingBootstrap: Void = {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = .trace  // each Logger's own level filters (`makeLogger` sets it)
        return EscapingLogHandler(handler)
    }
}()

private let notesGiven = Mutex<Set<String>>([])

/// Logs `note` (notice level) the first time it comes up in this process: for what is found
/// where no logger is at hand, such as an ignored `IBEACON_DEVICE`.
func noteOnce(_ note: String) {
    guard notesGiven.withLock({ $0.insert(note).inserted }) else { return }
    bootstrapLogging()
    Logger(label: "ibeacon").notice("\(note)")
}

/// A log handler that passes every message and metadata value through Core's one escaping
/// rule (`escapedForTerminal`) before `base` writes it: one log entry is one line, whatever
/// names, paths or radio-derived strings it quotes (a newline in a profile's name cannot forge
/// an entry, ESC cannot reach the terminal or the journal).
struct EscapingLogHandler: LogHandler {
    var base: StreamLogHandler

    init(_ base: StreamLogHandler) { self.base = base }

    var logLevel: Logger.Level {
        get { base.logLevel }
        set { base.logLevel = newValue }
    }

    var metadata: Logger.Metadata {
        get { base.metadata }
        set { base.metadata = newValue }
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { base[metadataKey: key] }
        set { base[metadataKey: key] = newValue }
    }

    func log(event: LogEvent) {
        var event = event
        event.message = "\(event.message.description.escapedForTerminal)"
        event.metadata = event.metadata?.mapValues { .string($0.description.escapedForTerminal) }
        base.log(event: event)
    }
}

/// Sends swift-log to stderr, once per process; the level is each logger's (`makeLogger`).
func bootstrapLogging() { _ = loggingBootstrap }

/// Checks a number of seconds from the command line: finite and within `range` (or exactly 0
/// when `zeroAllowed`), so that converting it to a `Duration` can neither trap nor spin.
func validateSeconds(
    _ option: String, _ value: Double, _ range: ClosedRange<Double>, zeroAllowed: String? = nil
) throws {
    if value.isFinite && range.contains(value) { return }
    if zeroAllowed != nil, value == 0 { return }
    let zero = zeroAllowed.map { ", or 0 to \($0)" } ?? ""
    throw ValidationError(
        "\(option) must be a number of seconds within \(range.lowerBound.clean)…\(range.upperBound.clean)\(zero), got \(value)"
    )
}

/// Checks `--major` and `--minor`: each is two octets of the iBeacon payload, 0…65535.
func validateMajorMinor(_ major: Int?, _ minor: Int?) throws {
    for (name, value) in [("--major", major), ("--minor", minor)] {
        if let value, !(0...65535).contains(value) { throw ValidationError("\(name) \(value) is outside 0…65535") }
    }
}

/// Checks a `--uuid` that goes into a beacon (encode, profile new): the 8-4-4-4-12 form only.
func validateUUIDForm(_ uuid: String) throws {
    guard UUID(uuidString: uuid) != nil, uuid.count == 36 else {
        throw ValidationError("--uuid \(uuid) is not a UUID like F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
    }
}

/// The longest `--duration` of advertise, scan and monitor: one year (longer runs need no duration).
let maximumRunSeconds: Double = 366 * 86400

/// How a command's help describes what happens without `--duration`.
protocol DurationHelp {
    static var text: String { get }
}

/// scan, monitor: they run until interrupted.
enum UntilInterrupted: DurationHelp {
    static let text = "Stop after this many seconds (default: until interrupted)."
}

/// advertise: it runs until stopped.
enum UntilStopped: DurationHelp {
    static let text = "Stop after this many seconds (default: run until stopped)."
}

/// `--duration` of the commands that otherwise run until stopped (advertise, scan, monitor), and
/// its one range check; `Help` words its help text.
struct DurationOption<Help: DurationHelp>: ParsableArguments {
    @Option(name: .customLong("duration"), help: ArgumentHelp(Help.text, valueName: "seconds"))
    var seconds: Double?

    func validate() throws {
        if let seconds { try validateSeconds("--duration", seconds, 0.001...maximumRunSeconds) }
    }

    /// As a `Duration` (to sleep for); nil without `--duration`.
    var duration: Duration? { seconds.map { .milliseconds(Int64($0 * 1000)) } }
}

/// `--device`, `--timeout`, `--btsnoop`: how to reach the controller.
struct DeviceOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "Controller: hciN (through the kernel's management interface when the kernel manages it), raw:hciN (raw HCI always), serial:PATH[,BAUD][,rtscts], tcp:HOST:PORT; or a capture to read, btsnoop:FILE (default: $IBEACON_DEVICE, else hci0).",
            valueName: "spec"))
    var device: String?

    @Option(help: ArgumentHelp("Seconds to wait for each controller answer.", valueName: "seconds"))
    var timeout: Double = 2

    @Option(help: ArgumentHelp("Write every HCI packet to FILE (btsnoop, opens in Wireshark).", valueName: "file"))
    var btsnoop: String?

    @Flag(help: "Let --btsnoop replace an existing file (it is refused otherwise).")
    var overwriteBtsnoop = false

    @Option(
        help: ArgumentHelp(
            "btsnoop:FILE of several controllers (btmon): read controller N (default: the one heard first).",
            valueName: "n"))
    var index: UInt16?

    var deviceText: String {
        if let device { return device }
        let environment = ProcessEnvironment.current
        if let note = environment.ignoredNote("IBEACON_DEVICE") { noteOnce(note) }
        return environment.value("IBEACON_DEVICE") ?? "hci0"
    }

    func validate() throws {
        try validateSeconds("--timeout", timeout, 0.001...600)
    }

    func spec() throws -> DeviceSpec { try DeviceSpec(parsing: deviceText) }

    /// The one way to the controller: `AdapterOpener` picks the path (kernel or raw HCI) from
    /// `--device`. `protecting` is a file the btsnoop recording must never be (the profile being written).
    func opener(logger: Logger, protecting: String? = nil) -> AdapterOpener {
        AdapterOpener(
            device: deviceText, timeout: .milliseconds(Int64(timeout * 1000)), btsnoop: btsnoop,
            overwriteBtsnoop: overwriteBtsnoop, captureIndex: index, protecting: protecting, logger: logger)
    }
}

/// What SIGINT and SIGTERM mean to a long-running command.
enum InterruptMeaning {
    /// The normal way to end it (advertise, scan): clean up and exit 0.
    case stop
    /// An abort (calibrate): nothing is written, exit 128 + the signal number (130, 143).
    case abort
}

/// The signals whose default action ends the process (signal(7)): all are caught, so that
/// advertising is turned off before exiting. SIGPIPE is ignored instead: a write to a closed
/// pipe then fails with EPIPE, which the output functions absorb.
let terminatingSignals: [Int32] = [
    SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGXFSZ, SIGIO, SIGPWR,
    SIGSTKFLT,
]

/// After a signal, how long the cleanup (turning advertising off, stopping the scan) may take
/// before the process exits anyway: a controller that stopped answering cannot hold it.
let signalGraceMilliseconds = 1500

/// As PID 1, a task reaping every orphan reparented here (`ChildReaper`); nil otherwise.
func reapOrphansIfInit() -> Task<Void, Never>? {
    guard getpid() == 1 else { return nil }
    let reaper = ChildReaper()
    return Task {
        while !Task.isCancelled {
            reaper.reap()
            try? await Task.sleep(for: .milliseconds(500))
        }
    }
}

/// The signal's name, `SIGHUP`.
func signalName(_ signo: Int32) -> String {
    let names: [Int32: String] = [
        SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP", SIGUSR1: "SIGUSR1", SIGUSR2: "SIGUSR2",
        SIGALRM: "SIGALRM", SIGVTALRM: "SIGVTALRM", SIGPROF: "SIGPROF", SIGXCPU: "SIGXCPU", SIGXFSZ: "SIGXFSZ",
        SIGIO: "SIGIO", SIGPWR: "SIGPWR", SIGSTKFLT: "SIGSTKFLT", SIGPIPE: "SIGPIPE",
    ]
    return names[signo] ?? "signal \(signo)"
}

/// The first signal received, and whether the body has finished; shared with the handlers.
private final class SignalState: Sendable {
    let received = Atomic<Int32>(0)
    let finished = Atomic<Bool>(false)
    /// A handler is ending the process (`onForcedExit`, then `_exit`): the body must not win
    /// the race and exit normally meanwhile.
    let forcing = Atomic<Bool>(false)
}

/// Runs `body` until it returns or a terminating signal arrives. On a signal the body's task is
/// cancelled so it can clean up (turn advertising off) before the process exits; if that takes
/// longer than `signalGraceMilliseconds`, or a second signal comes, the process exits at once, saying so.
///
/// Exit status after a signal: 128 + its number (SIGHUP 129, SIGUSR1 138, ...), except SIGINT and
/// SIGTERM for `.stop`, which end the command normally.
///
/// `cleanupSeconds`: how long the cleanup may take instead of `signalGraceMilliseconds` (monitor stopping a
/// hook). `onForcedExit` runs just before such an exit (monitor: SIGKILL to its hooks, so that
/// nothing of them outlives it). As PID 1 (a container without an init) every orphan of the
/// container is reparented here: they are reaped while the body runs, unless `reapsChildren`
/// (the body has a `ChildReaper` of its own: two would take each other's statuses).
func runUntilSignalled(
    interrupt: InterruptMeaning = .stop, cleanupSeconds: Double? = nil, reapsChildren: Bool = false,
    onForcedExit: @escaping @Sendable () -> Void = {}, _ body: @escaping @Sendable () async throws -> Void
) async throws {
    signal(SIGPIPE, SIG_IGN)
    let state = SignalState()
    let task = Task { try await body() }
    let reaping = reapsChildren ? nil : reapOrphansIfInit()
    defer { reaping?.cancel() }
    let grace = cleanupSeconds ?? Double(signalGraceMilliseconds) / 1000
    let sources = terminatingSignals.map { sig -> DispatchSourceSignal in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler {
            let first = state.received.compareExchange(expected: 0, desired: sig, ordering: .sequentiallyConsistent)
            if !first.exchanged {
                state.forcing.store(true, ordering: .sequentiallyConsistent)
                onForcedExit()
                exitNow(sig, "\(signalName(sig)) again: exiting without finishing the cleanup")
            }
            task.cancel()
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(Int(grace * 1000))) {
                if !state.finished.load(ordering: .sequentiallyConsistent) {
                    state.forcing.store(true, ordering: .sequentiallyConsistent)
                    onForcedExit()
                    exitNow(
                        sig,
                        "\(signalName(sig)): the cleanup did not finish within \(formatSeconds(grace)) (the controller "
                            + "does not answer); exiting anyway: check with `ibeacon stop` that advertising is off")
                }
            }
        }
        source.resume()
        return source
    }
    defer {
        for source in sources { source.cancel() }
    }
    var failure: (any Error)?
    do {
        try await task.value
    } catch {
        failure = error
    }
    state.finished.store(true, ordering: .sequentiallyConsistent)
    while state.forcing.load(ordering: .sequentiallyConsistent) {
        Glibc.sleep(1)  // the handler exits the process in a moment
    }
    let sig = state.received.load(ordering: .sequentiallyConsistent)
    if sig == 0 {
        if let failure { throw failure }
        return
    }
    if interrupt == .stop && (sig == SIGINT || sig == SIGTERM) {
        if let failure, !(failure is CancellationError) { throw failure }
        return
    }
    if let failure, !(failure is CancellationError) {
        let (message, _) = classify(failure)
        printError("ibeacon: " + message)
    }
    printError("ibeacon: stopped by \(signalName(sig))" + (interrupt == .abort ? "; nothing was written" : ""))
    throw ExitCode(128 + sig)
}

/// Ends the process now with 128 + `signo`, after a last message.
private func exitNow(_ signo: Int32, _ message: String) -> Never {
    printError("ibeacon: " + message)
    _exit(128 + signo)
}
