import Synchronization

/// A clock that moves only when a test calls `advance(by:)`, so what waits on it — command
/// timeouts, back-off, tickers — happens in the same order however loaded the machine is.
/// Sleepers whose deadline the clock reaches wake in deadline order; a cancelled sleeper
/// throws `CancellationError` at once, as `ContinuousClock.sleep` does.
public final class ManualClock: Clock, Sendable {
    public struct Instant: InstantProtocol, Sendable {
        /// Time since the clock was made.
        public var offset: Duration
        public init(offset: Duration) { self.offset = offset }
        public func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        public func duration(to other: Instant) -> Duration { other.offset - offset }
        public static func < (a: Instant, b: Instant) -> Bool { a.offset < b.offset }
    }

    private struct Sleeper {
        var id: UInt64
        var deadline: Instant
        var continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now = Instant(offset: .zero)
        var nextID: UInt64 = 0
        var sleepers: [Sleeper] = []
    }

    private let state = Mutex(State())

    public init() {}

    public var now: Instant { state.withLock { $0.now } }
    public var minimumResolution: Duration { .zero }

    /// How many tasks are sleeping on the clock: a test waits for this before advancing, so
    /// the sleep it means to end has begun.
    public var sleeperCount: Int { state.withLock { $0.sleepers.count } }

    /// The earliest deadline a sleeper waits for; nil when none sleeps. Advancing by
    /// `nextDeadline - now` wakes exactly that sleeper (and any with the same deadline).
    public var nextDeadline: Instant? { state.withLock { $0.sleepers.map(\.deadline).min() } }

    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        let id = state.withLock { s -> UInt64 in
            s.nextID += 1
            return s.nextID
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let resumeNow: Result<Void, any Error>? = state.withLock { s in
                    if Task.isCancelled { return .failure(CancellationError()) }
                    if deadline <= s.now { return .success(()) }
                    s.sleepers.append(Sleeper(id: id, deadline: deadline, continuation: continuation))
                    return nil
                }
                if let resumeNow { continuation.resume(with: resumeNow) }
            }
        } onCancel: {
            let cancelled = state.withLock { s -> Sleeper? in
                guard let i = s.sleepers.firstIndex(where: { $0.id == id }) else { return nil }
                return s.sleepers.remove(at: i)
            }
            cancelled?.continuation.resume(throwing: CancellationError())
        }
    }

    /// Moves the clock forward and wakes, in deadline order, every sleeper it reaches.
    public func advance(by duration: Duration) {
        let due = state.withLock { s -> [Sleeper] in
            s.now = s.now.advanced(by: duration)
            let now = s.now
            let due = s.sleepers.filter { $0.deadline <= now }.sorted { $0.deadline < $1.deadline }
            s.sleepers.removeAll { $0.deadline <= now }
            return due
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}
