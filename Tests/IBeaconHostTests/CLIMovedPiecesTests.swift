import FoundationEssentials
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

// The pieces issue 31 moved out of the CLI into Host, each tested here where it now lives:
// the monitor run, advertise's MQTT status, calibrate's profile update, decode, the scan,
// advertise and calibrate formats, and the failure classification.

private let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
private let beacon = IBeacon(proximityUUID: uuid, major: 1, minor: 772, measuredPower: -59)

private func sighting(_ b: IBeacon = beacon, rssi: Int8? = -61) -> Sighting {
    Sighting(
        address: BDAddress("D0:00:00:00:00:01")!, addressType: .random, rssi: rssi, data: b.advertisingData,
        extended: false)
}

/// Records what the publisher hands over once connected.
final class MovedRecordingConnection: MQTTConnection, Sendable {
    let sent = Mutex<[MQTTMessage]>([])
    let handler = Mutex<(any MQTTConnectionHandler)?>(nil)
    var brokerDescription: String { "mqtt://fake:1883" }
    func start(handler: any MQTTConnectionHandler) {
        self.handler.withLock { $0 = handler }
        handler.connectionUp()
    }
    func publish(_ message: MQTTMessage) -> Bool {
        sent.withLock { $0.append(message) }
        return true
    }
    func close(timeout: Duration) async {}
    func payload(_ topic: String) -> String? { sent.withLock { $0.last { $0.topic == topic }?.payload } }
}

/// Records the hooks' submissions.
final class MonitorRecordingHooks: EventHooks {
    let submitted = Mutex<[String]>([])
    let finished = Atomic(false)
    func submit(label: String, variables: [(String, String)]) { submitted.withLock { $0.append(label) } }
    func finish(grace: Duration, startQueued: Bool) async { finished.store(true, ordering: .relaxed) }
    var summaryText: String { "\(submitted.withLock { $0.count }) run, 0 failed, 0 dropped" }
}

/// The lines a run writes.
final class MonitorLines: Sendable {
    let lines = Mutex<[String]>([])
    func withLock<T>(_ body: (inout [String]) -> T) -> T { lines.withLock { body(&$0) } }
}

@Suite struct MonitorRunTests {
    let output = MonitorLines()

    func run(json: Bool = false, hooks: MonitorRecordingHooks? = nil, stateEvery: Double = 0, log: RecordingLog) throws
        -> MonitorRun
    {
        let output = self.output
        return MonitorRun(
            regions: [try BeaconRegion(parsing: "deli=\(uuid.uuidString)")],
            settings: .init(
                configuration: .init(exitAfter: 5), json: json, stateEvery: stateEvery, wallClock: { 1_790_000_000 }),
            hooks: hooks, logger: log.logger, output: { line in output.withLock { $0.append(line) } })
    }

    @Test func eventsAreWrittenAndHandedToTheHooksInOrderThenTheFinalState() async throws {
        let hooks = MonitorRecordingHooks()
        let log = RecordingLog()
        let run = try run(hooks: hooks, log: log)
        #expect(run.advance(to: 0))  // the first tick: scanning has started
        run.observe([sighting()], at: 1)
        #expect(!run.advance(to: 7))
        run.observe([sighting()], at: 8)
        await run.finish(grace: .seconds(1), startQueued: true)
        let lines = output.withLock { $0 }
        #expect(lines.count == 4)
        #expect(lines[0].hasPrefix("2026-09-21T14:13:21.000Z inside  deli: "))
        #expect(lines[1].contains(" exit    deli: silent for 5.0 s"))
        #expect(lines[2].contains(" enter   deli: "))
        #expect(lines[3].contains(" final   deli: inside since "))
        #expect(hooks.submitted.withLock { $0 } == ["inside of deli", "exit of deli", "enter of deli"])
        let finished = hooks.finished.load(ordering: .relaxed)
        #expect(finished)
        #expect(run.summary == "1 inside, 0 outside, 1 enter, 1 exit, 0 unknown; hooks: 3 run, 0 failed, 0 dropped")
    }

    /// A source whose beacon is already on the air: a report comes before the first tick.
    final class HeardBeforeTheFirstTick: SightingSource, Sendable {
        let order = Mutex<[String]>([])
        let started = Mutex(0)
        var name: String { "heard-first" }
        func receiverAddress() async throws -> BDAddress? { nil }
        func close() async {}
        func scan(_ request: ScanRequest) async throws {
            note("report")
            _ = request.receive([sighting()], 0.1)
            for t in [0.25, 0.5, 0.75] {
                note("tick")
                _ = try await request.tick(t)
            }
            note("report")
            _ = request.receive([sighting()], 0.9)
        }
        func note(_ what: String) { order.withLock { $0.append(what) } }
    }

