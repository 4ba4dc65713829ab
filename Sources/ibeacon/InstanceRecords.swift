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

extension InstanceRecords {
    /// The records as the kernel path uses them (`AdapterOpener`).
    var runtimeRecords: RuntimeRecords {
        let records = self
        return RuntimeRecords(
            directory: directory, saveInstances: { records.save($0, adapter: $1) },
            loadInstances: { records.load(adapter: $0) }, removeRecord: { unlink($0) },
            scanWindow: { records.scanWindowRecords(adapter: $0) })
    }
}
