import IBeaconCore
import IBeaconHost
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// The kernel path behind the `Adapter` seam, on the fake kernel: what `stop` removes and says,
/// and that every operation refuses without the capability to change the adapter.
@Suite struct KernelAdapterTests {
    /// A process id no process has (`kill(pid, 0)` answers ESRCH).
    static let gonePID: Int32 = 0x3FFF_FFF0

    static func adapter(
        _ kernel: FakeMgmtKernel, records: RuntimeRecords, administer: Bool = true
    ) async -> (KernelAdapter, MgmtClient) {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let raw = ControllerAdapter(name: "hci0", ownsController: false, logger: Logger(label: "test")) {
            throw TransportError(.io, "no raw HCI in this test")
        }
        let adapter = KernelAdapter(
            client: client, index: 0, records: records,
            requireAdministration: { what in
                if !administer { throw TransportError(.permissionDenied, "\(what) needs CAP_NET_ADMIN") }
            },
            rawFallback: raw, logger: Logger(label: "test"))
        return (adapter, client)
    }

    /// The record files `stop` removed.
    final class Removed: Sendable {
        let files = Mutex<[String]>([])
        var list: [String] { files.withLock { $0 } }
    }

    static func records(_ list: [RuntimeRecords.InstanceRecord], removed: Removed = Removed()) -> RuntimeRecords {
        RuntimeRecords(
            directory: "/run/ibeacon", saveInstances: { _, _ in }, loadInstances: { _ in list },
            removeRecord: { file in removed.files.withLock { $0.append(file) } }, scanWindow: { _ in .alone })
    }

    @Test func stopRemovesTheRecordedInstancesTheKernelListsAndNoOtherProgramsOnes() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "bluetoothctl")
        kernel.otherProgramAdds(2, owner: "ibeacon")
        let removed = Removed()
        // Instance 3 was ours once, and is gone: nothing to remove.
        let records = Self.records([(Self.gonePID, "/run/ibeacon/hci0-1.instances", [2, 3])], removed: removed)
        let (adapter, _) = await Self.adapter(kernel, records: records)
        let line = try await adapter.stopAdvertising()
        #expect(line == "removed ibeacon's advertising instance(s) 2 on hci0; other programs' instance(s) 1 left alone")
        #expect(kernel.instances.keys.sorted() == [1])
        // The advertiser is gone: its record goes too.
        #expect(removed.list == ["/run/ibeacon/hci0-1.instances"])
    }

    @Test func stopNamesAnAdvertiserStillRunningAndKeepsItsRecord() async throws {
        let kernel = FakeMgmtKernel()
        let removed = Removed()
        let running = getpid()
        let records = Self.records([(running, "/run/ibeacon/hci0-\(running).instances", [])], removed: removed)
        let (adapter, _) = await Self.adapter(kernel, records: records)
        let line = try await adapter.stopAdvertising()
        #expect(
            line
                == "no advertising instance of ibeacon's on hci0 (none recorded in /run/ibeacon); ibeacon process(es) "
                + "\(running) still running will put theirs back: stop them (kill PID or systemctl stop)")
        #expect(removed.list.isEmpty)
    }

    @Test func changingTheAdapterWithoutTheCapabilityIsRefusedBeforeAnyCommand() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)
        let (adapter, _) = await Self.adapter(kernel, records: .none, administer: false)
        await #expect(throws: TransportError.self) { try await adapter.stopAdvertising() }
        #expect(kernel.instances.keys.sorted() == [1])
        #expect(!kernel.opcodes.contains(.removeAdvertising))
    }
}