    /// READY=1 under systemd: `started` runs once, at the first report when a beacon is heard
    /// before the first tick (it was never called then, and ibeacon-monitor@ timed out and was
    /// restarted forever whenever the store's beacon was on the air: make deb-boot).
    @Test func startedRunsOnceEvenWhenABeaconIsHeardBeforeTheFirstTick() async throws {
        let run = try run(log: RecordingLog())
        let source = HeardBeforeTheFirstTick()
        try await run.scan(source, deadline: nil, watchdog: nil) {
            source.note("started")
            source.started.withLock { $0 += 1 }
        }
        #expect(source.started.withLock { $0 } == 1)
        #expect(source.order.withLock { $0 }.prefix(2) == ["report", "started"])
    }

    /// A capture's time is not the wall clock's: `t+` times, null in JSON.
    @Test func aCaptureHasNoWallClock() async throws {
        let run = try run(json: true, log: RecordingLog())
        run.sourceIsNotLive()
        run.observe([sighting()], at: 2)
        #expect(output.withLock { $0 }.first?.contains(#""time":null,"t":2.000"#) == true)
    }

    @Test func deafnessMakesTheRegionUnknownAndStateLinesComeWhenDue() throws {
        let run = try run(stateEvery: 10, log: RecordingLog())
        run.observe([sighting()], at: 1)
        run.receive(.deaf(Deafness(.reset, "the controller was reset")), at: 2)
        _ = run.advance(to: 10)
        let lines = output.withLock { $0 }
        #expect(lines.count == 3)
        #expect(lines[1].hasSuffix(" unknown deli: the controller was reset"))
        #expect(lines[2].contains(" state   deli: unknown since "))
    }

    @Test func mqttGetsTheRegionStateAndTheReceiversHealth() async throws {
        let connection = MovedRecordingConnection()
        let layout = MQTTLayout(base: "t/box", command: "monitor", discoveryPrefix: nil, node: "box", room: "box")
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        let run = try run(log: RecordingLog())
        run.attach(publisher, health: ReceiverHealth(device: "hci0", adapter: nil))
        publisher.start()
        run.observe([sighting()], at: 1)
        run.receive(.deaf(Deafness(.poweredOff, "adapter hci0 powered off")), at: 2)
        let sent = connection.sent.withLock { $0 }
        #expect(sent.contains { $0.topic.hasSuffix("/deli/state") && $0.payload == "ON" })
        #expect(sent.contains { $0.topic.hasSuffix("/deli/state") && $0.payload == "None" })
        #expect(sent.contains { $0.payload.contains(#""receiver":"deaf","reason":"adapter hci0 powered off""#) })
    }
}

@Suite struct BeaconStatusPublisherTests {
    @Test func eachBeaconIsPublishedByItsProfilesNameAndOnlineOnceOnTheAir() throws {
        let connection = MovedRecordingConnection()
        let layout = MQTTLayout(base: "t/box", command: "advertise", discoveryPrefix: nil, node: "box", room: "box")
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        let spec = BeaconSpec(beacon: beacon, intervalMilliseconds: 100, label: "store12.entrance.json")
        let status = BeaconStatusPublisher(
            publisher: publisher, specs: [spec], device: "hci0", wallClock: { 1_790_000_000 })
        publisher.start()
        #expect(BeaconStatusPublisher.name(of: spec) == "store12.entrance")
        #expect(connection.payload(layout.availabilityTopic) != "online")
        status.update(.advertising)
        #expect(connection.payload(layout.beaconStateTopic("store12.entrance")) == "ON")
        #expect(connection.payload(layout.availabilityTopic) == "online")
        status.update(.recovering, cause: "the controller was reset")
        let attributes = try #require(connection.payload(layout.beaconAttributesTopic("store12.entrance")))
        #expect(attributes.contains(#""lastRecovery":"2026-09-21T14:13:20.000Z""#))
        #expect(attributes.contains(#""lastRecoveryCause":"the controller was reset""#))
        #expect(connection.payload(layout.beaconStateTopic("store12.entrance")) == "OFF")
    }
}

