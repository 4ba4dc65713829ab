import Dispatch
import Synchronization

// Waiting in tests without asserting speed, and without holding up Swift Concurrency's shared
// pool (on Linux as wide as the machine has cores, and served by the same threads as
// `DispatchQueue.global()`): a test that blocks a pool thread, or keeps one busy computing,
// stalls every other suite's tasks in the same `swift test` process.

/// Waits (bounded) until `condition` holds; returns whether it did. Asserts behaviour, not speed.
///
/// Polls every 10 ms for `seconds` of served time (see `pollServed`): a busy machine cannot make
/// a condition that does come true look false; one that never holds still fails after `seconds`
/// of prompt polling.
public func eventually(within seconds: Double = 30, _ condition: () -> Bool) async -> Bool {
    await pollServed(seconds, until: condition)
    return condition()
}

/// Polls `done` every 10 ms until it holds or `seconds` of served time have passed. A poll that
/// comes back late (the machine is loaded, or the pool was held up) counts for at most 100 ms:
/// time the process spent waiting for a CPU is not counted against what it waits for.
public func pollServed(_ seconds: Double, until done: () -> Bool) async {
    var budget = Duration.milliseconds(Int64(seconds * 1000))
    while budget > .zero, !done() {
        let before = ContinuousClock.now
        try? await Task.sleep(for: .milliseconds(10))
        budget -= min(before.duration(to: .now), .milliseconds(100))
    }
}

/// Runs `body`, or gives up after `seconds` of served time (see `pollServed`): nil then (the body
/// is left running). A hang is a failure to report, not a test run that never ends.
public func within<T: Sendable>(_ seconds: Double, _ body: @escaping @Sendable () async -> T) async -> T? {
    let once = ResumeOnce<T?>()
    return await withCheckedContinuation { (c: CheckedContinuation<T?, Never>) in
        once.set(c)
        Task { once.resume(await body()) }
        Task {
            await pollServed(seconds) { once.isResumed }
            once.resume(nil)
        }
    }
}

/// A continuation resumed by whichever comes first.
public final class ResumeOnce<T: Sendable>: Sendable {
    private let slot = Mutex<(continuation: CheckedContinuation<T, Never>?, resumed: Bool)>((nil, false))
    public init() {}
    public func set(_ c: CheckedContinuation<T, Never>) { slot.withLock { $0.continuation = c } }
    /// Whether `resume` has been called once the continuation was set.
    public var isResumed: Bool { slot.withLock { $0.resumed } }
    public func resume(_ value: T) {
        let c = slot.withLock { s in
            defer { s.continuation = nil }
            if s.continuation != nil { s.resumed = true }
            return s.continuation
        }
        c?.resume(returning: value)
    }
}

/// Opens once, for good; any number of tasks may wait for it (a child process's exit, a
/// callback that has to have run).
public final class Latch: Sendable {
    private let state = Mutex<(open: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    public init() {}

    /// Whether it has opened.
    public var isOpen: Bool { state.withLock { $0.open } }

    /// Opens the latch and resumes every waiter.
    public func open() {
        let waiters = state.withLock { s in
            s.open = true
            defer { s.waiters = [] }
            return s.waiters
        }
        for w in waiters { w.resume() }
    }

    /// Returns once the latch is open.
    public func wait() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            let open = state.withLock { s in
                if !s.open { s.waiters.append(c) }
                return s.open
            }
            if open { c.resume() }
        }
    }
}

/// Runs `body` (CPU-bound, or blocking: a semaphore, a child process) on a thread of its own and
/// returns its result, leaving the shared pool's threads to the other suites' tasks.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { done in
        // A serial queue of its own is served by a thread of its own (an overcommitting one),
        // not by the pool's.
        DispatchQueue(label: "ibeacon.tests.own-thread").async { done.resume(returning: body()) }
    }
}

/// `onOwnThread` for a body that throws.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await onOwnThread { Result(catching: { try body() }) }.get()
}

/// A task executor on one serial dispatch queue, which libdispatch serves with its own thread,
/// outside the cooperative pool: `withTaskExecutorPreference(OwnThreadExecutor.shared)` runs a
/// CPU-bound suite there (see the `.ownThread` trait of the Core tests).
public final class OwnThreadExecutor: TaskExecutor {
    public static let shared = OwnThreadExecutor()
    private let queue = DispatchQueue(label: "ibeacon.tests.cpu-bound")

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
