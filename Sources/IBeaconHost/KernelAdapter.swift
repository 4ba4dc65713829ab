import IBeaconCore
import Logging

/// Where the kernel path keeps what other ibeacon processes need to know: the advertising
/// instances `advertise` registered (so that `stop` removes those and no other program's) and
/// the monitor scan window a scan widened. The store itself (files under the runtime directory)
/// is given by the caller.
public struct RuntimeRecords: Sendable {
    /// One process's record of its advertising instances on an adapter.
    public typealias InstanceRecord = (pid: Int32, file: String, instances: [UInt8])

    /// Where the records are, for messages.
    public var directory: String
    /// Records (or, with no instances, forgets) this process's instances on an adapter (`hciN`).
    public var saveInstances: @Sendable (_ instances: [UInt8], _ adapter: String) -> Void
    /// Every record of the adapter's instances.
    public var loadInstances: @Sendable (_ adapter: String) -> [InstanceRecord]
    /// Removes a record of a process that is gone.
    public var removeRecord: @Sendable (_ file: String) -> Void
    /// The scan window records of the adapter.
    public var scanWindow: @Sendable (_ adapter: String) -> ScanWindowRecords

    public init(
        directory: String, saveInstances: @escaping @Sendable ([UInt8], String) -> Void,
        loadInstances: @escaping @Sendable (String) -> [InstanceRecord],
        removeRecord: @escaping @Sendable (String) -> Void,
        scanWindow: @escaping @Sendable (String) -> ScanWindowRecords
    ) {
        self.directory = directory
        self.saveInstances = saveInstances
        self.loadInstances = loadInstances
        self.removeRecord = removeRecord
        self.scanWindow = scanWindow
    }

    /// Nothing recorded, nothing found (tests).
    public static let none = RuntimeRecords(
        directory: "(none)", saveInstances: { _, _ in }, loadInstances: { _ in [] }, removeRecord: { _ in },
        scanWindow: { _ in .alone })
}

/// `hciN` managed by the kernel: advertising instances, advertisement monitors and adapter
/// information through its management interface, next to bluetoothd.
public struct KernelAdapter: Adapter {
    public let client: MgmtClient
    public let index: UInt16
    public let records: RuntimeRecords
    /// Throws when this process may not change the adapter (CAP_NET_ADMIN); `what` names the change.
    public let requireAdministration: @Sendable (_ what: String) throws -> Void
    /// Raw HCI on the same adapter, for scanning while the kernel has it powered off.
    public let rawFallback: ControllerAdapter
    /// What the waits of the advertising session sleep on (a `ManualClock` in tests).
    public let clock: any Clock<Duration>
    let logger: Logger

    public init(
        client: MgmtClient, index: UInt16, records: RuntimeRecords,
        requireAdministration: @escaping @Sendable (String) throws -> Void, rawFallback: ControllerAdapter,
        clock: any Clock<Duration> = ContinuousClock(), logger: Logger
    ) {
        self.client = client
        self.index = index
        self.records = records
        self.requireAdministration = requireAdministration
        self.rawFallback = rawFallback
        self.clock = clock
        self.logger = logger
    }

    public var name: String { "hci\(index)" }
    private var mgmtIndex: MgmtIndex { MgmtIndex(index) }

