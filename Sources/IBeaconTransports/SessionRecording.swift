import IBeaconHost
import Logging

extension SessionRecorder {
    /// The record of this `advertise` or `monitor` in the runtime directory `stop` reads
    /// (`RuntimeRecords.current()`), written at once: `starting` for advertise (its first status
    /// follows when the beacons are on the air), `monitoring` for monitor.
    public init(_ command: SessionCommand, device: String, profiles: [String], logger: Logger) {
        self.init(
            records: RuntimeRecords.current(), command: command, device: device, profiles: profiles,
            wallClock: { ProcessContext.unixTime }, logger: logger)
        update(command == .advertise ? "starting" : "monitoring")
    }
}
