import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// The monitor scan window a kernel scan widens for its duration (`MgmtMonitorScanWindow`),
/// against the fake kernel, which restarts its passive scan with the current defaults whenever
/// a monitor is added or removed, as hci_update_passive_scan does.
@Suite struct MgmtMonitorScanWindowTests {
    static let interval = MgmtSystemParameter.leScanIntervalAdvMonitor
    static let window = MgmtSystemParameter.leScanWindowAdvMonitor
    /// The kernel's defaults (60 ms / 30 ms), and the window widened to the interval.
    static let defaults = FakeMgmtKernel.defaultMonitorScan
    static let continuous = MonitorScanParameters(interval: defaults.interval, window: defaults.interval)
    /// A window another program sets meanwhile (50 ms).
    static let othersWindow: UInt16 = 0x50

    /// Runs a kernel scan for a moment, then cancels it as SIGINT/SIGTERM would.
    static func scan(
        _ kernel: FakeMgmtKernel, records: ScanWindowRecords = .alone, logger: Logger = Logger(label: "test"),
        during: @Sendable () async throws -> Void = {}
    ) async throws {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(
            client: client, index: FakeMgmtKernel.index, scanWindowRecords: records, logger: logger)
        let task = Task {
            try await source.scan(
                ScanRequest(
                    tickInterval: .milliseconds(20), receive: { _, _ in .proceed }, tick: { _ in .proceed }))
        }
        #expect(await eventually { kernel.monitors.count >= 1 })
        try await during()
        task.cancel()
        _ = await task.result
        await source.close()
    }

    @Test func scansContinuouslyAndRestoresTheWindowBeforeRemovingTheMonitor() async throws {
        let kernel = FakeMgmtKernel()
        let other = kernel.otherProgramAddsMonitor()  // bluetoothd's, for a D-Bus client
        try await Self.scan(kernel) {
            #expect(await eventually { kernel.monitors.count == 2 })
            // The passive scan was (re)started with the monitor: window = interval = 60 ms.
            #expect(kernel.monitorScan == Self.continuous)
            #expect(kernel.systemConfiguration[Self.window] == Self.continuous.window)
        }
        #expect(kernel.systemConfiguration[Self.window] == Self.defaults.window)
        #expect(kernel.systemConfiguration[Self.interval] == Self.defaults.interval)
        // Restored first: the scan the kernel restarted for the other monitor is back at 30 ms.
        #expect(Array(kernel.monitors.keys) == [other])
        #expect(kernel.monitorScan == Self.defaults)
        let ops = kernel.opcodes
        let firstSet = ops.firstIndex(of: .setDefaultSystemConfiguration)
        let add = ops.firstIndex(of: .addAdvPatternsMonitor)
        let lastSet = ops.lastIndex(of: .setDefaultSystemConfiguration)
        let remove = ops.lastIndex(of: .removeAdvMonitor)
        #expect(firstSet != nil && add != nil && firstSet! < add!)
        #expect(lastSet != nil && remove != nil && lastSet! < remove!)
    }

