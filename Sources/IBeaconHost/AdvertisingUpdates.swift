import IBeaconCore
import Synchronization

/// New beacons for an advertising session that is running (`advertise --mqtt-control`): the
/// session takes them between its other work, puts them on the air in place of the old ones
/// (raw HCI: the controller reprogrammed on the same connection; the kernel: each changed
/// instance added again under its own number, which updates it in place), and answers. A
/// refused change leaves the previous beacons on the air.
public final class AdvertisingUpdates: Sendable {
    /// One change waiting: every beacon of the request, in order, nil for one kept off the air.
    struct Pending: Sendable {
        var beacons: [BeaconSpec?]
        var done: @Sendable (Result<AdvertisingStatus, any Error>) -> Void
    }

    private let pending = Mutex<[Pending]>([])
    /// Wakes the session (set by it while it runs).
    private let wake = Mutex<(@Sendable () -> Void)?>(nil)

    public init() {}

    /// Puts `beacons` on the air (nil: that beacon off); returns the status once they are on,
    /// throws when the controller or the kernel refused them (the previous ones are back).
    public func apply(_ beacons: [BeaconSpec?]) async throws -> AdvertisingStatus {
        try await withCheckedThrowingContinuation { continuation in
            pending.withLock {
                $0.append(Pending(beacons: beacons, done: { continuation.resume(with: $0) }))
            }
            wake.withLock { $0 }?()
        }
    }

    /// The session is ready to take changes; `wake` is how to tell it one waits.
    func attach(_ wake: @escaping @Sendable () -> Void) {
        self.wake.withLock { $0 = wake }
        if pending.withLock({ !$0.isEmpty }) { wake() }
    }

    /// The session ended: changes wait for the next one.
    func detach() { wake.withLock { $0 = nil } }

    /// Every change waiting, oldest first.
    func take() -> [Pending] {
        pending.withLock { p in
            defer { p.removeAll() }
            return p
        }
    }
}
