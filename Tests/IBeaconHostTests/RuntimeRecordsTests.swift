import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// A runtime directory tree made for one test (root-owned, 0755, like /run/ibeacon), with
/// records written as ibeacon writes them or as another user would plant them.
private struct RuntimeTree {
    let directory: String
    static let nobody: uid_t = 65534
    static let boot = "0f3c1d6a-7e47-4b1e-9c3e-8c2f0e5d9a11"
    static let address = "00:AA:01:00:00:00"

    init() throws {
        directory = try makeScratchDirectory("ibeacon-runtime")
        chmod(directory, 0o755)
    }

    func path(_ name: String) -> String { directory + "/" + name }

    /// A record as `advertise` writes it, by process `pid` started at `start`.
    static func text(
        pid: Int32, start: UInt64 = 100, boot: String = boot, address: String = address, _ instances: [UInt8]
    )
        -> String
    {
        (["pid \(pid)", "start \(start)", "boot \(boot)", "address \(address)"] + instances.map { "instance \($0)" })
            .map { $0 + "\n" }.joined()
    }

    @discardableResult
    func write(_ name: String, _ text: String, mode: mode_t = 0o644, owner: uid_t = 0) throws -> String {
        let p = path(name)
        try Data(text.utf8).write(to: URL(fileURLWithPath: p))
        chmod(p, mode)
        if owner != 0 { try #require(chown(p, owner, owner) == 0) }
        return p
    }

    func subdirectory(_ name: String, owner: uid_t = 0, mode: mode_t = 0o755) throws -> String {
        let p = path(name)
        try #require(mkdir(p, mode) == 0)
        chmod(p, mode)
        if owner != 0 { try #require(chown(p, owner, owner) == 0) }
        return p
    }

    func exists(_ p: String) -> Bool {
        var st = stat()
        return lstat(p, &st) == 0
    }

    func cleanUp() { removeScratchDirectory(directory) }
}

/// A process table where only the listed processes run, in boot `RuntimeTree.boot`.
/// `hidden`: processes that run but whose /proc entries this user cannot read (hidepid).
private func table(
    _ running: [ProcessIdentity] = [], hidden: Set<Int32> = [], boot: String = RuntimeTree.boot
) -> ProcessTable {
    ProcessTable(
        identity: { pid in running.first { $0.pid == pid } }, bootID: { boot },
        exists: { pid in hidden.contains(pid) || running.contains { $0.pid == pid } })
}

private func records(
    _ tree: RuntimeTree, running: [ProcessIdentity] = [], hidden: Set<Int32> = [], user: UInt32 = 0
) -> RuntimeRecords {
    RuntimeRecords(directory: tree.directory, user: user, processes: table(running, hidden: hidden))
}

/// Issue 23 item 1: `stop` removes only what a gone ibeacon process recorded, from records
/// nobody else could have written, and never an instance of a process that still runs.
@Suite(.serialized) struct RuntimeRecordsTests {
    /// Issue 30 item 2: the 6.1 kernel's list hides an instance whose number exceeds the count
    /// of instances; a recorded number above the list's length may be such a one and is tried.
    @Test func aGoneAdvertisersInstancesAreRemovedWhenListedOrPossiblyHidden() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-4242.instances", RuntimeTree.text(pid: 4242, [1, 2, 4]))
        // Two listed: 2 (at most the count, not listed) is gone; 4 (above it) may be hidden.
        let plan = records(tree).leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1, 3])
        #expect(plan.instances == [1, 4])
        #expect(plan.staleRecords.map(\.file) == [tree.path("hci0-4242.instances")])
        #expect(plan.running.isEmpty)
        // Another adapter's records are not read.
        let other = records(tree).leftovers(adapter: "hci1", address: RuntimeTree.address, listed: [1, 2])
        #expect(other.instances.isEmpty)
    }

    @Test func aRunningWritersInstancesAreLeftToIt() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-4242.instances", RuntimeTree.text(pid: 4242, start: 100, [1]))
        let alive = ProcessIdentity(pid: 4242, startTime: 100, bootID: RuntimeTree.boot)
        let plan = records(tree, running: [alive]).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1])
        #expect(plan.instances.isEmpty)
        #expect(plan.running == [4242])
        #expect(plan.staleRecords.isEmpty)
    }

    /// Issue 30 item 4: where /proc hides other users' processes (hidepid=2 answers ENOENT,
    /// hidepid=1 EACCES), a writer that exists but cannot be read is not taken for gone.
    @Test func aWriterProcHidesIsTakenForRunning() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-4242.instances", RuntimeTree.text(pid: 4242, start: 100, [1]))
        try tree.write("hci0-4343.instances", RuntimeTree.text(pid: 4343, start: 100, [2]))
        let plan = records(tree, hidden: [4242]).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1, 2])
        #expect(plan.instances == [2])
        #expect(plan.running == [4242])
        #expect(plan.notes.contains { $0.contains("process 4242") && $0.contains("does not show it") })
        #expect(plan.staleRecords.map(\.file) == [tree.path("hci0-4343.instances")])
    }

    @Test func aReusedProcessIDIsNotTheWriter() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-4242.instances", RuntimeTree.text(pid: 4242, start: 100, [1]))
        let impostor = ProcessIdentity(pid: 4242, startTime: 90_000, bootID: RuntimeTree.boot)
        let plan = records(tree, running: [impostor]).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1])
        #expect(plan.instances == [1])
        #expect(plan.running.isEmpty)
    }

    @Test func aRecordOfAnotherBootOrAnotherAdapterRemovesNothing() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-10.instances", RuntimeTree.text(pid: 10, boot: "an-earlier-boot", [1]))
        try tree.write("hci0-11.instances", RuntimeTree.text(pid: 11, address: "00:11:22:33:44:55", [2]))
        let plan = records(tree).leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1, 2])
        #expect(plan.instances.isEmpty)
        #expect(plan.staleRecords.count == 2)
        #expect(plan.notes.contains { $0.contains("before the last boot") })
        #expect(plan.notes.contains { $0.contains("another adapter") })
    }

    @Test func aNumberARunningProcessClaimsIsNotRemoved() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-10.instances", RuntimeTree.text(pid: 10, [1]))
        try tree.write("hci0-11.instances", RuntimeTree.text(pid: 11, start: 7, [1]))
        let alive = ProcessIdentity(pid: 11, startTime: 7, bootID: RuntimeTree.boot)
        let plan = records(tree, running: [alive]).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1])
        #expect(plan.instances.isEmpty)
    }

    /// The guardian of one advertiser acts on that process's record only, and still leaves a
    /// number a running ibeacon process claims.
    @Test func theGuardianActsOnItsAdvertisersRecordOnly() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-10.instances", RuntimeTree.text(pid: 10, [1]))
        try tree.write("hci0-11.instances", RuntimeTree.text(pid: 11, [2]))
        try tree.write("hci0-12.instances", RuntimeTree.text(pid: 12, start: 5, [1]))
        let alive = ProcessIdentity(pid: 12, startTime: 5, bootID: RuntimeTree.boot)
        let store = records(tree, running: [alive])
        let eleven = store.leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1, 2], writer: 11)
        #expect(eleven.instances == [2])
        #expect(eleven.staleRecords.map(\.file) == [tree.path("hci0-11.instances")])
        let ten = store.leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1, 2], writer: 10)
        #expect(ten.instances.isEmpty, "instance 1 is claimed by running process 12")
    }

    /// What another user can plant: a record of their own, a group- or world-writable one, a
    /// link to a record, a FIFO (which must not block), an old-format record.
    @Test func recordsOthersCouldHaveWrittenAreIgnored() throws {
        try #require(geteuid() == 0, "planting another user's files needs root (CI runs as root)")
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.write("hci0-1.instances", RuntimeTree.text(pid: 1, [1]), owner: RuntimeTree.nobody)
        try tree.write("hci0-2.instances", RuntimeTree.text(pid: 2, [2]), mode: 0o666)
        let target = try tree.write("elsewhere", RuntimeTree.text(pid: 3, [3]))
        try #require(symlink(target, tree.path("hci0-3.instances")) == 0)
        try #require(mkfifo(tree.path("hci0-4.instances"), 0o644) == 0)
        try tree.write("hci0-5.instances", "instance 5\n")  // no writer: an older ibeacon or by hand
        let open = try tree.subdirectory("open", mode: 0o777)
        try tree.write("open/hci0-6.instances", RuntimeTree.text(pid: 6, [6]))
        let plan = records(tree).leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1, 2, 3, 4, 5, 6])
        #expect(plan.instances.isEmpty)
        #expect(plan.staleRecords.isEmpty)
        for (file, reason) in [
            ("hci0-1.instances", "belongs to uid 65534"), ("hci0-2.instances", "writable by group or others"),
            ("hci0-3.instances", "cannot be opened"), ("hci0-4.instances", "is a FIFO"),
            ("hci0-5.instances", "does not name its writer"),
        ] {
            #expect(
                plan.notes.contains { $0.contains(tree.path(file)) && $0.contains(reason) }, "\(file): \(plan.notes)")
        }
        #expect(plan.notes.contains { $0.contains(open) && $0.contains("writable by group or others") })
    }

    @Test func aDirectoryOfAnotherUserIsNotBelievedAtAll() throws {
        try #require(geteuid() == 0, "needs root to give the directory to nobody")
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try #require(chown(tree.directory, RuntimeTree.nobody, RuntimeTree.nobody) == 0)
        try tree.write("hci0-1.instances", RuntimeTree.text(pid: 1, [1]), owner: RuntimeTree.nobody)
        let plan = records(tree).leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1])
        #expect(plan.instances.isEmpty)
        #expect(plan.notes.contains { $0.contains("belongs to uid 65534, neither root nor uid 0") })
        // The same directory is believed by its owner.
        let own = records(tree, user: UInt32(RuntimeTree.nobody)).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1])
        #expect(own.instances == [1])
    }

    /// systemd's `RuntimeDirectory=ibeacon/NAME` gives a service's user a directory of its own
    /// below root's: that user's records there are acted on by that user's `stop` (the unit's
    /// ExecStopPost runs as the unit's user).
    @Test func aServiceDirectoryBelowRootsIsBelievedForItsOwner() throws {
        try #require(geteuid() == 0, "needs root to give the directory to nobody")
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.subdirectory("store12", owner: RuntimeTree.nobody)
        try tree.write("store12/hci0-7.instances", RuntimeTree.text(pid: 7, [2]), owner: RuntimeTree.nobody)
        let plan = records(tree, user: RuntimeTree.nobody).leftovers(
            adapter: "hci0", address: RuntimeTree.address, listed: [1, 2])
        #expect(plan.instances == [2])
    }

    /// Issue 40, hole 3: a user given a directory below /run/ibeacon (or a monitor's hook, as
    /// the monitor's user) plants a record naming another program's instance. Root's `stop`
    /// and another unit's ExecStopPost (another user) leave it alone and say why; the file stays.
    @Test func aRecordPlantedInAnotherUsersDirectoryIsNotActedOn() throws {
        try #require(geteuid() == 0, "needs root to give the directory to nobody")
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        try tree.subdirectory("monitor-lobby", owner: RuntimeTree.nobody)
        try tree.write("monitor-lobby/hci0-7.instances", RuntimeTree.text(pid: 7, [1]), owner: RuntimeTree.nobody)
        for user: UInt32 in [0, 61234] {  // root's stop; a beacon unit's dynamic user
            let plan = records(tree, user: user).leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [1])
            #expect(plan.instances.isEmpty)
            #expect(plan.staleRecords.isEmpty)
            #expect(plan.notes.contains { $0.contains("belongs to uid 65534, not to this user (uid \(user)) or root") })
        }
        #expect(tree.exists(tree.path("monitor-lobby/hci0-7.instances")))
    }

    /// Issue 40, hole 4: the scan-window record of a killed scan is found (once) by the next
    /// scan; a running scan's is not an orphan.
    @Test func aKilledScansWindowRecordIsFoundOnceAndSpent() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        func text(_ pid: Int32) -> String {
            "pid \(pid)\nstart 100\nboot \(RuntimeTree.boot)\ninterval 96 window 48\n"
        }
        try tree.write("hci0-7.scanwindow", text(7))
        try tree.write("hci0-8.scanwindow", text(8))
        let live = ProcessIdentity(pid: 8, startTime: 100, bootID: RuntimeTree.boot)
        let store = records(tree, running: [live])
        #expect(store.orphanedScanWindow(adapter: "hci0") == MonitorScanParameters(interval: 96, window: 48))
        #expect(!tree.exists(tree.path("hci0-7.scanwindow")))
        #expect(store.orphanedScanWindow(adapter: "hci0") == nil)
        #expect(tree.exists(tree.path("hci0-8.scanwindow")))
    }

    @Test func writtenRecordsAreReadBackAndTheirWriterIsAlive() throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        let store = RuntimeRecords(directory: tree.directory, user: Sys.effectiveUserID())
        let file = try store.write(
            name: "hci0-\(getpid()).instances", lines: ["address \(RuntimeTree.address)", "instance 4"])
        var st = stat()
        #expect(lstat(file, &st) == 0 && st.st_mode & 0o022 == 0)
        let loaded = store.load(prefix: "hci0", suffix: ".instances")
        #expect(loaded.refused.isEmpty)
        let record = try #require(loaded.records.first)
        #expect(record.instances == [4])
        #expect(!store.writerIsGone(record))
        let plan = store.leftovers(adapter: "hci0", address: RuntimeTree.address, listed: [4])
        #expect(plan.instances.isEmpty && plan.running == [getpid()])
    }

    @Test func theStartTimeIsReadAfterTheLastParenthesis() {
        let line = "4242 (a) b (c)) S 1 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 50"
        #expect(ProcessTable.startTime(statLine: line) == 987_654)
        #expect(ProcessTable.startTime(statLine: "4242 (cut") == nil)
    }
}