@Suite struct CalibrationDestinationTests {
    let target = CalibrationTarget(proximityUUID: uuid, major: 1, minor: 2, address: nil)
    let record = CalibrationRecord(
        timestamp: "2026-11-27T12:00:00Z", samples: 100, estimate: -58.4, interval95: 0.5, spread: 2, method: "apple",
        receiver: "hci0", receiverAddress: "unknown", offset: 0, txPower: nil)

    @Test func aLockedProfileIsReReadSoEditsMadeWhileMeasuringAreKept() throws {
        let dir = try makeScratchDirectory("ibeacon-caldest")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/p.json"
        try SafeFile.create(
            path, try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59).encoded(), overwrite: false)
        let destination = try CalibrationDestination.open(path, mustExist: true, dryRun: false)
        defer { destination.close() }
        #expect(destination.existing?.measuredPower == -59)
        // Another lock is refused while calibrating.
        #expect(throws: FileError.self) { try ProfileStore.lock(path) }
        // Edited meanwhile (through the lock's own file, as an editor saving in place would).
        let edited = try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59, name: "Deli")
        try destination.lock!.replace(with: edited.encoded())
        try destination.write(measuredPower: -58, record: record, target: target)
        let written = try Profile.load(path: path)
        #expect(written.measuredPower == -58 && written.name == "Deli")
    }

    @Test func aNewFileIsMadeFromTheTargetAndADryRunLocksNothing() throws {
        let dir = try makeScratchDirectory("ibeacon-caldest")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/new.json"
        let dry = try CalibrationDestination.open(path, mustExist: false, dryRun: true)
        #expect(dry.existing == nil && dry.lock == nil)
        let destination = try CalibrationDestination.open(path, mustExist: false, dryRun: false)
        try destination.write(measuredPower: -60, record: record, target: target)
        let written = try Profile.load(path: path)
        #expect(written.measuredPower == -60 && written.minor == 2)
        #expect(throws: FileError.self) {
            try CalibrationDestination.open(dir + "/missing.json", mustExist: true, dryRun: false)
        }
    }

    /// A profile of `size` bytes: the beacon and a `notes` key ibeacon keeps but ignores.
    static func profile(ofSize size: Int) -> [UInt8] {
        let head = #"{"uuid": "\#(uuid.uuidString)", "major": 1, "minor": 2, "measuredPower": -59, "notes": ""#
        return Array((head + String(repeating: "n", count: size - head.utf8.count - 3) + "\"}\n").utf8)
    }

    /// Issue 41, defect 14: calibrating a profile near the 1 MiB limit wrote one ibeacon then
    /// refused to read. Refused before measuring, and (grown meanwhile) before writing.
    @Test func aCalibratedProfileStaysOneIbeaconReads() throws {
        let dir = try makeScratchDirectory("ibeacon-caldest")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/big.json"
        let big = Self.profile(ofSize: SafeFile.maximumSize - 100)
        try SafeFile.create(path, big, overwrite: false)
        #expect(try Profile.load(path: path).measuredPower == -59)
        let error = #expect(throws: FileError.self) {
            try CalibrationDestination.open(path, mustExist: true, dryRun: false)
        }
        #expect(error?.kind == .badData)
        #expect(
            error?.description.contains("more than the 1 MiB a profile may be") == true, "\(String(describing: error))")
        #expect(try SafeFile.read(path) == big)
        // A dry run writes nothing: nothing to refuse.
        _ = try CalibrationDestination.open(path, mustExist: true, dryRun: true)

        // Small when opened, grown near the limit while measuring.
        let small = dir + "/small.json"
        try SafeFile.create(
            small, try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59).encoded(), overwrite: false)
        let destination = try CalibrationDestination.open(small, mustExist: true, dryRun: false)
        defer { destination.close() }
        let grown = Self.profile(ofSize: SafeFile.maximumSize - 40)
        try destination.lock!.replace(with: grown)
        #expect(throws: FileError.self) { try destination.write(measuredPower: -58, record: record, target: target) }
        #expect(try SafeFile.read(small) == grown)
    }
}

@Suite struct AdvertisingDecoderTests {
    @Test func theKindIsTakenFromTheFirstBytes() {
        #expect(AdvertisingDecoder.kind(of: [0x04, 0x3E, 0x00]) == .event)
        #expect(AdvertisingDecoder.kind(of: [0x3E, 0x00]) == .event)
        #expect(AdvertisingDecoder.kind(of: [0x04, 0x3F]) == .ad)
        #expect(AdvertisingDecoder.kind(of: beacon.advertisingData) == .ad)
    }

