import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// What a steering under test did: the air changes asked for, events, settings published.
private final class Recorder: Sendable {
    let air = Mutex<[[BeaconSpec?]]>([])
    let events = Mutex<[BeaconCommandEvent]>([])
    let settings = Mutex<[(String, BeaconSettings)]>([])
    let airFails = Atomic(false)
}

private struct Box {
    let directory: String
    let path: String
    let steering: BeaconSteering
    let recorder: Recorder
    let clock: ManualClock

    static let text = """
        {
          "uuid": "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0",
          "major": 258,
          "minor": 772,
          "measuredPower": -59,
          "note": "kept"
        }

        """

    /// `air`: in place of the recorder's (which takes every change at once).
    init(writer: BeaconSteering.Writer? = nil, air: BeaconSteering.Air? = nil) throws {
        directory = try makeScratchDirectory("ibeacon-steering")
        path = directory + "/bakery.json"
        try Data(Self.text.utf8).write(to: URL(fileURLWithPath: path))
        let spec = try BeaconSpec(profileAt: path, forceRandomAddress: false)
        let recorder = Recorder()
        self.recorder = recorder
        let clock = ManualClock()
        self.clock = clock
        let layout = MQTTLayout(
            base: "chain/store12", command: "advertise", discoveryPrefix: "homeassistant", node: "box", room: "box"
        ).controlled()
        steering = BeaconSteering(
            beacons: [try BeaconSteering.Beacon(path: path, spec: spec)], layout: layout,
            air: air ?? { specs in
                if recorder.airFails.load(ordering: .relaxed) {
                    recorder.airFails.store(false, ordering: .relaxed)
                    throw AdvertisingError("Invalid HCI Command Parameters (0x12)")
                }
                recorder.air.withLock { $0.append(specs) }
                return nil
            }, writer: writer ?? BeaconSteering.write, logger: quietLogger,
            clock: clock, wallClock: { 1_800_000_000 },
            onEvent: { e in recorder.events.withLock { $0.append(e) } },
            onSettings: { n, s in recorder.settings.withLock { $0.append((n, s)) } })
    }

    func file() throws -> String { String(decoding: try Data(contentsOf: URL(fileURLWithPath: path)), as: UTF8.self) }

    @discardableResult
    func send(
        _ key: String, _ payload: String, retained: Bool = false, beacon: String = "bakery",
        base: String = "chain/store12"
    )
        async -> BeaconCommandEvent?
    {
        let e = await steering.handle(
            topic: "\(base)/beacon/\(beacon)/set/\(key)", payload: Array(payload.utf8), retained: retained)
        clock.advance(by: .milliseconds(300))  // within the rate limit
        return e
    }

    func cleanUp() { removeScratchDirectory(directory) }
}

@Suite struct BeaconSteeringTests {
    @Test func anAcceptedCommandGoesOnTheAirThenIntoTheProfileThenOut() async throws {
        let box = try Box()
        defer { box.cleanUp() }
        let e = try #require(await box.send("major", "1001"))
        #expect(e.refusal == nil && e.old == .integer(258) && e.new == .integer(1001))
        #expect(e.source == "mqtt:chain/store12/beacon/bakery/set/major")
        let air = box.recorder.air.withLock { $0 }
        #expect(air.count == 1 && air[0][0]?.beacon.major == 1001 && air[0][0]?.beacon.minor == 772)
        let written = try Profile.load(bytes: Array(try box.file().utf8), file: box.path)
        #expect(written.major == 1001 && written.document["note"] == .string("kept"))
        #expect(box.recorder.settings.withLock { $0.last?.1.major } == 1001)
        #expect(box.steering.beacons[0].spec.beacon.major == 1001)
        // A restart reads the profile: the value stays.
        let again = try BeaconSteering.Beacon(
            path: box.path, spec: try BeaconSpec(profileAt: box.path, forceRandomAddress: false))
        #expect(again.settings.major == 1001 && again.spec.beacon.major == 1001)
    }

