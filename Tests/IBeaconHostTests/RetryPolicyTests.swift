import IBeaconTestSupport
import Synchronization
import Testing

@testable import IBeaconHost

private struct Refused: Error, Equatable {
    var attempt: Int
}

/// Runs `body` in a task and ends every wait it makes on `clock` by advancing the clock to the
/// sleeper's deadline. Returns the outcome and the waits, in order. No real sleeping: the clock
/// moves only here.
func advancingThroughWaits<T: Sendable>(
    _ clock: ManualClock, _ body: @escaping @Sendable () async throws -> T
) async -> (result: Result<T, any Error>, waits: [Duration]) {
    let task = Task { try await body() }
    let finished = Atomic(false)
    let watcher = Task {
        _ = await task.result
        finished.store(true, ordering: .relaxed)
    }
    var waits: [Duration] = []
    while true {
        let waiting = await eventually(within: 10) { clock.sleeperCount >= 1 || finished.load(ordering: .relaxed) }
        if !waiting || finished.load(ordering: .relaxed) { break }
        // Only this loop moves the clock, so the sleeper's deadline is the wait it asked for.
        guard let deadline = clock.nextDeadline else { continue }
        let wait = deadline.offset - clock.now.offset
        waits.append(wait)
        clock.advance(by: wait)
    }
    task.cancel()  // only if it hangs without waiting on the clock
    await watcher.value
    return (await task.result, waits)
}

/// Runs `policy` with an attempt that fails until attempt `succeedOn` (1-based; nil: always
/// fails). Returns the clock time of each attempt, the delays `retrying` was told, the waits,
/// and the outcome.
private func drive(
    _ policy: RetryPolicy, succeedOn: Int?, retryWhile: @escaping @Sendable (Int) -> Bool = { _ in true }
) async throws -> (attempts: [Duration], told: [Duration], waits: [Duration], result: Result<Int, any Error>) {
    let clock = ManualClock()
    let attempts = Mutex<[Duration]>([])
    let told = Mutex<[Duration]>([])
    let (result, waits) = await advancingThroughWaits(clock) {
        let (value, elapsed) = try await policy.run(on: clock) {
            let n = attempts.withLock {
                $0.append(clock.now.offset)
                return $0.count
            }
            if let succeedOn, n >= succeedOn { return n }
            throw Refused(attempt: n)
        } retrying: { error, delay, failures in
            #expect(failures == (error as? Refused)?.attempt, "the failures so far are counted for `retrying`")
            told.withLock { $0.append(delay) }
            return retryWhile((error as? Refused)?.attempt ?? 0)
        }
        // Measured on the clock waited on: the clock has not moved since the last attempt.
        #expect(elapsed == clock.now.offset)
        return value
    }
    return (attempts.withLock { $0 }, told.withLock { $0 }, waits, result)
}

@Suite struct RetryPolicyTests {
    @Test func aSettleTimeThenDoublingWaitsCappedAtTheMaximum() async throws {
        let policy = RetryPolicy(
            firstDelay: .milliseconds(250), maximumDelay: .seconds(2), waitsBeforeFirstAttempt: true)
        let run = try await drive(policy, succeedOn: 6)
        #expect(
            run.waits == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        #expect(
            run.attempts == [
                .milliseconds(250), .milliseconds(750), .milliseconds(1750), .milliseconds(3750), .milliseconds(5750),
                .milliseconds(7750),
            ])
        #expect(run.told == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(2), .seconds(2)])
        #expect(try run.result.get() == 6)
    }

    @Test func withoutASettleTimeTheFirstAttemptRunsAtOnce() async throws {
        let policy = RetryPolicy(
            firstDelay: .milliseconds(500), maximumDelay: .seconds(1), waitsBeforeFirstAttempt: false)
        let run = try await drive(policy, succeedOn: 4)
        #expect(run.attempts == [.zero, .milliseconds(500), .milliseconds(1500), .milliseconds(2500)])
        #expect(run.told == [.milliseconds(500), .seconds(1), .seconds(1)])
        #expect(try run.result.get() == 4)
    }

    @Test func theLastErrorIsThrownAfterTheMaximumAttempts() async throws {
        let policy = RetryPolicy(
            firstDelay: .milliseconds(250), maximumDelay: .seconds(2), maximumAttempts: 8, waitsBeforeFirstAttempt: true
        )
        let run = try await drive(policy, succeedOn: nil)
        #expect(run.attempts.count == 8)
        #expect(run.attempts.last == .milliseconds(11_750))  // "about 12 s" (Scanner.recover)
        #expect(run.told.count == 7)  // the last failure is not retried, so not announced
        #expect(throws: Refused(attempt: 8)) { try run.result.get() }
    }

    @Test func anErrorNotWorthRetryingIsThrownAtOnce() async throws {
        let policy = RetryPolicy(
            firstDelay: .milliseconds(100), maximumDelay: .seconds(2), waitsBeforeFirstAttempt: false)
        let run = try await drive(policy, succeedOn: nil, retryWhile: { $0 < 3 })
        #expect(run.attempts == [.zero, .milliseconds(100), .milliseconds(300)])
        #expect(throws: Refused(attempt: 3)) { try run.result.get() }
    }

    @Test func cancellingDuringAWaitEndsItWithoutAnotherAttempt() async throws {
        let clock = ManualClock()
        let attempts = Atomic(0)
        let policy = RetryPolicy(firstDelay: .seconds(1), maximumDelay: .seconds(2), waitsBeforeFirstAttempt: false)
        let task = Task {
            try await policy.run(on: clock) {
                attempts.add(1, ordering: .relaxed)
                throw Refused(attempt: 1)
            } retrying: { _, _, _ in
                true
            }
        }
        #expect(await eventually(within: 10) { clock.sleeperCount == 1 })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(attempts.load(ordering: .relaxed) == 1)
        #expect(clock.now.offset == .zero)
    }
}

/// `RetryPolicy.Delays`: the schedule taken one wait at a time, by a loop on a thread of its own
/// (the MQTT client's reconnects) that cannot `run`.
@Suite struct RetryPolicyDelaysTests {
    @Test func theWaitsDoubleUpToTheMaximumAndStartAgainAfterAReset() {
        var delays = RetryPolicy(firstDelay: .seconds(1), maximumDelay: .seconds(30)).delays()
        #expect(delays.upcoming == .seconds(1))
        let taken = (0..<7).map { _ in delays.next() }
        #expect(taken == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
        delays.reset()
        #expect(delays.next() == .seconds(1))
        #expect(delays.next() == .seconds(2))
    }
}
