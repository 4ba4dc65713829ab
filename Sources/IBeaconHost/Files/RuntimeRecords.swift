import Logging
import SystemPackage

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// Which process wrote a record: its ID, when it started (`/proc/PID/stat` field 22, clock
/// ticks since boot) and the boot it ran in (`/proc/sys/kernel/random/boot_id`). A process ID
/// alone is reused; the three together name one process.
public struct ProcessIdentity: Sendable, Equatable {
    public var pid: Int32
    public var startTime: UInt64
    public var bootID: String

    public init(pid: Int32, startTime: UInt64, bootID: String) {
        self.pid = pid
        self.startTime = startTime
        self.bootID = bootID
    }
}

/// How records learn which processes run: the system's `/proc`, or a test's table.
public struct ProcessTable: Sendable {
    /// The identity of the process running as `pid` now; nil when there is none.
    public var identity: @Sendable (Int32) -> ProcessIdentity?
    /// This boot's ID.
    public var bootID: @Sendable () -> String?
    /// Whether a process `pid` exists at all, whoever's it is (`kill(pid, 0)`: EPERM means it
    /// does). Where `/proc` hides other users' processes (the mount option `hidepid=1`/`2`,
    /// systemd's `ProtectProc=invisible`), `identity` is nil for a process that runs: reading
    /// `/proc/PID/stat` then fails with ENOENT (invisible) or EACCES, just as for one that is gone.
    public var exists: @Sendable (Int32) -> Bool

    public init(
        identity: @escaping @Sendable (Int32) -> ProcessIdentity?, bootID: @escaping @Sendable () -> String?,
        exists: @escaping @Sendable (Int32) -> Bool = { _ in false }
    ) {
        self.identity = identity
        self.bootID = bootID
        self.exists = exists
    }

    /// Returns once the process that has run as `pid` since `startTime` is gone: no process
    /// runs as `pid`, or another one does (the PID reused). Polled every `interval`, as `stop`'s
    /// guardian is its advertiser's sibling, not its parent, and cannot wait(2) for it. Throws
    /// `CancellationError` when the task is cancelled.
    public func waitUntilGone(
        _ pid: Int32, startTime: UInt64, polling interval: Duration = .milliseconds(200)
    ) async throws {
        while let now = identity(pid), now.startTime == startTime {
            try await Task.sleep(for: interval)
        }
    }

    /// `/proc`: the start time from `/proc/PID/stat`, the boot from `boot_id`.
    public static let system = ProcessTable(
        identity: { pid in
            guard pid > 0, let boot = ProcessTable.systemBootID(),
                let stat = try? Sys.readFile("/proc/\(pid)/stat"),
                let start = ProcessTable.startTime(statLine: String(decoding: stat, as: UTF8.self))
            else { return nil }
            return ProcessIdentity(pid: pid, startTime: start, bootID: boot)
        },
        bootID: { ProcessTable.systemBootID() }, exists: { Sys.processExists($0) })

    static func systemBootID() -> String? {
        guard let bytes = try? Sys.readFile("/proc/sys/kernel/random/boot_id") else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).filter { !$0.isWhitespace }
        return text.isEmpty ? nil : text
    }

    /// Field 22 (`starttime`) of a `/proc/PID/stat` line; the command name (field 2) may hold
    /// spaces and parentheses, so fields are counted after its last `)`.
    static func startTime(statLine: String) -> UInt64? {
        guard let close = statLine.lastIndex(of: ")") else { return nil }
        let fields = statLine[statLine.index(after: close)...].split(separator: " ")
        // fields[0] is field 3 (state): field 22 is fields[19].
        guard fields.count > 19 else { return nil }
        return UInt64(fields[19])
    }
}

/// One record file: who wrote it and what it says.
public struct RuntimeRecord: Sendable, Equatable {
    /// Where it is, for messages and removal.
    public var file: String
    public var writer: ProcessIdentity
    /// `address` line: the adapter's address when the record was written.
    public var adapterAddress: String?
    /// `instance N` lines.
    public var instances: [UInt8]
    /// `interval N window N` (scan-window records).
    public var scanWindow: MonitorScanParameters?
    /// The user the file belongs to (root, or its directory's owner).
    public var owner: UInt32 = 0
    /// Every line, as written (the keys other readers know, such as `SessionRecord`'s).
    public var lines: [String] = []
}

