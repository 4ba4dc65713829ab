import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif
#if canImport(Glibc)
    import Glibc
#endif

/// The kernel's management interface, when `--device hciN` goes through it.
struct KernelPath {
    var client: MgmtClient
    var index: UInt16
    var name: String { "hci\(index)" }
}

extension DeviceOptions {
    /// The management path for `hciN` when the kernel manages that adapter; nil for `raw:hciN`,
    /// serial/TCP/btsnoop devices, and adapters the kernel does not manage (a user channel, or
    /// no such adapter: the raw path then says which adapters exist).
    func kernelPath(logger: Logger) async throws -> KernelPath? {
        guard case .hci(let index, let raw) = try spec(), !raw else { return nil }
        let client: MgmtClient
        do {
            client = try await openMgmtClient(logger: logger, timeout: .milliseconds(Int64(timeout * 1000)))
        } catch let error as TransportError where error.kind == .bluetoothUnavailable {
            throw error
        } catch {
            logger.notice("the kernel's management interface cannot be opened (\(error)); using raw HCI on hci\(index)")
            return nil
        }
        guard await kernelManages(index: index, client: client) else {
            await client.close()
            logger.debug("hci\(index) is not in the kernel's management index list; using raw HCI")
            return nil
        }
        // Powered but with LE off in the kernel: no bluetoothd (or btmgmt) has set the adapter up for
        // LE, and the kernel refuses advertising (Rejected). Raw HCI works there, as it always did.
        if let info = try? await client.execute(MgmtReadControllerInfo(), index: MgmtIndex(index)),
            info.currentSettings.contains(.powered), !info.currentSettings.contains(.lowEnergy)
        {
            await client.close()
            let note =
                "hci\(index) is powered but Low Energy is off in the kernel (no bluetoothd set it up): "
                + "using raw HCI; `btmgmt --index \(index) le on` or bluetoothd makes ibeacon go through the kernel"
            logger.notice("\(note)")
            return nil
        }
        if btsnoop != nil {
            let note =
                "--btsnoop records HCI packets only: through the kernel's management interface there are none "
                + "to record; run `btmon -w FILE` alongside to capture the management and HCI traffic, "
                + "or use --device raw:hci\(index)"
            logger.warning("\(note)")
        }
        return KernelPath(client: client, index: index)
    }
}

/// `advertise` through the kernel: registers the beacons as advertising instances and keeps
/// them there until SIGINT/SIGTERM or the duration ends, then removes them.
func advertiseThroughKernel(
    _ path: KernelPath, specs: [BeaconSpec], json: Bool, logger: Logger, mqtt: AdvertiseMQTT? = nil,
    onReady: @escaping @Sendable (String) -> Void
) async throws {
    guard hasNetAdminCapability() else { throw missingNetAdmin("advertising on \(path.name)") }
    let records = RuntimeRecords.current()
    let adapter = path.name
    let address = try await path.client.execute(MgmtReadControllerInfo(), index: MgmtIndex(path.index)).address
    let session = MgmtAdvertisingSession(
        advertiser: MgmtAdvertiser(beacons: specs, index: MgmtIndex(path.index), logger: logger),
        client: path.client, logger: logger,
        onInstancesChanged: { records.saveInstances($0, adapter: adapter, address: "\(address)", logger: logger) })
    defer { Task { await path.client.close() } }
    startGuardian(adapter: adapter, logger: logger)
    try await session.run(
        onReady: { status in
            for w in status.warnings { logger.warning("\(w)") }
            onReady(kernelStatusLine(status, device: adapter, json: json))
            mqtt?.update(
                .advertising, txPower: status.instances.map { $0.txPower.map { Int($0) } },
                addresses: status.instances.map { $0.address?.description })
        }, onLost: { cause in mqtt?.update(.recovering, cause: cause) },
        onRestored: { mqtt?.update(.advertising) })
}