    @Test(arguments: [
        ("major", "70000", false, "bakery", "chain/store12", CommandRefusal.Kind.outOfRange),
        ("measured_power", "-59.0", false, "bakery", "chain/store12", .malformed),
        ("uuid", "x", false, "bakery", "chain/store12", .unknownKey),
        ("major", "5", true, "bakery", "chain/store12", .retained),
        ("major", "5", false, "deli", "chain/store12", .unknownBeacon),
        ("major", "5", false, "bakery", "chain/store13", .foreignTopic),
        ("major", String(repeating: "1", count: 4096), false, "bakery", "chain/store12", .oversized),
    ])
    func aRefusedCommandChangesNothing(
        key: String, payload: String, retained: Bool, beacon: String, base: String, kind: CommandRefusal.Kind
    ) async throws {
        let box = try Box()
        defer { box.cleanUp() }
        let before = try box.file()
        let e = try #require(await box.send(key, payload, retained: retained, beacon: beacon, base: base))
        #expect(e.refusal?.kind == kind)
        #expect(box.recorder.air.withLock { $0.isEmpty })
        #expect(try box.file() == before)
        #expect(box.recorder.settings.withLock { $0.isEmpty })
        #expect(box.steering.beacons[0].settings.major == 258)
    }

    @Test func moreThanFourASecondAreRefusedAndTheFloodIsReportedOnce() async throws {
        let box = try Box()
        defer { box.cleanUp() }
        var results: [BeaconCommandEvent?] = []
        for minor in 1...8 {
            results.append(
                await box.steering.handle(
                    topic: "chain/store12/beacon/bakery/set/minor", payload: Array("\(minor)".utf8), retained: false))
        }
        #expect(results.prefix(4).allSatisfy { $0?.refusal == nil })
        #expect(results[4]?.refusal?.kind == .rateLimited)
        #expect(results[5...].allSatisfy { $0 == nil })  // counted, said with the next report
        #expect(box.steering.beacons[0].settings.minor == 4)
        box.clock.advance(by: .seconds(1))
        #expect(await box.send("minor", "9")?.refusal == nil)
    }

    @Test func aProfileThatCannotBeWrittenPutsTheOldValueBackOnTheAir() async throws {
        let box = try Box(writer: { path, _ in
            throw FileError(.cannotWrite, path: path, "read-only file system")
        })
        defer { box.cleanUp() }
        let before = try box.file()
        let e = try #require(await box.send("measured_power", "-70"))
        #expect(e.refusal?.kind == .notWritten)
        let air = box.recorder.air.withLock { $0 }
        #expect(air.map { $0[0]?.beacon.measuredPower } == [-70, -59])  // new, then the old back
        #expect(try box.file() == before)
        #expect(box.recorder.settings.withLock { $0.isEmpty })
    }

    @Test func aValueTheControllerRefusesIsNotWritten() async throws {
        let box = try Box()
        defer { box.cleanUp() }
        let before = try box.file()
        box.recorder.airFails.store(true, ordering: .relaxed)
        let e = try #require(await box.send("tx_power", "20"))
        #expect(e.refusal?.kind == .notApplied)
        #expect(try box.file() == before)
    }

    @Test func switchingOffTakesTheBeaconOffTheAirAndStaysOffAfterARestart() async throws {
        let box = try Box()
        defer { box.cleanUp() }
        #expect(await box.send("advertising", "OFF")?.refusal == nil)
        #expect(box.recorder.air.withLock { $0 } == [[nil]])
        #expect(try box.file().contains("\"advertising\": false"))
        let again = try BeaconSteering.Beacon(
            path: box.path, spec: try BeaconSpec(profileAt: box.path, forceRandomAddress: false))
        #expect(!again.settings.advertising)
        // Changed while off: written, nothing goes on the air.
        #expect(await box.send("minor", "7")?.refusal == nil)
        #expect(box.recorder.air.withLock { $0.count } == 1)
        #expect(await box.send("advertising", "ON")?.refusal == nil)
        #expect(box.recorder.air.withLock { $0.last?[0]?.beacon.minor } == 7)
        #expect(!(try box.file().contains("advertising")))
    }

