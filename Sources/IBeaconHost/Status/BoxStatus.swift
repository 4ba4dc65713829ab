import IBeaconCore

/// One adapter as the kernel's management interface shows it now.
public struct AdapterSnapshot: Sendable, Equatable {
    /// `hci0`.
    public var name: String
    public var address: String?
    public var powered: Bool?
    /// The advertising instances Read Advertising Features lists (the 6.1 kernel leaves out a
    /// number above the count of instances: `RuntimeRecords.leftovers` allows for that).
    public var instances: [UInt8]
    /// Why the adapter could not be read, when it could not.
    public var error: String?

    public init(name: String, address: String?, powered: Bool?, instances: [UInt8], error: String? = nil) {
        self.name = name
        self.address = address
        self.powered = powered
        self.instances = instances
        self.error = error
    }
}

/// One beacon a running (or dead) `advertise` put up.
public struct BeaconStatus: Sendable, Equatable {
    public var profile: String
    public var device: String
    /// The kernel's advertising instance (hciN through the kernel), when known.
    public var instance: UInt8?
    public var onAir: Bool
    /// Why it is (or is not) on the air, in words.
    public var reason: String
    /// When the advertise process's present state began (Unix time).
    public var since: Double?
    public var pid: Int32
    public var running: Bool
    public var unit: String?
}

/// One `monitor` process.
public struct MonitorStatus: Sendable, Equatable {
    public var device: String
    public var profiles: [String]
    public var state: String
    public var since: Double?
    public var pid: Int32
    public var running: Bool
    public var unit: String?
}

/// What `ibeacon stop` would act on, and what it leaves alone.
public struct LeftoverStatus: Sendable, Equatable {
    /// Records whose writers are gone (session and instance records).
    public var goneRecords: [(file: String, pid: Int32, device: String, command: String)] = []
    /// Instances of gone ibeacon processes the kernel still lists: on the air, owned by nobody running.
    public var instances: [(device: String, instance: UInt8)] = []
    /// Instances no record names: another program's (bluetoothd's, btmgmt's); `stop` leaves them alone.
    public var unowned: [(device: String, instance: UInt8)] = []

    public static func == (a: LeftoverStatus, b: LeftoverStatus) -> Bool {
        a.goneRecords.map { "\($0)" } == b.goneRecords.map { "\($0)" }
            && a.instances.map { "\($0)" } == b.instances.map { "\($0)" }
            && a.unowned.map { "\($0)" } == b.unowned.map { "\($0)" }
    }
}

/// `ibeacon status`: what this box advertises and monitors, from the runtime records
/// (`SessionRecord`, the `hciN-PID.instances` records) and the kernel's management interface,
/// and `stop`'s view of what is left over. All is well when every beacon is on the air, every
/// recorded process runs, and nothing of a gone ibeacon is left; `problems` says what is not.
public struct BoxStatus: Sendable, Equatable {
    public var directory: String
    public var adapters: [AdapterSnapshot]
    /// Why the kernel's management interface could not be asked (no Bluetooth, …).
    public var kernelError: String?
    public var beacons: [BeaconStatus] = []
    public var monitors: [MonitorStatus] = []
    public var leftovers = LeftoverStatus()
    /// Records not believed, and other remarks that are not problems.
    public var notes: [String] = []
    /// What is off, one line each; empty when all is well.
    public var problems: [String] = []

    public var allWell: Bool { problems.isEmpty }

    /// Reads the records and asks the kernel (`openMgmt`; its failure is reported, not thrown).
    /// `unitOf` names the systemd unit of a running process its record does not name.
    public static func gather(
        records: RuntimeRecords, openMgmt: () async throws -> MgmtClient,
        unitOf: (Int32) -> String? = BoxStatus.systemUnit(of:)
    ) async -> BoxStatus {
        var adapters: [AdapterSnapshot] = []
        var kernelError: String?
        do {
            let client = try await openMgmt()
            adapters = try await client.closing {
                var out: [AdapterSnapshot] = []
                for index in try await client.execute(MgmtReadIndexList(), index: .none) {
                    out.append(await snapshot(client, index: index))
                }
                return out
            }
        } catch {
            kernelError = "\(error)"
        }
        return assemble(records: records, adapters: adapters, kernelError: kernelError, unitOf: unitOf)
    }

