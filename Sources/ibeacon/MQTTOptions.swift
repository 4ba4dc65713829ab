import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging
import Synchronization

/// `--mqtt URL` and its settings, shared by `monitor`, `advertise` and `scan`: where to publish
/// states, events and ranging, and how Home Assistant finds them (README "Home Assistant and MQTT").
struct MQTTOptions: ParsableArguments {
    @Option(
        name: .customLong("mqtt"),
        help: ArgumentHelp(
            "Publish to this MQTT broker: mqtt://[USER@]HOST[:PORT] or mqtts:// (TLS).", valueName: "url"))
    var url: String?

    @Option(
        name: .customLong("mqtt-user"), help: ArgumentHelp("MQTT user name (or USER@ in the URL).", valueName: "name"))
    var user: String?

    @Option(
        name: .customLong("mqtt-password-file"),
        help: ArgumentHelp("Read the MQTT password from FILE (else $IBEACON_MQTT_PASSWORD).", valueName: "file"))
    var passwordFile: String?

    @Option(
        name: .customLong("mqtt-ca"),
        help: ArgumentHelp("mqtts: verify the broker against this CA (default: the system's).", valueName: "file"))
    var caFile: String?

    @Option(name: .customLong("mqtt-cert"), help: ArgumentHelp("mqtts: client certificate (PEM).", valueName: "file"))
    var certFile: String?

    @Option(
        name: .customLong("mqtt-key"),
        help: ArgumentHelp("mqtts: the client certificate's key (PEM).", valueName: "file"))
    var keyFile: String?

    @Option(
        name: .customLong("mqtt-base"),
        help: ArgumentHelp("Topic everything is published under (default: ibeacon/HOSTNAME).", valueName: "topic"))
    var base: String?

    @Option(
        name: .customLong("mqtt-discovery-prefix"),
        help: ArgumentHelp("Home Assistant discovery prefix.", valueName: "topic"))
    var discoveryPrefix: String = "homeassistant"

    @Flag(name: .customLong("no-mqtt-discovery"), help: "Do not publish Home Assistant discovery.")
    var noDiscovery = false

    @Option(
        name: .customLong("mqtt-name"),
        help: ArgumentHelp(
            "This process in topics: BASE/NAME/availability (default: the command; ignored without --mqtt).",
            valueName: "name"))
    var processName: String?

    @Option(
        name: .customLong("mqtt-room"),
        help: ArgumentHelp("scan: the room of room_presence/ROOM (mqtt_room; default: HOSTNAME).", valueName: "name"))
    var room: String?

    /// The options that mean something only with `--mqtt`.
    private var dependentOptions: [(String, Bool)] {
        [
            ("--mqtt-user", user != nil), ("--mqtt-password-file", passwordFile != nil), ("--mqtt-ca", caFile != nil),
            ("--mqtt-cert", certFile != nil), ("--mqtt-key", keyFile != nil), ("--mqtt-base", base != nil),
            ("--mqtt-room", room != nil), ("--no-mqtt-discovery", noDiscovery),
        ]
    }

    func validate() throws {
        // Checked with or without --mqtt: the systemd units always give it.
        if let name, name.isEmpty || MQTTTopic.level(name) != name || MQTTTopic.noncharacter(in: name) != nil {
            throw ValidationError(
                "--mqtt-name \(name) must be one topic level: not empty, without / + # or control characters "
                    + "or Unicode noncharacters")
        }
        guard let url else {
            if let given = dependentOptions.first(where: \.1) {
                throw ValidationError("\(given.0) needs --mqtt URL (the broker to publish to)")
            }
            return
        }
        let broker: MQTTBrokerURL
        do {
            broker = try MQTTBrokerURL(parsing: url)
            try MQTTTopic.validatePrefix(baseTopic, option: "--mqtt-base")
            try MQTTTopic.validatePrefix(discoveryPrefix, option: "--mqtt-discovery-prefix")
        } catch {
            throw ValidationError("\(error)")
        }
        if broker.user != nil && user != nil {
            throw ValidationError("the MQTT user is given twice (in --mqtt and --mqtt-user): keep one")
        }
        if !broker.tls,
            let tlsOption = [("--mqtt-ca", caFile), ("--mqtt-cert", certFile), ("--mqtt-key", keyFile)]
                .first(where: { $0.1 != nil })
        {
            throw ValidationError("\(tlsOption.0) is for TLS: use an mqtts:// URL")
        }
        if (certFile == nil) != (keyFile == nil) {
            throw ValidationError("--mqtt-cert and --mqtt-key go together (the client certificate and its key)")
        }
        if let room, room.isEmpty { throw ValidationError("--mqtt-room is empty") }
        if let room, let bad = MQTTTopic.noncharacter(in: room) {
            throw ValidationError(
                "--mqtt-room contains the Unicode noncharacter U+\(String(bad.value, radix: 16, uppercase: true)), "
                    + "which MQTT does not allow in a topic")
        }
    }

    /// This box's name: the host name, as `gethostname(2)` gives it.
    static var hostName: String { ProcessContext.hostName }

    /// `--mqtt-name` (the systemd units give it per instance).
    var name: String? { processName }

    var baseTopic: String { base ?? "ibeacon/\(MQTTTopic.level(Self.hostName))" }

