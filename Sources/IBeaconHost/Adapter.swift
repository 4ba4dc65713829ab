import IBeaconCore
import Logging

/// The way a command reaches a Bluetooth adapter, as `devices` names it: through the kernel's
/// management interface (`mgmt`, next to bluetoothd) or over HCI this host speaks itself (`raw`:
/// a raw HCI socket, H4 over a serial line or TCP).
public enum ControllerPath: String, Sendable {
    case kernel = "mgmt"
    case raw

    /// The one rule for an adapter the kernel lists: through the kernel unless it is powered with
    /// Low Energy off (no bluetoothd or btmgmt set it up for LE, and the kernel refuses
    /// advertising): raw HCI works there, as it always did. Powered off, it stays the kernel's
    /// (bluetoothd may power it later).
    public static func forListedAdapter(settings: MgmtSettings) -> ControllerPath {
        settings.contains(.powered) && !settings.contains(.lowEnergy) ? .raw : .kernel
    }

    /// The path to adapter `hciN`, and the one failure policy: not in the kernel's index list
    /// (or no management interface): raw HCI; listed: `forListedAdapter` of its settings, and
    /// when Read Controller Information fails (`settings` nil) the kernel's, which then reports
    /// the failure itself. What `advertise` opens and what `devices` shows.
    public static func choose(listed: Bool, settings: MgmtSettings?) -> ControllerPath {
        guard listed else { return .raw }
        return settings.map(forListedAdapter(settings:)) ?? .kernel
    }
}

/// What `stop` did: the kernel's instances removed (those ibeacon processes now gone recorded),
/// or a controller's advertising turned off; the sentence that says so is `description`.
public struct StopReport: Sendable, Equatable, CustomStringConvertible {
    public enum Action: Sendable, Equatable {
        /// Over HCI: the controller's advertising turned off, with these commands.
        case advertisingOff(LECommandSet)
        /// Through the kernel: these instances removed (none: nothing of ibeacon's was left).
        case removedInstances([UInt8])
    }

    public var action: Action
    public var adapter: String
    /// Other programs' instances, left alone (kernel).
    public var othersLeft: [UInt8] = []
    /// ibeacon processes still running whose instances are theirs to remove (kernel).
    public var stillRunning: [Int32] = []
    /// Where the records are (kernel).
    public var recordDirectory: String = ""

    public init(
        _ action: Action, adapter: String, othersLeft: [UInt8] = [], stillRunning: [Int32] = [],
        recordDirectory: String = ""
    ) {
        self.action = action
        self.adapter = adapter
        self.othersLeft = othersLeft
        self.stillRunning = stillRunning
        self.recordDirectory = recordDirectory
    }

    /// True when something of ibeacon's was taken off the air.
    public var removedSomething: Bool {
        switch action {
        case .advertisingOff: true
        case .removedInstances(let removed): !removed.isEmpty
        }
    }

    public var description: String {
        let removed: [UInt8]
        switch action {
        case .advertisingOff(let commandSet): return "advertising off on \(adapter) (\(commandSet.rawValue) commands)"
        case .removedInstances(let instances): removed = instances
        }
        var line =
            removed.isEmpty
            ? "no advertising instance of ibeacon's on \(adapter) (none recorded in \(recordDirectory) by a process now gone)"
            : "removed ibeacon's advertising instance(s) \(removed.map(String.init).joined(separator: ", ")) on \(adapter)"
        if !othersLeft.isEmpty {
            line += "; other programs' instance(s) \(othersLeft.map(String.init).joined(separator: ", ")) left alone"
        }
        if !stillRunning.isEmpty {
            line +=
                "; ibeacon process(es) \(stillRunning.map(String.init).joined(separator: ", ")) still running: "
                + "stop them instead (kill PID or systemctl stop), which removes their instances"
        }
        return line
    }
}

/// An open client that must be closed when the operation ends, on every path, and awaited
/// (not left to a detached task).
public protocol AsyncClosable: Sendable {
    func close() async
}

extension ControllerClient: AsyncClosable {}
extension MgmtClient: AsyncClosable {}

extension AsyncClosable {
    /// Runs `body`, then closes this client, awaited, whether `body` returned or threw.
    public func closing<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let result: T
        do {
            result = try await body()
        } catch {
            await close()
            throw error
        }
        await close()
        return result
    }
}

/// What `advertise` asks of an adapter besides the beacons.
public struct AdvertisingRequest: Sendable {
    public var beacons: [BeaconSpec]
    /// The HCI command set (`--mode`); through the kernel, the kernel chooses.
    public var mode: AdvertisingMode
    /// How often to check that a controller this host programs still answers; nil disables it.
    public var healthCheckInterval: Duration?
    /// Beacons that replace these while advertising (`advertise --mqtt-control`); nil: none.
    public var updates: AdvertisingUpdates?

    public init(
        beacons: [BeaconSpec], mode: AdvertisingMode, healthCheckInterval: Duration?,
        updates: AdvertisingUpdates? = nil
    ) {
        self.beacons = beacons
        self.mode = mode
        self.healthCheckInterval = healthCheckInterval
        self.updates = updates
    }
}

