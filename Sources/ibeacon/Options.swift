import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

/// `--verbose` / `--quiet`, shared by every command; configures swift-log for the process.
struct LoggingOptions: ParsableArguments {
    @Flag(name: .shortAndLong, help: "More detail on stderr (-v debug, -vv every HCI packet).")
    var verbose: Int

    @Flag(name: .shortAndLong, help: "Only errors on stderr.")
    var quiet = false

    /// What was asked for; `makeLogger` applies `ProcessEnvironment.logLevel` (no `-vv` when elevated).
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
        let (granted, refusal) = ProcessEnvironment.current.logLevel(requested: level)
        logger.logLevel = granted
        if let refusal { noteOnce(refusal) }
        if let note = ProcessEnvironment.current.ignoredNote("IBEACON_RUNTIME_DIR") { logger.notice("\(note)") }
        return logger
    }
}

private let loggingBootstrap: Void = {
    LoggingSystem.bootstrap { label in
        var handler = EscapingLogHandler.standardError(label: label)
        handler.logLevel = .trace  // each Logger's own level filters (`makeLogger` sets it)
        return handler
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
    var duration: Duration? { seconds.map { .seconds($0) } }
}

/// `--device`, `--timeout`, `--btsnoop`: how to reach the controller; `Use` says whether the
/// command reads captures (`btsnoop:FILE`, `--index`) or programs a controller.
struct DeviceOptions<Use: DeviceUse>: ParsableArguments {
    @Option(name: .shortAndLong, help: ArgumentHelp(Use.deviceHelp, valueName: "spec"))
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
            valueName: "n", visibility: Use.readsCaptures ? .default : .private))
    var index: UInt16?

    var deviceText: String {
        if let device { return device }
        let environment = ProcessEnvironment.current
        if let note = environment.ignoredNote("IBEACON_DEVICE") { noteOnce(note) }
        return environment.value("IBEACON_DEVICE") ?? "hci0"
    }

    func validate() throws {
        try validateSeconds("--timeout", timeout, 0.001...600)
        if let problem = Use.indexProblem(index) { throw ValidationError(problem) }
        if overwriteBtsnoop && btsnoop == nil { throw ValidationError("--overwrite-btsnoop needs --btsnoop FILE") }
    }

    func spec() throws -> DeviceSpec { try DeviceSpec(parsing: deviceText) }

    /// The reports are read from a capture (`btsnoop:FILE`), not heard here.
    var isCapture: Bool { (try? spec().isCapture) ?? false }

    /// The one way to the controller: `AdapterOpener` picks the path (kernel or raw HCI) from
    /// `--device`. The btsnoop recording must never be a profile the command reads or writes.
    func opener(logger: Logger, reading: [String] = [], writing: String? = nil) -> AdapterOpener {
        AdapterOpener(
            device: deviceText, timeout: .seconds(timeout), btsnoop: btsnoop, overwriteBtsnoop: overwriteBtsnoop,
            captureIndex: index, protecting: SafeFile.ProtectedFile.profiles(reading, writing), logger: logger)
    }
}

/// Runs `body` until it returns or a terminating signal arrives (`SignalSupervisor`: the body
/// is cancelled so it can clean up, a second signal or a cleanup longer than its grace ends the
/// process at once, saying so).
///
/// Exit status after a signal: 128 + its number (SIGHUP 129, SIGUSR1 138, ...), except SIGINT and
/// SIGTERM for `.stop`, which end the command normally.
func runUntilSignalled(
    interrupt: InterruptMeaning = .stop, cleanupSeconds: Double? = nil, reapsChildren: Bool = false,
    onForcedExit: @escaping @Sendable () -> Void = {}, _ body: @escaping @Sendable () async throws -> Void
) async throws {
    let supervisor = SignalSupervisor(
        cleanupSeconds: cleanupSeconds, reapsChildren: reapsChildren, onForcedExit: onForcedExit,
        say: { printError("ibeacon: " + $0) })
    let outcome = await supervisor.run(body)
    guard let exit = outcome.signalledExit(interrupt) else {
        if let failure = outcome.reportableFailure { throw failure }
        return
    }
    if let failure = outcome.reportableFailure {
        let (message, _) = classify(failure)
        printError("ibeacon: " + message)
    }
    printError("ibeacon: " + exit.message)
    throw ExitCode(exit.status)
}