    @Test func advertisingDataShowsTheIBeacon() throws {
        let text = try AdvertisingDecoder.decode(beacon.advertisingData, as: .auto, json: false)
        #expect(
            text.hasSuffix("iBeacon: UUID \(uuid.uuidString), major 1 (0x1), minor 772 (0x304), measured power -59 dBm")
        )
        let json = try AdvertisingDecoder.decode(beacon.advertisingData, as: .ad, json: true)
        #expect(json.hasPrefix(#"{"kind":"advertisingData","data":""#) && json.contains(#""minor":772"#))
    }

    @Test func malformedInputIsAFailureNamingWhat() {
        #expect(throws: AdvertisingDecoder.DecodeFailure.self) {
            try AdvertisingDecoder.decode([UInt8](repeating: 2, count: 32), as: .ad, json: false)
        }
        #expect {
            try AdvertisingDecoder.decode([0x3E, 0x05, 0x02], as: .auto, json: false)
        } throws: {
            ($0 as? AdvertisingDecoder.DecodeFailure)?.description.hasPrefix("decode: not a valid HCI event") == true
        }
    }
}

@Suite struct MovedFormatsTests {
    @Test func reportJSONLinesCarryDistanceAndData() {
        var buffer = JSONLineBuffer()
        Sighting.ReportJSON.shared.append(sighting(), t: 1.5, to: &buffer)
        var text = ""
        buffer.drain { text += String(decoding: $0, as: UTF8.self) }
        #expect(text.hasPrefix(#"{"t":1.5,"address":"D0:00:00:00:00:01","addressType":"random","rssi":-61"#))
        #expect(text.contains(#""proximity":"near""#) && text.hasSuffix("\"}\n"))
    }

    @Test func rangingGoesToMQTTOnlyForBeaconsWithADistance() {
        let connection = MovedRecordingConnection()
        let layout = MQTTLayout(base: "t/box", command: "scan", discoveryPrefix: nil, node: "box", room: "box")
        let publisher = MQTTPublisher(layout: layout, connection: connection, logger: RecordingLog().logger)
        publisher.start()
        var ranger = BeaconRanger(.init())
        ranger.record(sighting(), at: 0.5)
        ranger.advance(to: 1.01)
        for update in ranger.takeUpdates() { publisher.publishRanging(update) }
        let ranging = connection.sent.withLock { $0.filter { $0.topic == layout.rangingTopic } }
        #expect(ranging.count == 1 && ranging[0].payload.contains("e2c56db5-dffb-48d2-b060-d0f5a71096e0-1-772"))
    }

    @Test func calibrationReportTextAndJSON() throws {
        let target = CalibrationTarget(proximityUUID: uuid, major: 1, minor: 772)
        var settings = CalibrationSettings()
        settings.offset = 1
        var collector = CalibrationCollector(target: target, settings: settings)
        for i in 0..<200 {
            _ = try collector.add(sighting(rssi: Int8(-60 + i % 3)), at: Double(i) * 0.1)
        }
        let result = try collector.result(at: 20)
        let text = result.textLines(precision: 1, maximumDuration: 180)
        #expect(text.contains { $0.hasPrefix("estimate \(result.estimate.fixed(2)) dBm, 95% interval ±") })
        #expect(
            text.last
                == (result.precisionReached
                    ? "precision ±1.0 dB reached" : "precision ±1.0 dB NOT reached within 3 min"))
        let json = result.json(
            target: target, refusal: nil, forced: false, previous: -59, written: true, file: "p.json")
        #expect(json.hasPrefix(#"{"uuid":"\#(uuid.uuidString)","major":1,"minor":772,"address":"D0:00:00:00:00:01""#))
        #expect(
            json.contains(#""refused":null,"forced":false,"previousMeasuredPower":-59,"written":true,"file":"p.json""#))
    }

    @Test func controllerAndFileErrorsAreClassifiedAsMgmtErrorsAre() {
        #expect(ControllerError.timeout(opcode: .reset, after: .seconds(1)).failureKind == .tempFail)
        #expect(ControllerError.closed(opcode: .reset).failureKind == .io)
        #expect(ControllerError.commandFailed(opcode: .reset, status: .commandDisallowed).failureKind == .rejected)
        #expect(FileError(.notFound, path: "p", "x").failureKind == .notFound)
        #expect(FileError(.cannotWrite, path: "p", "x").failureKind == .cannotWrite)
        #expect(FileError(.locked, path: "p", "x").failureKind == .tempFail)
        #expect(TransportError(.permissionDenied, "no").failureKind == .transport(.permissionDenied))
    }

