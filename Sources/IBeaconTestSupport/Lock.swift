import Synchronization

/// A lock with `NSLock`'s `withLock`, without Foundation, for classes whose state it guards.
final class Lock: Sendable {
    private let mutex = Mutex(())

    func withLock<T>(_ body: () throws -> T) rethrows -> T {
        try mutex.withLock { _ in try body() }
    }
}
