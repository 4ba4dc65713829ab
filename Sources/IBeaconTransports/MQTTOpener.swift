import IBeaconCore
import IBeaconHost
import Logging

/// `--mqtt` checked and its files read, waiting for the adapter's address (which keeps boxes
/// of one host name apart in Home Assistant) to name this box: makes the publisher over
/// libmosquitto. The one place a `MosquittoConnection` is made for a command.
public struct MQTTOpener: Sendable {
    public var broker: MQTTBrokerURL
    public var user: String?
    public var password: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    /// The command publishing (`advertise`, `scan`, `monitor`): part of the client id.
    public var command: String
    /// The topic layout for an adapter address (nil: not known).
    public var layout: @Sendable (_ adapter: String?) -> MQTTLayout

    public init(
        broker: MQTTBrokerURL, user: String?, password: String?, caFile: String?, certFile: String?,
        keyFile: String?, command: String, layout: @escaping @Sendable (_ adapter: String?) -> MQTTLayout
    ) {
        self.broker = broker
        self.user = user ?? broker.user
        self.password = password
        self.caFile = caFile
        self.certFile = certFile
        self.keyFile = keyFile
        self.command = command
        self.layout = layout
    }

    /// `ibeacon-<host>-<command>-<pid>-<16 hex digits>`: unique per process, so two commands on
    /// one box do not take each other's session, and not guessable (issue 40, hole 7): a broker
    /// disconnects the older client when a new one connects with its id, so a client that can
    /// guess the id (host, command and a pid are a few thousand tries) knocks the box offline.
    /// The last part is 64 bits from the system's random number generator (`getrandom(2)`),
    /// drawn once per process.
    public var clientID: String {
        "ibeacon-\(MQTTTopic.identifier(ProcessContext.hostName))-\(command)-\(ProcessContext.processID)-"
            + mqttClientNonce
    }

    /// The client's settings for `layout`: credentials, TLS, and `offline` as the Last Will.
    public func settings(_ layout: MQTTLayout) -> MQTTClientSettings {
        MQTTClientSettings(
            url: broker, user: user, password: password, caFile: caFile, certFile: certFile, keyFile: keyFile,
            clientID: clientID, will: MQTTMessage(topic: layout.availabilityTopic, payload: "offline", kind: .retained),
            subscriptions: layout.subscriptions, commandSubscriptions: layout.commandSubscriptions)
    }

    /// The publisher, not yet started. Throws when libmosquitto cannot use a TLS file.
    public func publisher(adapter: String?, logger: Logger) throws(MQTTSettingError) -> MQTTPublisher {
        let layout = layout(adapter)
        let connection = try MosquittoConnection(settings: settings(layout))
        let discovery = layout.discoveryPrefix.map { ", Home Assistant discovery under \($0) as \(layout.node)" } ?? ""
        logger.notice("MQTT: publishing to \(broker) under \(layout.base)\(discovery)")
        return MQTTPublisher(layout: layout, connection: connection, logger: logger)
    }
}

extension MQTTOpener {
    /// The client of `calibrate --apply-to`: no Last Will (it publishes no state), subscribed
    /// to the box's answers before it sends. Throws when libmosquitto cannot use a TLS file.
    public func calibrationSender(
        _ handover: CalibrationHandover, logger: Logger
    ) throws(MQTTSettingError) -> CalibrationSender {
        var settings = settings(layout(nil))
        settings.will = nil
        settings.subscriptions = CalibrationSender.subscriptions(for: handover)
        return CalibrationSender(
            handover: handover, connection: try MosquittoConnection(settings: settings), logger: logger)
    }
}

/// The random part of this process's MQTT client id (`MQTTOpener.clientID`).
let mqttClientNonce = makeClientNonce()

/// 64 bits from the system's random number generator, as 16 lowercase hex digits.
func makeClientNonce() -> String {
    var generator = SystemRandomNumberGenerator()
    let digits = String(UInt64.random(in: .min ... .max, using: &generator), radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
}
