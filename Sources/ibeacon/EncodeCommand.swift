import ArgumentParser
import IBeaconCore
import IBeaconHost

/// encode's `--uuid`, `--major`, `--minor`: the beacon, instead of a profile.
enum BeaconIdentityHelp: IdentityHelp {
    static let uuid = "Proximity UUID (8-4-4-4-12), instead of --profile."
    static let major = "Major, \(FieldRange.major.bounds)."
    static let minor = "Minor, \(FieldRange.minor.bounds)."
}

/// `--profile FILE`, or the beacon's fields on the command line.
struct BeaconOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Profile to read the beacon from.", valueName: "file"))
    var profile: String?

    @OptionGroup var identity: IdentityOptions<BeaconIdentityHelp>

    // Negative numbers are values, not options: `--measured-power -65`.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Measured power in dBm, \(FieldRange.measuredPower.bounds) (default -59).", valueName: "dBm"))
    var measuredPower: MeasuredPower?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp(
            "Advertising interval in ms, \(FieldRange.intervalMs.bounds) (default \(Profile.defaultIntervalMs)).",
            valueName: "ms"))
    var intervalMs: IntervalMs?

    func validate() throws {
        if profile != nil {
            if !identity.isEmpty || measuredPower != nil {
                throw ValidationError("give either --profile or --uuid/--major/--minor/--measured-power, not both")
            }
            // The profile's interval is replaced as given: Core checks it against the command set.
            return
        }
        guard identity.uuid != nil, identity.major != nil, identity.minor != nil else {
            throw ValidationError("give --profile FILE, or --uuid, --major and --minor")
        }
        try measuredPower?.checked()
        try intervalMs?.checked()
    }

    func spec() throws -> BeaconSpec {
        if let profile {
            var s = try BeaconSpec(profileAt: profile, forceRandomAddress: false)
            if let intervalMs { s.intervalMilliseconds = intervalMs.number }
            return s
        }
        // validate() checked every field.
        let beacon = IBeacon(
            proximityUUID: try identity.uuid?.checked().uuid ?? ProximityUUID.random().uuid,
            major: identity.major?.value ?? 0, minor: identity.minor?.value ?? 0,
            measuredPower: Int8(clamping: measuredPower?.number ?? -59))
        return BeaconSpec(
            beacon: beacon, intervalMilliseconds: intervalMs?.number ?? Profile.defaultIntervalMs, label: "command line"
        )
    }
}

struct EncodeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "encode",
        abstract: "Print a beacon's advertising data and the HCI commands that advertise it.",
        discussion: """
            The advertising data is the 30-byte legacy payload (Flags + Apple manufacturer data). \
            The commands are H4 packets in hex, one per line, exactly as `ibeacon advertise` sends \
            them after reading the controller's address and features. On a serial or TCP \
            controller they are preceded by Reset, Set Event Mask and LE Set Event Mask.
            """)

    @OptionGroup var beacon: BeaconOptions

    /// Only the two command sets: `auto` depends on a controller, which encode has not.
    enum Mode: String, CaseIterable, ExpressibleByArgument { case legacy, extended }
    @Option(help: "Which command set to show: legacy or extended.")
    var mode: Mode = .legacy

    @Flag(help: "Print one JSON object.")
    var json = false

    func run() async throws {
        try await reporting {
            let listing = try EncodeListing(spec: try beacon.spec(), extended: mode == .extended)
            printOut(json ? listing.json : listing.lines.joined(separator: "\n"))
        }
    }
}
