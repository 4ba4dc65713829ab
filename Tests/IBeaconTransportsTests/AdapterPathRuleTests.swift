import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import IBeaconTransports
import Logging
import Testing

/// Issue 31 step 2: the path rule and its one failure policy, through the real `AdapterOpener`
/// with the management interface injected (a fake kernel instead of the socket). `open()`
/// (what advertise, scan and info use) and `paths` (what `devices` prints) must agree.
@Suite struct AdapterPathRuleTests {
    static let logger = Logger(label: "test")

    /// An opener whose management interface is `kernel` (a fresh client each time it is opened).
    static func opener(_ device: String, _ kernel: FakeMgmtKernel) -> AdapterOpener {
        var opener = AdapterOpener(device: device, timeout: .milliseconds(300), logger: logger)
        opener.openMgmt = { logger, timeout in
            let client = MgmtClient(transport: kernel, logger: logger, defaultTimeout: timeout)
            await client.start()
            return client
        }
        return opener
    }

    static func pathOfOpen(_ device: String, _ kernel: FakeMgmtKernel) async throws -> ControllerPath {
        let adapter = try await opener(device, kernel).open()
        let path: ControllerPath = adapter is KernelAdapter ? .kernel : .raw
        await adapter.close()
        return path
    }

    static func pathOfDevices(_ index: UInt16, _ kernel: FakeMgmtKernel) async -> ControllerPath? {
        await AdapterOpener.paths([index], logger: logger, openMgmt: opener("hci\(index)", kernel).openMgmt)[index]
    }

    @Test func anAdapterTheKernelListsWithLowEnergyOnGoesThroughTheKernel() async throws {
        #expect(try await Self.pathOfOpen("hci0", FakeMgmtKernel()) == .kernel)
        #expect(await Self.pathOfDevices(0, FakeMgmtKernel()) == .kernel)
    }

    @Test func anAdapterTheKernelDoesNotListIsRaw() async throws {
        #expect(try await Self.pathOfOpen("hci1", FakeMgmtKernel()) == .raw)
        #expect(await Self.pathOfDevices(1, FakeMgmtKernel()) == .raw)
    }

    @Test func poweredWithLowEnergyOffIsRawOnBoth() async throws {
        let kernel = FakeMgmtKernel()
        kernel.lowEnergy = false
        #expect(try await Self.pathOfOpen("hci0", kernel) == .raw)
        let other = FakeMgmtKernel()
        other.lowEnergy = false
        #expect(await Self.pathOfDevices(0, other) == .raw)
    }

    /// The failure policy: Read Controller Information unanswered (a kernel whose queue is stuck)
    /// leaves a listed adapter with the kernel, for both (they used to disagree: `devices` said raw).
    @Test func unknownSettingsKeepAListedAdapterWithTheKernelOnBoth() async throws {
        let kernel = FakeMgmtKernel()
        kernel.unansweredOpcodes = [.readControllerInfo]
        #expect(try await Self.pathOfOpen("hci0", kernel) == .kernel)
        let other = FakeMgmtKernel()
        other.unansweredOpcodes = [.readControllerInfo]
        #expect(await Self.pathOfDevices(0, other) == .kernel)
    }

    @Test func aManagementInterfaceThatCannotBeOpenedMeansRawUnlessBluetoothIsAbsent() async throws {
        var opener = AdapterOpener(device: "hci0", timeout: .milliseconds(300), logger: Self.logger)
        opener.openMgmt = { _, _ in throw TransportError(.io, "no management socket here") }
        #expect(try await opener.open() is ControllerAdapter)
        opener.openMgmt = { _, _ in throw TransportError(.bluetoothUnavailable, "no Bluetooth in this kernel") }
        await #expect(throws: TransportError.self) { try await opener.open() }
        let paths = await AdapterOpener.paths([0], logger: Self.logger, openMgmt: opener.openMgmt)
        #expect(paths.known.isEmpty)
        #expect(paths[0] == .raw)  // what devices shows then
    }
}
