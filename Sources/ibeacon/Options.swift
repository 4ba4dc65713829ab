import ArgumentParser
import Dispatch
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

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
        return logger
    }
}

private let loggingBootstrap: Void = {
    LoggingSystem.bootstrap { label in
        var handler = StreamLogHandler.standardError(label: label)
        handler.logLevel = .trace  // each Logger's own level filters (`makeLogger` sets it)
        return handler
    }
}()

/// Sends swift-log to stderr, once per process; the level is each logger's (`makeLogger`).
func bootstrapLogging() { _ = loggingBootstrap }

/// `--device`, `--timeout`, `--btsnoop`: how to reach the controller.
struct DeviceOptions: ParsableArguments {
    @Option(
        name: .shortAndLong,
        help: ArgumentHelp(
            "Controller: hciN, serial:PATH[,BAUD][,rtscts], tcp:HOST:PORT (default: $IBEACON_DEVICE, else hci0).",
            valueName: "spec"))
    var device: String?

    @Option(help: ArgumentHelp("Seconds to wait for each controller answer.", valueName: "seconds"))
    var timeout: Double = 2

    @Option(help: ArgumentHelp("Write every HCI packet to FILE (btsnoop, opens in Wireshark).", valueName: "file"))
    var btsnoop: String?

    var deviceText: String {
        device ?? ProcessInfo.processInfo.environment["IBEACON_DEVICE"].flatMap { $0.isEmpty ? nil : $0 } ?? "hci0"
    }

    func validate() throws {
        guard timeout > 0, timeout <= 600 else {
            throw ValidationError("--timeout must be between 0 and 600 seconds, got \(timeout)")
        }
    }

    func spec() throws -> DeviceSpec { try DeviceSpec(parsing: deviceText) }

    /// Opens the transport (wrapped by the btsnoop recorder when asked) and starts a client.
    func connect(logger: Logger) async throws -> ControllerClient {
        let spec = try spec()
        var transport = try openTransport(spec, logger: logger)
        if let btsnoop {
            let recorder = try BTSnoopFileRecorder(path: btsnoop, logger: logger)
            transport = RecordingTransport(wrapping: transport, recorder: recorder)
        }
        let client = ControllerClient(
            transport: transport, logger: logger, defaultTimeout: .milliseconds(Int64(timeout * 1000)))
        await client.start()
        return client
    }

    /// The receiver `scan`, `calibrate` and `monitor` take their advertising reports from.
    func openSightingSource(mode: AdvertisingMode = .auto, logger: Logger) async throws -> any SightingSource {
        let spec = try spec()
        let client = try await connect(logger: logger)
        return ControllerSightingSource(
            client: client, scanner: Scanner(mode: mode, ownsController: spec.isExclusive, logger: logger),
            timeline: (client.transport as? BTSnoopReplayTransport)?.reportTimes,
            endTime: (client.transport as? BTSnoopReplayTransport)?.endTime)
    }
}

/// Runs `body` until it returns or SIGINT/SIGTERM arrives; on a signal the body's task is
/// cancelled so it can clean up (turn advertising off) before the process exits.
func runUntilSignalled(_ body: @escaping @Sendable () async throws -> Void) async throws {
    let task = Task { try await body() }
    let sources = [SIGINT, SIGTERM].map { sig -> DispatchSourceSignal in
        signal(sig, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
        source.setEventHandler { task.cancel() }
        source.resume()
        return source
    }
    defer {
        for source in sources { source.cancel() }
    }
    try await task.value
}