    static func snapshot(_ client: MgmtClient, index: UInt16) async -> AdapterSnapshot {
        let name = "hci\(index)"
        do {
            let info = try await client.execute(MgmtReadControllerInfo(), index: MgmtIndex(index))
            let powered = info.currentSettings.contains(.powered)
            let features = try? await client.execute(MgmtReadAdvertisingFeatures(), index: MgmtIndex(index))
            return AdapterSnapshot(
                name: name, address: "\(info.address)", powered: powered, instances: features?.instances ?? [],
                error: features == nil ? "Read Advertising Features failed" : nil)
        } catch {
            return AdapterSnapshot(name: name, address: nil, powered: nil, instances: [], error: "\(error)")
        }
    }

    /// The unit from `/proc/PID/cgroup`; nil when unreadable or not a service.
    public static func systemUnit(of pid: Int32) -> String? {
        (try? Sys.readFile("/proc/\(pid)/cgroup")).flatMap { systemdUnit(cgroup: String(decoding: $0, as: UTF8.self)) }
    }

    /// The status from records and adapter snapshots (pure but for reading the records).
    public static func assemble(
        records: RuntimeRecords, adapters: [AdapterSnapshot], kernelError: String?, unitOf: (Int32) -> String?
    ) -> BoxStatus {
        var status = BoxStatus(directory: records.directory, adapters: adapters, kernelError: kernelError)
        let (advertisers, refusedA) = records.sessions(.advertise)
        let (monitors, refusedM) = records.sessions(.monitor)
        // A refused directory refuses both kinds: one note each.
        for r in refusedA + refusedM where !status.notes.contains("ignored \(r.file): \(r.reason)") {
            status.notes.append("ignored \(r.file): \(r.reason)")
        }
        for adapter in adapters where adapter.error != nil {
            status.notes.append("\(adapter.name) could not be read: \(adapter.error ?? "")")
        }
        // The instance records of every adapter the kernel lists or a session names.
        let names = Set(adapters.map(\.name) + advertisers.map(\.device).filter { $0.hasPrefix("hci") })
        var instanceRecords: [String: [RuntimeRecord]] = [:]
        for name in names.sorted() {
            let (loaded, refused) = records.load(prefix: name, suffix: ".instances")
            instanceRecords[name] = loaded
            for r in refused where !status.notes.contains("ignored \(r.file): \(r.reason)") {
                status.notes.append("ignored \(r.file): \(r.reason)")
            }
        }
        for session in advertisers {
            status.addAdvertiser(
                session, records: records, instanceRecords: instanceRecords[session.device] ?? [],
                unitOf: unitOf)
        }
        for session in monitors { status.addMonitor(session, records: records, unitOf: unitOf) }
        for adapter in adapters {
            status.addLeftovers(on: adapter, records: records, instanceRecords: instanceRecords[adapter.name] ?? [])
        }
        if kernelError != nil, advertisers.contains(where: { $0.device.hasPrefix("hci") }) {
            status.notes.append(
                "the kernel's management interface could not be asked (\(kernelError ?? "")): beacons on hciN are "
                    + "shown as their advertise process reports them")
        }
        return status
    }

    private mutating func addAdvertiser(
        _ session: SessionRecord, records: RuntimeRecords, instanceRecords: [RuntimeRecord], unitOf: (Int32) -> String?
    ) {
        let running = !records.writerIsGone(session.record)
        let unit = session.unit ?? (running ? unitOf(session.pid) : nil)
        let own = instanceRecords.first { $0.writer == session.record.writer }?.instances ?? []
        let adapter = adapters.first { $0.name == session.device }
        for (i, profile) in session.profiles.enumerated() {
            let instance = own.count == session.profiles.count ? own[i] : nil
            let (onAir, reason) = Self.judge(session, running: running, instance: instance, adapter: adapter)
            beacons.append(
                BeaconStatus(
                    profile: profile, device: session.device, instance: instance, onAir: onAir, reason: reason,
                    since: session.since, pid: session.pid, running: running, unit: unit))
            if !onAir { problems.append("\(profile) on \(session.device) is off the air: \(reason)") }
        }
        if !running {
            leftovers.goneRecords.append((session.record.file, session.pid, session.device, "advertise"))
            problems.append(
                "\(session.record.file): advertise (pid \(session.pid)) on \(session.device) is gone without "
                    + "cleaning up; `ibeacon stop --device \(session.device)` removes what it left")
        }
    }