/// Starts `ibeacon stop --device hciN --after-exit-of PID` for this process: should it die
/// without removing its instances (SIGKILL, a crash), they are removed at once, before a power
/// cycle could give their numbers to another program that `stop` would then take them from.
func startGuardian(adapter: String, logger: Logger) {
    // Without /proc nothing tells a gone advertiser from a live one (and no record is written).
    guard let me = ProcessTable.system.identity(getpid()) else { return }
    let arguments = [
        ownExecutablePath(), "stop", "--device", adapter, "--after-exit-of", "\(me.pid)", "--start-time",
        "\(me.startTime)",
    ]
    do {
        let pid = try startHelperProcess(arguments)
        logger.debug("started the guardian (pid \(pid)) that removes this process's instances if it dies")
    } catch {
        logger.notice(
            "cannot start the guardian that removes the instances if ibeacon dies (\(error)); use `ibeacon stop`")
    }
}

func kernelStatusLine(_ status: MgmtAdvertisingStatus, device: String, json: Bool) -> String {
    status.instances.map { i in
        let beacon = i.spec.beacon
        let tx = i.txPower.map { "\($0) dBm" } ?? "chosen by the kernel"
        let interval =
            i.method == .extendedParameters
            ? "every \(i.spec.intervalMilliseconds) ms" : "at the kernel's default interval"
        let address = i.address?.description
        if json {
            return jsonLine([
                "event": "advertising", "device": device, "path": "mgmt", "instance": Int(i.instance),
                "address": address, "connectable": i.connectable,
                "method": i.method.rawValue, "uuid": beacon.uuidString, "major": Int(beacon.major),
                "minor": Int(beacon.minor), "measuredPower": Int(beacon.measuredPower),
                "intervalMs": i.method == .extendedParameters ? i.spec.intervalMilliseconds : nil,
                "txPower": i.txPower.map { Int($0) }, "profile": i.spec.label,
            ])
        }
        let from = address.map { "from \($0)" } ?? "from a new non-resolvable address"
        return "advertising \(i.spec.label) on \(device) through the kernel (instance \(i.instance)) \(from)"
            + "\(i.connectable ? ", connectable" : ""): "
            + "\(beacon.uuidString) major \(beacon.major) minor \(beacon.minor), measured power "
            + "\(beacon.measuredPower) dBm, \(interval), TX power \(tx)"
    }.joined(separator: "\n")
}

/// `stop` through the kernel: removes the instances that ibeacon processes now gone recorded
/// for this adapter (`RuntimeRecords.leftovers`), never others.
func stopThroughKernel(_ path: KernelPath, logger: Logger, writer: Int32? = nil) async throws -> String {
    defer { Task { await path.client.close() } }
    guard hasNetAdminCapability() else { throw missingNetAdmin("removing advertising on \(path.name)") }
    let records = RuntimeRecords.current()
    let index = MgmtIndex(path.index)
    let address = try await path.client.execute(MgmtReadControllerInfo(), index: index).address
    let features = try await path.client.execute(MgmtReadAdvertisingFeatures(), index: index)
    var plan = records.leftovers(
        adapter: path.name, address: "\(address)", listed: Set(features.instances), writer: writer)
    for note in plan.notes { logger.notice("\(note)") }
    for instance in plan.instances {
        do {
            _ = try await path.client.execute(MgmtRemoveAdvertising(instance: instance), index: index)
        } catch {
            // Gone meanwhile (a power cycle drops every instance): the record is spent anyway,
            // so that a later stop cannot take the number from whoever gets it next.
            logger.notice("instance \(instance) on \(path.name) could not be removed: \(error)")
            plan.instances.removeAll { $0 == instance }
        }
    }
    for record in plan.staleRecords { records.remove(record) }
    return stopSummary(plan, listed: features.instances, adapter: path.name, directory: records.directory)
}

func stopSummary(_ plan: LeftoverInstances, listed: [UInt8], adapter: String, directory: String) -> String {
    let removed = plan.instances
    let others = listed.filter { !removed.contains($0) }
    var line =
        removed.isEmpty
        ? "no advertising instance of ibeacon's on \(adapter) (none recorded in \(directory) by a process now gone)"
        : "removed ibeacon's advertising instance(s) \(removed.map(String.init).joined(separator: ", ")) on \(adapter)"
    if !others.isEmpty {
        line += "; other programs' instance(s) \(others.map(String.init).joined(separator: ", ")) left alone"
    }
    if !plan.running.isEmpty {
        line +=
            "; ibeacon process(es) \(plan.running.map(String.init).joined(separator: ", ")) still running: "
            + "stop them instead (kill PID or systemctl stop), which removes their instances"
    }
    return line
}
