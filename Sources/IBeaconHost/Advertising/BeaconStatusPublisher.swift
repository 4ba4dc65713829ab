import IBeaconCore
import Synchronization

/// `advertise --mqtt`: each beacon's status, retained, fed by the adapter's callbacks
/// (`update` from onReady, onLost, onRestored); available once the beacons are on the air.
public final class BeaconStatusPublisher: AsyncClosable {
    let publisher: MQTTPublisher
    let beacons: [(name: String, spec: BeaconSpec)]
    let device: String
    let wallClock: @Sendable () -> Double
    /// The state of all beacons, their TX power and addresses, and the latest loss: when
    /// (UTC) and why.
    let state = Mutex<
        (state: BeaconRunState, txPower: [Int?], addresses: [String?], lastRecovery: String?, cause: String?)
    >((.stopped, [], [], nil, nil))

    public init(
        publisher: MQTTPublisher, specs: [BeaconSpec], device: String, wallClock: @escaping @Sendable () -> Double
    ) {
        self.publisher = publisher
        self.beacons = specs.map { (Self.name(of: $0), $0) }
        self.device = device
        self.wallClock = wallClock
        publisher.addBeacons(beacons.map(\.name))
    }

    /// A beacon's name: its profile's (`Profile.name(ofFile:)` of its label, the file name).
    public static func name(of spec: BeaconSpec) -> String { Profile.name(ofFile: spec.label) }

    /// The beacons are on the air (`status`), being put back after `cause`, or stopped.
    /// A status, when given, replaces each beacon's TX power and address; without one they stay.
    public func update(_ newState: BeaconRunState, status: AdvertisingStatus? = nil, cause: String? = nil) {
        let now = iso8601(unixSeconds: wallClock(), milliseconds: true)
        let s = state.withLock { s in
            s.state = newState
            if let status {
                s.txPower = status.beacons.map { $0.txPower.map { Int($0) } }
                s.addresses = status.beacons.map { $0.address?.description }
            }
            if let cause {
                s.lastRecovery = now
                s.cause = cause
            }
            return s
        }
        for (i, b) in beacons.enumerated() {
            publisher.publishBeaconStatus(
                BeaconStatusMessage(
                    name: b.name, state: s.state, beacon: b.spec.beacon,
                    intervalMilliseconds: b.spec.intervalMilliseconds,
                    txPower: i < s.txPower.count ? s.txPower[i] : nil, device: device,
                    address: i < s.addresses.count ? s.addresses[i] : nil, since: now,
                    lastRecovery: s.lastRecovery, lastRecoveryCause: s.cause))
        }
        // Available once the beacons' status is determined (they are on the air).
        if newState == .advertising { publisher.markAvailable() }
    }

    /// On the way out: every beacon stopped, then offline and disconnect (`closing` calls it
    /// when the scope of `advertise --mqtt` ends).
    public func close() async {
        update(.stopped)
        await publisher.close()
    }
}