    /// Registers the beacons as advertising instances and keeps them there until cancelled,
    /// then removes them; records the instance numbers for `stop`.
    public func advertise(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void
    ) async throws {
        if request.mode != .auto {
            logger.warning("--mode \(request.mode.rawValue) applies to raw HCI only; the kernel chooses the commands")
        }
        defer { Task { await client.close() } }
        try requireAdministration("advertising on \(name)")
        let records = self.records
        let adapter = name
        let logger = self.logger
        let session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(beacons: request.beacons, index: mgmtIndex, logger: logger),
            client: client, logger: logger, clock: clock,
            onInstancesChanged: { records.saveInstances($0, adapter) })
        try await session.run(onReady: { status in
            for w in status.warnings { logger.warning("\(w)") }
            onReady(status)
        })
    }

    /// Removes the instances ibeacon recorded for this adapter, never another program's.
    public func stopAdvertising() async throws -> String {
        defer { Task { await client.close() } }
        try requireAdministration("removing advertising on \(name)")
        let features = try await client.execute(MgmtReadAdvertisingFeatures(), index: mgmtIndex)
        let listed = Set(features.instances)
        var removed: [UInt8] = []
        var stillRunning: [Int32] = []
        for record in records.loadInstances(name) {
            for instance in record.instances where listed.contains(instance) {
                _ = try await client.execute(MgmtRemoveAdvertising(instance: instance), index: mgmtIndex)
                removed.append(instance)
            }
            if Sys.processExists(record.pid) {
                stillRunning.append(record.pid)
            } else {
                records.removeRecord(record.file)
            }
        }
        let others = features.instances.filter { !removed.contains($0) }
        var line =
            removed.isEmpty
            ? "no advertising instance of ibeacon's on \(name) (none recorded in \(records.directory))"
            : "removed ibeacon's advertising instance(s) \(removed.map(String.init).joined(separator: ", ")) on \(name)"
        if !others.isEmpty {
            line += "; other programs' instance(s) \(others.map(String.init).joined(separator: ", ")) left alone"
        }
        if !stillRunning.isEmpty {
            line +=
                "; ibeacon process(es) \(stillRunning.map(String.init).joined(separator: ", ")) still running will "
                + "put theirs back: stop them (kill PID or systemctl stop)"
        }
        return line
    }

    /// Scans through an advertisement monitor; while the kernel has the adapter powered off (no
    /// bluetoothd powers it) a monitor would wait for someone to power it: raw HCI scans now.
    public func sightingSource(mode: AdvertisingMode) async throws -> any SightingSource {
        let info = try? await client.execute(MgmtReadControllerInfo(), index: mgmtIndex)
        guard let info, info.currentSettings.contains(.powered) else {
            await client.close()
            logger.notice("\(name) is powered off in the kernel (no bluetoothd powered it): scanning through raw HCI")
            return try await rawFallback.sightingSource(mode: mode)
        }
        do {
            try requireAdministration("scanning on \(name)")
        } catch {
            await client.close()
            throw error
        }
        if mode != .auto {
            logger.notice(
                "--mode \(mode.rawValue) applies to raw HCI; through the kernel it picks the scanning commands (--device raw:\(name) to choose)"
            )
        }
        return MgmtSightingSource(
            client: client, index: mgmtIndex, scanWindowRecords: records.scanWindow(name), logger: logger)
    }

    /// `info` through the management interface (no capability needed).
    public func describe() async throws -> AdapterDescription {
        defer { Task { await client.close() } }
        let info = try await client.execute(MgmtReadControllerInfo(), index: mgmtIndex)
        let features = try? await client.execute(MgmtReadAdvertisingFeatures(), index: mgmtIndex)
        let version = try? await client.execute(MgmtReadVersion(), index: .none)
        return Self.describe(info, features: features, version: version, name: name)
    }

    static func describe(
        _ info: MgmtReadControllerInfo.ReturnParameters, features: MgmtReadAdvertisingFeatures.ReturnParameters?,
        version: MgmtReadVersion.ReturnParameters?, name: String
    ) -> AdapterDescription {
        let settings = info.currentSettings
        let json = JSONObject([
            ("device", .string(name)), ("path", .string(ControllerPath.kernel.rawValue)),
            ("address", .string(info.address.description)), ("name", .string(info.name)),
            ("manufacturer", .integer(Int64(info.manufacturer))),
            ("manufacturerName", .string(CompanyIdentifier(rawValue: info.manufacturer).description)),
            ("powered", .bool(settings.contains(.powered))), ("lowEnergy", .bool(settings.contains(.lowEnergy))),
            ("settings", .string(settings.description)),
            ("supportedSettings", .string(info.supportedSettings.description)),
            ("managementVersion", .nullable(version.map { "\($0.version).\($0.revision)" })),
            ("maxAdvertisingInstances", .nullable(features.map { Int($0.maxInstances) })),
            (
                "advertisingInstances",
                features.map { .array($0.instances.map { .integer(Int64($0)) }) } ?? .null
            ),
            ("maxAdvertisingDataLength", .nullable(features.map { Int($0.maxAdvertisingDataLength) })),
            ("advertisingFlags", .nullable(features.map { $0.supportedFlags.description })),
            ("canSetTxPower", .nullable(features.map { $0.supportedFlags.contains(.canSetTxPower) })),
        ])
        var lines = [
            "device:              \(name)",
            "path:                the kernel's management interface"
                + (version.map { " \($0.version).\($0.revision)" } ?? "") + " (raw:\(name) for raw HCI)",
            "address:             \(info.address)",
            "name:                \(info.name)",
            "manufacturer:        \(CompanyIdentifier(rawValue: info.manufacturer))",
            "powered:             \(settings.contains(.powered) ? "yes" : "no")",
            "Low Energy:          \(settings.contains(.lowEnergy) ? "on" : "off")",
            "settings:            \(settings)",
        ]
        if let f = features {
            let used = f.instances.isEmpty ? "none" : f.instances.map(String.init).joined(separator: ", ")
            lines += [
                "advertising instances: \(f.maxInstances) (in use: \(used))",
                "max adv data length: \(f.maxAdvertisingDataLength) bytes",
                "advertising flags:   \(f.supportedFlags)",
                "TX power settable:   \(f.supportedFlags.contains(.canSetTxPower) ? "yes" : "no")",
            ]
        }
        return AdapterDescription(lines: lines, json: json)
    }
}
