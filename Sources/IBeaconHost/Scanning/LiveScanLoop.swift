/// What the scan loops of live sources share (`ControllerSightingSource`,
/// `MgmtSightingSource`): the time origin their callbacks are given seconds from and a ticker
/// that wakes the loop every `tickInterval`, both on the source's clock (a `ManualClock` in
/// tests), and the way out — the loop ends (a stop, the end of the
/// link, a failure, cancellation), the ticker stops, the source turns its scanning off, and only
/// then is the failure rethrown. Each source keeps its protocol: what it turns on and off, which
/// events it reads and how it recovers.
struct LiveScanLoop: Sendable {
    let clock: any Clock<Duration>
    private let elapsed: @Sendable () -> Duration

    init(clock: any Clock<Duration>) {
        self.clock = clock
        elapsed = stopwatch(on: clock)
    }

    /// Seconds since the scan started.
    @Sendable func now() -> Double { elapsed().seconds }

    /// Runs `loop` with a ticker calling `wake` every `tickInterval`, then `cleanup` however
    /// `loop` ended (given the error that ended it, if any); rethrows that error.
    func run(
        tickInterval: Duration,
        wake: @escaping @Sendable () -> Void,
        loop: () async throws -> Void,
        cleanup: (_ failure: (any Error)?) async -> Void
    ) async throws {
        let clock = self.clock
        let ticker = Task {
            while !Task.isCancelled {
                do { try await clock.sleep(for: tickInterval) } catch { return }
                wake()
            }
        }
        var failure: (any Error)?
        do {
            try await loop()
        } catch {
            failure = error
        }
        ticker.cancel()
        await cleanup(failure)
        if let failure { throw failure }
    }
}
