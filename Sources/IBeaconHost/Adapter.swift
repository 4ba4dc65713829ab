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
}

/// What `advertise` asks of an adapter besides the beacons.
public struct AdvertisingRequest: Sendable {
    public var beacons: [BeaconSpec]
    /// The HCI command set (`--mode`); through the kernel, the kernel chooses.
    public var mode: AdvertisingMode
    /// How often to check that a controller this host programs still answers; nil disables it.
    public var healthCheckInterval: Duration?

    public init(beacons: [BeaconSpec], mode: AdvertisingMode, healthCheckInterval: Duration?) {
        self.beacons = beacons
        self.mode = mode
        self.healthCheckInterval = healthCheckInterval
    }
}

/// What `info` shows of an adapter, in the words of its path: the text lines in order, and the
/// same facts as one JSON object (members in a stable order).
public struct AdapterDescription: Sendable {
    public var lines: [String]
    public var json: JSONObject

    public init(lines: [String], json: JSONObject) {
        self.lines = lines
        self.json = json
    }
}

/// One Bluetooth controller, whatever the way to it: the commands are written once against
/// this protocol, and `AdapterOpener` (IBeaconTransports) is the one place that picks the path
/// from a `--device` specification. A new path (say BlueZ's D-Bus API) is a new conformance
/// there, and no command changes.
///
/// An opened adapter serves one operation: each closes what it opened when it ends (a
/// `SightingSource` is closed by its consumer).
public protocol Adapter: Sendable {
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

    /// Takes off advertising that ibeacon (or, over raw HCI, anything) left on; returns the
    /// sentence that says what was done. With `writer`, only what that ibeacon process (now gone)
    /// left (its guardian): nil on a path that keeps no records of who advertised.
    func stopAdvertising(leftBy writer: Int32?) async throws -> String?

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
        let session = AdvertisingSession(
            advertiser: Advertiser(
                beacons: request.beacons, mode: request.mode, ownsController: ownsController, logger: logger),
            connect: connect, healthCheckInterval: request.healthCheckInterval, logger: logger)
        try await session.run(
            onReady: { status in
                for w in status.warnings { logger.warning("\(w)") }
                onReady(status)
            }, onLost: onLost, onRecovered: { onRestored($0) })
    }

    /// Turns the controller's advertising off whoever set it, legacy or extended.
    public func stopAdvertising(leftBy writer: Int32?) async throws -> String? {
        if writer != nil { return nil }
        let client = try await connect()
        let commandSet = try await Advertiser.stopAny(on: client, logger: logger)
        await client.close()
        return "advertising off on \(name) (\(commandSet.rawValue) commands)"
    }

    public func describe() async throws -> AdapterDescription {
        let client = try await connect()
        defer { Task { await client.close() } }
        return Self.describe(try await ControllerInfo.read(from: client), name: name)
    }

    public func sightingSource(mode: AdvertisingMode) async throws -> any SightingSource {
        let client = try await connect()
        return ControllerSightingSource(
            client: client, scanner: Scanner(mode: mode, ownsController: ownsController, logger: logger))
    }

    /// `info` over raw HCI: the controller's own answers.
    static func describe(_ info: ControllerInfo, name: String) -> AdapterDescription {
        let version = info.version
        let json = JSONObject([
            ("device", .string(name)), ("address", .string(info.address.description)),
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
        ])
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
        return AdapterDescription(lines: lines, json: json)
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