/// What `info` shows of an adapter: the text lines in the words of its path, and the same facts
/// as one JSON object of one schema for every path (`members`, in that order; what a path cannot
/// know is `null`: the kernel does not say the HCI version, raw HCI does not say the settings).
public struct AdapterDescription: Sendable {
    public var lines: [String]
    public var json: JSONObject

    /// Every member of `info --json`, in order, whatever the path.
    public static let members = [
        "device", "path", "address", "name", "manufacturer", "manufacturerName",
        "hciVersion", "hciVersionName", "lmpVersion", "managementVersion",
        "powered", "lowEnergy", "settings", "supportedSettings",
        "leFeatures", "extendedAdvertising", "le2MPHY", "leCodedPHY",
        "advertisingSets", "maxAdvertisingInstances", "advertisingInstances", "maxAdvertisingDataLength",
        "advertisingFlags", "canSetTxPower", "advertisingTxPower", "txPowerRange",
    ]

    /// `known`: the members this path knows (each one of `members`); the others are `null`.
    public init(lines: [String], known: [(String, JSONValue)]) {
        let values = Dictionary(known, uniquingKeysWith: { first, _ in first })
        assert(values.keys.allSatisfy(Self.members.contains), "a member outside AdapterDescription.members")
        self.lines = lines
        json = JSONObject(Self.members.map { ($0, values[$0] ?? .null) })
    }
}

/// One Bluetooth controller, whatever the way to it: the commands are written once against
/// this protocol, and `AdapterOpener` (IBeaconTransports) is the one place that picks the path
/// from a `--device` specification. A new path (say BlueZ's D-Bus API) is a new conformance
/// there, and no command changes.
///
/// An opened adapter serves one operation: each closes what it opened when it ends (a
/// `SightingSource` is closed by its consumer).
public protocol Adapter: AsyncClosable {
    /// What to call the adapter in messages: `hci0`, `raw:hci0`, `serial:/dev/ttyACM0,115200`.
    var name: String { get }

    /// Advertises until the task is cancelled, then takes the advertising off again. Errors
    /// before advertising is first on are thrown; later ones are logged and recovered from.
    /// `onReady` gets the status once every beacon is on the air (its warnings already logged);
    /// `onLost` the cause when the controller or another program took it away (putting it back
    /// starts); `onRestored` once it is back, with the new status where the path reports one.
    func advertise(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void,
        onLost: @escaping @Sendable (String) -> Void, onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws

    /// Takes off advertising that ibeacon (or, over raw HCI, anything) left on; reports what was
    /// done. With `writer`, only what that ibeacon process (now gone) left (its guardian): nil on
    /// a path that keeps no records of who advertised.
    func stopAdvertising(leftBy writer: Int32?) async throws -> StopReport?

    /// The adapter's own address, where it can be read (a capture: nil). Leaves the adapter
    /// open for the operation that follows (`advertise --mqtt` names the box by it).
    func address() async throws -> BDAddress?

    /// Lets go of what the adapter holds open between operations (the kernel's socket);
    /// idempotent. `AdapterOpener.withAdapter` calls it when its scope ends.
    func close() async

    /// What the adapter is and can do for beacons; changes nothing.
    func describe() async throws -> AdapterDescription

    /// The receiver `scan`, `calibrate` and `monitor` take their advertising reports from.
    func sightingSource(mode: AdvertisingMode) async throws -> any SightingSource
}

extension Adapter {
    /// Advertises, reporting only when advertising is first on.
    public func advertise(_ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void)
        async throws
    {
        try await advertise(request, onReady: onReady, onLost: { _ in }, onRestored: { _ in })
    }
}

/// A controller this host talks HCI to: a raw HCI socket (`raw:hciN`, or `hciN` the kernel does
/// not serve), H4 over a serial line or TCP.
public struct ControllerAdapter: Adapter {
    public let name: String
    /// True when this host owns the controller (H4): it may Reset it and set the event masks.
    public let ownsController: Bool
    /// Opens the transport and starts a client (again, after the link is lost).
    public let connect: @Sendable () async throws -> ControllerClient
    let logger: Logger

    public init(
        name: String, ownsController: Bool, logger: Logger,
        connect: @escaping @Sendable () async throws -> ControllerClient
    ) {
        self.name = name
        self.ownsController = ownsController
        self.connect = connect
        self.logger = logger
    }

