import IBeaconCore
import Logging

/// `advertise --mqtt --mqtt-control`, put together for the CLI: the beacons' profiles read, the
/// commands of the publisher handed to a `BeaconSteering`, whose changes go on the air through
/// the advertising session's `AdvertisingUpdates`, into the profiles, and out as settings,
/// events and the beacons' status.
public final class AdvertiseControl: Sendable {
    public let steering: BeaconSteering
    public let updates: AdvertisingUpdates

    /// `paths` and `specs`: the profiles given and what `advertise` made of each, in order.
    public init(paths: [String], specs: [BeaconSpec], status: AdvertiseStatus, logger: Logger) throws {
        let publisher = status.publisher
        let beacons = try zip(paths, specs).map { try BeaconSteering.Beacon(path: $0, spec: $1) }
        let updates = AdvertisingUpdates()
        self.updates = updates
        steering = BeaconSteering(
            beacons: beacons, layout: publisher.layout, air: { try await updates.apply($0) }, logger: logger,
            wallClock: status.wallClock,
            onEvent: { publisher.publishEvent(json: $0.json) },
            onSettings: { publisher.publishBeaconSettings($0, $1) },
            onApplied: { beacons, applied in status.replace(beacons.map(\.onAir), status: applied) })
        let steering = self.steering
        publisher.acceptCommands(for: beacons.map(\.name)) { topic, payload, retained in
            steering.submit(topic: topic, payload: payload, retained: retained)
        }
        status.replace(steering.onAir, status: nil)
    }

    /// What goes on the air at the start: the beacons whose profiles do not say `"advertising": false`.
    public var initialBeacons: [BeaconSpec] { steering.onAir.compactMap { $0 } }

    /// Runs `advertising` (which reports ready through `ready()`) with the commands handled
    /// alongside, until it ends.
    public func running(_ advertising: @Sendable () async throws -> Void) async throws {
        let steering = self.steering
        let handling = Task { await steering.run() }
        defer { handling.cancel() }
        try await advertising()
    }

    /// The beacons are on the air: their settings are published.
    public func ready() { steering.publishSettings() }
}

extension Optional where Wrapped == AdvertiseStatus {
    /// With `enabled` (`--mqtt-control`), starts taking commands; then connects to the broker
    /// (so the first message, a retained command replayed, already meets the steering). The
    /// beacons to put on the air first: those not switched off in their profiles.
    public func startingControl(_ enabled: Bool, paths: [String], specs: [BeaconSpec], logger: Logger) throws
        -> [BeaconSpec]
    {
        guard let status = self else { return specs }
        defer { status.connect() }
        guard enabled else { return specs }
        let control = try AdvertiseControl(paths: paths, specs: specs, status: status, logger: logger)
        status.control.withLock { $0 = control }
        return control.initialBeacons
    }

    /// `adapter.advertise`, with the commands handled alongside (`--mqtt-control`): changes
    /// reach the advertising through `request.updates`, and the settings are published once the
    /// beacons are first on the air.
    public func advertise(
        on adapter: any Adapter, _ request: AdvertisingRequest,
        onReady: @escaping @Sendable (AdvertisingStatus) -> Void, onLost: @escaping @Sendable (String) -> Void,
        onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws {
        guard let control = self?.control.withLock({ $0 }) else {
            return try await adapter.advertise(request, onReady: onReady, onLost: onLost, onRestored: onRestored)
        }
        var steered = request
        steered.updates = control.updates
        let request = steered
        try await control.running {
            try await adapter.advertise(
                request,
                onReady: { status in
                    onReady(status)
                    control.ready()
                }, onLost: onLost, onRestored: onRestored)
        }
    }
}
