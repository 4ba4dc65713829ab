import FoundationEssentials
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

// What the CLI no longer does by hand (issue 43): scopes that close on every path, the
// guardian's wait, the calibration record, the one identity matcher, the path `devices` shows.

private let uuid = UUID(uuidString: "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0")!
private let other = UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!

/// Counts its closes.
private final class CountingResource: AsyncClosable {
    let closes = Atomic(0)
    func close() async { closes.add(1, ordering: .relaxed) }
    var count: Int { closes.load(ordering: .relaxed) }
}

private struct Boom: Error {}

/// Counts the polls of a process table.
private final class PollCounter: Sendable {
    let polls = Atomic(0)
    func next() -> Int { polls.add(1, ordering: .relaxed).oldValue }
    var count: Int { polls.load(ordering: .relaxed) }
}

@Suite struct ScopedResourcesTests {
    @Test func aScopeClosesOnceWhetherTheBodyReturnsOrThrows() async throws {
        let resource = CountingResource()
        #expect(try await resource.closing { 7 } == 7)
        #expect(resource.count == 1)
        await #expect(throws: Boom.self) { try await resource.closing { () async throws -> Int in throw Boom() } }
        #expect(resource.count == 2)
        // `--mqtt` given: the optional publisher is closed; not given: nothing to close.
        let some: CountingResource? = resource
        await #expect(throws: Boom.self) { try await some.closing { () async throws -> Int in throw Boom() } }
        #expect(resource.count == 3)
        let none: CountingResource? = nil
        #expect(try await none.closing { "ran" } == "ran")
    }

    @Test func theGuardianWaitsUntilTheProcessIsGoneOrItsPIDIsReused() async throws {
        let polls = PollCounter()
        // Running for three polls, then gone.
        let ending = ProcessTable(
            identity: { pid in
                polls.next() < 3
                    ? ProcessIdentity(pid: pid, startTime: 42, bootID: "b") : nil
            }, bootID: { "b" })
        try await ending.waitUntilGone(1234, startTime: 42, polling: .milliseconds(1))
        let polled = polls.count
        #expect(polled == 4)
        // The PID taken by another process (another start time): gone at once, no poll waited.
        let reused = ProcessTable(identity: { ProcessIdentity(pid: $0, startTime: 43, bootID: "b") }, bootID: { "b" })
        try await reused.waitUntilGone(1234, startTime: 42, polling: .seconds(3600))
        // Still running when the guardian is stopped: cancellation ends the wait.
        let forever = ProcessTable(identity: { ProcessIdentity(pid: $0, startTime: 42, bootID: "b") }, bootID: { "b" })
        let wait = Task { try await forever.waitUntilGone(1234, startTime: 42, polling: .milliseconds(5)) }
        wait.cancel()
        await #expect(throws: CancellationError.self) { try await wait.value }
    }

