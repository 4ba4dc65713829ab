import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

extension AdvertisingMode: ExpressibleByArgument {}

struct AdvertiseCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "advertise",
        abstract: "Advertise the iBeacon of one or more profiles until stopped.",
        discussion: """
            Non-connectable (ADV_NONCONN_IND) on all three channels at the profile's interval \
            (default 100 ms), data set before enabling. Through the kernel (hciN) a beacon with the \
            profile's default "address": "public" is connectable (ADV_IND), because only then \
            does the kernel keep the adapter's address; "non-resolvable" stays non-connectable \
            from a new address at every start. Prints one status line, then stays quiet. \
            SIGINT/SIGTERM (exit 0) and the other terminating signals, such as SIGHUP (exit 128 + \
            the signal number), turn advertising off before exiting; SIGPIPE is ignored. If the \
            controller is reset, \
            power-cycled or reprogrammed behind its back, advertising is re-applied (logged on \
            stderr); if the adapter disappears, it waits for it to return. \
            Under systemd (Type=notify) it reports READY=1 once advertising is on.
            """)

    @Option(
        name: .long, parsing: .singleValue,
        help: ArgumentHelp(
            "Profile to advertise; repeat for several beacons (extended advertising).", valueName: "file"))
    var profile: [String] = []

    @OptionGroup var device: DeviceOptions<ProgramsController>

    @Option(help: "Advertising commands: auto (extended when supported), legacy or extended.")
    var mode: AdvertisingMode = .auto

    @Flag(
        help:
            "Advertise from a static random address derived from the profile's UUID, major and minor (raw HCI; as \"address\": \"random-static\")."
    )
    var randomAddress = false

    @OptionGroup var stopAfter: DurationOption<UntilStopped>

    @Option(
        help: ArgumentHelp(
            "Seconds between checks that the controller still answers; 0 disables.", valueName: "seconds"))
    var checkInterval: Double = 30

    @Flag(help: "Print the status line as JSON.")
    var json = false

    @OptionGroup var mqtt: MQTTOptions<AdvertiseMQTT>
    @Flag(name: .customLong("mqtt-control"), help: "Take commands on BASE/beacon/NAME/set/KEY (README).")
    var mqttControl = false
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if profile.isEmpty { throw ValidationError("give at least one --profile FILE") }
        try validateSeconds("--check-interval", checkInterval, 0.1...86400, zeroAllowed: "disable the check")
        if mqttControl && mqtt.url == nil { throw ValidationError("--mqtt-control needs --mqtt URL (the broker)") }
    }

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let specs = try profile.map { path in try BeaconSpec(profileAt: path, forceRandomAddress: randomAddress) }
            let mqtt = try mqttOpener(specs, logger: logger)
            // One adapter, opened once: its address names the box for MQTT, then it advertises.
            try await device.opener(logger: logger, reading: profile).withAdapter { adapter in
                let status = try await mqttStatus(mqtt, specs, adapter: adapter, logger: logger)
                do {
                    let initial = try status.startingControl(mqttControl, paths: profile, specs: specs, logger: logger)
                    try await advertise(initial, on: adapter, mqtt: status)
                } catch {
                    await status?.finish()
                    throw error
                }
                await status?.finish()
            }
        }
    }

    /// `--mqtt` checked, its files read, the beacons' names checked; nil without --mqtt.
    private func mqttOpener(_ specs: [BeaconSpec], logger: Logger) throws -> MQTTOpener? {
        guard var prepared = try mqtt.prepare(command: "advertise", logger: logger) else { return nil }
        if mqttControl { prepared.layout = { [layout = prepared.layout] in layout($0).controlled() } }
        do {
            try mqtt.layout(command: "advertise").checkBeaconNames(specs.map(AdvertiseStatus.name(of:)))
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        return prepared
    }

    /// The beacons' MQTT status, not connected yet; nil without --mqtt. The adapter's address (which
    /// keeps boxes of one host name apart in Home Assistant) is read first.
    private func mqttStatus(_ prepared: MQTTOpener?, _ specs: [BeaconSpec], adapter: any Adapter, logger: Logger)
        async throws -> AdvertiseStatus?
    {
        guard let prepared else { return nil }
        var address: String?
        do {
            address = try await adapter.address()?.description
        } catch {
            logger.debug("MQTT: the adapter's address could not be read: \(error)")
        }
        let publisher = try prepared.publisherForCLI(adapter: address, logger: logger)
        let status = AdvertiseStatus(
            publisher: publisher, specs: specs, device: device.deviceText, wallClock: { ProcessContext.unixTime })
        return status
    }

    /// Advertises on the adapter `--device` names until stopped, printing the status line and
    /// telling systemd and the MQTT broker (`--mqtt`) what is on the air.
    private func advertise(_ specs: [BeaconSpec], on adapter: any Adapter, mqtt: AdvertiseStatus?) async throws {
        let request = AdvertisingRequest(
            beacons: specs, mode: mode,
            healthCheckInterval: checkInterval > 0 ? .seconds(checkInterval) : nil)
        let json = self.json
        let onTheAir = "advertising \(specs.count) beacon(s) on \(adapter.name.escapedForTerminal)"
        try await untilStopped {
            try await mqtt.advertise(
                on: adapter, request,
                onReady: { status in
                    printOut(status.lines(device: adapter.name, json: json))
                    mqtt?.update(.advertising, status: status)
                    SystemdNotifier.notify(
                        "READY=1\nSTATUS=\(onTheAir)" + (status.commandSet == nil ? " through the kernel" : ""))
                },
                onLost: { cause in
                    mqtt?.update(.recovering, cause: cause)
                    SystemdNotifier.notify("STATUS=recovering: \(cause.escapedForTerminal)")
                },
                onRestored: { status in
                    mqtt?.update(.advertising, status: status)
                    SystemdNotifier.notify("STATUS=\(onTheAir)")
                })
        }
    }

    /// Runs `advertising` until a signal, or --duration: whichever ends first (the duration, or
    /// advertising with an error) ends both.
    private func untilStopped(_ advertising: @escaping @Sendable () async throws -> Void) async throws {
        let duration = stopAfter.duration
        try await runUntilSignalled {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await advertising() }
                if let duration {
                    group.addTask { try await Task.sleep(for: duration) }
                }
                try await group.next()
                group.cancelAll()
                try await group.waitForAll()
            }
        }
    }
}
