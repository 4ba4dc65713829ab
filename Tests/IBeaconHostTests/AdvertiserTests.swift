import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Testing

@testable import IBeaconHost

/// Lopsided values so that a byte swap anywhere fails: major 0x0102, minor 0x0304, -59 dBm.
let testBeacon = IBeacon(
    proximityUUID: UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!, major: 0x0102, minor: 0x0304,
    measuredPower: -59)

/// A started client whose command timeouts run on `clock`: a manual clock nobody advances unless a
/// test means a command to time out, so a loaded machine cannot make a reply late.
func startedClient(
    _ fake: FakeController, timeout: Duration = .seconds(2), clock: ManualClock = ManualClock()
) async -> ControllerClient {
    let client = ControllerClient(transport: fake, logger: quietLogger, clock: clock, defaultTimeout: timeout)
    await client.start()
    return client
}

@Suite struct AdvertiserTests {
    @Test func legacyControllerGetsTheExactLegacySequence() async throws {
        let fake = FakeController(supportsExtended: false)
        let client = await startedClient(fake)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, intervalMilliseconds: 100, label: "t.json")], mode: .auto,
            ownsController: true, logger: quietLogger)
        let status = try await advertiser.start(on: client)

        #expect(status.commandSet == .legacy)
        #expect(
            fake.opcodes == [
                .reset, .setEventMask, .leSetEventMask, .readBDAddr, .leReadLocalSupportedFeatures,
                .leSetAdvertisingEnable, .leSetAdvertisingParameters, .leSetAdvertisingData, .leSetAdvertisingEnable,
                .leReadAdvertisingPhysicalChannelTxPower,
            ])
        // Data is set before enabling, the PDU is ADV_NONCONN_IND (3), 100 ms = 160 slots.
        #expect(fake.legacy.enabled)
        #expect(fake.legacy.properties == 3)
        #expect(fake.legacy.intervalSlots == 160)
        #expect(fake.legacy.data == testBeacon.advertisingData)
        // LE Meta (bit 61) must be unmasked or no report ever arrives.
        #expect(fake.eventMask & (1 << 61) != 0)
        #expect(status.beacons.first?.address == fake.address)
        await client.close()
    }

    @Test func extendedControllerUsesOnlyExtendedCommandsAndHonoursTxPower() async throws {
        let fake = FakeController(supportsExtended: true)
        let client = await startedClient(fake)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, intervalMilliseconds: 250, txPower: 4, label: "t.json")],
            mode: .auto, ownsController: true, logger: quietLogger)
        let status = try await advertiser.start(on: client)

        #expect(status.commandSet == .extended)
        #expect(!fake.opcodes.contains { FakeControllerOpcodes.legacy.contains($0) })
        let set = try #require(fake.advertisingSets[0])
        #expect(set.enabled)
        #expect(set.properties == 0x0010)  // legacy PDU, non-connectable, non-scannable
        #expect(set.intervalSlots == 400)
        #expect(set.requestedTxPower == 4)
        #expect(set.data == testBeacon.advertisingData)
        #expect(status.beacons.first?.txPower == 4)
        await client.close()
    }

    /// The address a controller put on the air: its public one, or the random one programmed.
    static func onAir(_ fake: FakeController, extended: Bool) -> BDAddress? {
        if extended {
            guard let set = fake.advertisingSets[0] else { return nil }
            return set.ownAddressType == 0 ? fake.address : set.randomAddress
        }
        return fake.legacy.ownAddressType == 0 ? fake.address : fake.legacyRandomAddress
    }

    @Test(
        arguments: [false, true],
        [
            BeaconAddress.identity, .staticRandom(BDAddress("C3:12:34:56:78:9A")!),
            .nonResolvable(BDAddress("12:34:56:78:9A:BC")!),
        ])
    func rawHCIAdvertisesFromTheChosenAddressAtEveryStart(extended: Bool, address: BeaconAddress) async throws {
        let fake = FakeController(supportsExtended: extended)
        let spec = BeaconSpec(beacon: testBeacon, address: address, label: "t.json")
        let expected = address.randomAddress ?? fake.address
        let client = await startedClient(fake)
        let advertiser = Advertiser(beacons: [spec], mode: .auto, ownsController: true, logger: quietLogger)
        for _ in 0..<2 {  // started, stopped and started again (each start Resets the controller it owns)
            let status = try await advertiser.start(on: client)
            #expect(Self.onAir(fake, extended: extended) == expected)
            #expect(status.beacons.first?.address == expected)
            // Non-connectable either way: ADV_NONCONN_IND (legacy type 3, extended properties 0x0010).
            #expect(extended ? fake.advertisingSets[0]?.properties == 0x0010 : fake.legacy.properties == 3)
            await advertiser.stop(on: client, commandSet: try #require(status.commandSet))
        }
        await client.close()
    }

    @Test func twoProfilesBecomeTwoAdvertisingSets() async throws {
        let fake = FakeController(supportsExtended: true)
        let client = await startedClient(fake)
        var other = testBeacon
        other.minor = 0x0506
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, label: "a"), BeaconSpec(beacon: other, label: "b")], mode: .auto,
            ownsController: true, logger: quietLogger)
        _ = try await advertiser.start(on: client)
        let sets = fake.advertisingSets
        #expect(sets.count == 2)
        #expect(sets.values.allSatisfy { $0.enabled })
        #expect(Set(sets.values.map(\.data)) == [testBeacon.advertisingData, other.advertisingData])
        await client.close()
    }

    @Test func severalProfilesOnALegacyControllerAreRefusedWithAReason() async throws {
        let fake = FakeController(supportsExtended: false)
        let client = await startedClient(fake)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, label: "a"), BeaconSpec(beacon: testBeacon, label: "b")],
            mode: .auto, ownsController: true, logger: quietLogger)
        await #expect(throws: AdvertisingError.self) { try await advertiser.start(on: client) }
        #expect(!fake.isAdvertising)
        await client.close()
    }

    @Test func legacyTxPowerRequestIsReportedAsNotHonoured() async throws {
        let fake = FakeController(supportsExtended: false)
        let client = await startedClient(fake)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, txPower: 4, calibratedTxPower: -8, label: "t.json")],
            mode: .auto, ownsController: true, logger: quietLogger)
        let status = try await advertiser.start(on: client)
        #expect(status.warnings.contains { $0.contains("cannot be honoured with legacy advertising") })
        #expect(status.warnings.contains { $0.contains("calibrated at TX -8 dBm") })
        await client.close()
    }

    @Test(arguments: [HCIOpcode.leSetAdvertisingParameters, .leSetAdvertisingData, .leSetAdvertisingEnable])
    func aRejectedSetupCommandNamesCommandAndStatusAndLeavesAdvertisingOff(_ failing: HCIOpcode) async throws {
        let fake = FakeController(supportsExtended: false)
        fake.faults[failing] = .status(.commandDisallowed)
        let client = await startedClient(fake)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, label: "t.json")], mode: .auto, ownsController: true,
            logger: quietLogger)
        do {
            _ = try await advertiser.start(on: client)
            Issue.record("expected \(failing) to fail")
        } catch let error as ControllerError {
            #expect(error.description.hasPrefix("\(failing) failed: Command Disallowed (0x0C)"))
        }
        #expect(!fake.isAdvertising)
        await client.close()
    }

    @Test func aSilentControllerTimesOutNamingTheCommand() async throws {
        let fake = FakeController(supportsExtended: false)
        fake.faults[.leSetAdvertisingData] = .noAnswer
        let clock = ManualClock()
        let client = await startedClient(fake, timeout: .milliseconds(200), clock: clock)
        let advertiser = Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, label: "t.json")], mode: .auto, ownsController: true,
            logger: quietLogger)
        let start = Task { try await advertiser.start(on: client) }
        // The unanswered command's timer is the only sleeper once the fake has it.
        guard await eventually({ fake.opcodes.last == .leSetAdvertisingData && clock.sleeperCount == 1 }) else {
            Issue.record("no command waiting on the clock; sent: \(fake.opcodes)")
            await client.close()
            return
        }
        clock.advance(by: .milliseconds(199))
        #expect(clock.sleeperCount == 1)  // not yet
        clock.advance(by: .milliseconds(1))
        do {
            _ = try await start.value
            Issue.record("expected a timeout")
        } catch ControllerError.timeout(let opcode, let after) {
            #expect(opcode == .leSetAdvertisingData)
            #expect(after == .milliseconds(200))
        }
        #expect(!fake.isAdvertising)
        await client.close()
    }

    @Test func stopAnyTurnsOffLegacyAdvertisingLeftByAnotherProcess() async throws {
        let fake = FakeController(supportsExtended: true)
        let first = await startedClient(fake)
        _ = try await Advertiser(
            beacons: [BeaconSpec(beacon: testBeacon, label: "t")], mode: .legacy, ownsController: true,
            logger: quietLogger
        ).start(on: first)
        #expect(fake.isAdvertising)
        // The controller is now in legacy mode: the extended disable is refused, the legacy one works.
        let mode = try await Advertiser.stopAny(on: first, logger: quietLogger)
        #expect(mode == .legacy)
        #expect(!fake.isAdvertising)
        await first.close()
    }
}

enum FakeControllerOpcodes {
    static let legacy: Set<HCIOpcode> = [
        .leSetAdvertisingParameters, .leReadAdvertisingPhysicalChannelTxPower, .leSetAdvertisingData,
        .leSetScanResponseData, .leSetAdvertisingEnable, .leSetScanParameters, .leSetScanEnable,
    ]
}