/// Issue 23: under elevated privileges (file capabilities, set-user-ID) the environment is
/// whoever started the process's choice: no variable is honoured but `NOTIFY_SOCKET`.
@Suite struct ProcessEnvironmentTests {
    @Test func elevatedProcessesIgnoreEveryVariable() {
        let variables = [
            "IBEACON_DEVICE": "hci7", "IBEACON_RUNTIME_DIR": "/home/mallory/run",
            "NOTIFY_SOCKET": "/run/systemd/notify",
        ]
        let plain = ProcessEnvironment(variables: variables, elevated: false)
        #expect(plain.value("IBEACON_DEVICE") == "hci7")
        #expect(plain.value("IBEACON_RUNTIME_DIR") == "/home/mallory/run")
        #expect(plain.ignoredNote("IBEACON_RUNTIME_DIR") == nil)
        let elevated = ProcessEnvironment(variables: variables, elevated: true)
        #expect(elevated.value("IBEACON_DEVICE") == nil)
        #expect(elevated.value("IBEACON_RUNTIME_DIR") == nil)
        #expect(elevated.ignoredNote("IBEACON_RUNTIME_DIR")?.contains("is ignored") == true)
        #expect(elevated.notifySocket == "/run/systemd/notify")
        #expect(RuntimeRecords.current(environment: elevated).directory == "/run/ibeacon")
        #expect(RuntimeRecords.current(environment: plain).directory == "/home/mallory/run")
    }

