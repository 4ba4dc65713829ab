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

/// Where `advertise` records the instance numbers it registered, so that `stop` removes those
/// and no other program's: `$IBEACON_RUNTIME_DIR` or /run/ibeacon, one file per process,
/// `hciN-PID.instances`, one `instance N` line each.
struct InstanceRecords {
    var directory: String
    var logger: Logger

    init(logger: Logger) {
        let env = ProcessInfo.processInfo.environment["IBEACON_RUNTIME_DIR"].flatMap { $0.isEmpty ? nil : $0 }
        directory = env ?? "/run/ibeacon"
        self.logger = logger
    }

    func path(adapter: String, pid: Int32) -> String { "\(directory)/\(adapter)-\(pid).instances" }

    /// Records (or, with no instances, forgets) this process's instances. Failing to write is
    /// a warning: `advertise` still removes its own instances when it exits.
    func save(_ instances: [UInt8], adapter: String) {
        let file = path(adapter: adapter, pid: getpid())
        if instances.isEmpty {
            unlink(file)
            return
        }
        // One level of directory is created here (/run/ibeacon, 0755); its parent must exist.
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            let note =
                "cannot create \(directory) (errno \(errno)) to record the advertising instances; "
                + "`ibeacon stop` will not know them (set IBEACON_RUNTIME_DIR to a writable directory)"
            logger.warning("\(note)")
            return
        }
        do {
            try ProfileStore.writeAtomically(file, Array(instances.map { "instance \($0)\n" }.joined().utf8))
        } catch {
            let note =
                "cannot record the advertising instances in \(file) (\(error)); "
                + "`ibeacon stop` will not know them (set IBEACON_RUNTIME_DIR to a writable directory)"
            logger.warning("\(note)")
        }
    }

    /// Every record for `adapter` in the directory and its subdirectories one level down (the
    /// systemd unit gives each service its own, /run/ibeacon/NAME): the process id and its
    /// instances. Malformed lines are skipped.
    func load(adapter: String) -> [(pid: Int32, file: String, instances: [UInt8])] {
        guard let top = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var out: [(Int32, String, [UInt8])] = []
        let dirs = [directory] + top.sorted().map { "\(directory)/\($0)" }  // files simply list nothing
        for dir in dirs { out += load(adapter: adapter, in: dir) }
        return out
    }

    private func load(adapter: String, in directory: String) -> [(pid: Int32, file: String, instances: [UInt8])] {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var out: [(Int32, String, [UInt8])] = []
        for name in names.sorted() where name.hasPrefix("\(adapter)-") && name.hasSuffix(".instances") {
            let pidText = name.dropFirst(adapter.count + 1).dropLast(".instances".count)
            guard let pid = Int32(pidText), pid > 0 else { continue }
            let file = "\(directory)/\(name)"
            guard let data = try? ProfileStore.read(file), data.count <= 4096 else { continue }
            let instances = String(decoding: data, as: UTF8.self).split(separator: "\n").compactMap { line -> UInt8? in
                let parts = line.split(separator: " ")
                guard parts.count == 2, parts[0] == "instance", let n = UInt8(parts[1]), n != 0 else { return nil }
                return n
            }
            out.append((pid, file, instances))
        }
        return out
    }
}

/// The monitor scan window a running `scan`/`calibrate`/`monitor` widened and will restore, next
/// to the instance records: `hciN-PID.scanwindow`, one line `interval N window N` (0.625 ms
/// slots). Another ibeacon scan on the same adapter sees it, so only the last one to end restores.
extension InstanceRecords {
    func scanWindowPath(adapter: String, pid: Int32) -> String { "\(directory)/\(adapter)-\(pid).scanwindow" }

    func scanWindowRecords(adapter: String) -> ScanWindowRecords {
        let records = self
        return ScanWindowRecords(
            inherited: { records.liveScanWindows(adapter: adapter).first?.parameters },
            save: { records.saveScanWindow($0, adapter: adapter) },
            othersScanning: { records.liveScanWindows(adapter: adapter).map(\.pid) })
    }