    @Test func aCalibrationWritesTheRecordAsCalibrateDoes() async throws {
        let box = try Box()
        defer { box.cleanUp() }
        let record = CalibrationRecord(
            timestamp: "2026-11-29T04:00:00Z", samples: 120, estimate: -61.4, interval95: 0.8, spread: 3.1,
            method: "trimmed-mean-10", receiver: "hci1", receiverAddress: "00:AA:01:01:00:01", offset: 0, txPower: 4)
        let payload = "{\"measuredPower\":-61,\"calibration\":\(record.json.compactText())}"
        #expect(await box.send("calibration", payload)?.refusal == nil)
        let written = try Profile.load(bytes: Array(try box.file().utf8), file: box.path)
        #expect(written.measuredPower == -61 && written.calibrationRecord == record)
        #expect(box.recorder.air.withLock { $0.last?[0]?.beacon.measuredPower } == -61)
    }
}

@Suite struct AdvertisingUpdateTests {
    /// Raw HCI: a change reprograms the controller on the same connection, advertising off
    /// before the new data and parameters, on after them.
    @Test func aChangeReprogramsTheSameController() async throws {
        let fakes = Fakes()
        let updates = AdvertisingUpdates()
        var session = AdvertisingSession(
            advertiser: Advertiser(
                beacons: [BeaconSpec(beacon: testBeacon, label: "t.json")], mode: .auto, ownsController: true,
                logger: quietLogger),
            connect: { await startedClient(try fakes.make()) }, healthCheckInterval: nil, logger: quietLogger)
        session.updates = updates
        let ready = Atomic(false)
        let task = Task { try await session.run(onReady: { _ in ready.store(true, ordering: .relaxed) }) }
        #expect(await eventually { ready.load(ordering: .relaxed) })
        let fake = try #require(fakes.latest)
        let before = fake.opcodes.count
        var changed = BeaconSpec(beacon: testBeacon, intervalMilliseconds: 250, label: "t.json")
        changed.beacon = IBeacon(
            proximityUUID: testBeacon.proximityUUID, major: 0x0102, minor: 0x0304, measuredPower: -70)
        let status = try await updates.apply([changed])
        #expect(status.beacons.map(\.spec) == [changed])
        #expect(fakes.count == 1)  // no reconnect
        #expect(fake.isAdvertising && fake.legacy.data == changed.beacon.advertisingData)
        #expect(fake.legacy.intervalSlots == 400)
        let sent = Array(fake.opcodes[before...])
        let off = try #require(sent.firstIndex(of: .leSetAdvertisingEnable))
        let data = try #require(sent.firstIndex(of: .leSetAdvertisingData))
        let on = try #require(sent.lastIndex(of: .leSetAdvertisingEnable))
        #expect(off < data && data < on)
        // Switched off: nothing on the air.
        _ = try await updates.apply([nil])
        #expect(!fake.isAdvertising)
        task.cancel()
        try await task.value
    }
}

@Suite struct AdvertisingUpdateLimitTests {
    /// A change no session takes in time (the controller lost, the raw session blocked in its
    /// reconnect) is withdrawn and answered: it never reaches the air later, when the session
    /// comes back and nobody waits for it.
    @Test func aChangeNoSessionTakesIsWithdrawnAfterTheLimit() async throws {
        let updates = AdvertisingUpdates(limit: .milliseconds(50))
        await #expect(throws: AdvertisingUpdates.NotTaken.self) { try await updates.apply([nil]) }
        let woken = Atomic(false)
        updates.attach { woken.store(true, ordering: .relaxed) }
        #expect(updates.take().isEmpty)
        let wasWoken = woken.load(ordering: .relaxed)
        #expect(!wasWoken)
    }