    @Test func leavesAContinuousWindowAlone() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramSetsSystemConfiguration(Self.window, Self.continuous.window)
        try await Self.scan(kernel)
        #expect(!kernel.opcodes.contains(.setDefaultSystemConfiguration))
        #expect(kernel.systemConfiguration[Self.window] == Self.continuous.window)
    }

    @Test func leavesAWindowAnotherProgramChangedMeanwhile() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.scan(kernel) {
            #expect(kernel.systemConfiguration[Self.window] == Self.continuous.window)
            kernel.otherProgramSetsSystemConfiguration(Self.window, Self.othersWindow)
        }
        #expect(kernel.systemConfiguration[Self.window] == Self.othersWindow)
        #expect(kernel.monitors.isEmpty)
    }

    @Test func scansWithTheDefaultWindowWhenTheKernelCannotChangeIt() async throws {
        let old = FakeMgmtKernel()
        old.supportsSystemConfiguration = false
        try await Self.scan(old) { #expect(old.monitorScan?.window == Self.defaults.window) }
        #expect(old.monitors.isEmpty)

        let denied = FakeMgmtKernel()
        denied.setSystemConfigurationStatus = .permissionDenied
        try await Self.scan(denied) { #expect(denied.monitorScan?.window == Self.defaults.window) }
        #expect(denied.systemConfiguration[Self.window] == Self.defaults.window)
        #expect(denied.monitors.isEmpty)
    }

    /// The kernel refuses the wider window to a process without CAP_NET_ADMIN: the warning says
    /// how to get it where the package is installed (join the group), before setcap.
    @Test func aRefusedWindowAdvisesJoiningTheGroup() async throws {
        let denied = FakeMgmtKernel()
        denied.setSystemConfigurationStatus = .permissionDenied
        let log = RecordingLog()
        try await Self.scan(denied, logger: log.logger)
        let warning = log.messages.first { $0.contains("cannot widen") }
        #expect(warning?.contains("`sudo adduser $USER ibeacon`, then log in again") == true)
        #expect(warning?.contains("Permission Denied") == true)
    }

    @Test func restoresWhenAddingTheMonitorFails() async throws {
        let kernel = FakeMgmtKernel()
        kernel.supportsAdvMonitor = false
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(client: client, index: FakeMgmtKernel.index, logger: Logger(label: "test"))
        await #expect(throws: MgmtError.self) {
            try await source.scan(
                ScanRequest(
                    tickInterval: .milliseconds(20), receive: { _, _ in .proceed }, tick: { _ in .proceed }))
        }
        #expect(kernel.opcodes.filter { $0 == .setDefaultSystemConfiguration }.count == 2)
        #expect(kernel.systemConfiguration[Self.window] == Self.defaults.window)
        await source.close()
    }

    /// Two ibeacon scans on one adapter, the first ending first: the second inherits the window
    /// to restore and restores it when it ends, not before.
    @Test func theLastOfTwoScansRestores() async throws {
        let kernel = FakeMgmtKernel()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let saved = Mutex<[Int32: MonitorScanParameters]>([:])
        func window(pid: Int32) -> MgmtMonitorScanWindow {
            let records = ScanWindowRecords(
                inherited: { saved.withLock { $0.first { $0.key != pid }?.value } },
                save: { p in saved.withLock { $0[pid] = p } },
                othersScanning: { saved.withLock { $0.keys.filter { $0 != pid }.sorted() } })
            return MgmtMonitorScanWindow(
                client: client, index: FakeMgmtKernel.index, records: records, logger: Logger(label: "t"))
        }
        let defaults = Self.defaults
        let first = window(pid: 1)
        let second = window(pid: 2)
        let firstChange = try #require(await first.widen())
        #expect(firstChange.original == defaults)
        let secondChange = try #require(await second.widen())
        #expect(secondChange.original == defaults)
        #expect(saved.withLock { $0 } == [1: defaults, 2: defaults])
        await first.restore(firstChange)
        #expect(kernel.systemConfiguration[Self.window] == Self.continuous.window)
        await second.restore(secondChange)
        #expect(kernel.systemConfiguration[Self.window] == Self.defaults.window)
        #expect(saved.withLock { $0.isEmpty })
        #expect(kernel.opcodes.filter { $0 == .setDefaultSystemConfiguration }.count == 2)
        await client.close()
    }

    /// Issue 40, hole 4: a scan killed (SIGKILL) before it restored the window left it at the
    /// interval for good. The next scan finds the killed scan's record, restores the window it
    /// names when it ends, and spends the record.
    @Test func theNextScanRestoresTheWindowAKilledScanLeft() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramSetsSystemConfiguration(Self.window, Self.continuous.window)  // as the killed scan left it
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let orphan = Mutex<MonitorScanParameters?>(Self.defaults)
        let saved = Mutex<MonitorScanParameters?>(nil)
        let records = ScanWindowRecords(
            inherited: { nil }, save: { p in saved.withLock { $0 = p } }, othersScanning: { [] },
            orphaned: {
                orphan.withLock { o in
                    defer { o = nil }
                    return o
                }
            })
        let scanWindow = MgmtMonitorScanWindow(
            client: client, index: FakeMgmtKernel.index, records: records, logger: Logger(label: "t"))
        let change = try #require(await scanWindow.widen())
        #expect(change == .init(original: Self.defaults, applied: Self.continuous))
        #expect(saved.withLock { $0 } == Self.defaults)
        #expect(orphan.withLock { $0 } == nil)
        await scanWindow.restore(change)
        #expect(kernel.systemConfiguration[Self.window] == Self.defaults.window)
        await client.close()
    }

    /// The command a failed restore names: the type big-endian, the value little-endian, as
    /// `btmgmt set-sysconfig -v` takes them (lopsided value so a swap shows).
    @Test func theRestoreHintSpellsTheWindowAsBtmgmtTakesIt() {
        #expect(Self.defaults.btmgmtWindowArgument == "0014:2:3000")
        #expect(MonitorScanParameters(interval: 0x0400, window: 0x0102).btmgmtWindowArgument == "0014:2:0201")
    }
}
