import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// Scanning through the kernel (`MgmtSightingSource`) against the fake kernel: it registers an
/// iBeacon monitor, takes reports from both events the kernel forwards them in, and removes its
/// monitor (and only its own) however the scan ends.
@Suite struct MgmtSightingSourceTests {
    static let beaconData: [UInt8] =
        [0x02, 0x01, 0x06, 0x1A, 0xFF, 0x4C, 0x00, 0x02, 0x15] + (1...16).map { UInt8($0) } + [
            0x00, 0x0C, 0x00, 0x01, 0xC5,
        ]
    static let address = try! BDAddress(littleEndian: [1, 2, 3, 4, 5, 0xC6])

    static func report(rssi: Int8 = -59, data: [UInt8] = beaconData, type: UInt8 = MgmtDeviceFound.leRandomAddress)
        -> MgmtDeviceFound
    {
        MgmtDeviceFound(address: address, addressType: type, rssi: rssi, flags: 0, data: data)
    }

    /// Runs a scan on `kernel` in a task; `body` gets what was received so far.
    static func withScan(
        _ kernel: FakeMgmtKernel, tick: @escaping @Sendable (Double) async throws -> ScanControl = { _ in .proceed },
        _ body: @Sendable (_ received: @Sendable () -> [Sighting], _ task: Task<Void, any Error>) async throws -> Void
    ) async throws {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(client: client, index: FakeMgmtKernel.index, logger: Logger(label: "test"))
        let received = Mutex<[Sighting]>([])
        let task = Task {
            try await source.scan(
                ScanRequest(
                    tickInterval: .milliseconds(20),
                    receive: { batch, _ in
                        received.withLock { $0 += batch }
                        return .proceed
                    }, tick: tick))
        }
        try await body({ received.withLock { $0 } }, task)
        task.cancel()
        _ = await task.result
        await source.close()
    }