    @Test func theRecordStatesTheOffsetTheCalibratorAppliedOnce() async throws {
        let target = CalibrationTarget(proximityUUID: uuid, major: 1, minor: 2)
        let settings = CalibrationSettings(duration: 30, precision: 1, offset: 3, method: .apple)
        #expect(settings.notHeardTimeout == .seconds(10) && settings.maximumDuration == .seconds(30))
        var collector = CalibrationCollector(target: target, settings: settings)
        let beacon = IBeacon(proximityUUID: uuid, major: 1, minor: 2, measuredPower: -59)
        for i in 0..<200 {
            let s = Sighting(
                address: BDAddress("D0:00:00:00:00:01")!, addressType: .random, rssi: Int8(-62 + i % 3),
                data: beacon.advertisingData, extended: false)
            _ = try collector.add(s, at: Double(i) * 0.1)
        }
        let result = try collector.result(at: 20)
        // The samples were -62…-60 dBm: the estimate has the 3 dB added once, not twice.
        #expect(result.estimate > -60 && result.estimate < -57, "\(result.estimate)")
        let dir = try makeScratchDirectory("ibeacon-record")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/p.json"
        try SafeFile.create(
            path, try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59).encoded(), overwrite: false)
        let record = try await CalibrationDestination.withOpened(path, mustExist: true, dryRun: true) { destination in
            destination.record(
                of: result, receiver: "hci0", receiverAddress: BDAddress("00:11:22:33:44:55"), unixTime: 1_790_000_000)
        }
        #expect(record.estimate == result.estimate && record.offset == 3)
        #expect(record.timestamp == "2026-09-21T14:13:20Z")
        #expect(record.receiver == "hci0" && record.receiverAddress == "00:11:22:33:44:55")
        #expect(record.samples == result.sampleCount && record.interval95 == result.halfWidth95)
    }

    @Test func aDestinationScopeLetsGoOfTheLockOnEveryPath() async throws {
        let dir = try makeScratchDirectory("ibeacon-record")
        defer { removeScratchDirectory(dir) }
        let path = dir + "/p.json"
        try SafeFile.create(
            path, try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59).encoded(), overwrite: false)
        await #expect(throws: Boom.self) {
            try await CalibrationDestination.withOpened(path, mustExist: true, dryRun: false) { destination in
                #expect(destination.lock != nil)
                #expect(throws: FileError.self) { try ProfileStore.lock(path) }  // held inside
                throw Boom()
            }
        }
        try ProfileStore.lock(path).unlock()  // let go after the throw: it can be taken again
    }

    @Test func oneIdentityMatcherForScanMonitorAndCalibrate() throws {
        let b = IBeacon(proximityUUID: uuid, major: 0x0102, minor: 0x0304, measuredPower: -59)
        #expect(BeaconIdentityPattern().matches(b))
        #expect(BeaconIdentityPattern(major: 0x0102).matches(b))  // scan --major alone
        #expect(!BeaconIdentityPattern(major: 0x0201).matches(b))
        #expect(BeaconIdentityPattern(proximityUUID: uuid, major: 0x0102, minor: 0x0304).matches(b))
        #expect(!BeaconIdentityPattern(proximityUUID: uuid, major: 0x0102, minor: 0x0403).matches(b))
        #expect(!BeaconIdentityPattern(proximityUUID: other).matches(b))
        // The region and the calibration target are patterns of the same matcher.
        #expect(try BeaconRegion(proximityUUID: uuid, major: 0x0102).contains(b))
        #expect(try !BeaconRegion(proximityUUID: uuid, major: 0x0102, minor: 5).contains(b))
        #expect(CalibrationTarget(proximityUUID: uuid, major: 0x0102, minor: 0x0304).pattern.matches(b))
        #expect(!CalibrationTarget(proximityUUID: uuid, major: 0x0102, minor: 0).pattern.matches(b))
        // scan: a transmitter that is no iBeacon shows only with --all and no identity given.
        let notABeacon = Sighting(
            address: BDAddress("D0:00:00:00:00:02")!, addressType: .random, rssi: -70, data: [2, 1, 6],
            extended: false)
        #expect(SightingFilter(identity: .init(), all: true).matches(notABeacon))
        #expect(!SightingFilter(identity: .init(), all: false).matches(notABeacon))
        #expect(!SightingFilter(identity: .init(major: 1), all: true).matches(notABeacon))
    }

    @Test func aMonitorRunIsFinishedWhenItsScanFails() async throws {
        let hooks = MonitorRecordingHooks()
        let log = RecordingLog()
        let run = MonitorRun(
            regions: [try BeaconRegion(parsing: "deli=\(uuid.uuidString)")],
            settings: .init(configuration: .init(exitAfter: 5), json: false, wallClock: { 1_790_000_000 }),
            hooks: hooks, logger: log.logger, output: { _ in })
        await #expect(throws: Boom.self) { try await run.finishing(grace: .zero) { throw Boom() } }
        let finished = hooks.finished.load(ordering: .relaxed)
        #expect(finished)
    }

    @Test func devicesShowsRawForAnAdapterTheKernelWasNotAskedAbout() {
        let paths = ControllerPaths(known: [0: .kernel, 1: .raw])
        #expect(paths[0] == .kernel && paths[1] == .raw && paths[7] == .raw)
    }

    @Test func calibrateTargetsTheProfilesBeaconElseTheIdentityGiven() throws {
        let profile = try Profile.new(uuid: uuid, major: 1, minor: 2, measuredPower: -59)
        let fromProfile = CalibrationTarget(profile: profile, proximityUUID: nil, major: nil, minor: nil, address: nil)
        #expect(fromProfile == CalibrationTarget(proximityUUID: uuid, major: 1, minor: 2))
        let given = CalibrationTarget(profile: nil, proximityUUID: other, major: 5, minor: nil, address: nil)
        #expect(given == CalibrationTarget(proximityUUID: other, major: 5, minor: 0))
    }
}
