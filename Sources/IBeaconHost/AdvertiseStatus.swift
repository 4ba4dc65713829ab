import IBeaconCore
import Synchronization

/// `advertise --mqtt`: each beacon's status, retained, fed by the adapter's callbacks
/// (`update` from onReady, onLost, onRestored); available once the beacons are on the air.
public final class AdvertiseStatus: Sendable {
    let publisher: MQTTPublisher
    /// Every beacon by name, what it advertises, and whether it is switched on (`--mqtt-control`).
    let beacons: Mutex<[(name: String, spec: BeaconSpec, on: Bool)]>
    let device: String
    let wallClock: @Sendable () -> Double
    /// The steering of `--mqtt-control`, once started.
    let control = Mutex<AdvertiseControl?>(nil)
    /// The state of all beacons, their TX power and addresses (by name), and the latest loss:
    /// when (UTC) and why.
    let state = Mutex<
        (
            state: BeaconRunState, txPower: [String: Int?], addresses: [String: String?], lastRecovery: String?,
            cause: String?
        )
    >((.stopped, [:], [:], nil, nil))

    public init(
        publisher: MQTTPublisher, specs: [BeaconSpec], device: String, wallClock: @escaping @Sendable () -> Double
    ) {
        self.publisher = publisher
        let named = specs.map { (name: Self.name(of: $0), spec: $0, on: true) }
        self.beacons = Mutex(named)
        self.device = device
        self.wallClock = wallClock
        publisher.addBeacons(named.map(\.name))
    }

    /// Starts connecting to the broker.
    public func connect() { publisher.start() }

    /// A beacon's name: its profile's (`Profile.name(ofFile:)` of its label, the file name).
    public static func name(of spec: BeaconSpec) -> String { Profile.name(ofFile: spec.label) }

    /// New beacons (`--mqtt-control`): what each advertises, nil while switched off; then the
    /// status of what is on the air now.
    public func replace(_ specs: [BeaconSpec?], status: AdvertisingStatus?) {
        beacons.withLock { b in
            for i in b.indices where i < specs.count {
                if let spec = specs[i] { b[i].spec = spec }
                b[i].on = specs[i] != nil
            }
        }
        // Before the first status (the start), nothing is published yet.
        let current = state.withLock { $0.state }
        if current != .stopped || status != nil { update(status != nil ? .advertising : current, status: status) }
    }

    /// The beacons are on the air (`status`), being put back after `cause`, or stopped.
    /// A status, when given, replaces each beacon's TX power and address; without one they stay.
    public func update(_ newState: BeaconRunState, status: AdvertisingStatus? = nil, cause: String? = nil) {
        let now = iso8601(unixSeconds: wallClock(), milliseconds: true)
        let s = state.withLock { s in
            s.state = newState
            if let status {
                for b in status.beacons {
                    s.txPower[Self.name(of: b.spec)] = b.txPower.map { Int($0) }
                    s.addresses[Self.name(of: b.spec)] = b.address?.description
                }
            }
            if let cause {
                s.lastRecovery = now
                s.cause = cause
            }
            return s
        }
        for b in beacons.withLock({ $0 }) {
            publisher.publishBeaconStatus(
                AdvertisedBeaconStatus(
                    name: b.name, state: b.on ? s.state : .stopped, beacon: b.spec.beacon,
                    intervalMilliseconds: b.spec.intervalMilliseconds, txPower: s.txPower[b.name] ?? nil,
                    device: device, address: s.addresses[b.name] ?? nil, since: now, lastRecovery: s.lastRecovery,
                    lastRecoveryCause: s.cause))
        }
        // Available once the beacons' status is determined (they are on the air).
        if newState == .advertising { publisher.markAvailable() }
    }

    /// On the way out: every beacon stopped, then offline and disconnect.
    public func finish() async {
        update(.stopped)
        await publisher.close()
    }
}