    @Test func profileRegionsAndSharedNames() throws {
        let dir = try makeScratchDirectory("ibeacon-region")
        defer { removeScratchDirectory(dir) }
        try SafeFile.create(
            dir + "/a.b.json", try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59).encoded(),
            overwrite: false)
        let region = try BeaconRegion(profileAt: dir + "/a.b.json")
        #expect(region.name == "a.b" && region.major == 1 && region.minor == 2)
        let other = try BeaconRegion(parsing: "a.b=\(uuid.uuidString)")
        #expect(BeaconRegion.sharedName(in: [region, other]) == "a.b")
        #expect(BeaconRegion.sharedName(in: [region]) == nil)
    }
}

/// The typed seam (issue 31 step 2): one path rule with one failure policy, a stop report value.
@Suite struct TypedSeamTests {
    @Test func thePathRuleAndItsFailurePolicy() {
        #expect(ControllerPath.choose(listed: false, settings: [.powered, .lowEnergy]) == .raw)
        #expect(ControllerPath.choose(listed: true, settings: [.powered, .lowEnergy]) == .kernel)
        // Powered with LE off: the kernel refuses advertising, raw HCI works.
        #expect(ControllerPath.choose(listed: true, settings: [.powered]) == .raw)
        // Powered off: stays the kernel's (bluetoothd may power it later).
        #expect(ControllerPath.choose(listed: true, settings: []) == .kernel)
        // Read Controller Information failed: the kernel's, for `open` and `devices` alike.
        #expect(ControllerPath.choose(listed: true, settings: nil) == .kernel)
    }

    @Test func stopReportsSayWhatWasDone() {
        let off = StopReport(.advertisingOff(.extended), adapter: "raw:hci1")
        #expect(off.removedSomething && off.description == "advertising off on raw:hci1 (extended commands)")
        let running = StopReport(
            .removedInstances([]), adapter: "hci0", stillRunning: [42], recordDirectory: "/run/ibeacon")
        #expect(!running.removedSomething)
        #expect(
            running.description
                == "no advertising instance of ibeacon's on hci0 (none recorded in /run/ibeacon by a process now gone); "
                + "ibeacon process(es) 42 still running: stop them instead (kill PID or systemctl stop), which removes "
                + "their instances")
    }

    /// Closing is awaited on both paths: the client is closed when `closing` returns or throws.
    @Test func closingClosesOnSuccessAndOnFailure() async throws {
        for fails in [false, true] {
            let client = await startedClient(FakeController(supportsExtended: false))
            let address = try? await client.closing {
                let address = try await client.execute(ReadBDAddr())
                if fails { throw TransportError(.io, "failed") }
                return address
            }
            #expect((address == nil) == fails)
            // Closed by then: a command fails at once.
            await #expect(throws: ControllerError.self) { try await client.execute(ReadBDAddr()) }
        }
    }
}

/// A capture whose recording phone's address is known: issue 41, defect 2.
private struct RecordedCapture: SightingSource {
    var name: String { "btsnoop:phone.log" }
    var isLive: Bool { false }
    func receiverAddress() async throws -> BDAddress? { BDAddress("5C:F3:70:11:22:33") }
    func scan(_ request: ScanRequest) async throws {}
    func close() async {}
}

private struct NoPublisher: Error {}

@Suite struct MonitorMQTTCaptureTests {
    /// Issue 41, defect 2: `monitor --mqtt` on a capture named its Home Assistant device after
    /// the recording phone's address and published it; the host name alone names it, as scan's.
    @Test func aCapturesRecordingPhoneNeverNamesTheMQTTDevice() async throws {
        let run = MonitorRun(
            regions: [try BeaconRegion(parsing: "deli=\(uuid.uuidString)")],
            settings: .init(configuration: .init(exitAfter: 5), json: false, wallClock: { 0 }),
            hooks: nil, logger: RecordingLog().logger, output: { _ in })
        let given = Mutex<[String?]>([])
        await #expect(throws: NoPublisher.self) {
            try await run.connectMQTT(source: RecordedCapture(), regions: [], device: "btsnoop:phone.log") { adapter in
                given.withLock { $0.append(adapter) }
                throw NoPublisher()
            }
        }
        #expect(given.withLock { $0 } == [nil])
    }
}
