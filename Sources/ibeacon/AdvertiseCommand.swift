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

    @OptionGroup var device: DeviceOptions

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

    @OptionGroup var mqtt: MQTTOptions
    @OptionGroup var logging: LoggingOptions

    func validate() throws {
        if profile.isEmpty { throw ValidationError("give at least one --profile FILE") }
        try validateSeconds("--check-interval", checkInterval, 0.1...86400, zeroAllowed: "disable the check")
    }

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let specs = try profile.map { path in try beaconSpec(path: path, forceRandomAddress: randomAddress) }
            let status = try await mqttStatus(specs, logger: logger)
            do {
                try await advertise(specs, mqtt: status, logger: logger)
            } catch {
                await status?.finish()
                throw error
            }
            await status?.finish()
        }
    }

    /// The beacons' MQTT status, connecting; nil without --mqtt. The adapter's address (which
    /// keeps boxes of one host name apart in Home Assistant) is read first, as `info` reads it.
    private func mqttStatus(_ specs: [BeaconSpec], logger: Logger) async throws -> AdvertiseMQTT? {
        guard let prepared = try mqtt.prepare(command: "advertise", logger: logger) else { return nil }
        do {
            try mqtt.layout(command: "advertise").checkBeaconNames(specs.map(AdvertiseMQTT.name(of:)))
        } catch {
            throw CLIError("\(error)", code: Exit.usage)
        }
        var address: String?
        do {
            address = try await device.opener(logger: logger).open().describe().json["address"]?.stringValue
        } catch {
            logger.debug("MQTT: the adapter's address could not be read: \(error)")
        }
        let publisher = try prepared.publisher(adapter: address)
        let status = AdvertiseMQTT(publisher: publisher, specs: specs, device: device.deviceText)
        publisher.start()
        return status
    }

    /// Advertises on the adapter `--device` names until stopped, printing the status line and
    /// telling systemd and the MQTT broker (`--mqtt`) what is on the air.
    private func advertise(_ specs: [BeaconSpec], mqtt: AdvertiseMQTT?, logger: Logger) async throws {
        let adapter = try await device.opener(logger: logger).open()
        let request = AdvertisingRequest(
            beacons: specs, mode: mode,
            healthCheckInterval: checkInterval > 0 ? .seconds(checkInterval) : nil)
        let json = self.json
        @Sendable func onAir(_ status: AdvertisingStatus) {
            mqtt?.update(
                .advertising, txPower: status.beacons.map { $0.txPower.map { Int($0) } },
                addresses: status.beacons.map { $0.address?.description })
        }
        let onTheAir = "advertising \(specs.count) beacon(s) on \(adapter.name.escapedForTerminal)"
        try await untilStopped {
            try await adapter.advertise(
                request,
                onReady: { status in
                    printOut(statusLine(status, device: adapter.name, json: json))
                    onAir(status)
                    SystemdNotifier.notify(
                        "READY=1\nSTATUS=\(onTheAir)" + (status.commandSet == nil ? " through the kernel" : ""))
                },
                onLost: { cause in
                    mqtt?.update(.recovering, cause: cause)
                    SystemdNotifier.notify("STATUS=recovering: \(cause.escapedForTerminal)")
                },
                onRestored: { status in
                    if let status { onAir(status) } else { mqtt?.update(.advertising) }
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

/// Builds what to advertise from a profile file.
func beaconSpec(path: String, forceRandomAddress: Bool) throws -> BeaconSpec {
    let profile = try Profile.load(bytes: ProfileStore.read(path), file: path)
    let beacon = profile.iBeacon
    return BeaconSpec(
        beacon: beacon, intervalMilliseconds: profile.intervalMs, txPower: profile.txPower,
        address: beaconAddress(forceRandomAddress ? .randomStatic : profile.address, beacon: beacon),
        calibratedTxPower: profile.calibrationRecord?.txPower.map { Int8($0) },
        label: path.split(separator: "/").last.map(String.init) ?? path)
}

/// The profile's `address` as an address to advertise from; a non-resolvable one is new for each run.
func beaconAddress(_ kind: Profile.AddressKind, beacon: IBeacon) -> BeaconAddress {
    switch kind {
    case .public: return .identity
    case .randomStatic: return .staticRandom(.staticRandom(for: beacon))
    case .fixed(let address): return .staticRandom(address)
    case .nonResolvable:
        var generator = SystemRandomNumberGenerator()
        return .nonResolvable(.nonResolvable(using: &generator))
    }
}

/// The status line of each beacon on the air: on a controller this host programs, or as an
/// advertising instance of the kernel's (whose interval and TX power the kernel may choose).
func statusLine(_ status: AdvertisingStatus, device: String, json: Bool) -> String {
    status.beacons.map { b in
        switch b.placement {
        case .controller(let address, _):
            return controllerLine(b, address: address, commandSet: status.commandSet, device: device, json: json)
        case .kernelInstance(let instance, let method, let connectable, _):
            return kernelInstanceLine(
                b, instance: instance, method: method.rawValue, extended: method == .extendedParameters,
                connectable: connectable, device: device, json: json)
        }
    }.joined(separator: "\n")
}

private func controllerLine(
    _ b: AdvertisingStatus.Beacon, address: BDAddress, commandSet: LECommandSet?, device: String, json: Bool
) -> String {
    let beacon = b.spec.beacon
    let mode = commandSet?.rawValue ?? ""
    if json {
        return jsonLine([
            "event": "advertising", "device": device, "address": address.description,
            "uuid": beacon.uuidString, "major": Int(beacon.major), "minor": Int(beacon.minor),
            "measuredPower": Int(beacon.measuredPower), "intervalMs": b.spec.intervalMilliseconds,
            "mode": mode, "txPower": b.txPower.map { Int($0) }, "profile": b.spec.label,
        ])
    }
    let tx = b.txPower.map { "\($0) dBm" } ?? "not reported"
    return "advertising \(b.spec.label) on \(device) from \(address): \(beacon.uuidString) "
        + "major \(beacon.major) minor \(beacon.minor), measured power \(beacon.measuredPower) dBm, "
        + "every \(b.spec.intervalMilliseconds) ms, \(mode), TX power \(tx)"
}

private func kernelInstanceLine(
    _ b: AdvertisingStatus.Beacon, instance: UInt8, method: String, extended: Bool, connectable: Bool,
    device: String, json: Bool
) -> String {
    let beacon = b.spec.beacon
    let address = b.address?.description
    if json {
        return jsonLine([
            "event": "advertising", "device": device, "path": "mgmt", "instance": Int(instance),
            "address": address, "connectable": connectable, "method": method, "uuid": beacon.uuidString,
            "major": Int(beacon.major),
            "minor": Int(beacon.minor), "measuredPower": Int(beacon.measuredPower),
            "intervalMs": extended ? b.spec.intervalMilliseconds : nil,
            "txPower": b.txPower.map { Int($0) }, "profile": b.spec.label,
        ])
    }
    // Add Advertising reports no power (the kernel chooses it); Add Extended Advertising
    // Parameters reports the controller's, or that it does not know it.
    let tx = b.txPower.map { "\($0) dBm" } ?? (extended ? "unknown" : "chosen by the kernel")
    let interval = extended ? "every \(b.spec.intervalMilliseconds) ms" : "at the kernel's default interval"
    let from = address.map { "from \($0)" } ?? "from a new non-resolvable address"
    return "advertising \(b.spec.label) on \(device) through the kernel (instance \(instance)) \(from)"
        + "\(connectable ? ", connectable" : ""): "
        + "\(beacon.uuidString) major \(beacon.major) minor \(beacon.minor), measured power "
        + "\(beacon.measuredPower) dBm, \(interval), TX power \(tx)"
}

struct StopCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Turn off advertising left on by ibeacon (hciN) or by anything (raw HCI).",
        discussion: """
            On hciN through the kernel: removes the advertising instances that ibeacon processes \
            now gone recorded in /run/ibeacon (or $IBEACON_RUNTIME_DIR, unless run with file \
            capabilities or set-user-ID) for that adapter, and no other program's; records another \
            user could have written are ignored. With \
            raw:hciN, serial: or tcp:, turns the controller's advertising off whoever set it, \
            legacy or extended. Exits 0 if nothing was advertising.
            """)

    @OptionGroup var device: DeviceOptions
    @OptionGroup var logging: LoggingOptions

    /// The guardian `advertise` starts (`startGuardian`): waits for that process to end, then
    /// removes what it recorded and left behind.
    @Option(help: .hidden) var afterExitOf: Int32?
    /// That process's start time (`/proc/PID/stat`), so that a guardian that starts after its
    /// advertiser already died (or whose PID was reused) still knows it is gone.
    @Option(help: .hidden) var startTime: UInt64?

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            if let pid = afterExitOf {
                try await guardAdvertiser(pid, logger: logger)
                return
            }
            if let line = try await device.opener(logger: logger).open().stopAdvertising(leftBy: nil) {
                printOut(line)
            }
        }
    }

    /// Waits until process `pid` is gone (polled: the guardian is its child's sibling, not its
    /// parent), then removes the instances its record still names, and says so only then.
    private func guardAdvertiser(_ pid: Int32, logger: Logger) async throws {
        let processes = ProcessTable.system
        guard let startTime else { return }
        while let now = processes.identity(pid), now.startTime == startTime {
            try await Task.sleep(for: .milliseconds(200))
        }
        // Only the kernel path keeps records (raw HCI answers nil).
        guard let line = try await device.opener(logger: logger).open().stopAdvertising(leftBy: pid) else { return }
        if line.hasPrefix("removed") {
            logger.warning("ibeacon advertise (pid \(pid)) ended without cleaning up: \(line)")
        }
    }
}