    func saveScanWindow(_ parameters: MonitorScanParameters?, adapter: String) {
        let file = scanWindowPath(adapter: adapter, pid: getpid())
        guard let parameters else {
            unlink(file)
            return
        }
        if mkdir(directory, 0o755) != 0 && errno != EEXIST {
            logger.info(
                "cannot create \(directory) (errno \(errno)): another ibeacon scan will not know the scan window to restore"
            )
            return
        }
        let line = "interval \(parameters.interval) window \(parameters.window)\n"
        do {
            try ProfileStore.writeAtomically(file, Array(line.utf8))
        } catch {
            logger.info("cannot record the scan window in \(file) (\(error)): another ibeacon scan will not know it")
        }
    }

    /// Records of other running processes (the stale ones of processes gone are removed).
    func liveScanWindows(adapter: String) -> [(pid: Int32, parameters: MonitorScanParameters)] {
        guard let top = try? FileManager.default.contentsOfDirectory(atPath: directory) else { return [] }
        var out: [(Int32, MonitorScanParameters)] = []
        for dir in [directory] + top.sorted().map({ "\(directory)/\($0)" }) {
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: dir) else { continue }
            for name in names.sorted() where name.hasPrefix("\(adapter)-") && name.hasSuffix(".scanwindow") {
                let pidText = name.dropFirst(adapter.count + 1).dropLast(".scanwindow".count)
                guard let pid = Int32(pidText), pid > 0, pid != getpid() else { continue }
                let file = "\(dir)/\(name)"
                guard Sys.processExists(pid) else {
                    unlink(file)
                    continue
                }
                guard let data = try? ProfileStore.read(file), data.count <= 256 else { continue }
                let words = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" })
                guard words.count == 4, words[0] == "interval", words[2] == "window",
                    let interval = UInt16(words[1]), let window = UInt16(words[3])
                else { continue }
                out.append((pid, MonitorScanParameters(interval: interval, window: window)))
            }
        }
        return out
    }
}

/// `advertise` through the kernel: registers the beacons as advertising instances and keeps
/// them there until SIGINT/SIGTERM or the duration ends, then removes them.
func advertiseThroughKernel(
    _ path: KernelPath, specs: [BeaconSpec], json: Bool, logger: Logger, mqtt: AdvertiseMQTT? = nil,
    onReady: @escaping @Sendable (String) -> Void
) async throws {
    guard hasNetAdminCapability() else { throw missingNetAdmin("advertising on \(path.name)") }
    let records = InstanceRecords(logger: logger)
    let adapter = path.name
    let session = MgmtAdvertisingSession(
        advertiser: MgmtAdvertiser(beacons: specs, index: MgmtIndex(path.index), logger: logger),
        client: path.client, logger: logger,
        onInstancesChanged: { records.save($0, adapter: adapter) })
    defer { Task { await path.client.close() } }
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

/// `stop` through the kernel: removes the instances ibeacon recorded for this adapter, never others.
func stopThroughKernel(_ path: KernelPath, logger: Logger) async throws -> String {
    defer { Task { await path.client.close() } }
    guard hasNetAdminCapability() else { throw missingNetAdmin("removing advertising on \(path.name)") }
    let records = InstanceRecords(logger: logger)
    let index = MgmtIndex(path.index)
    let features = try await path.client.execute(MgmtReadAdvertisingFeatures(), index: index)
    let listed = Set(features.instances)
    var removed: [UInt8] = []
    var stillRunning: [Int32] = []
    for record in records.load(adapter: path.name) {
        let ours = record.instances.filter { listed.contains($0) }
        for instance in ours {
            _ = try await path.client.execute(MgmtRemoveAdvertising(instance: instance), index: index)
            removed.append(instance)
        }
        if Sys.processExists(record.pid) {
            stillRunning.append(record.pid)
        } else {
            unlink(record.file)
        }
    }
    let others = features.instances.filter { !removed.contains($0) }
    var line =
        removed.isEmpty
        ? "no advertising instance of ibeacon's on \(path.name) (none recorded in \(records.directory))"
        : "removed ibeacon's advertising instance(s) \(removed.map(String.init).joined(separator: ", ")) on \(path.name)"
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
