import IBeaconCore
import Logging

/// `hciN` managed by the kernel: advertising instances, advertisement monitors and adapter
/// information through its management interface, next to bluetoothd.
public struct KernelAdapter: Adapter {
    public let client: MgmtClient
    public let index: UInt16
    /// Where `advertise` records its instances (for `stop`) and scans their widened window.
    public let records: RuntimeRecords
    /// Throws when this process may not change the adapter (CAP_NET_ADMIN); `what` names the change.
    public let requireAdministration: @Sendable (_ what: String) throws -> Void
    /// Called once advertising starts: starts the guardian that removes the instances should
    /// this process die without doing it (`ibeacon stop --after-exit-of PID`).
    public let startGuardian: @Sendable (_ adapter: String) -> Void
    /// Raw HCI on the same adapter, for scanning while the kernel has it powered off.
    public let rawFallback: ControllerAdapter
    /// What the waits of the advertising session sleep on (a `ManualClock` in tests).
    public let clock: any Clock<Duration>
    /// Advertise only when the instances can be recorded where root's `stop` believes them:
    /// for a process with more privileges than its user (the setcap'd binary run by anyone),
    /// whose beacon must not outlive a SIGKILL unrecorded (issue 30, item 5).
    public let requireRecords: Bool
    let logger: Logger

    public init(
        client: MgmtClient, index: UInt16, records: RuntimeRecords,
        requireAdministration: @escaping @Sendable (String) throws -> Void,
        startGuardian: @escaping @Sendable (String) -> Void = { _ in }, rawFallback: ControllerAdapter,
        clock: any Clock<Duration> = ContinuousClock(), requireRecords: Bool = false, logger: Logger
    ) {
        self.client = client
        self.index = index
        self.records = records
        self.requireAdministration = requireAdministration
        self.startGuardian = startGuardian
        self.rawFallback = rawFallback
        self.clock = clock
        self.requireRecords = requireRecords
        self.logger = logger
    }

    public var name: String { "hci\(index)" }
    private var mgmtIndex: MgmtIndex { MgmtIndex(index) }

    /// Registers the beacons as advertising instances and keeps them there until cancelled,
    /// then removes them; records the instance numbers for `stop`.
    public func advertise(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void,
        onLost: @escaping @Sendable (String) -> Void, onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws {
        if request.mode != .auto {
            logger.warning("--mode \(request.mode.rawValue) applies to raw HCI only; the kernel chooses the commands")
        }
        try await client.closing {
            try await advertiseOpen(request, onReady: onReady, onLost: onLost, onRestored: onRestored)
        }
    }

    private func advertiseOpen(
        _ request: AdvertisingRequest, onReady: @escaping @Sendable (AdvertisingStatus) -> Void,
        onLost: @escaping @Sendable (String) -> Void, onRestored: @escaping @Sendable (AdvertisingStatus?) -> Void
    ) async throws {
        try requireAdministration("advertising on \(name)")
        try requireRecordDirectory()
        let records = self.records
        let adapter = name
        let logger = self.logger
        let address = try await client.execute(MgmtReadControllerInfo(), index: mgmtIndex).address
        var session = MgmtAdvertisingSession(
            advertiser: MgmtAdvertiser(beacons: request.beacons, index: mgmtIndex, logger: logger),
            client: client, logger: logger, clock: clock,
            onInstancesChanged: { records.saveInstances($0, adapter: adapter, address: "\(address)", logger: logger) })
        session.updates = request.updates
        startGuardian(adapter)
        try await session.run(
            onReady: { status in
                for w in status.warnings { logger.warning("\(w)") }
                onReady(status)
            }, onLost: onLost, onRestored: { onRestored(nil) })
    }

    /// With `requireRecords`: throws unless this process can write its record in the runtime
    /// directory (or its own directory below it), where root's `stop` and the guardian find it.
    private func requireRecordDirectory() throws {
        guard requireRecords else { return }
        do throws(FileError) {
            _ = try records.writableDirectory()
        } catch {
            throw FileError(
                .cannotWrite, path: records.directory,
                "\(error.message): this ibeacon runs with file capabilities, and advertises only where it can record "
                    + "its instances for `ibeacon stop` (so that nobody's beacon outlives a kill unrecorded); run it as "
                    + "root or through the systemd unit, or have root give this user a directory: "
                    + "`sudo install -d -m 0755 -o $(id -un) \(records.directory)/$(id -un)`")
        }
    }

    /// Removes the instances that ibeacon processes now gone recorded for this adapter
    /// (`RuntimeRecords.leftovers`; only `writer`'s when given, for its guardian), never others.
    public func stopAdvertising(leftBy writer: Int32?) async throws -> StopReport? {
        try await client.closing { try await removeLeftovers(leftBy: writer) }
    }

    private func removeLeftovers(leftBy writer: Int32?) async throws -> StopReport {
        try requireAdministration("removing advertising on \(name)")
        let address = try await client.execute(MgmtReadControllerInfo(), index: mgmtIndex).address
        let features = try await client.execute(MgmtReadAdvertisingFeatures(), index: mgmtIndex)
        var plan = records.leftovers(
            adapter: name, address: "\(address)", listed: Set(features.instances), writer: writer)
        for note in plan.notes { logger.notice("\(note)") }
        for instance in plan.instances {
            do {
                _ = try await client.execute(MgmtRemoveAdvertising(instance: instance), index: mgmtIndex)
            } catch {
                // Gone meanwhile (a power cycle drops every instance): the record is spent anyway,
                // so that a later stop cannot take the number from whoever gets it next.
                logger.notice("instance \(instance) on \(name) could not be removed: \(error)")
                plan.instances.removeAll { $0 == instance }
            }
        }
        for record in plan.staleRecords { records.remove(record) }
        return Self.stopSummary(plan, listed: features.instances, adapter: name, directory: records.directory)
    }

    static func stopSummary(_ plan: LeftoverInstances, listed: [UInt8], adapter: String, directory: String)
        -> StopReport
    {
        StopReport(
            .removedInstances(plan.instances), adapter: adapter,
            othersLeft: listed.filter { !plan.instances.contains($0) }, stillRunning: plan.running,
            recordDirectory: directory)
    }

    /// The address from Read Controller Information; the socket stays open for what follows.
    public func address() async throws -> BDAddress? {
        try await client.execute(MgmtReadControllerInfo(), index: mgmtIndex).address
    }

    public func close() async { await client.close() }

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
            client: client, index: mgmtIndex,
            scanWindowRecords: records.scanWindowRecords(adapter: name, logger: logger),
            logger: logger)
    }

    /// `info` through the management interface (no capability needed).
    public func describe() async throws -> AdapterDescription {
        try await client.closing { try await describeOpen() }
    }

    private func describeOpen() async throws -> AdapterDescription {
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
        let json: [(String, JSONValue)] = [
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
        ]
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
        return AdapterDescription(lines: lines, known: json)
    }
}