    /// The password: the file's first line, else $IBEACON_MQTT_PASSWORD, else none. A file
    /// other users may read or change is used, with a warning (as ssh warns of a key).
    func password(logger: Logger) throws -> String? {
        if let passwordFile {
            let (bytes, warnings) = try ProfileStore.readSecret(passwordFile)
            for warning in warnings { logger.warning("MQTT password file: \(warning)") }
            let text = String(decoding: bytes, as: UTF8.self)
            return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
        }
        return ProcessEnvironment.current.mqttPassword
    }

    /// The layout of `command`'s topics; `adapter`: the adapter's address, which keeps boxes of
    /// one host name apart in Home Assistant.
    func layout(command: String, adapter: String? = nil) -> MQTTLayout {
        MQTTLayout(
            base: baseTopic, command: name ?? command, discoveryPrefix: noDiscovery ? nil : discoveryPrefix,
            node: Self.hostName, adapter: adapter, room: room ?? Self.hostName)
    }

    /// The settings checked and the files read, before anything starts (an unreadable file is
    /// 66); nil without `--mqtt`. `publisher(adapter:)` makes the publisher once the adapter is open.
    func prepare(command: String, logger: Logger) throws -> PreparedMQTT? {
        guard let url else { return nil }
        let broker = try MQTTBrokerURL(parsing: url)
        for file in [caFile, certFile, keyFile].compactMap({ $0 }) { _ = try ProfileStore.read(file) }
        return PreparedMQTT(
            options: self, command: command, broker: broker, password: try password(logger: logger), logger: logger)
    }

    /// The publisher for `command`, not yet started; nil without `--mqtt` (scan: no adapter).
    func makePublisher(command: String, logger: Logger) throws -> MQTTPublisher? {
        try prepare(command: command, logger: logger)?.publisher(adapter: nil)
    }
}

/// `--mqtt` checked, waiting for the adapter's address to name this box.
struct PreparedMQTT {
    let options: MQTTOptions
    let command: String
    let broker: MQTTBrokerURL
    let password: String?
    let logger: Logger

    /// The publisher, not yet started. A TLS file libmosquitto cannot use is a usage error (64).
    func publisher(adapter: String?) throws -> MQTTPublisher {
        let layout = options.layout(command: command, adapter: adapter)
        let settings = MQTTClientSettings(
            url: broker, user: options.user ?? broker.user, password: password, caFile: options.caFile,
            certFile: options.certFile, keyFile: options.keyFile,
            clientID: "ibeacon-\(MQTTTopic.identifier(MQTTOptions.hostName))-\(command)-\(ProcessContext.processID)",
            will: MQTTMessage(topic: layout.availabilityTopic, payload: "offline", kind: .retained),
            subscriptions: layout.subscriptions)
        let connection: MosquittoConnection
        do {
            connection = try MosquittoConnection(settings: settings)
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        let discovery = layout.discoveryPrefix.map { ", Home Assistant discovery under \($0) as \(layout.node)" } ?? ""
        logger.notice("MQTT: publishing to \(broker) under \(layout.base)\(discovery)")
        return MQTTPublisher(layout: layout, connection: connection, logger: logger)
    }
}

/// `advertise --mqtt`: each beacon's status, retained, as the session reports it.
final class AdvertiseMQTT: Sendable {
    let publisher: MQTTPublisher
    let beacons: [(name: String, spec: BeaconSpec)]
    let device: String
    /// The latest loss: when (UTC) and why; the state of all beacons.
    let state = Mutex<
        (state: BeaconRunState, txPower: [Int?], addresses: [String?], lastRecovery: String?, cause: String?)
    >((.stopped, [], [], nil, nil))

    init(publisher: MQTTPublisher, specs: [BeaconSpec], device: String) {
        self.publisher = publisher
        self.beacons = specs.map { (Self.name(of: $0), $0) }
        self.device = device
        publisher.addBeacons(beacons.map(\.name))
    }

    /// A beacon's name: its profile's file name without `.json`.
    static func name(of spec: BeaconSpec) -> String {
        spec.label.hasSuffix(".json") ? String(spec.label.dropLast(5)) : spec.label
    }

    func update(
        _ newState: BeaconRunState, txPower: [Int?]? = nil, addresses: [String?]? = nil, cause: String? = nil
    ) {
        let now = iso8601(unixSeconds: ProcessContext.unixTime, milliseconds: true)
        let s = state.withLock { s in
            s.state = newState
            if let txPower { s.txPower = txPower }
            if let addresses { s.addresses = addresses }
            if let cause {
                s.lastRecovery = now
                s.cause = cause
            }
            return s
        }
        for (i, b) in beacons.enumerated() {
            publisher.publishBeaconStatus(
                AdvertisedBeaconStatus(
                    name: b.name, state: s.state, beacon: b.spec.beacon,
                    intervalMilliseconds: b.spec.intervalMilliseconds,
                    txPower: i < s.txPower.count ? s.txPower[i] : nil, device: device,
                    address: i < s.addresses.count ? s.addresses[i] : nil, since: now,
                    lastRecovery: s.lastRecovery, lastRecoveryCause: s.cause))
        }
        // Available once the beacons' status is determined (they are on the air).
        if newState == .advertising { publisher.markAvailable() }
    }

    /// On the way out: every beacon stopped, then offline and disconnect.
    func finish() async {
        update(.stopped)
        await publisher.close()
    }
}
