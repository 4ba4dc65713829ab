import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// A central (a phone) connecting to the connectable kernel-path beacon: the kernel pauses the
/// instance while the link is up (issue 30, item 1). The session must drop the link at once,
/// say `recovering` meanwhile, log it rate-limited, and leave the box's own links alone.
@Suite struct MgmtCentralTests {
    static let phone = MgmtLink(BDAddress("4A:11:22:33:44:55")!, MgmtDeviceFound.leRandomAddress)

    /// What a session reported: its status, each `onLost` cause, how often `onRestored` ran.
    final class Reports: Sendable {
        let ready = Mutex<AdvertisingStatus?>(nil)
        let lost = Mutex<[String]>([])
        let restored = Mutex(0)
    }

    /// Runs a session on `kernel` with `clock` until `body` returns.
    static func withSession(
        _ kernel: FakeMgmtKernel, beacons: [BeaconSpec], clock: ManualClock, log: RecordingLog,
        openedHere: (@Sendable (MgmtIndex, MgmtLink) -> Bool?)? = nil,
        _ body: @Sendable (Reports) async throws -> Void
    ) async throws {
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let reports = Reports()
        let session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(beacons: beacons, index: FakeMgmtKernel.index, logger: log.logger),
            client: client, logger: log.logger, clock: clock,
            openedHere: openedHere ?? { _, link in kernel.linkOpenedHere(link) })
        let task = Task {
            try await session.run(
                onReady: { s in reports.ready.withLock { $0 = s } },
                onLost: { cause in reports.lost.withLock { $0.append(cause) } },
                onRestored: { reports.restored.withLock { $0 += 1 } })
        }
        try await body(reports)
        task.cancel()
        try await task.value
        await client.close()
    }

    @Test func dropsEveryCentralAtOnceAndSaysRecoveringUntilNoneCameForTheQuietPeriod() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let log = RecordingLog()
        let beacon = MgmtAdvertisingTests.spec(minor: 3)
        try await Self.withSession(kernel, beacons: [beacon], clock: clock, log: log) { reports in
            #expect(await eventually { reports.ready.withLock { $0 } != nil })
            #expect(kernel.instances[1]?.flags.contains(.connectable) == true)
            // A central that connects again as soon as it is dropped, eight times.
            for round in 1...8 {
                #expect(kernel.centralConnects(Self.phone, to: 1))
                #expect(kernel.pauses == round)  // paused by the connection (the session may already have resumed it)
                #expect(await eventually { kernel.links.isEmpty && kernel.pausedInstances.isEmpty })
                #expect(await eventually { clock.sleeperCount == round })
            }
            #expect(kernel.opcodes.filter { $0 == .disconnect }.count == 8)
            // Lost once, with the cause; not back while centrals keep coming.
            let lost = reports.lost.withLock { $0 }
            #expect(lost.count == 1)
            #expect(lost.first?.contains("a central (4A:11:22:33:44:55) connected to hci0") == true)
            #expect(reports.restored.withLock { $0 } == 0)
            // Logged, rate-limited: the first 5 in a minute.
            #expect(log.messages.filter { $0.contains("a central (4A:11:22:33:44:55) connected") }.count == 5)
            clock.advance(by: MgmtAdvertisingSession.quietPeriod)
            #expect(await eventually { reports.restored.withLock { $0 } == 1 })
            #expect(log.messages.contains { $0.contains("(3 connection(s) not logged)") })
            // The instance was never removed or moved: the kernel resumed it on disconnection.
            #expect(kernel.instances[1]?.owner == "test")
        }
    }

    @Test func aCentralThatLeavesByItselfEndsThePauseToo() async throws {
        let kernel = FakeMgmtKernel()
        kernel.unansweredOpcodes = [.disconnect]  // the kernel's queue is stuck: the central leaves first
        let clock = ManualClock()
        let log = RecordingLog()
        try await Self.withSession(kernel, beacons: [MgmtAdvertisingTests.spec(minor: 3)], clock: clock, log: log) {
            reports in
            #expect(await eventually { reports.ready.withLock { $0 } != nil })
            kernel.centralConnects(Self.phone, to: 1)
            #expect(await eventually { reports.lost.withLock { $0.count } == 1 })
            kernel.centralDisconnects(Self.phone)
            // The Disconnect times out (5 s, real time) only after the central left: the link is
            // down either way, and the status comes back after the quiet period.
            #expect(await eventually { clock.sleeperCount >= 1 })
            clock.advance(by: MgmtAdvertisingSession.quietPeriod)
            #expect(await eventually { reports.restored.withLock { $0 } == 1 })
        }
    }

    @Test func leavesLinksTheBoxMadeAndLinksToOtherProgramsWhenNoBeaconOfOursIsConnectable() async throws {
        // A non-connectable beacon (non-resolvable address) on an adapter that is not
        // connectable: a connection cannot be to it, so it is none of ibeacon's business.
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let log = RecordingLog()
        var spec = MgmtAdvertisingTests.spec(minor: 3)
        spec.address = .nonResolvable(BDAddress("3A:11:22:33:44:55")!)
        kernel.otherProgramAdds(1, flags: [.connectable])
        try await Self.withSession(kernel, beacons: [spec], clock: clock, log: log) { reports in
            #expect(await eventually { reports.ready.withLock { $0 } != nil })
            #expect(kernel.instances[2]?.flags.contains(.connectable) == false)
            // A central connects to another program's connectable advertisement (none of ours
            // is connectable), and the box connects to a keyboard.
            #expect(kernel.centralConnects(Self.phone, to: 1))
            let keyboard = MgmtLink(BDAddress("00:11:22:33:44:55")!, MgmtDeviceFound.lePublicAddress)
            kernel.hostConnects(keyboard)
            // Events are handled in order: once the power cycle after them is handled, so were they.
            let adds = kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count
            kernel.powerOff()
            kernel.powerOn()
            #expect(
                await eventually { kernel.opcodes.filter { $0 == .addExtendedAdvertisingParameters }.count == adds + 1 }
            )
            #expect(kernel.links == [Self.phone, keyboard])
            #expect(!kernel.opcodes.contains(.disconnect))
            #expect(!reports.lost.withLock { $0 }.contains { $0.contains("central") })
        }
    }

    /// Kernels before 5.14 (Debian 11's 5.10) send Device Connected without the "initiated"
    /// flag, for a central's link and the box's own alike. With our beacon connectable (the
    /// guard active), the box's link to its keyboard stays up and the phone's is dropped: on
    /// 5.10 by asking the kernel who opened it, on 6.1 by the flag as well.
    @Test(arguments: [false, true])
    func theBoxsOwnLinkIsNeverDroppedWhetherOrNotTheKernelSaysWhoOpenedIt(reportsInitiator: Bool) async throws {
        let kernel = FakeMgmtKernel()
        kernel.reportsInitiator = reportsInitiator
        let clock = ManualClock()
        let log = RecordingLog()
        let keyboard = MgmtLink(BDAddress("00:11:22:33:44:55")!, MgmtDeviceFound.lePublicAddress)
        try await Self.withSession(kernel, beacons: [MgmtAdvertisingTests.spec(minor: 3)], clock: clock, log: log) {
            reports in
            #expect(await eventually { reports.ready.withLock { $0 } != nil })
            #expect(kernel.instances[1]?.flags.contains(.connectable) == true)
            kernel.hostConnects(keyboard)
            #expect(kernel.centralConnects(Self.phone, to: 1))
            #expect(await eventually { kernel.links == [keyboard] })
            #expect(kernel.opcodes.filter { $0 == .disconnect }.count == 1)
            #expect(reports.lost.withLock { $0 }.allSatisfy { $0.contains("4A:11:22:33:44:55") })
            #expect(!log.messages.contains { $0.contains("00:11:22:33:44:55") && !$0.contains("leaving it up") })
        }
    }

    /// When the kernel cannot be asked (no HCI socket) a link without the flag is left up and
    /// the log says why: dropping the box's own link is the worse mistake.
    @Test func aLinkOfUnknownOriginIsLeftUpWithAWarning() async throws {
        let kernel = FakeMgmtKernel()
        kernel.reportsInitiator = false
        let clock = ManualClock()
        let log = RecordingLog()
        let keyboard = MgmtLink(BDAddress("00:11:22:33:44:55")!, MgmtDeviceFound.lePublicAddress)
        let cannotTell: @Sendable (MgmtIndex, MgmtLink) -> Bool? = { _, _ in nil }
        try await Self.withSession(
            kernel, beacons: [MgmtAdvertisingTests.spec(minor: 3)], clock: clock, log: log, openedHere: cannotTell
        ) { reports in
            #expect(await eventually { reports.ready.withLock { $0 } != nil })
            kernel.hostConnects(keyboard)
            #expect(await eventually { log.messages.contains { $0.contains("cannot tell which side opened") } })
            #expect(kernel.links == [keyboard])
            #expect(!kernel.opcodes.contains(.disconnect))
        }
    }
}
