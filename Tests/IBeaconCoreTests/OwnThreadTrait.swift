import Dispatch
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
        try await withTaskExecutorPreference(SerialThreadExecutor.shared) { try await function() }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// `@Suite(.ownThread)`: see `OwnThreadTrait`.
    static var ownThread: Self { Self() }
}

/// A task executor on one serial dispatch queue, which libdispatch serves with its own thread,
/// outside the cooperative pool.
final class SerialThreadExecutor: TaskExecutor {
    static let shared = SerialThreadExecutor()
    private let queue = DispatchQueue(label: "ibeacon.tests.cpu-bound")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
