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

extension Optional where Wrapped == AdvertiseControl {
    /// `advertising` run with the commands handled alongside, or alone without `--mqtt-control`.
    public func running(_ advertising: @Sendable () async throws -> Void) async throws {
        if let control = self { try await control.running(advertising) } else { try await advertising() }
    }
}
