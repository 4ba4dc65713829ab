import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Testing

@testable import IBeaconHost

/// A runtime directory with the records `advertise` and `monitor` write, by processes a test's
/// process table says run (or not), and a fake kernel behind the management interface.
private struct StatusTree {
    let directory: String
    static let boot = "5b0c1d6a-7e47-4b1e-9c3e-8c2f0e5d9a22"
    static let address = "00:AA:01:00:00:00"
    static let unit = "ibeacon@store12.service"

    init() throws {
        directory = try makeScratchDirectory("ibeacon-status")
        chmod(directory, 0o755)
    }

    static func identity(_ pid: Int32) -> ProcessIdentity { ProcessIdentity(pid: pid, startTime: 100, bootID: boot) }

    /// `session-PID.COMMAND` as `SessionRecorder` writes it.
    @discardableResult
    func session(
        _ pid: Int32, _ command: SessionCommand = .advertise, device: String = "hci0",
        profiles: [String] = ["/etc/ibeacon/store12.json"], state: String = "advertising", cause: String? = nil,
        unit: String? = StatusTree.unit, owner: uid_t = 0
    ) throws -> String {
        let lines =
            ["pid \(pid)", "start 100", "boot \(Self.boot)"]
            + SessionRecord.lines(
                device: device, profiles: profiles, state: state, cause: cause, since: 1_795_000_000, unit: unit)
        return try write("session-\(pid)\(command.suffix)", lines, owner: owner)
    }

    /// `hci0-PID.instances` as `advertise` writes it through the kernel.
    @discardableResult
    func instances(_ pid: Int32, _ instances: [UInt8]) throws -> String {
        try write(
            "hci0-\(pid).instances",
            ["pid \(pid)", "start 100", "boot \(Self.boot)", "address \(Self.address)"]
                + instances.map { "instance \($0)" })
    }

    func write(_ name: String, _ lines: [String], owner: uid_t = 0) throws -> String {
        let p = directory + "/" + name
        try Data(lines.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: p))
        chmod(p, 0o644)
        if owner != 0 { try #require(chown(p, owner, owner) == 0) }
        return p
    }

    func exists(_ name: String) -> Bool { FileManager.default.fileExists(atPath: directory + "/" + name) }

    func records(running: [Int32]) -> RuntimeRecords {
        let ids = running.map(Self.identity)
        return RuntimeRecords(
            directory: directory, user: 0,
            processes: ProcessTable(
                identity: { pid in ids.first { $0.pid == pid } }, bootID: { Self.boot },
                exists: { pid in ids.contains { $0.pid == pid } }))
    }

    func status(_ kernel: FakeMgmtKernel?, running: [Int32]) async -> BoxStatus {
        await BoxStatus.gather(
            records: records(running: running),
            openMgmt: {
                guard let kernel else { throw TransportError(.bluetoothUnavailable, "no Bluetooth in this test") }
                kernel.reopen()  // a management socket of its own, as each ibeacon process opens
                let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
                await client.start()
                return client
            }, unitOf: { _ in nil })
    }

    func cleanUp() { removeScratchDirectory(directory) }
}