    /// Whether one beacon of `session` is on the air, and why.
    static func judge(_ session: SessionRecord, running: Bool, instance: UInt8?, adapter: AdapterSnapshot?)
        -> (Bool, String)
    {
        guard running else { return (false, "its advertise process (pid \(session.pid)) is gone") }
        switch session.state {
        case "advertising": break
        case "recovering": return (false, "recovering: \(session.cause ?? "cause not recorded")")
        case "starting": return (false, "starting (not yet on the air)")
        default: return (false, "state \(session.state)")
        }
        guard let adapter, adapter.error == nil else {
            return (true, "on the air, as its advertise process reports (the kernel's list was not read)")
        }
        if adapter.powered == false { return (false, "\(adapter.name) is powered off") }
        guard let instance else {
            return (true, "on the air, as its advertise process reports (no instance record to check)")
        }
        if adapter.instances.contains(instance) { return (true, "instance \(instance) listed by the kernel") }
        if Int(instance) > adapter.instances.count {
            // The 6.1 kernel hides a number above the count of instances (mgmt.c read_adv_features).
            return (true, "instance \(instance) (the kernel's list hides numbers above its length)")
        }
        return (false, "instance \(instance) is not in the kernel's list")
    }

    private mutating func addMonitor(_ session: SessionRecord, records: RuntimeRecords, unitOf: (Int32) -> String?) {
        let running = !records.writerIsGone(session.record)
        monitors.append(
            MonitorStatus(
                device: session.device, profiles: session.profiles, state: running ? session.state : "gone",
                since: session.since, pid: session.pid, running: running,
                unit: session.unit ?? (running ? unitOf(session.pid) : nil)))
        if !running {
            leftovers.goneRecords.append((session.record.file, session.pid, session.device, "monitor"))
            problems.append(
                "\(session.record.file): monitor (pid \(session.pid)) on \(session.device) is gone; "
                    + "`ibeacon stop --device \(session.device)` removes its record")
        } else if session.state == "recovering" {
            problems.append("monitor (pid \(session.pid)) on \(session.device) is recovering: \(session.cause ?? "")")
        }
    }

    /// `stop`'s view of one adapter: instances of gone processes, their records, and instances
    /// no record names.
    private mutating func addLeftovers(
        on adapter: AdapterSnapshot, records: RuntimeRecords, instanceRecords: [RuntimeRecord]
    ) {
        guard adapter.error == nil, let address = adapter.address else { return }
        let plan = records.leftovers(adapter: adapter.name, address: address, listed: Set(adapter.instances))
        for instance in plan.instances {
            leftovers.instances.append((adapter.name, instance))
            problems.append(
                "instance \(instance) on \(adapter.name) was left by an ibeacon process now gone; "
                    + "`ibeacon stop --device \(adapter.name)` removes it")
        }
        for record in plan.staleRecords where !leftovers.goneRecords.contains(where: { $0.file == record.file }) {
            leftovers.goneRecords.append((record.file, record.writer.pid, adapter.name, "advertise"))
            problems.append(
                "\(record.file): the record of an ibeacon process now gone; `ibeacon stop --device \(adapter.name)` "
                    + "removes it")
        }
        let named = Set(instanceRecords.flatMap(\.instances))
        for instance in adapter.instances where !named.contains(instance) {
            leftovers.unowned.append((adapter.name, instance))
        }
        for note in plan.notes where !notes.contains(note) { notes.append(note) }
    }
}
