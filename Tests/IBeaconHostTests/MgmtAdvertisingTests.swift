import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// The advertising-instance logic against a fake kernel (`FakeMgmtKernel`): which numbers it
/// takes, what it sends, that it puts its own instances back and never touches others'.
@Suite struct MgmtAdvertisingTests {
    static func spec(minor: UInt16, txPower: Int8? = nil, interval: Int = 100) -> BeaconSpec {
        let beacon = IBeacon(
            proximityUUID: UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")!, major: 0x0102, minor: minor,
            measuredPower: -59)
        return BeaconSpec(beacon: beacon, intervalMilliseconds: interval, txPower: txPower, label: "p\(minor).json")
    }

    /// Runs a session on `kernel` until `body` returns, then cancels it and waits for it to end.
    static func withSession(
        _ kernel: FakeMgmtKernel, beacons: [BeaconSpec], clock: any Clock<Duration> = ContinuousClock(),
        logger: Logger = Logger(label: "test"),
        _ body: @Sendable (_ ready: @Sendable () -> AdvertisingStatus?) async throws -> Void
    ) async throws {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let status = Mutex<AdvertisingStatus?>(nil)
        let session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(beacons: beacons, index: FakeMgmtKernel.index, logger: Logger(label: "test")),
            client: client, logger: logger, clock: clock)
        let task = Task { try await session.run(onReady: { s in status.withLock { $0 = s } }) }
        try await body { status.withLock { $0 } }
        task.cancel()
        try await task.value
        await client.close()
    }

    @Test func takesFreeNumbersAroundAnotherProgramsAndSendsTheProfilesIntervalAndPower() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)
        try await Self.withSession(
            kernel, beacons: [Self.spec(minor: 3, txPower: -4), Self.spec(minor: 4, interval: 250)]
        ) {
            ready in
            #expect(await eventually { ready() != nil })
            #expect(ready()?.beacons.map(\.instance) == [2, 3])
            let instances = kernel.instances
            #expect(instances[1]?.owner == "btmgmt")
            #expect(instances[2]?.minInterval == 160)
            #expect(instances[2]?.txPower == -4)
            // The default address is the adapter's identity address: the kernel uses it only for
            // a connectable instance.
            #expect(instances[2]?.flags.contains(.connectable) == true)
            #expect(instances[2]?.data == Self.spec(minor: 3).beacon.advertisingData)
            #expect(instances[3]?.minInterval == 400)
            #expect(instances[3]?.txPower == nil)
        }
        // On the way out: ours removed, the other program's kept.
        #expect(kernel.instances.keys.sorted() == [1])
    }

    /// Issue 30 item 3: the 6.1 kernel's list leaves out an instance whose number exceeds the
    /// count of instances; another program's instance 2, alone, is not listed at all.
    @Test func neverTakesANumberAnotherProgramHoldsHiddenFromTheList() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(2, owner: "bluetoothd")
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3), Self.spec(minor: 4)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(ready()?.beacons.map(\.instance) == [1, 3])
            #expect(kernel.instances[2]?.owner == "bluetoothd")
            #expect(kernel.instances[2]?.data == FakeMgmtKernel.otherProgramData)
        }
        #expect(kernel.instances.keys.sorted() == [2])
    }

    /// Issue 30 items 2/3: one of ours that the list hides is still ours; it is not forgotten
    /// (and left on the air when we exit) when another of ours has to be put back.
    @Test func keepsItsOwnInstanceTheListHides() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1, owner: "bluetoothd")
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3), Self.spec(minor: 4)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(ready()?.beacons.map(\.instance) == [2, 3])
            kernel.otherProgramRemoves(1)
            kernel.otherProgramRemoves(2)  // ours: put back; our 3 is now alone, so hidden
            let data = Self.spec(minor: 3).beacon.advertisingData
            #expect(await eventually { kernel.instances.keys.sorted() == [1, 3] && kernel.instances[1]?.data == data })
            #expect(kernel.instances.values.allSatisfy { $0.owner == "test" })
        }
        #expect(kernel.instances.isEmpty)
    }

    @Test func putsItsInstanceBackWhenAnotherProgramRemovesIt() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            kernel.otherProgramRemoves(1)
            // Parameters and data are two commands: wait for both, not for the first.
            let data = Self.spec(minor: 3).beacon.advertisingData
            #expect(
                await eventually {
                    kernel.instances[1]?.owner == "test" && kernel.opcodes.count > 4
                        && kernel.instances[1]?.data == data
                })
        }
        #expect(kernel.instances.isEmpty)
    }

    @Test func movesToAnotherNumberWhenAnotherProgramTakesOurs() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(kernel.instances[1]?.owner == "test")
            kernel.otherProgramAdds(1, owner: "bluetoothd")  // writes over instance 1
            #expect(await eventually { kernel.instances[2]?.owner == "test" })
            #expect(kernel.instances[1]?.owner == "bluetoothd")
        }
        // Instance 1 is no longer ours: it must survive our exit.
        #expect(kernel.instances.keys.sorted() == [1])
    }

    @Test func waitsWhilePoweredOffAndRegistersOnPowerOn() async throws {
        let kernel = FakeMgmtKernel(powered: false)
        let log = RecordingLog()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)], logger: log.logger) { ready in
            // Said once it has read the adapter's settings and decided to wait.
            #expect(await eventually { log.messages.contains { $0.hasPrefix("warning: hci0 is powered off") } })
            #expect(ready() == nil)
            #expect(kernel.instances.isEmpty)
            kernel.powerOn()
            #expect(await eventually { ready() != nil })
            #expect(kernel.instances[1]?.owner == "test")
        }
    }

    @Test func registersAgainAfterAPowerCycle() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            let before = kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count
            kernel.powerOff()
            kernel.powerOn()
            // The kernel kept the instance; it is programmed again (an HCI reset loses it in the
            // controller while the kernel still lists it).
            #expect(
                await eventually {
                    kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count == before + 1
                })
            #expect(kernel.instances.keys.sorted() == [1])
        }
    }

    @Test func retriesPuttingTheAdvertisingBackAfter100msThen200msOnTheInjectedClock() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let log = RecordingLog()
        let adds: @Sendable () -> Int = { kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count }
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)], clock: clock, logger: log.logger) {
            ready in
            #expect(await eventually { ready() != nil })
            // The controller is still being reset after the power cycle: two refusals, then it works.
            kernel.refuseAddingAdvertising(times: 2)
            kernel.powerOff()
            kernel.powerOn()
            #expect(await eventually { clock.sleeperCount == 1 })
            #expect(adds() == 2)
            #expect(clock.nextDeadline == .init(offset: .milliseconds(100)))
            clock.advance(by: .milliseconds(100))
            #expect(await eventually { adds() == 3 && clock.sleeperCount == 1 })
            #expect(clock.nextDeadline == .init(offset: .milliseconds(300)))
            clock.advance(by: .milliseconds(200))
            #expect(await eventually { log.messages.contains { $0.hasPrefix("notice: advertising checked") } })
            #expect(adds() == 4)
            #expect(clock.sleeperCount == 0)
            #expect(kernel.instances[1]?.owner == "test")
            #expect(kernel.instances[1]?.data == Self.spec(minor: 3).beacon.advertisingData)
        }
        let refused = "Add Extended Advertising Parameters (0x0054) on hci0 failed: Failed (0x03)"
        let cause = "hci0 was powered on again (New Settings)"
        #expect(
            log.messages.filter { !$0.hasPrefix("debug") && !$0.hasPrefix("trace") } == [
                "warning: hci0 was powered off (New Settings); waiting for it to be powered on again",
                "info: putting the advertising back failed (\(refused)); retrying in 0.1 s",
                "info: putting the advertising back failed (\(refused)); retrying in 0.2 s",
                "warning: p3.json: registered again as instance 1 (cause: \(cause))",
                // Measured on the manual clock: exactly the two waits.
                "notice: advertising checked and restored after 0.3 s (\(cause))",
            ])
    }

    @Test func givesUpWithAnErrorAfterSixAttemptsAndKeepsRunning() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let log = RecordingLog()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)], clock: clock, logger: log.logger) {
            ready in
            #expect(await eventually { ready() != nil })
            kernel.refuseAddingAdvertising(times: 7)
            kernel.powerOff()
            kernel.powerOn()
            var waits: [Duration] = []
            for _ in 0..<5 {
                #expect(await eventually { clock.sleeperCount == 1 })
                guard let deadline = clock.nextDeadline else { break }
                waits.append(deadline.offset - clock.now.offset)
                clock.advance(by: deadline.offset - clock.now.offset)
            }
            #expect(
                waits == [
                    .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .milliseconds(1600),
                ])
            #expect(
                await eventually {
                    log.messages.contains { $0.hasPrefix("error: putting the advertising back failed") }
                })
            #expect(clock.sleeperCount == 0)
            #expect(kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count == 1 + 6)
            // Still watching: the next event puts it back (the seventh refusal is used up here).
            kernel.otherProgramRemoves(1)
            #expect(await eventually { clock.sleeperCount == 1 })
            clock.advance(by: .milliseconds(100))
            #expect(await eventually { kernel.instances[1]?.owner == "test" })
        }
    }

    @Test func anUnansweredCommandTimesOutOnTheInjectedClockNamingIt() async throws {
        let kernel = FakeMgmtKernel()
        kernel.unansweredOpcodes = [.readAdvertisingFeatures]
        let clock = ManualClock()
        let client = MgmtClient(
            transport: kernel, logger: Logger(label: "test"), clock: clock, defaultTimeout: .seconds(10))
        await client.start()
        let read = Task { try await client.execute(MgmtReadAdvertisingFeatures(), index: FakeMgmtKernel.index) }
        // The unanswered command's timer is the only sleeper once the kernel has it.
        #expect(await eventually { kernel.opcodes == [.readAdvertisingFeatures] && clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(9_999))
        #expect(clock.sleeperCount == 1)  // not yet
        clock.advance(by: .milliseconds(1))
        do {
            _ = try await read.value
            Issue.record("expected a timeout")
        } catch MgmtError.timeout(let opcode, let index, let after) {
            #expect(opcode == .readAdvertisingFeatures)
            #expect(index == FakeMgmtKernel.index)
            #expect(after == .seconds(10))
        }
        // The client is free again for the next command.
        let info = try await client.execute(MgmtReadControllerInfo(), index: FakeMgmtKernel.index)
        #expect(info.currentSettings.contains(.powered))
        await client.close()
    }

    /// On a controller without extended advertising the kernel answers with TX power 127, its
    /// "unknown" (HCI_TX_POWER_INVALID): not a power, so the status has none (the status line
    /// says "TX power unknown", not "127 dBm").
    @Test func aTxPowerTheKernelCannotKnowIsUnknownNot127dBm() async throws {
        let kernel = FakeMgmtKernel()
        kernel.legacyOnlyController = true
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3, txPower: -4)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(
                ready()?.beacons.first?.placement
                    == .kernelInstance(
                        1, method: .extendedParameters, connectable: true, address: FakeMgmtKernel.identityAddress))
            #expect(ready()?.beacons.first?.txPower == nil)
        }
    }

    @Test func fallsBackToAddAdvertisingOnAnOlderKernel() async throws {
        let kernel = FakeMgmtKernel()
        kernel.supportsExtendedParameters = false
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(
                ready()?.beacons.first?.placement
                    == .kernelInstance(
                        1, method: .addAdvertising, connectable: true, address: FakeMgmtKernel.identityAddress))
            #expect(kernel.opcodes.contains(.addAdvertising))
            #expect(kernel.instances[1]?.minInterval == nil)
            #expect(kernel.instances[1]?.flags == [.connectable])
            #expect(ready()?.beacons.first?.address == FakeMgmtKernel.identityAddress)
        }
    }

    /// Linux 5.10 answers Add Extended Advertising Parameters (added in 5.12) with Unknown
    /// Command and a `send(2)` that returns 0. The command went out once, the fallback
    /// followed; a client that took the 0 for a short write resent it until ENOMEM and never
    /// reached Add Advertising.
    @Test func onLinux510TheUnknownCommandIsSentOnceAndAddAdvertisingFollows() async throws {
        let kernel = FakeMgmtKernel()
        kernel.supportsExtendedParameters = false
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            #expect(
                ready()?.beacons.first?.placement
                    == .kernelInstance(
                        1, method: .addAdvertising, connectable: true, address: FakeMgmtKernel.identityAddress))
            #expect(kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count == 1)
            #expect(kernel.opcodes.filter { $0 == .addAdvertising }.count == 1)
            #expect(kernel.instances[1]?.data == Self.spec(minor: 3).beacon.advertisingData)
        }
    }

    /// The write rule itself: a count of 0 is a consumed command, never resent; a count between
    /// 0 and the length cannot come from a packet socket and is an error, not a resend.
    @Test func aManagementCommandIsWrittenWithOneSend() throws {
        let calls = Mutex(0)
        try sendMgmtCommand([1, 2, 3, 4, 5, 6]) { _ in
            calls.withLock { $0 += 1 }
            return 0
        }
        #expect(calls.withLock { $0 } == 1)
        try sendMgmtCommand([1, 2, 3, 4, 5, 6]) { bytes in
            calls.withLock { $0 += 1 }
            return bytes.count
        }
        #expect(calls.withLock { $0 } == 2)
        #expect(throws: TransportError.self) {
            try sendMgmtCommand([1, 2, 3, 4, 5, 6]) { _ in
                calls.withLock { $0 += 1 }
                return 2
            }
        }
        #expect(calls.withLock { $0 } == 3)
    }

    // MARK: - the address on the air across restarts

    static func spec(minor: UInt16, address: BeaconAddress) -> BeaconSpec {
        var s = spec(minor: minor)
        s.address = address
        return s
    }

    /// Two runs of `advertise` with `spec` on one kernel (a restart in between, as systemd does):
    /// what the kernel put on the air, and what each run's status said.
    static func twoRuns(_ kernel: FakeMgmtKernel, _ spec: BeaconSpec) async throws -> [(
        onAir: BDAddress?, status: AdvertisingStatus.Beacon?, warnings: [String]
    )] {
        let runs = Mutex<[(BDAddress?, AdvertisingStatus.Beacon?, [String])]>([])
        for run in 0..<2 {
            if run > 0 { kernel.reopen() }
            try await withSession(kernel, beacons: [spec]) { ready in
                #expect(await eventually { ready() != nil })
                let run = (kernel.instances[1]?.address, ready()?.beacons.first, ready()?.warnings ?? [])
                runs.withLock { $0.append(run) }
            }
            #expect(kernel.instances.isEmpty)
        }
        return runs.withLock { $0 }
    }

    @Test func theDefaultKeepsTheAdaptersIdentityAddressAcrossRestarts() async throws {
        let kernel = FakeMgmtKernel()
        let runs = try await Self.twoRuns(kernel, Self.spec(minor: 3))
        for run in runs {
            #expect(run.onAir == FakeMgmtKernel.identityAddress)
            #expect(run.status?.address == FakeMgmtKernel.identityAddress)
            #expect(run.status?.connectable == true)
            #expect(run.warnings.isEmpty)
        }
    }

    @Test func theIdentityAddressSurvivesAPowerCycle() async throws {
        let kernel = FakeMgmtKernel()
        try await Self.withSession(kernel, beacons: [Self.spec(minor: 3)]) { ready in
            #expect(await eventually { ready() != nil })
            kernel.powerOff()
            kernel.powerOn()
            #expect(await eventually { kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count == 2 })
            #expect(kernel.instances[1]?.address == FakeMgmtKernel.identityAddress)
        }
    }

    @Test func aNonResolvableBeaconIsNonConnectableWithANewAddressAtEveryStart() async throws {
        let kernel = FakeMgmtKernel()
        let runs = try await Self.twoRuns(
            kernel, Self.spec(minor: 3, address: .nonResolvable(BDAddress("12:34:56:78:9A:BC")!)))
        #expect(runs.allSatisfy { $0.status?.connectable == false && $0.status?.address == nil })
        #expect(runs.allSatisfy { $0.onAir?.isNonResolvablePrivate == true && $0.warnings.isEmpty })
        #expect(runs[0].onAir != runs[1].onAir)
    }

    @Test func aStaticRandomAddressCannotBeHonouredThroughTheKernelAndSaysHowToGetIt() async throws {
        let kernel = FakeMgmtKernel()
        let runs = try await Self.twoRuns(
            kernel, Self.spec(minor: 3, address: .staticRandom(BDAddress("C3:12:34:56:78:9A")!)))
        for run in runs {
            #expect(run.status?.connectable == false)
            let warning = try #require(run.warnings.first)
            #expect(warning.contains("not C3:12:34:56:78:9A but a new address at every start"))
            #expect(warning.contains("--device raw:hci0"))
            #expect(warning.contains("\"address\": \"public\""))
        }
    }

    @Test func anAdapterMadeConnectableAdvertisesEveryInstanceFromItsIdentityAndSaysSo() async throws {
        let kernel = FakeMgmtKernel()
        kernel.setConnectable(true)
        let runs = try await Self.twoRuns(
            kernel, Self.spec(minor: 3, address: .nonResolvable(BDAddress("12:34:56:78:9A:BC")!)))
        for run in runs {
            #expect(run.onAir == FakeMgmtKernel.identityAddress)
            #expect(run.status?.address == FakeMgmtKernel.identityAddress)
            #expect(run.warnings.contains { $0.contains("hci0 is connectable") })
        }
    }

    @Test func noFreeInstanceIsAnErrorNamingTheInstancesInUse() async throws {
        let features = MgmtReadAdvertisingFeatures.ReturnParameters(
            supportedFlags: [], maxAdvertisingDataLength: 31, maxScanResponseLength: 31, maxInstances: 2,
            instances: [1, 2])
        #expect(throws: AdvertisingError.self) { try MgmtAdvertiser.freeInstances(1, features: features) }
        let some = MgmtReadAdvertisingFeatures.ReturnParameters(
            supportedFlags: [], maxAdvertisingDataLength: 31, maxScanResponseLength: 31, maxInstances: 4,
            instances: [2])
        #expect(try MgmtAdvertiser.freeInstances(2, features: some) == [1, 3])
        #expect(try MgmtAdvertiser.freeInstances(2, features: some, reserved: [1]) == [3, 4])
    }

    @Test func startFailsWithTheKernelsStatusAndLeavesNothingBehind() async throws {
        let kernel = FakeMgmtKernel()
        kernel.maxInstances = 1
        kernel.otherProgramAdds(1)
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"))
        await client.start()
        let session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(
                beacons: [Self.spec(minor: 3)], index: FakeMgmtKernel.index, logger: Logger(label: "t")),
            client: client, logger: Logger(label: "test"))
        // Bounded: a regression that starts advertising anyway must fail the test, not hang it.
        let run = Task { try await session.run(onReady: { _ in }) }
        let watchdog = Task {
            try await Task.sleep(for: .seconds(10))
            run.cancel()
        }
        await #expect(throws: AdvertisingError.self) { try await run.value }
        watchdog.cancel()
        #expect(kernel.instances.keys.sorted() == [1])
        await client.close()
    }

    /// The fake checks every command against its row before any handler runs, as hci_sock.c
    /// `hci_mgmt_cmd` does: a length the row does not admit is Invalid Parameters (and changes
    /// nothing), a code without a row Unknown Command.
    @Test func theFakeKernelRefusesWhatItsTableRefuses() async throws {
        let kernel = FakeMgmtKernel()
        kernel.otherProgramAdds(1)
        var replies = kernel.incoming.makeAsyncIterator()
        _ = try await replies.next()  // Advertising Added, for the other program's instance
        // Deliberately malformed: Remove Advertising of instance 1 with a byte too many (its row: exactly 1).
        let removeWithAByteTooMany = MgmtPacket(
            code: MgmtOpcode.removeAdvertising.rawValue, index: FakeMgmtKernel.index, parameters: [1, 0])
        let unknownCode = MgmtOpcode(rawValue: 0x0099)
        try kernel.send(removeWithAByteTooMany.bytes)
        try kernel.send(MgmtPacket(code: unknownCode.rawValue, index: FakeMgmtKernel.index, parameters: []).bytes)
        var got: [MgmtEvent] = []
        for _ in 0..<2 {
            got.append(try MgmtEvent(MgmtPacket(decoding: try #require(try await replies.next()))))
        }
        #expect(
            got == [
                .commandStatus(index: FakeMgmtKernel.index, opcode: .removeAdvertising, status: .invalidParameters),
                .commandStatus(index: FakeMgmtKernel.index, opcode: unknownCode, status: .unknownCommand),
            ])
        #expect(kernel.instances.keys.sorted() == [1])
    }
}