/// A record that was not believed, and why (for the log and `stop`'s output).
public struct RefusedRecord: Sendable, Equatable {
    public var file: String
    public var reason: String
}

/// The files `advertise` and the scans keep in the runtime directory so that `stop` and other
/// ibeacon scans know what a process holds: `hciN-PID.instances` (the kernel advertising
/// instances it registered) and `hciN-PID.scanwindow` (the monitor scan window it widened), in
/// `/run/ibeacon` or one directory below it (the systemd units' `RuntimeDirectory=ibeacon/NAME`).
///
/// A record is believed only when nobody but its writer could have written it: the directory
/// (and a subdirectory) belongs to root or to the user running ibeacon and is writable by its
/// owner only, and the record is a regular file (opened `O_NOFOLLOW | O_NONBLOCK`, checked with
/// `fstat`) that belongs to root or to its directory's owner and is writable by its owner only.
/// `$IBEACON_RUNTIME_DIR` replaces `/run/ibeacon` only when ibeacon runs without elevated
/// privileges (`ProcessEnvironment`). A record names its writer by process ID, start time and
/// boot ID, so a reused process ID is not mistaken for it. `stop` removes the instances of a
/// record only when the record belongs to root or to the user running it: a directory of its
/// own lets a user (or a monitor's hook) write a record naming any instance.
public struct RuntimeRecords: Sendable {
    /// Where records live unless `$IBEACON_RUNTIME_DIR` says otherwise.
    public static let systemDirectory = "/run/ibeacon"
    /// Records are a few lines; a larger file is not one.
    static let maximumSize = 4096

    public var directory: String
    /// The user records may belong to besides root (the effective user).
    public var user: UInt32
    public var processes: ProcessTable

    public init(directory: String, user: UInt32, processes: ProcessTable = .system) {
        self.directory = directory
        self.user = user
        self.processes = processes
    }

    /// The directory for this process: `$IBEACON_RUNTIME_DIR` when honoured, else /run/ibeacon.
    public static func current(environment: ProcessEnvironment = .current) -> RuntimeRecords {
        RuntimeRecords(
            directory: environment.value("IBEACON_RUNTIME_DIR") ?? systemDirectory, user: Sys.effectiveUserID())
    }

    // MARK: - Writing

    /// This process's identity, for the records it writes; nil without `/proc`.
    public func ownIdentity() -> ProcessIdentity? { processes.identity(Sys.processID()) }

