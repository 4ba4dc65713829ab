import IBeaconCore
import Synchronization

/// New beacons for an advertising session that is running (`advertise --mqtt-control`): the
/// session takes them between its other work, puts them on the air in place of the old ones
/// (raw HCI: the controller reprogrammed on the same connection; the kernel: each changed
/// instance added again under its own number, which updates it in place), and answers. A
/// refused change leaves the previous beacons on the air. A change the session has not taken
/// within `limit` (the controller lost and being reconnected) is withdrawn and answered with
/// `NotTaken`: it never goes on the air later, when nobody waits for it any more.
public final class AdvertisingUpdates: Sendable {
    /// One change waiting: every beacon of the request, in order, nil for one kept off the air.
    struct Pending: Sendable {
        var id: UInt64
        var beacons: [BeaconSpec?]
        var done: @Sendable (Result<AdvertisingStatus, any Error>) -> Void
    }

    /// The session did not take a change in time: nothing of it reached the air.
    public struct NotTaken: Error, CustomStringConvertible {
        public let limit: Duration
        public var description: String {
            "the controller did not take the change within \(limit.formattedSeconds) (it is lost and being reconnected,"
                + " or busy); nothing changed on the air, send the command again once the beacon is back"
        }
    }

    private let pending = Mutex<(next: UInt64, waiting: [Pending])>((0, []))
    /// Wakes the session (set by it while it runs).
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)
    private let limit: Duration

    /// `limit`: how long a change may wait for the session to take it.
    public init(limit: Duration = .seconds(3)) { self.limit = limit }

    /// Puts `beacons` on the air (nil: that beacon off); returns the status once they are on,
    /// throws when the controller or the kernel refused them (the previous ones are back), or
    /// `NotTaken` when the session did not take the change within the limit.
    public func apply(_ beacons: [BeaconSpec?]) async throws -> AdvertisingStatus {
        try await withCheckedThrowingContinuation { continuation in
            let id = pending.withLock { p in
                defer { p.next += 1 }
                p.waiting.append(Pending(id: p.next, beacons: beacons, done: { continuation.resume(with: $0) }))
                return p.next
            }
            wake.withLock { $0 }?()
            // Holds self until the limit: every change is answered, even if nothing else keeps it.
            Task {
                try? await Task.sleep(for: limit)
                withdraw(id)?.done(.failure(NotTaken(limit: limit)))
            }
        }
    }

    /// Removes change `id` if the session has not taken it yet.
    private func withdraw(_ id: UInt64) -> Pending? {
        pending.withLock { p in
            guard let i = p.waiting.firstIndex(where: { $0.id == id }) else { return nil }
            return p.waiting.remove(at: i)
        }
    }

    /// The session is ready to take changes; `wake` is how to tell it one waits.
    func attach(_ wake: @escaping @Sendable () -> Void) {
        self.wake.withLock { $0 = wake }
        if !pendingIsEmpty { wake() }
    }

    /// The session ended: changes wait for the next one, at most the limit.
    func detach() { wake.withLock { $0 = nil } }

    /// No change waits to be taken.
    var pendingIsEmpty: Bool { pending.withLock { $0.waiting.isEmpty } }

    /// Every change waiting, oldest first.
    func take() -> [Pending] {
        pending.withLock { p in
            defer { p.waiting.removeAll() }
            return p.waiting
        }
    }
}
