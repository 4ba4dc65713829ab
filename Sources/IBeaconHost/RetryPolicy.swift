/// The one back-off schedule of the loops that wait for something to come back: re-applying
/// advertising after a reset (`AdvertisingSession`), reconnecting a lost link
/// (`AdvertisingSession`), starting a scan again (`Scanner.recover`), putting kernel advertising
/// instances back (`MgmtAdvertisingSession`), reconnecting to the MQTT broker
/// (`MosquittoConnection`, through `Delays`). The waits double from `firstDelay` up to
/// `maximumDelay` and are slept on an injected clock, so a test drives them with a
/// `ManualClock` instead of sleeping.
package struct RetryPolicy: Sendable {
    /// The first wait.
    var firstDelay: Duration
    /// The longest wait; doubling stops there.
    var maximumDelay: Duration
    /// Attempts made before the last error is thrown; nil tries until the task is cancelled.
    var maximumAttempts: Int?
    /// Whether the first attempt waits `firstDelay` too (a settle time after a reset, so the
    /// kernel's own initialisation of the adapter has finished) instead of running at once.
    var waitsBeforeFirstAttempt: Bool

    package init(
        firstDelay: Duration, maximumDelay: Duration, maximumAttempts: Int? = nil, waitsBeforeFirstAttempt: Bool = false
    ) {
        self.firstDelay = firstDelay
        self.maximumDelay = maximumDelay
        self.maximumAttempts = maximumAttempts
        self.waitsBeforeFirstAttempt = waitsBeforeFirstAttempt
    }

    /// The schedule's waits one after another: `run` sleeps them, and a loop on a thread of its
    /// own that cannot `run` (the MQTT client's) takes them with `next()`.
    package struct Delays: Sendable {
        let policy: RetryPolicy
        /// The wait `next()` returns.
        package private(set) var upcoming: Duration

        /// The upcoming wait; the one after is twice as long, up to `maximumDelay`.
        package mutating func next() -> Duration {
            defer { upcoming = min(upcoming * 2, policy.maximumDelay) }
            return upcoming
        }

        /// Starts again from `firstDelay` (after a success).
        package mutating func reset() { upcoming = policy.firstDelay }
    }

    /// The waits, from `firstDelay` on.
    package func delays() -> Delays { Delays(policy: self, upcoming: firstDelay) }

    /// Runs `attempt` until it returns, waiting on `clock` before it (when
    /// `waitsBeforeFirstAttempt`) and between tries. After a failure, `retrying(error,
    /// nextDelay, failures)` (failures so far, this one included) decides — and logs — whether
    /// to try again; when it says no, or after
    /// `maximumAttempts`, that error is thrown. A cancelled task throws `CancellationError`
    /// before the next attempt or from the wait. Returns the value and the time `clock` says
    /// passed since the call.
    func run<T, C: Clock<Duration>>(
        on clock: C,
        _ attempt: () async throws -> T,
        retrying: (_ error: any Error, _ nextDelay: Duration, _ failures: Int) async -> Bool
    ) async throws -> (value: T, elapsed: Duration) {
        let started = clock.now
        var delays = delays()
        var attempts = 0
        if waitsBeforeFirstAttempt { try await clock.sleep(for: delays.next()) }
        while true {
            try Task.checkCancellation()
            do {
                let value = try await attempt()
                return (value, started.duration(to: clock.now))
            } catch {
                attempts += 1
                if let maximumAttempts, attempts >= maximumAttempts { throw error }
                guard await retrying(error, delays.upcoming, attempts) else { throw error }
            }
            try await clock.sleep(for: delays.next())
        }
    }
}