    /// The directory this process writes its records in: the runtime directory when it may
    /// write there (creating it, one level, 0755), else the one subdirectory of it that belongs
    /// to this user (what systemd's `RuntimeDirectory=` makes for a service that is not root).
    public func writableDirectory() throws(FileError) -> String {
        do throws(Errno) {
            try Sys.makeDirectory(directory, mode: 0o755)
        } catch {
            guard error == .fileExists else {
                throw FileError(.cannotWrite, path: directory, "cannot be created: \(error)")
            }
        }
        if Sys.isWritable(directory) { return directory }
        let top = try openTrustedDirectory()
        defer { try? top.descriptor.close() }
        for name in ((try? Sys.directoryEntries(at: top.descriptor)) ?? []).sorted() {
            guard let sub = try? Sys.open(at: top.descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else {
                continue
            }
            defer { try? sub.close() }
            if let status = try? Sys.status(sub), status.uid == user, status.mode & 0o022 == 0 {
                return "\(directory)/\(name)"
            }
        }
        throw FileError(
            .cannotWrite, path: directory,
            "is not writable by uid \(user), and has no directory of that user's below it")
    }

    /// Writes `lines` as the record `name` of this process (atomically, mode 0644 less the
    /// umask); returns the file written.
    @discardableResult
    public func write(name: String, lines: [String]) throws(FileError) -> String {
        guard let me = ownIdentity() else {
            throw FileError(.cannotWrite, path: directory, "cannot tell this process's start time (no /proc)")
        }
        let header = ["pid \(me.pid)", "start \(me.startTime)", "boot \(me.bootID)"]
        let file = "\(try writableDirectory())/\(name)"
        try SafeFile.writeAtomically(file, Array((header + lines).map { $0 + "\n" }.joined().utf8))
        return file
    }

    // MARK: - Reading

    /// Every record whose name is `PREFIX-PID.SUFFIX` (`hci0-1234.instances`) in the directory
    /// and the directories one level below it, believed or refused (see the type's comment).
    public func load(prefix: String, suffix: String) -> (records: [RuntimeRecord], refused: [RefusedRecord]) {
        var records: [RuntimeRecord] = []
        var refused: [RefusedRecord] = []
        let top: (descriptor: FileDescriptor, status: FileStatus)
        do throws(FileError) {
            top = try openTrustedDirectory()
        } catch {
            if error.kind != .notFound { refused.append(RefusedRecord(file: directory, reason: error.message)) }
            return ([], refused)
        }
        defer { try? top.descriptor.close() }
        let names = ((try? Sys.directoryEntries(at: top.descriptor)) ?? []).sorted()
        scan(top.descriptor, top.status, shown: directory, names: names, prefix: prefix, suffix: suffix) {
            records.append($0)
        } refuse: {
            refused.append($0)
        }
        for name in names where !Self.isRecordName(name, prefix: prefix, suffix: suffix) {
            guard let sub = try? Sys.open(at: top.descriptor, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW) else {
                continue  // not a directory (or a link to one: never followed)
            }
            defer { try? sub.close() }
            let shown = "\(directory)/\(name)"
            guard let status = try? Sys.status(sub) else { continue }
            // Only root (or the owner of a directory writable by its owner only) can make a
            // directory here; it belongs to whoever it was given to (systemd's DynamicUser).
            if status.mode & 0o022 != 0 {
                refused.append(RefusedRecord(file: shown, reason: "is writable by group or others"))
                continue
            }
            let subNames = ((try? Sys.directoryEntries(at: sub)) ?? []).sorted()
            scan(sub, status, shown: shown, names: subNames, prefix: prefix, suffix: suffix) {
                records.append($0)
            } refuse: {
                refused.append($0)
            }
        }
        return (records, refused)
    }

    /// Removes a record file (it is trusted: it was returned by `load`).
    public func remove(_ record: RuntimeRecord) {
        try? Sys.unlink(record.file)
    }

    /// Whether the record's writer is gone: another boot, no such process, or another process
    /// with its ID now (started at another time). A process with its ID that this process may
    /// not look at (`/proc` hides it: `hidepid`, `ProtectProc=invisible`) is taken for the
    /// writer: it may be, and removing a running advertiser's instances is the worse mistake.
    public func writerIsGone(_ record: RuntimeRecord) -> Bool {
        guard let boot = processes.bootID(), boot == record.writer.bootID else { return true }
        guard let now = processes.identity(record.writer.pid) else { return !processes.exists(record.writer.pid) }
        return now != record.writer
    }

    /// Whether the record was written in another boot (nothing it names can still exist).
    public func isFromAnotherBoot(_ record: RuntimeRecord) -> Bool {
        processes.bootID() != record.writer.bootID
    }

    static func isRecordName(_ name: String, prefix: String, suffix: String) -> Bool {
        recordPID(name, prefix: prefix, suffix: suffix) != nil
    }

    static func recordPID(_ name: String, prefix: String, suffix: String) -> Int32? {
        guard name.hasPrefix("\(prefix)-"), name.hasSuffix(suffix), name.count > prefix.count + 1 + suffix.count
        else { return nil }
        let text = name.dropFirst(prefix.count + 1).dropLast(suffix.count)
        guard let pid = Int32(text), pid > 0 else { return nil }
        return pid
    }

    /// The runtime directory itself, reached without following links other users made, and
    /// checked: a directory, owned by root or this user, writable by its owner only.
    private func openTrustedDirectory() throws(FileError) -> (descriptor: FileDescriptor, status: FileStatus) {
        let location = try SafeFile.locate(directory, writing: false)
        defer { location.close() }
        guard location.status != nil else { throw FileError(.notFound, path: directory, "does not exist") }
        let fd: FileDescriptor
        do throws(Errno) {
            fd = try Sys.open(at: location.directory, location.name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        } catch {
            throw FileError(.notFound, path: directory, "cannot be opened as a directory: \(error)")
        }
        guard let status = try? Sys.status(fd) else {
            try? fd.close()
            throw FileError(.io, path: directory, "cannot be inspected")
        }
        guard status.uid == 0 || status.uid == user else {
            try? fd.close()
            throw FileError(
                .badData, path: directory,
                "belongs to uid \(status.uid), neither root nor uid \(user); its records are ignored")
        }
        guard status.mode & 0o022 == 0 else {
            try? fd.close()
            throw FileError(.badData, path: directory, "is writable by group or others; its records are ignored")
        }
        return (fd, status)
    }

    /// Reads the records among `names` in one directory (`owner`: that directory's status).
    private func scan(
        _ dir: FileDescriptor, _ owner: FileStatus, shown: String, names: [String], prefix: String, suffix: String,
        accept: (RuntimeRecord) -> Void, refuse: (RefusedRecord) -> Void
    ) {
        for name in names {
            guard let pid = Self.recordPID(name, prefix: prefix, suffix: suffix) else { continue }
            let file = "\(shown)/\(name)"
            switch readRecord(dir, name, owner: owner.uid, file: file, pid: pid) {
            case .success(let record): accept(record)
            case .failure(let error): refuse(RefusedRecord(file: file, reason: error.message))
            }
        }
    }

    private func readRecord(
        _ dir: FileDescriptor, _ name: String, owner: UInt32, file: String, pid: Int32
    ) -> Result<RuntimeRecord, FileError> {
        let fd: FileDescriptor
        do throws(Errno) {
            fd = try Sys.open(at: dir, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK)
        } catch {
            return .failure(FileError(.notFound, path: file, "cannot be opened (\(error)); a record is a regular file"))
        }
        defer { try? fd.close() }
        guard let status = try? Sys.status(fd) else {
            return .failure(FileError(.io, path: file, "cannot be inspected"))
        }
        guard status.isRegular else { return .failure(FileError(.badData, path: file, "is \(status.typeName)")) }
        guard status.uid == 0 || status.uid == owner else {
            return .failure(
                FileError(.badData, path: file, "belongs to uid \(status.uid), neither root nor its directory's owner"))
        }
        guard status.mode & 0o022 == 0, status.links == 1, status.size <= Self.maximumSize else {
            return .failure(
                FileError(.badData, path: file, "is writable by group or others, linked twice, or too large"))
        }
        guard let bytes = try? Sys.readToEnd(fd, limit: Self.maximumSize), bytes.count <= Self.maximumSize else {
            return .failure(FileError(.io, path: file, "cannot be read"))
        }
        return Self.parse(String(decoding: bytes, as: UTF8.self), file: file, pid: pid).map { record in
            var owned = record
            owned.owner = status.uid
            return owned
        }
    }

    /// Parses a record's lines (`pid`, `start`, `boot`, `address`, `instance N`,
    /// `interval N window N`); the `pid` line must agree with the file name.
    static func parse(_ text: String, file: String, pid: Int32) -> Result<RuntimeRecord, FileError> {
        var start: UInt64?
        var boot: String?
        var address: String?
        var instances: [UInt8] = []
        var window: MonitorScanParameters?
        var writtenPID: Int32?
        for line in text.split(separator: "\n") {
            let words = line.split(separator: " ")
            guard let key = words.first else { continue }
            switch (key, words.count) {
            case ("pid", 2): writtenPID = Int32(words[1])
            case ("start", 2): start = UInt64(words[1])
            case ("boot", 2): boot = String(words[1])
            case ("address", 2): address = String(words[1])
            case ("instance", 2): if let n = UInt8(words[1]), n != 0 { instances.append(n) }
            case ("interval", 4) where words[2] == "window":
                if let i = UInt16(words[1]), let w = UInt16(words[3]) {
                    window = MonitorScanParameters(interval: i, window: w)
                }
            default: continue
            }
        }
        guard writtenPID == pid, let start, let boot else {
            return .failure(
                FileError(
                    .badData, path: file,
                    "does not name its writer (pid \(pid), start time, boot ID): written by an older ibeacon or by hand"
                ))
        }
        return .success(
            RuntimeRecord(
                file: file, writer: ProcessIdentity(pid: pid, startTime: start, bootID: boot),
                adapterAddress: address, instances: instances, scanWindow: window,
                lines: text.split(separator: "\n").map(String.init)))
    }
}

/// What `ibeacon stop` may remove on one adapter, decided from the records and the kernel's list.
public struct LeftoverInstances: Sendable, Equatable {
    /// Instances of ibeacon processes that are gone, still listed by the kernel.
    public var instances: [UInt8] = []
    /// Records to delete once those are removed (their writers are gone).
    public var staleRecords: [RuntimeRecord] = []
    /// ibeacon processes still running with instances (they would put them back).
    public var running: [Int32] = []
    /// Records not believed or not acted on, and why.
    public var notes: [String] = []
}

extension RuntimeRecords {
    /// The instances a gone ibeacon process left on the adapter `adapter` (`hci0`) whose
    /// address is `address`, given the instances the kernel lists now (listed, or possibly hidden
    /// from the list). An instance is left
    /// alone when its record is not believed (see the type's comment), was written for another
    /// adapter or in another boot, when its writer still runs (the same process ID, start time
    /// and boot), or when a running ibeacon process claims the same number.
    /// With `writer`, only that process's record is acted on (the guardian of one advertiser).
    public func leftovers(
        adapter: String, address: String, listed: Set<UInt8>, writer: Int32? = nil
    ) -> LeftoverInstances {
        var plan = LeftoverInstances()
        var (records, refused) = load(prefix: adapter, suffix: ".instances")
        if let writer {
            records = records.filter { $0.writer.pid == writer || !writerIsGone($0) }
            refused = []
        }
        for r in refused { plan.notes.append("ignored \(r.file): \(r.reason)") }
        var gone: [RuntimeRecord] = []
        var claimedByRunning = Set<UInt8>()
        for record in records {
            if isFromAnotherBoot(record) {
                plan.notes.append("\(record.file) was written before the last boot: its instances are long gone")
                plan.staleRecords.append(record)
            } else if !writerIsGone(record) {
                if processes.identity(record.writer.pid) == nil {
                    plan.notes.append(
                        "process \(record.writer.pid), which wrote \(record.file), exists but /proc does not show it "
                            + "to this user (hidepid, ProtectProc=invisible): taken for that running ibeacon, its "
                            + "instances left alone (run `ibeacon stop` as root to decide)")
                }
                plan.running.append(record.writer.pid)
                claimedByRunning.formUnion(record.instances)
            } else if record.owner != 0 && record.owner != user {
                // Issue 40, hole 3: a user (or a monitor's hook, which runs as the monitor's
                // user) can write records in its own directory below /run/ibeacon naming any
                // instance, another program's included. Only root and the record's own user act
                // on it: the beacon unit's ExecStopPost runs as the unit's user.
                plan.notes.append(
                    "\(record.file) belongs to uid \(record.owner), not to this user (uid \(user)) or root: "
                        + "its instances are left alone (that user's `ibeacon stop` removes them; a unit's "
                        + "ExecStopPost does)")
            } else if record.adapterAddress != address {
                let recorded = record.adapterAddress ?? "none"
                plan.notes.append(
                    "\(record.file) was written for another adapter (address \(recorded), \(adapter) is now \(address)): left alone"
                )
                plan.staleRecords.append(record)
            } else {
                gone.append(record)
            }
        }
        for record in gone {
            // The 6.1 kernel's list leaves out an instance whose number exceeds the count of
            // instances (mgmt.c `read_adv_features`), so a number above the list's length may
            // still be there, hidden: it is removed too (Remove Advertising answers Invalid
            // Parameters if it is not). One at most the list's length and not in it is gone.
            for n in record.instances
            where (listed.contains(n) || Int(n) > listed.count) && !plan.instances.contains(n) {
                if claimedByRunning.contains(n) {
                    plan.notes.append("instance \(n) is claimed by a running ibeacon process too: left alone")
                } else {
                    plan.instances.append(n)
                }
            }
            plan.staleRecords.append(record)
        }
        return plan
    }
}

// MARK: - The two kinds of record

extension RuntimeRecords {
    /// Records (or, with no instances, forgets) this process's advertising instances on
    /// `adapter` (`hci0`, address `address`). Failing to write is a warning: `advertise` still
    /// removes its own instances when it exits.
    public func saveInstances(_ instances: [UInt8], adapter: String, address: String, logger: Logger) {
        let name = "\(adapter)-\(Sys.processID()).instances"
        guard !instances.isEmpty else {
            forget(name)
            return
        }
        do throws(FileError) {
            try write(name: name, lines: ["address \(address)"] + instances.map { "instance \($0)" })
        } catch {
            let note =
                "cannot record the advertising instances (\(error)); `ibeacon stop` will not know them "
                + "(run as root, or give this user a directory below \(directory))"
            logger.warning("\(note)")
        }
    }

    /// Removes this process's record `name`, wherever `writableDirectory()` put it.
    private func forget(_ name: String) {
        if let dir = try? writableDirectory() { try? Sys.unlink("\(dir)/\(name)") }
    }

    /// The scan-window records of other running ibeacon scans on `adapter`, as the seam
    /// `MgmtMonitorScanWindow` takes them.
    public func scanWindowRecords(adapter: String, logger: Logger) -> ScanWindowRecords {
        let records = self
        return ScanWindowRecords(
            inherited: { records.liveScanWindows(adapter: adapter).first?.parameters },
            save: { records.saveScanWindow($0, adapter: adapter, logger: logger) },
            othersScanning: { records.liveScanWindows(adapter: adapter).map(\.pid) },
            orphaned: { records.orphanedScanWindow(adapter: adapter) })
    }

    /// The window a killed ibeacon scan on `adapter` recorded to restore (its process gone, in
    /// this boot, the record owned by root or this user); its record is removed.
    func orphanedScanWindow(adapter: String) -> MonitorScanParameters? {
        for record in load(prefix: adapter, suffix: ".scanwindow").records
        where record.writer.pid != Sys.processID() && !isFromAnotherBoot(record) && writerIsGone(record)
            && (record.owner == 0 || record.owner == user)
        {
            remove(record)
            if let window = record.scanWindow { return window }
        }
        return nil
    }

    func saveScanWindow(_ parameters: MonitorScanParameters?, adapter: String, logger: Logger) {
        let name = "\(adapter)-\(Sys.processID()).scanwindow"
        guard let parameters else {
            forget(name)
            return
        }
        do throws(FileError) {
            try write(name: name, lines: ["interval \(parameters.interval) window \(parameters.window)"])
        } catch {
            logger.info("cannot record the scan window (\(error)): another ibeacon scan will not know it")
        }
    }

    /// Scan-window records of other running processes; those of processes gone are removed.
    func liveScanWindows(adapter: String) -> [(pid: Int32, parameters: MonitorScanParameters)] {
        var out: [(Int32, MonitorScanParameters)] = []
        for record in load(prefix: adapter, suffix: ".scanwindow").records
        where record.writer.pid != Sys.processID() {
            if writerIsGone(record) {
                remove(record)
            } else if let window = record.scanWindow {
                out.append((record.writer.pid, window))
            }
        }
        return out
    }
}