    /// A session that re-applies advertising after resets and reconnects after the link is lost.
    public func advertise(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void,
        onLost: @escaping @Sendable (String) -> Void, onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws {
        let logger = self.logger
        var session = AdvertisingSession(
            advertiser: Advertiser(
                beacons: request.beacons, mode: request.mode, ownsController: ownsController, logger: logger),
            connect: connect, healthCheckInterval: request.healthCheckInterval, logger: logger)
        session.updates = request.updates
        try await session.run(
            onReady: { status in
                for w in status.warnings { logger.warning("\(w)") }
                onReady(status)
            }, onLost: onLost, onRecovered: { onRestored($0) })
    }

    /// Turns the controller's advertising off whoever set it, legacy or extended.
    public func stopAdvertising(leftBy writer: Int32?) async throws -> StopReport? {
        if writer != nil { return nil }
        let client = try await connect()
        let (logger, name) = (self.logger, self.name)
        return try await client.closing {
            StopReport(.advertisingOff(try await Advertiser.stopAny(on: client, logger: logger)), adapter: name)
        }
    }

    public func describe() async throws -> AdapterDescription {
        let client = try await connect()
        let name = self.name
        return try await client.closing { Self.describe(try await ControllerInfo.read(from: client), name: name) }
    }

    /// Read Public Device Address, on a connection of its own (each operation connects).
    public func address() async throws -> BDAddress? {
        let client = try await connect()
        return try await client.closing { try await client.execute(ReadBDAddr()) }
    }

    /// Each operation closes its own connection: nothing held between them.
    public func close() async {}

    public func sightingSource(mode: AdvertisingMode) async throws -> any SightingSource {
        let client = try await connect()
        return ControllerSightingSource(
            client: client, scanner: Scanner(mode: mode, ownsController: ownsController, logger: logger))
    }

    /// `info` over raw HCI: the controller's own answers.
    static func describe(_ info: ControllerInfo, name: String) -> AdapterDescription {
        let version = info.version
        let json: [(String, JSONValue)] = [
            ("device", .string(name)), ("path", .string(ControllerPath.raw.rawValue)),
            ("address", .string(info.address.description)),
            ("hciVersion", .nullable(version.map { Int($0.hciVersion) })),
            ("hciVersionName", .nullable(version.map { coreVersionName($0.hciVersion) })),
            ("lmpVersion", .nullable(version.map { Int($0.lmpVersion) })),
            ("manufacturer", .nullable(version.map { Int($0.companyIdentifier) })),
            (
                "manufacturerName",
                .nullable(version.map { CompanyIdentifier(rawValue: $0.companyIdentifier).description })
            ),
            ("leFeatures", .string("0x" + String(info.features.rawValue, radix: 16))),
            ("extendedAdvertising", .bool(info.features.contains(.extendedAdvertising))),
            ("le2MPHY", .bool(info.features.contains(.le2MPHY))),
            ("leCodedPHY", .bool(info.features.contains(.leCodedPHY))),
            ("advertisingSets", .nullable(info.advertisingSets.map { Int($0) })),
            ("maxAdvertisingDataLength", .nullable(info.maximumAdvertisingDataLength.map { Int($0) })),
            ("advertisingTxPower", .nullable(info.advertisingTxPower.map { Int($0) })),
            (
                "txPowerRange",
                info.txPowerRange.map { .array([.integer(Int64($0.min)), .integer(Int64($0.max))]) } ?? .null
            ),
        ]
        var lines = [
            "device:              \(name)",
            "path:                raw HCI (the controller's own answers)",
            "address:             \(info.address)",
        ]
        if let v = version {
            lines += [
                "HCI version:         \(coreVersionName(v.hciVersion)) (0x\([v.hciVersion].hexString)), revision 0x\(String(v.hciSubversion, radix: 16))",
                "LMP version:         \(coreVersionName(v.lmpVersion)) (0x\([v.lmpVersion].hexString)), subversion 0x\(String(v.lmpSubversion, radix: 16))",
                "manufacturer:        \(CompanyIdentifier(rawValue: v.companyIdentifier))",
            ]
        }
        lines += [
            "LE features:         0x\(String(info.features.rawValue, radix: 16, uppercase: true))",
            "  extended advertising: \(info.features.contains(.extendedAdvertising) ? "yes" : "no")",
            "  LE 2M PHY:            \(info.features.contains(.le2MPHY) ? "yes" : "no")",
            "  LE Coded PHY:         \(info.features.contains(.leCodedPHY) ? "yes" : "no")",
        ]
        if let sets = info.advertisingSets { lines.append("advertising sets:    \(sets)") }
        if let max = info.maximumAdvertisingDataLength { lines.append("max adv data length: \(max) bytes") }
        if let p = info.advertisingTxPower { lines.append("advertising TX power: \(p) dBm") }
        if let r = info.txPowerRange { lines.append("TX power range:      \(r.min) … \(r.max) dBm") }
        return AdapterDescription(lines: lines, known: json)
    }
}

/// `Bluetooth 5.4` for HCI/LMP version numbers, from Core's table (Assigned Numbers §2.1).
public func coreVersionName(_ v: UInt8) -> String {
    ReadLocalVersionInformation.ReturnParameters.coreVersionName(v).map { "Bluetooth \($0)" } ?? "unknown version"
}

extension JSONValue {
    /// An integer, or `null`.
    static func nullable(_ value: Int?) -> JSONValue { value.map { .integer(Int64($0)) } ?? .null }
    /// A string, or `null`.
    static func nullable(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
    /// A boolean, or `null`.
    static func nullable(_ value: Bool?) -> JSONValue { value.map { .bool($0) } ?? .null }
}
