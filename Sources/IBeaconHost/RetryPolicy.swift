/// The one back-off schedule of the loops that wait for a controller to come back: re-applying
/// advertising after a reset (`AdvertisingSession`), reconnecting a lost link
/// (`AdvertisingSession`), starting a scan again (`Scanner.recover`), putting kernel advertising
/// instances back (`MgmtAdvertisingSession`). The waits double from
/// `firstDelay` up to `maximumDelay` and are slept on an injected clock, so a test drives them
/// with a `ManualClock` instead of sleeping.
struct RetryPolicy: Sendable {
    /// The first wait.
    var firstDelay: Duration
    /// The longest wait; doubling stops there.
    var maximumDelay: Duration
    /// Attempts made before the last error is thrown; nil tries until the task is cancelled.
    var maximumAttempts: Int?
    /// Whether the first attempt waits `firstDelay` too (a settle time after a reset, so the
    /// kernel's own initialisation of the adapter has finished) instead of running at once.
    var waitsBeforeFirstAttempt: Bool

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
        var delay = firstDelay
        var attempts = 0
        if waitsBeforeFirstAttempt {
            try await clock.sleep(for: delay)
            delay = min(delay * 2, maximumDelay)
        }
        while true {
            try Task.checkCancellation()
            do {
                let value = try await attempt()
                return (value, started.duration(to: clock.now))
            } catch {
                attempts += 1
                if let maximumAttempts, attempts >= maximumAttempts { throw error }
                guard await retrying(error, delay, attempts) else { throw error }
            }
            try await clock.sleep(for: delay)
            delay = min(delay * 2, maximumDelay)
        }
    }
}
