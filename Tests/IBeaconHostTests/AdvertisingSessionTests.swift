import Foundation
import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

final class Fakes: @unchecked Sendable {
    private let lock = NSLock()
    private var all: [FakeController] = []
    private var failuresLeft: Int
    let supportsExtended: Bool
    init(failFirst: Int = 0, supportsExtended: Bool = false) {
        failuresLeft = failFirst
        self.supportsExtended = supportsExtended
    }
    var count: Int { lock.withLock { all.count } }
    var latest: FakeController? { lock.withLock { all.last } }
    /// The next `n` connections fail as if the adapter were missing.
    func failNext(_ n: Int) { lock.withLock { failuresLeft = n } }
    func make() throws -> FakeController {
        try lock.withLock {
            if failuresLeft > 0 {
                failuresLeft -= 1
                throw TransportError(.noSuchAdapter(available: []), "no adapter hci0")
            }
            let f = FakeController(supportsExtended: supportsExtended)
            all.append(f)
            return f
        }
    }
}

@Suite struct AdvertisingSessionTests {
    /// A session whose waits (settle time, back-off) sleep on `clock`.
    func session(_ fakes: Fakes, clock: ManualClock = ManualClock()) -> AdvertisingSession {
        AdvertisingSession(
            advertiser: Advertiser(
                beacons: [BeaconSpec(beacon: testBeacon, label: "t.json")], mode: .auto, ownsController: true,
                logger: quietLogger),
            connect: {
                await startedClient(try fakes.make())
            },
            clock: clock, healthCheckInterval: nil, settleTime: .milliseconds(20), maximumBackoff: .milliseconds(50),
            logger: quietLogger)
    }

    /// Ends the settle time the session waits for after a reset, once it has begun to wait.
    func endSettleTime(_ clock: ManualClock) async {
        #expect(await eventually { clock.sleeperCount == 1 })
        #expect(clock.nextDeadline == clock.now.advanced(by: .milliseconds(20)))
        clock.advance(by: .milliseconds(20))
    }

    @Test func resumesAfterAnotherHostResetsTheController() async throws {
        let fakes = Fakes()
        let ready = Atomic<Int>(0)
        let recovered = Atomic<Int>(0)
        let clock = ManualClock()
        let s = session(fakes, clock: clock)
        let task = Task {
            try await s.run(
                onReady: { _ in ready.add(1, ordering: .relaxed) },
                onRecovered: { _ in recovered.add(1, ordering: .relaxed) })
        }
        #expect(await eventually { ready.load(ordering: .relaxed) == 1 })
        let fake = try #require(fakes.latest)
        #expect(fake.isAdvertising)

        fake.resetByAnotherHost()
        #expect(!fake.isAdvertising)  // the reset really stopped it
        await endSettleTime(clock)
        #expect(await eventually { recovered.load(ordering: .relaxed) == 1 && fake.isAdvertising })
        #expect(fake.legacy.data == testBeacon.advertisingData)

        task.cancel()
        try await task.value
        #expect(!fake.isAdvertising)  // cancelled: advertising turned off on the way out
    }

    @Test func resumesAfterAHardwareErrorAndAPowerUpNOP() async throws {
        let fakes = Fakes()
        let recovered = Atomic<Int>(0)
        let clock = ManualClock()
        let s = session(fakes, clock: clock)
        let task = Task {
            try await s.run(onReady: { _ in }, onRecovered: { _ in recovered.add(1, ordering: .relaxed) })
        }
        #expect(await eventually { fakes.latest?.isAdvertising == true })
        let fake = try #require(fakes.latest)

        fake.loseState()
        fake.inject(H4Packet(type: .event, body: [0x10, 0x01, 0x01]))  // Hardware Error, code 1
        await endSettleTime(clock)
        #expect(await eventually { recovered.load(ordering: .relaxed) == 1 && fake.isAdvertising })

        fake.loseState()
        fake.inject(FakeController.commandComplete(.nop, []))  // power-up NOP
        await endSettleTime(clock)
        #expect(await eventually { recovered.load(ordering: .relaxed) == 2 && fake.isAdvertising })
        task.cancel()
        try await task.value
    }

    @Test func waitsForAVanishedControllerAndResumesOnTheNewOne() async throws {
        let fakes = Fakes()
        let recovered = Atomic<Int>(0)
        let clock = ManualClock()
        let s = session(fakes, clock: clock)
        let task = Task {
            try await s.run(onReady: { _ in }, onRecovered: { _ in recovered.add(1, ordering: .relaxed) })
        }
        #expect(await eventually { fakes.latest?.isAdvertising == true })
        let first = try #require(fakes.latest)
        first.dropLink()
        // Reconnected at once; advertising is applied again after the settle time.
        await endSettleTime(clock)
        #expect(await eventually { recovered.load(ordering: .relaxed) == 1 })
        #expect(fakes.count == 2)
        #expect(fakes.latest?.isAdvertising == true)
        task.cancel()
        try await task.value
    }

    @Test func settleTimeAndReconnectionBackOffWaitOnTheInjectedClock() async throws {
        let fakes = Fakes()
        let clock = ManualClock()
        var s = session(fakes, clock: clock)
        s.settleTime = .milliseconds(250)
        s.maximumBackoff = .seconds(1)
        let recovered = Atomic<Int>(0)
        let session = s
        let task = Task {
            try await session.run(onReady: { _ in }, onRecovered: { _ in recovered.add(1, ordering: .relaxed) })
        }
        #expect(await eventually { fakes.latest?.isAdvertising == true })
        let first = try #require(fakes.latest)

        // Reset by another host: advertising comes back only when the settle time has passed.
        first.resetByAnotherHost()
        #expect(await eventually { clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(249))
        #expect(clock.sleeperCount == 1)
        #expect(!first.isAdvertising)
        clock.advance(by: .milliseconds(1))
        #expect(await eventually { recovered.load(ordering: .relaxed) == 1 && first.isAdvertising })

        // The link lost and the adapter missing twice: tried at once, after 0.5 s, then after
        // 1 s (the maximum back-off), then the settle time on the new controller.
        fakes.failNext(2)
        first.dropLink()
        for (wait, controllers) in [(Duration.milliseconds(500), 1), (.seconds(1), 1), (.milliseconds(250), 2)] {
            #expect(await eventually { clock.sleeperCount == 1 && fakes.count == controllers })
            clock.advance(by: wait - .milliseconds(1))
            #expect(clock.sleeperCount == 1)
            clock.advance(by: .milliseconds(1))
        }
        #expect(await eventually { recovered.load(ordering: .relaxed) == 2 && fakes.latest?.isAdvertising == true })
        #expect(clock.now.offset == .milliseconds(2000))
        task.cancel()
        try await task.value
    }

    @Test func aControllerMissingAtStartIsAnErrorNotARetryLoop() async throws {
        let fakes = Fakes(failFirst: 1)
        await #expect(throws: TransportError.self) { try await session(fakes).run(onReady: { _ in }) }
    }
}
