import IBeaconCore
import Logging
import Synchronization

/// Scanning through the kernel's management interface, next to bluetoothd: registers an
/// advertisement monitor (Add Advertisement Patterns Monitor, iBeacon pattern) so that the kernel
/// scans passively with duplicate filtering off, and takes every report it forwards:
///
/// - Adv Monitor Device Found (0x002F) while no program runs discovery. Without controller
///   offload (MSFT) the kernel does no matching: every advertisement comes, iBeacon or not.
/// - Device Found (0x0012) while another program (bluetoothd `scan on`, `btmgmt find`) runs
///   discovery: the kernel then reports each advertisement once, through that event.
///
/// The monitor is ibeacon's own, removed again (by its handle, never handle 0) when the scan
/// ends, fails or is cancelled. One setting of the adapter changes for the duration, logged and
/// restored the same way: the monitor scan window (`MgmtMonitorScanWindow`), without which the
/// kernel hears about half of the advertisements.
public struct MgmtSightingSource: SightingSource {
    public let client: MgmtClient
    public let index: MgmtIndex
    /// Shares the widened scan window with other ibeacon scans on the adapter.
    public let scanWindowRecords: ScanWindowRecords
    /// What the source's time and its ticks are read from (a `ManualClock` in tests).
    public let clock: any Clock<Duration>
    let logger: Logger

    public init(
        client: MgmtClient, index: MgmtIndex, scanWindowRecords: ScanWindowRecords = .alone,
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger
    ) {
        self.client = client
        self.index = index
        self.scanWindowRecords = scanWindowRecords
        self.clock = clock
        self.logger = logger
    }

    public var name: String { index.description }

    public func receiverAddress() async throws -> BDAddress? {
        try await client.execute(MgmtReadControllerInfo(), index: index).address
    }

    public func close() async { await client.close() }

    /// The sightings of one management event for `index`; empty for any other event.
    public static func sightings(in event: MgmtEvent, index: MgmtIndex) -> [Sighting] {
        let report: MgmtDeviceFound
        switch event {
        case .deviceFound(index, let r): report = r
        case .advMonitorDeviceFound(index, _, let r): report = r
        default: return []
        }
        guard let type = report.leAddressType else { return [] }  // BR/EDR inquiry result
        return [
            Sighting(
                address: report.address, addressType: type, rssi: report.rssi == 127 ? nil : report.rssi,
                data: report.data, extended: false)
        ]
    }

    private enum Input: Sendable {
        case event(MgmtEvent)
        case tick
        case ended
    }

    public func scan(
        tickInterval: Duration,
        receive: @escaping @Sendable ([Sighting], Double) -> ScanControl,
        tick: @escaping @Sendable (Double) async throws -> ScanControl
    ) async throws {
        let run = LiveScanLoop(clock: clock)
        let now = run.now
        let client = self.client
        let index = self.index
        let monitor = try MgmtAddAdvPatternsMonitor(patterns: [.iBeacon])
        // The window first: adding the monitor (re)starts the kernel's passive scan with it.
        let scanWindow = MgmtMonitorScanWindow(client: client, index: index, records: scanWindowRecords, logger: logger)
        let widened = await scanWindow.widen()
        let handle: UInt16
        do {
            handle = try await client.execute(monitor, index: index)
        } catch {
            if let widened { await scanWindow.restore(widened) }
            throw error
        }
        logger.debug("advertisement monitor \(handle) registered on \(index): the kernel scans for us")

        let (inputs, sink) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let forwarder = Task {
            for await event in client.events { sink.yield(.event(event)) }
            sink.yield(.ended)
        }
        var poweredOff = false
        try await run.run(
            tickInterval: tickInterval, wake: { sink.yield(.tick) },
            loop: {
                loop: for await input in inputs {
                    if Task.isCancelled { break }
                    switch input {
                    case .tick:
                        if try await tick(now()) == .stop { break loop }
                    case .ended:
                        if let error = await client.linkError { throw error }
                        throw MgmtError.closed(opcode: .addAdvPatternsMonitor)
                    case .event(.indexRemoved(index)):
                        throw TransportError(
                            .disconnected, "\(index) was removed while scanning (unplugged, or the driver was unloaded)"
                        )
                    case .event(.newSettings(index, let settings)):
                        // The kernel keeps the monitor across a power cycle and scans again by itself.
                        if !settings.contains(.powered), !poweredOff {
                            poweredOff = true
                            logger.notice("\(index) was powered off: no reports until it is back")
                        } else if settings.contains(.powered), poweredOff {
                            poweredOff = false
                            logger.notice(
                                "\(index) is powered again: scanning resumed (the kernel scans for the monitor)")
                        }
                    case .event(let event):
                        let sightings = Self.sightings(in: event, index: index)
                        if !sightings.isEmpty, receive(sightings, now()) == .stop { break loop }
                    }
                }
            },
            cleanup: { failure in
                forwarder.cancel()
                sink.finish()
                // Restored before the monitor goes, so the kernel's next passive scan uses it again.
                if let widened { await scanWindow.restore(widened) }
                do {
                    _ = try await client.execute(try MgmtRemoveAdvMonitor(handle: handle), index: index)
                    logger.debug("advertisement monitor \(handle) removed from \(index)")
                } catch {
                    if failure == nil {
                        logger.warning(
                            "could not remove advertisement monitor \(handle) from \(index): \(error); `btmgmt --index \(index.rawValue) rem-monitor \(handle)` removes it"
                        )
                    }
                }
            })
    }
}
