import IBeaconTestSupport
import Testing

/// Runs a CPU-bound suite on a thread of its own instead of Swift Concurrency's shared pool
/// (as wide as the machine has cores). Without it, `swift test` in parallel on two cores had
/// the estimator's simulations hold both pool threads for ~90 s, and the Host tests' tasks —
/// a controller client's replies, an advertising session's recovery — waited that long.
struct OwnThreadTrait: SuiteTrait, TestTrait, TestScoping {
    /// Every test and case of the suite gets the scope; they share the one thread, in turn.
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await withTaskExecutorPreference(OwnThreadExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// `@Suite(.ownThread)`: see `OwnThreadTrait`.
    static var ownThread: Self { Self() }
}
