import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import Logging
import Testing

/// The kernel path behind the `Adapter` seam, on the fake kernel. (What `stop` removes is
/// `RuntimeRecords.leftovers`, tested in `RuntimeRecordsTests`.)
@Suite struct KernelAdapterTests {
    static func adapter(_ kernel: FakeMgmtKernel, administer: Bool) async -> KernelAdapter {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let raw = ControllerAdapter(name: "hci0", ownsController: false, logger: Logger(label: "test")) {
            throw TransportError(.io, "no raw HCI in this test")
        }
        return KernelAdapter(
            client: client, index: 0, records: RuntimeRecords(directory: "/nonexistent/ibeacon-test", user: 0),
            requireAdministration: { what in
                if !administer { throw TransportError(.permissionDenied, "\(what) needs CAP_NET_ADMIN") }
            },
            rawFallback: raw, logger: Logger(label: "test"))
    }

    @Test func changingTheAdapterWithoutTheCapabilityIsRefusedBeforeAnyCommand() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)
        let adapter = await Self.adapter(kernel, administer: false)
        await #expect(throws: TransportError.self) { try await adapter.stopAdvertising(leftBy: nil) }
        #expect(kernel.instances.keys.sorted() == [1])
        #expect(!kernel.opcodes.contains(.removeAdvertising))
    }

    @Test func stopLeavesAnotherProgramsInstanceAndSaysSo() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "bluetoothctl")
        let adapter = await Self.adapter(kernel, administer: true)
        let report = try await adapter.stopAdvertising(leftBy: nil)
        // The guardian warns only when something was removed: a value, not a sentence's prefix.
        #expect(report?.removedSomething == false && report?.othersLeft == [1])
        #expect(
            report?.description
                == "no advertising instance of ibeacon's on hci0 (none recorded in /nonexistent/ibeacon-test by a "
                + "process now gone); other programs' instance(s) 1 left alone")
        #expect(kernel.instances.keys.sorted() == [1])
    }
}
