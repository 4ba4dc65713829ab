import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

/// `--mqtt URL` and its settings, shared by `monitor`, `advertise` and `scan`: where to publish
/// states, events and ranging, and how Home Assistant finds them (README "Home Assistant and MQTT").
struct MQTTOptions<Use: MQTTUse>: ParsableArguments {
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
        help: ArgumentHelp(
            "Home Assistant discovery prefix (default: homeassistant).", valueName: "topic", visibility: Use.states))
    var discoveryPrefixOption: String?
    var discoveryPrefix: String { discoveryPrefixOption ?? "homeassistant" }

    @Flag(
        name: .customLong("no-mqtt-discovery"),
        help: ArgumentHelp("Do not publish Home Assistant discovery.", visibility: Use.states))
    var noDiscovery = false

    @Option(
        name: .customLong("mqtt-name"),
        help: ArgumentHelp(
            "This process in topics: BASE/NAME/availability (default: the command; ignored without --mqtt).",
            valueName: "name", visibility: Use.states))
    var processName: String?

    @Option(
        name: .customLong("mqtt-room"),
        help: ArgumentHelp(
            "scan: the room of room_presence/ROOM (mqtt_room; default: HOSTNAME).", valueName: "name",
            visibility: Use.publishesRooms ? .default : .private))
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
        // A command that publishes no state refuses them, with or without --mqtt.
        let stateOption =
            discoveryPrefixOption.map { _ in "--mqtt-discovery-prefix" } ?? name.map { _ in "--mqtt-name" }
        if let problem = Use.stateOptionProblem(noDiscovery: noDiscovery, name: stateOption) {
            throw ValidationError(problem)
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
        if let problem = Use.roomProblem(room) {
            throw ValidationError(problem)
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
            let (bytes, warnings) = try SafeFile.readSecret(passwordFile, option: "--mqtt-password-file")
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
    /// 66); nil without `--mqtt`. The opener makes the publisher once the adapter is open.
    func prepare(command: String, logger: Logger) throws -> MQTTOpener? {
        guard let url else { return nil }
        let broker = try MQTTBrokerURL(parsing: url)
        try SafeFile.readOptionFiles([("--mqtt-ca", caFile), ("--mqtt-cert", certFile), ("--mqtt-key", keyFile)])
        let options = self
        return MQTTOpener(
            broker: broker, user: user, password: try password(logger: logger), caFile: caFile, certFile: certFile,
            keyFile: keyFile, command: command, layout: { options.layout(command: command, adapter: $0) })
    }

    /// The publisher for `command`, not yet started; nil without `--mqtt` (scan: no adapter).
    func makePublisher(command: String, logger: Logger) throws -> MQTTPublisher? {
        try prepare(command: command, logger: logger)?.publisherForCLI(adapter: nil, logger: logger)
    }
}

extension MQTTUse {
    /// The options only the commands that publish states show.
    static var states: ArgumentVisibility { publishesStates ? .default : .private }
}

extension MQTTOpener {
    /// The publisher, not yet started. A TLS file libmosquitto cannot use is a usage error (64).
    func publisherForCLI(adapter: String?, logger: Logger) throws -> MQTTPublisher {
        do {
            return try publisher(adapter: adapter, logger: logger)
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
    }
}
