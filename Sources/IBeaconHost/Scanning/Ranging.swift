import IBeaconCore
import Synchronization

extension BeaconRanger {
    /// Records the report `s` heard at source time `t` (`record(beacon:address:rssi:at:)`).
    public mutating func record(_ s: Sighting, at t: Double) {
        record(beacon: s.beacon, address: s.address, rssi: s.rssi, at: t)
    }
}

/// Ranging on any `SightingSource` (a receiver, the kernel, a capture): every report that
/// `includes` accepts goes to a `BeaconRanger`, and each `RangingUpdate` it makes — one per
/// second of source time, as Core Location's `didRangeBeacons` — is handed to `updates` as soon
/// as it is made. What `ibeacon scan` shows and prints, and what a publisher sends on.
///
/// `updates` runs on the source's receive path (a transport's reader thread, or while a
/// capture is read as fast as the disk allows), under the ranger's lock: it must be quick
/// (append to a buffer, hand over to a task). `tick` runs about once a second of source time
/// after the updates due by then, with the latest update (for a display), and may stop the run.
public struct RangingRun: Sendable {
    public var configuration: BeaconRanger.Configuration
    public var includes: @Sendable (Sighting) -> Bool
    /// Source time at which the run stops (`--duration`); nil: until the source ends.
    public var deadline: Double?
    public var updates: @Sendable ([RangingUpdate]) -> Void
    public var tick: @Sendable (_ time: Double, _ latest: RangingUpdate?) async throws -> ScanControl

    public init(
        configuration: BeaconRanger.Configuration = .init(), deadline: Double? = nil,
        includes: @escaping @Sendable (Sighting) -> Bool = { $0.beacon != nil },
        updates: @escaping @Sendable ([RangingUpdate]) -> Void,
        tick: @escaping @Sendable (_ time: Double, _ latest: RangingUpdate?) async throws -> ScanControl = { _, _ in
            .proceed
        }
    ) {
        self.configuration = configuration
        self.deadline = deadline
        self.includes = includes
        self.updates = updates
        self.tick = tick
    }

    /// How a run ended: the ranger as it was at the end (`reports`, `beaconsHeard`,
    /// `othersHeard` for a summary), the source time reached, and the error that ended it, if
    /// any (the updates made until then were delivered, and a last one for the second in
    /// progress).
    public struct Outcome: Sendable {
        public var ranger: BeaconRanger
        public var time: Double
        public var failure: (any Error)?
    }

    private struct State: Sendable {
        var ranger: BeaconRanger
        var latest: RangingUpdate?

        /// Hands the updates the ranger made to `deliver`; keeps the latest.
        mutating func deliver(_ deliver: ([RangingUpdate]) -> Void) {
            guard ranger.hasUpdates else { return }
            let made = ranger.takeUpdates()
            latest = made.last
            deliver(made)
        }
    }

    /// Ranges until `tick` says stop, the deadline, the end of the source, cancellation or a
    /// failure; the source is left open (the caller closes it).
    public func run(on source: any SightingSource) async -> Outcome {
        let state = Mutex(State(ranger: BeaconRanger(configuration)))
        let (includes, deadline, updates, tick) = (self.includes, self.deadline, self.updates, self.tick)
        var failure: (any Error)?
        do {
            // The batch that reaches the deadline is ranged, then the run stops (a live scan's
            // clock includes setting the controller up).
            try await source.scan(
                ScanRequest(
                    tickInterval: .seconds(1), deadline: deadline,
                    receive: { sightings, t in
                        state.withLock { state in
                            for s in sightings where includes(s) { state.ranger.record(s, at: t) }
                            state.ranger.advance(to: t)
                            state.deliver(updates)
                        }
                        return .proceed
                    },
                    tick: { t in
                        let latest = state.withLock { state in
                            state.ranger.advance(to: t)
                            state.deliver(updates)
                            return state.latest
                        }
                        return try await tick(t, latest)
                    }))
        } catch {
            failure = error
        }
        return state.withLock { state in
            state.ranger.finish(at: state.ranger.time)
            state.deliver(updates)
            return Outcome(ranger: state.ranger, time: state.ranger.time, failure: failure)
        }
    }
}
