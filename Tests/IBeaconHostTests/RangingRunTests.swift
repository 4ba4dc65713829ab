import IBeaconCore
import IBeaconTestSupport
import Logging
import Synchronization
import Testing

@testable import IBeaconHost

/// `RangingRun` on a live source (the kernel path against the fake kernel) whose time is a
/// `ManualClock`: one update per second of that clock, the mean of the second's reports, the
/// beacon unknown after a silent second and gone after `forgetAfter`, the run stopped by `tick`.
@Suite struct RangingRunTests {
    @Test func oneUpdatePerSecondOfTheInjectedClock() async throws {
        let kernel = FakeMgmtKernel()
        let clock = ManualClock()
        let client = MgmtClient(transport: kernel, logger: Logger(label: "test"), defaultTimeout: .seconds(5))
        await client.start()
        let source = MgmtSightingSource(client: client, index: MgmtIndex(0), clock: clock, logger: Logger(label: "t"))
        let updates = Mutex<[RangingUpdate]>([])
        let ticks = Mutex<[Double]>([])
        let heard = Atomic<Int>(0)
        let run = RangingRun(
            configuration: .init(forgetAfter: 3),
            includes: { _ in
                heard.add(1, ordering: .relaxed)
                return true
            },
            updates: { made in updates.withLock { $0 += made } },
            tick: { t, _ in
                ticks.withLock { $0.append(t) }
                return t >= 5 ? .stop : .proceed
            })
        let task = Task { await run.run(on: source) }
        #expect(await eventually { kernel.monitors.count == 1 && clock.sleeperCount == 1 })
        clock.advance(by: .milliseconds(250))
        #expect(kernel.advertisementHeard(MgmtSightingSourceTests.report(rssi: -60)))
        clock.advance(by: .milliseconds(250))
        #expect(kernel.advertisementHeard(MgmtSightingSourceTests.report(rssi: -70)))
        #expect(await eventually { heard.load(ordering: .relaxed) == 2 })
        #expect(updates.withLock { $0 }.isEmpty)  // second 0 is not over yet
        // Each tick handled before the clock moves again.
        for second in 1...5 {
            clock.advance(by: second == 1 ? .milliseconds(500) : .seconds(1))
            #expect(
                await eventually { ticks.withLock { $0.count } == second && (second == 5 || clock.sleeperCount == 1) })
        }
        let outcome = await task.value
        #expect(outcome.failure == nil)
        let made = updates.withLock { $0 }
        // Second 0: both reports; 1 and 2: unknown; the update due at 4 is empty (silent 3.5 s).
        #expect(made.map(\.second) == [0, 1, 2, 3])
        #expect(made.map(\.beacons.count) == [1, 1, 1, 0])
        #expect(made[0].beacons[0].rssi == -65 && made[0].beacons[0].count == 2)
        #expect(made[0].beacons[0].identity?.major == 12)
        #expect(made[1].beacons[0].proximity == .unknown && made[1].beacons[0].rssi == nil)
        #expect(outcome.ranger.reports == 2 && outcome.ranger.beaconsHeard.count == 1)
        #expect(kernel.monitors.isEmpty)
        await source.close()
    }
}
