import IBeaconTestSupport
import Testing

@Suite struct ManualClockTests {
    @Test func sleepersWakeOnlyWhenTheClockReachesThemInDeadlineOrder() async throws {
        let clock = ManualClock()
        let order = Order()
        let late = Task {
            try await clock.sleep(for: .seconds(2))
            await order.append("late")
        }
        let early = Task {
            try await clock.sleep(for: .seconds(1))
            await order.append("early")
        }
        #expect(await eventually { clock.sleeperCount == 2 })
        #expect(clock.nextDeadline == ManualClock.Instant(offset: .seconds(1)))
        clock.advance(by: .milliseconds(999))
        #expect(clock.sleeperCount == 2)
        clock.advance(by: .milliseconds(1))
        try await early.value
        #expect(clock.sleeperCount == 1)
        #expect(clock.nextDeadline == ManualClock.Instant(offset: .seconds(2)))
        #expect(await order.items == ["early"])
        clock.advance(by: .seconds(5))
        try await late.value
        #expect(await order.items == ["early", "late"])
        #expect(clock.now == ManualClock.Instant(offset: .seconds(6)))
    }

    @Test func aPastDeadlineReturnsAtOnce() async throws {
        let clock = ManualClock()
        clock.advance(by: .seconds(1))
        try await clock.sleep(until: ManualClock.Instant(offset: .milliseconds(500)))
        try await clock.sleep(for: .zero)
        #expect(clock.sleeperCount == 0)
    }

    @Test func cancellingASleeperThrowsAndRemovesIt() async {
        let clock = ManualClock()
        let sleeper = Task { try await clock.sleep(for: .seconds(60)) }
        #expect(await eventually { clock.sleeperCount == 1 })
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }
}

private actor Order {
    var items: [String] = []
    func append(_ s: String) { items.append(s) }
}
