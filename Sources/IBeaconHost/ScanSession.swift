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
public protocol SightingSource: Sendable {
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
    /// - `tick(time)` runs about every `tickInterval` of source time, for displays, deadlines and
    ///   stopping rules, and once more when the source ends.
    func scan(
        tickInterval: Duration,
        receive: @escaping @Sendable ([Sighting], Double) -> ScanControl,
        tick: @escaping @Sendable (Double) async throws -> ScanControl
    ) async throws

    /// Releases the receiver (closes sockets and files). Safe to call more than once.
    func close() async
}

extension SightingSource {
    public var isLive: Bool { true }
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

    public func scan(
        tickInterval: Duration,
        receive: @escaping @Sendable ([Sighting], Double) -> ScanControl,
        tick: @escaping @Sendable (Double) async throws -> ScanControl
    ) async throws {
        let run = LiveScanLoop(clock: scanner.clock)
        let now = run.now
        let client = self.client
        let stopRequested = Atomic<Bool>(false)
        // Reports are handled as they are decoded: no hand-over between tasks per report.
        await client.setEventHandler { event in
            let sightings = Sighting.all(in: event)
            guard !sightings.isEmpty else { return false }
            if stopRequested.load(ordering: .relaxed) { return true }
            if receive(sightings, now()) == .stop {
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
            tickInterval: tickInterval, wake: { client.wake() },
            loop: {
                loop: for await input in client.events {
                    if stopRequested.load(ordering: .relaxed) || Task.isCancelled { break }
                    switch input {
                    case .wake:
                        if try await tick(now()) == .stop { break loop }
                    case .linkClosed(nil):
                        _ = try await tick(now())
                        break loop  // closed
                    case .linkClosed(let error?):
                        throw error
                    case .event(let event):
                        // A reset or another program stopped the scan: start it again.
                        if let restarted = try await scanner.recover(after: event, on: client) {
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
}