@Suite(.serialized) struct BoxStatusTests {
    @Test func aRunningAdvertiserWhoseInstanceTheKernelListsIsOnTheAirAndAllIsWell() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(4242)
        try tree.instances(4242, [1])
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "ibeacon")
        let status = await tree.status(kernel, running: [4242])
        let beacon = try #require(status.beacons.first)
        #expect(status.beacons.count == 1)
        #expect(beacon.onAir && beacon.instance == 1 && beacon.running && beacon.pid == 4242)
        #expect(beacon.profile == "/etc/ibeacon/store12.json" && beacon.unit == StatusTree.unit)
        #expect(beacon.since == 1_795_000_000)
        #expect(status.allWell, "\(status.problems)")
        #expect(
            status.adapters == [
                AdapterSnapshot(name: "hci0", address: StatusTree.address, powered: true, instances: [1])
            ])
        #expect(status.lines.last == "all well")
        #expect(status.json["ok"] == .bool(true))
    }

    @Test func aKilledAdvertiserLeavesRecordsAndAnInstanceStatusReportsAndStopClears() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(4242)
        try tree.instances(4242, [1])
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "ibeacon")
        let status = await tree.status(kernel, running: [])
        #expect(!status.allWell)
        let beacon = try #require(status.beacons.first)
        #expect(!beacon.onAir && !beacon.running && beacon.reason.contains("gone"))
        #expect(status.leftovers.instances.map(\.instance) == [1])
        #expect(
            Set(status.leftovers.goneRecords.map(\.file))
                == [tree.directory + "/session-4242.advertise", tree.directory + "/hci0-4242.instances"])
        #expect(status.json["ok"] == .bool(false))
        // Status changed nothing.
        #expect(tree.exists("session-4242.advertise") && tree.exists("hci0-4242.instances"))
        #expect(kernel.instances.keys.sorted() == [1])

        // What `stop --device hci0` does: the kernel adapter removes the instance, then the sessions.
        kernel.reopen()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let adapter = KernelAdapter(
            client: client, index: 0, records: tree.records(running: []), requireAdministration: { _ in },
            rawFallback: ControllerAdapter(name: "hci0", ownsController: false, logger: Logger(label: "test")) {
                throw TransportError(.io, "no raw HCI")
            }, logger: Logger(label: "test"))
        _ = try await adapter.stopAdvertising(leftBy: nil)
        #expect(
            tree.records(running: []).removeGoneSessions(device: "hci0") == [tree.directory + "/session-4242.advertise"]
        )
        let after = await tree.status(kernel, running: [])
        #expect(after.allWell, "\(after.problems)")
        #expect(after.beacons.isEmpty && after.leftovers == LeftoverStatus())
    }

    @Test func aRecoveringAdvertiserIsOffTheAirWithItsCause() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(7, state: "recovering", cause: "hci0 was removed")
        let status = await tree.status(FakeMgmtKernel(), running: [7])
        let beacon = try #require(status.beacons.first)
        #expect(!beacon.onAir && beacon.reason == "recovering: hci0 was removed")
        #expect(!status.allWell)
    }

    @Test func anAdapterPoweredOffPutsItsBeaconsOffTheAir() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(7)
        try tree.instances(7, [1])
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "ibeacon")
        kernel.powerOff()
        let status = await tree.status(kernel, running: [7])
        #expect(status.beacons.map(\.reason) == ["hci0 is powered off"])
        #expect(!status.allWell)
    }

    @Test func anInstanceTheKernelNoLongerListsIsOffTheAir() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(7)
        try tree.instances(7, [1])
        // Other programs hold 2 and 3; the 6.1 kernel lists [2] (3 exceeds the count): 1, at most
        // the list's length and not in it, is gone (a number above it might only be hidden).
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(2)
        kernel.otherProgramAdds(3)
        let status = await tree.status(kernel, running: [7])
        #expect(status.adapters.first?.instances == [2])
        #expect(status.beacons.map(\.onAir) == [false])
        #expect(status.beacons.first?.reason == "instance 1 is not in the kernel's list")
    }

    @Test func anotherProgramsInstanceIsShownAndIsNoProblem() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "bluetoothctl")
        let status = await tree.status(kernel, running: [])
        #expect(status.leftovers.unowned.map(\.instance) == [1])
        #expect(status.allWell)
        #expect(status.lines.contains("no ibeacon advertise or monitor runs on this box"))
    }

    @Test func withoutTheKernelABeaconOverH4IsOnTheAirAsItsProcessReports() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(9, device: "tcp:127.0.0.1:9999", unit: nil)
        try tree.session(10, .monitor, device: "hci1", profiles: [], state: "monitoring", unit: nil)
        let status = await tree.status(nil, running: [9, 10])
        #expect(status.kernelError?.contains("no Bluetooth in this test") == true)
        #expect(status.beacons.map(\.onAir) == [true])
        #expect(status.monitors.map(\.state) == ["monitoring"])
        #expect(status.allWell)
        let gone = await tree.status(nil, running: [9])
        #expect(gone.monitors.map(\.state) == ["gone"] && !gone.allWell)
    }

    /// A user who may write a directory below the runtime directory (or a monitor's hook)
    /// cannot make status list a beacon in root's directory: a record it does not own is refused.
    @Test func aSessionRecordAnotherUserPlantedIsNotBelieved() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(11, owner: 65534)
        let status = await tree.status(nil, running: [11])
        #expect(status.beacons.isEmpty)
        #expect(status.notes.contains { $0.contains("session-11.advertise") && $0.contains("65534") })
    }

    /// A runtime directory others may write is not read at all: one note, no beacon.
    @Test func aDirectoryOthersMayWriteIsIgnoredWithOneNote() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(12)
        chmod(tree.directory, 0o777)
        let status = await tree.status(nil, running: [12])
        #expect(status.beacons.isEmpty)
        #expect(status.notes == ["ignored \(tree.directory): is writable by group or others; its records are ignored"])
    }

    /// Values are escaped: a profile path with a line break cannot forge the state line.
    @Test func aLineBreakInAProfilePathCannotForgeAState() throws {
        let lines = SessionRecord.lines(
            device: "hci0", profiles: ["/tmp/x\nstate advertising"], state: "recovering", cause: "50%\r\nbad",
            since: 1, unit: nil)
        let record = RuntimeRecord(
            file: "f", writer: StatusTree.identity(1), adapterAddress: nil, instances: [], scanWindow: nil,
            lines: lines)
        let session = try #require(SessionRecord(record, command: .advertise))
        #expect(session.state == "recovering")
        #expect(session.profiles == ["/tmp/x\nstate advertising"])
        #expect(session.cause == "50%\r\nbad")
    }

    @Test func theUnitComesFromTheCgroupOfAService() {
        #expect(systemdUnit(cgroup: "0::/system.slice/ibeacon@store12.service\n") == "ibeacon@store12.service")
        #expect(systemdUnit(cgroup: "0::/user.slice/user-0.slice/session-3.scope\n") == nil)
        #expect(
            systemdUnit(cgroup: "12:cpu:/\n1:name=systemd:/system.slice/ibeacon-monitor@a.service\n")
                == "ibeacon-monitor@a.service")
        #expect(systemdUnit(cgroup: "garbage") == nil)
    }

    @Test func theJSONHasEveryDocumentedMemberInOrder() async throws {
        let tree = try StatusTree()
        defer { tree.cleanUp() }
        try tree.session(4242)
        let status = await tree.status(nil, running: [])
        #expect(status.json.keys == BoxStatus.members)
        let beacon = try #require(
            status.json["beacons"].flatMap { if case .array(let a) = $0 { a.first } else { nil } })
        #expect(
            beacon.objectValue?.keys
                == ["profile", "device", "instance", "onAir", "reason", "since", "sinceUnix", "pid", "running", "unit"])
        #expect(beacon.objectValue?["since"] == .string("2026-11-18T11:06:40Z"))
    }
}