    /// One the session takes in time is answered by the session only, however long it takes.
    @Test func aChangeTakenInTimeIsAnsweredByTheSession() async throws {
        let updates = AdvertisingUpdates(limit: .milliseconds(50))
        updates.attach {}
        let answer = Task { try await updates.apply([nil]) }
        #expect(await eventually { !updates.pendingIsEmpty })
        let taken = updates.take()
        try await Task.sleep(for: .milliseconds(150))
        let status = AdvertisingStatus(commandSet: nil, beacons: [], warnings: [])
        for change in taken { change.done(.success(status)) }
        #expect(try await answer.value.beacons.isEmpty)
    }

    /// Steering over a session that does not take the change: refused as not applied, saying
    /// why and what to do; the profile, the settings and the beacon stay as they were.
    @Test func aSteeringCommandWhileTheControllerIsLostChangesNothing() async throws {
        let updates = AdvertisingUpdates(limit: .milliseconds(50))
        let box = try Box(air: { try await updates.apply($0) })
        defer { box.cleanUp() }
        let before = try box.file()
        let e = try #require(await box.send("major", "1001"))
        #expect(e.refusal?.kind == .notApplied)
        #expect(e.refusal?.reason.contains("did not take the change within 0.05 s") == true)
        #expect(e.refusal?.reason.contains("send the command again once the beacon is back") == true)
        #expect(try box.file() == before)
        #expect(box.recorder.settings.withLock { $0.isEmpty })
        #expect(box.steering.beacons[0].settings.major == 258)
    }
}

@Suite struct MgmtAdvertisingUpdateTests {
    /// Through the kernel: a changed beacon is added again under its own instance number (the
    /// kernel updates it in place: never removed, so never off and never two of it), the other
    /// beacon and another program's instance are not touched; OFF removes only its instance.
    @Test func aChangeUpdatesTheInstanceInPlace() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)
        let updates = AdvertisingUpdates()
        let client = MgmtClient(transport: kernel, logger: quietLogger, defaultTimeout: .seconds(5))
        await client.start()
        let a = MgmtAdvertisingTests.spec(minor: 3)
        let b = MgmtAdvertisingTests.spec(minor: 4)
        var session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(beacons: [a, b], index: FakeMgmtKernel.index, logger: quietLogger),
            client: client, logger: quietLogger)
        session.updates = updates
        let ready = Atomic(false)
        let task = Task { try await session.run(onReady: { _ in ready.store(true, ordering: .relaxed) }) }
        #expect(await eventually { ready.load(ordering: .relaxed) })
        #expect(kernel.instances.keys.sorted() == [1, 2, 3])
        let before = kernel.opcodes.count

        var changed = a
        changed.beacon = IBeacon(
            proximityUUID: a.beacon.proximityUUID, major: 0x0102, minor: 0x0304, measuredPower: -70)
        changed.intervalMilliseconds = 250
        let status = try await updates.apply([changed, b])
        #expect(status.beacons.map(\.instance) == [2, 3])
        #expect(kernel.instances[2]?.data == changed.beacon.advertisingData)
        #expect(kernel.instances[2]?.minInterval == 400)
        #expect(kernel.instances[3]?.data == b.beacon.advertisingData)
        #expect(kernel.instances[1]?.owner == "btmgmt")
        #expect(!kernel.opcodes[before...].contains(.removeAdvertising))

        _ = try await updates.apply([nil, b])
        #expect(kernel.instances.keys.sorted() == [1, 3])
        _ = try await updates.apply([changed, b])
        #expect(kernel.instances.keys.sorted() == [1, 2, 3])
        #expect(kernel.instances[2]?.data == changed.beacon.advertisingData)
        task.cancel()
        try await task.value
        await client.close()
        #expect(kernel.instances.keys.sorted() == [1])
    }
}

@Suite struct AllSwitchedOffTests {
    @Test func aBoxWithEveryBeaconOffSaysSo() throws {
        let status = AdvertisingStatus(commandSet: nil, beacons: [], warnings: [])
        #expect(status.lines(device: "hci0", json: false).hasPrefix("advertising nothing on hci0: every profile says"))
        let json = try JSONValue.parse(Array(status.lines(device: "hci0", json: true).utf8)).objectValue
        #expect(json?["status"] == .string("off") && json?["device"] == .string("hci0"))
    }
}
