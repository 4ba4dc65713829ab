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
                address: report.address, addressType: type,
                rssi: report.rssi == MgmtDeviceFound.rssiNotAvailable ? nil : report.rssi,
                data: report.data, extended: false)
        ]
    }

    private enum Input: Sendable {
        case event(MgmtEvent)
        case tick
        case ended
    }

    public func scan(_ request: ScanRequest) async throws {
        let run = LiveScanLoop(clock: clock)
        let now = run.now
        let client = self.client
        let tracker = request.receptionTracker()
        let monitor = try MgmtAddAdvPatternsMonitor(patterns: [.iBeacon])
        let scanWindow = MgmtMonitorScanWindow(client: client, index: index, records: scanWindowRecords, logger: logger)
        let (widened, registered) = try await register(monitor, widening: scanWindow)
        var handle = registered

        let (inputs, sink) = AsyncStream.makeStream(of: Input.self, bufferingPolicy: .unbounded)
        let forwarder = Task {
            for await event in client.events { sink.yield(.event(event)) }
            sink.yield(.ended)
        }
        try await run.run(
            tickInterval: request.tickInterval, wake: { sink.yield(.tick) },
            loop: {
                loop: for await input in inputs {
                    if Task.isCancelled { break }
                    switch input {
                    case .tick:
                        if try await request.tick(now()) == .stop { break loop }
                        if let due = tracker.watchdogDue(at: now()) {
                            handle = await reregister(monitor, replacing: handle, tracker: tracker, at: due)
                        }
                    case .ended:
                        tracker.deaf(Deafness(.link, "the kernel's management socket closed"), at: now())
                        if let error = await client.linkError { throw error }
                        throw MgmtError.closed(opcode: .addAdvPatternsMonitor)
                    case .event(let event):
                        let t = now()
                        let sightings = try observe(event, tracker: tracker, at: t)
                        guard !sightings.isEmpty else { continue }
                        tracker.heard(at: t)
                        if request.receive(sightings, t) == .stop { break loop }
                    }
                }
            },
            cleanup: { failure in
                forwarder.cancel()
                sink.finish()
                await unregister(handle, restoring: widened, of: scanWindow, quietly: failure != nil)
            })
    }

    /// Widens the scan window, then adds the monitor (adding it (re)starts the kernel's passive
    /// scan with the window); the window is put back when adding fails.
    private func register(_ monitor: MgmtAddAdvPatternsMonitor, widening scanWindow: MgmtMonitorScanWindow)
        async throws -> (MgmtMonitorScanWindow.Change?, UInt16)
    {
        let widened = await scanWindow.widen()
        do {
            let handle = try await client.execute(monitor, index: index)
            logger.debug("advertisement monitor \(handle) registered on \(index): the kernel scans for us")
            return (widened, handle)
        } catch {
            if let widened { await scanWindow.restore(widened) }
            throw error
        }
    }

    /// Puts the window back, then removes the monitor, so that the kernel's next passive scan
    /// uses the window again. A failure to remove is a warning naming the command that does it,
    /// unless the scan already failed (`quietly`).
    private func unregister(
        _ handle: UInt16, restoring widened: MgmtMonitorScanWindow.Change?, of scanWindow: MgmtMonitorScanWindow,
        quietly: Bool
    ) async {
        if let widened { await scanWindow.restore(widened) }
        do {
            _ = try await client.execute(try MgmtRemoveAdvMonitor(handle: handle), index: index)
            logger.debug("advertisement monitor \(handle) removed from \(index)")
        } catch {
            if !quietly {
                logger.warning(
                    "could not remove advertisement monitor \(handle) from \(index): \(error); `btmgmt --index \(index.rawValue) rem-monitor \(handle)` removes it"
                )
            }
        }
    }

    /// What one event means for the scan: its sightings; the adapter's removal (thrown) or power
    /// change (told to `tracker`), with no sightings.
    private func observe(_ event: MgmtEvent, tracker: ReceptionTracker, at t: Double) throws -> [Sighting] {
        switch event {
        case .indexRemoved(index):
            let why = "\(index) was removed while scanning (unplugged, or the driver was unloaded)"
            tracker.deaf(Deafness(.removed, why), at: t)
            throw TransportError(.disconnected, why)
        case .newSettings(index, let settings):
            // The kernel keeps the monitor across a power cycle and scans again by itself.
            if !settings.contains(.powered), tracker.deafness?.cause != .poweredOff {
                logger.notice("\(index) was powered off: no reports until it is back")
                tracker.deaf(Deafness(.poweredOff, "\(index) was powered off"), at: t)
            } else if settings.contains(.powered), tracker.deafness?.cause == .poweredOff {
                logger.notice("\(index) is powered again: scanning resumed (the kernel scans for the monitor)")
                tracker.hears(at: t)
            }
            return []
        default:
            return Self.sightings(in: event, index: index)
        }
    }

    /// The watchdog fired: the receiver is deaf until something is heard, and the kernel's scan
    /// is started again by removing the monitor and adding it anew. Returns the handle now in
    /// use (the old one when adding failed: the next firing tries again).
    private func reregister(
        _ monitor: MgmtAddAdvPatternsMonitor, replacing handle: UInt16, tracker: ReceptionTracker, at due: Double
    ) async -> UInt16 {
        let deafness = tracker.watchdogDeafness(restart: "; advertisement monitor registered again")
        logger.warning("\(deafness.reason)")
        tracker.deaf(deafness, at: due)
        _ = try? await client.execute(try MgmtRemoveAdvMonitor(handle: handle), index: index)
        do {
            let new = try await client.execute(monitor, index: index)
            logger.notice("advertisement monitor \(new) registered on \(index) (was \(handle))")
            return new
        } catch {
            logger.warning(
                "registering the advertisement monitor on \(index) again failed: \(error); trying again later")
            return handle
        }
    }
}