    @Test func anEmptyVariableIsUnset() {
        #expect(ProcessEnvironment(variables: ["IBEACON_DEVICE": ""], elevated: false).value("IBEACON_DEVICE") == nil)
    }

    @Test func thisTestProcessIsNotElevated() {
        #expect(!ProcessEnvironment.current.elevated)
    }
}

/// Issue 30 item 2 end to end on the fake kernel, which hides instances as 6.1 does: a killed
/// advertiser's instance that the kernel's list leaves out is still removed by `stop`.
@Suite(.serialized) struct HiddenInstanceStopTests {
    @Test func stopRemovesAKilledAdvertisersHiddenInstance() async throws {
        let tree = try RuntimeTree()
        defer { tree.cleanUp() }
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "bluetoothctl")
        kernel.otherProgramAdds(2, data: [0x02, 0x01, 0x06], owner: "ibeacon 4242")  // the killed advertiser's
        kernel.otherProgramRemoves(1)
        // One instance, numbered 2: the kernel's list is empty.
        try tree.write("hci0-4242.instances", RuntimeTree.text(pid: 4242, [2]))
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let raw = ControllerAdapter(name: "hci0", ownsController: false, logger: Logger(label: "test")) {
            throw TransportError(.io, "no raw HCI in this test")
        }
        let adapter = KernelAdapter(
            client: client, index: 0, records: records(tree), requireAdministration: { _ in }, rawFallback: raw,
            logger: Logger(label: "test"))
        let report = try await adapter.stopAdvertising(leftBy: nil)
        #expect(kernel.instances.isEmpty)
        #expect(report?.action == .removedInstances([2]) && report?.removedSomething == true)
        #expect(report?.description == "removed ibeacon's advertising instance(s) 2 on hci0")
        #expect(!tree.exists(tree.path("hci0-4242.instances")))
    }
}