    @Test func registersTheIBeaconMonitorAndTakesReportsFromBothEventsThenRemovesIt() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)  // another program's state the scan must not touch
        try await Self.withScan(kernel) { received, _ in
            #expect(await eventually { kernel.monitors.count == 1 })
            #expect(kernel.monitors.values.first == [.iBeacon])
            // No discovery: Adv Monitor Device Found (handle 0).
            #expect(kernel.advertisementHeard(Self.report(rssi: -60)))
            // Another program's discovery: Device Found.
            kernel.otherProgramDiscovers(true)
            #expect(kernel.advertisementHeard(Self.report(rssi: -61)))
            // RSSI 127 is "not available"; a BR/EDR inquiry result is no LE report.
            #expect(kernel.advertisementHeard(Self.report(rssi: MgmtDeviceFound.rssiNotAvailable)))
            #expect(kernel.advertisementHeard(Self.report(type: MgmtDeviceFound.brEdrAddress)))
            #expect(await eventually { received().count == 3 })
            let got = received()
            #expect(got.map(\.rssi) == [-60, -61, nil])
            #expect(
                got.allSatisfy { $0.beacon?.major == 12 && $0.addressType == .random && $0.address == Self.address })
        }
        #expect(kernel.monitors.isEmpty)
        #expect(kernel.opcodes.contains(.removeAdvMonitor))
        #expect(kernel.instances.keys.sorted() == [1])
    }

    @Test func removesTheMonitorWhenTickAsksToStop() async throws {
        let kernel = FakeMgmtKernel()
        let stopLater: @Sendable (Double) async throws -> ScanControl = { t in t > 0.05 ? .stop : .proceed }
        try await Self.withScan(kernel, tick: stopLater) { _, task in
            try await task.value  // ends by itself
            #expect(kernel.monitors.isEmpty)
        }
    }

    @Test func keepsOtherProgramsMonitors() async throws {
        let kernel = FakeMgmtKernel()
        let otherHandle = kernel.otherProgramAddsMonitor()
        try await Self.withScan(kernel) { _, _ in
            #expect(await eventually { kernel.monitors.count == 2 })
        }
        #expect(Array(kernel.monitors.keys) == [otherHandle])
    }

    @Test func failsWithTheKernelsStatusWhenMonitorsAreUnsupported() async throws {
        let kernel = FakeMgmtKernel()
        kernel.supportsAdvMonitor = false
        try await Self.withScan(kernel) { _, task in
            let error = await #expect(throws: MgmtError.self) { try await task.value }
            #expect(error?.status == .unknownCommand)
            #expect("\(error!)".contains("Add Advertisement Patterns Monitor (0x0052)"))
        }
    }

    @Test func failsWhenTheAdapterIsRemoved() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withScan(kernel) { _, task in
            #expect(await eventually { kernel.monitors.count == 1 })
            kernel.removeIndex()
            let error = await #expect(throws: TransportError.self) { try await task.value }
            #expect("\(error!)".contains("hci0 was removed"))
        }
    }

    @Test func keepsScanningAcrossAPowerCycle() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withScan(kernel) { received, task in
            #expect(await eventually { kernel.monitors.count == 1 })
            kernel.powerOff()
            #expect(!kernel.advertisementHeard(Self.report()))
            kernel.powerOn()
            #expect(kernel.advertisementHeard(Self.report(rssi: -70)))
            #expect(await eventually { received().map(\.rssi) == [-70] })
            #expect(kernel.monitors.count == 1)
        }
    }

    @Test func sightingsAndTicksCarryTheTimeOfTheInjectedClock() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(
            client: client, index: FakeMgmtKernel.index, clock: clock, logger: Logger(label: "t"))
        let seen = Mutex<[String]>([])
        let task = Task {
            try await source.scan(
                ScanRequest(
                    tickInterval: .seconds(1),
                    receive: { _, time in
                        seen.withLock { $0.append("report at \(time)") }
                        return .proceed
                    },
                    tick: { time in
                        seen.withLock { $0.append("tick at \(time)") }
                        return time >= 2 ? .stop : .proceed
                    }))
        }
        // The ticker is the only sleeper on the clock.
        #expect(await eventually { kernel.monitors.count == 1 && clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(250))
        #expect(kernel.advertisementHeard(Self.report()))
        #expect(await eventually { seen.withLock { $0 } == ["report at 0.25"] })
        clock.advance(by: .milliseconds(750))
        #expect(await eventually { seen.withLock { $0 }.count == 2 && clock.sleeperCount == 1 })
        clock.advance(by: .seconds(1))
        try await task.value  // the tick at 2 s stops it
        #expect(seen.withLock { $0 } == ["report at 0.25", "tick at 1.0", "tick at 2.0"])
        #expect(kernel.monitors.isEmpty)
        await source.close()
    }

    @Test func aCalibrationThatHearsNothingGivesUpAfterTenSecondsOfTheInjectedClock() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(
            client: client, index: FakeMgmtKernel.index, clock: clock, logger: Logger(label: "t"))
        let target = CalibrationTarget(
            proximityUUID: UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!, major: 0x0102, minor: 0x0304)
        let calibrator = Calibrator(target: target, settings: CalibrationSettings(), logger: Logger(label: "test"))
        let progressed = Mutex<Duration?>(nil)
        let run = Task {
            try await calibrator.run(on: source) { _, elapsed in progressed.withLock { $0 = elapsed } }
        }
        #expect(await eventually { kernel.monitors.count == 1 && clock.sleeperCount == 1 })
        // Twenty ticks of 0.5 s, each handled before the clock moves again: no real waiting.
        for step in 1...20 {
            clock.advance(by: .milliseconds(500))
            let now = Duration.milliseconds(500 * step)
            #expect(await eventually { progressed.withLock { $0 } == now && (step == 20 || clock.sleeperCount == 1) })
        }
        await #expect(throws: CalibrationError.notHeard(target: target.identity, seconds: 10)) { try await run.value }
        #expect(kernel.monitors.isEmpty)
        await source.close()
    }

    /// Issue 24: the source says when its receiver cannot hear — a power cycle, the watchdog —
    /// on the injected clock.
    @Test func saysWhenTheReceiverCannotHearAndTheWatchdogRestartsTheScan() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(
            client: client, index: FakeMgmtKernel.index, clock: clock, logger: Logger(label: "t"))
        let seen = Mutex<[String]>([])
        let task = Task {
            try await source.scan(
                ScanRequest(
                    tickInterval: .seconds(1), watchdog: .seconds(3),
                    receive: { _, time in
                        seen.withLock { $0.append("report at \(time)") }
                        return .proceed
                    },
                    reception: { reception, time in
                        let what =
                            switch reception {
                            case .hearing: "hearing"
                            case .deaf(let d): "deaf (\(d.cause.rawValue): \(d.reason))"
                            }
                        seen.withLock { $0.append("\(what) at \(time)") }
                    },
                    tick: { time in time >= 12 ? .stop : .proceed }))
        }
        #expect(await eventually { kernel.monitors.count == 1 && clock.sleeperCount == 1 })
        let first = kernel.monitors.keys.first
        clock.advance(by: .seconds(1))
        #expect(await eventually { clock.sleeperCount == 1 })
        kernel.powerOff()
        #expect(await eventually { seen.withLock { $0 }.count == 1 })
        // Powered off for longer than the watchdog: the watchdog keeps quiet (deaf already).
        for _ in 1...4 {
            clock.advance(by: .seconds(1))
            #expect(await eventually { clock.sleeperCount == 1 })
        }
        kernel.powerOn()
        #expect(await eventually { seen.withLock { $0 }.count == 2 })
        // Nothing heard for 3 s after power on: the watchdog fires, the monitor is registered again.
        for _ in 1...3 {
            clock.advance(by: .seconds(1))
            #expect(await eventually { clock.sleeperCount == 1 })
        }
        // Removed, then added again: wait for the new one (an empty table also has no `first`).
        #expect(
            await eventually {
                seen.withLock { $0 }.count == 3 && kernel.monitors.count == 1 && kernel.monitors.keys.first != first
            })
        #expect(kernel.monitors.count == 1)
        #expect(kernel.advertisementHeard(Self.report()))
        #expect(await eventually { seen.withLock { $0 }.count == 5 })
        #expect(
            seen.withLock { $0 } == [
                "deaf (powered-off: hci0 was powered off) at 1.0", "hearing at 5.0",
                "deaf (watchdog: no advertisement of any device for 3 s (--watchdog); advertisement monitor registered again) at 8.0",
                "hearing at 8.0", "report at 8.0",
            ])
        clock.advance(by: .seconds(4))
        try await task.value
        await source.close()
    }
}
