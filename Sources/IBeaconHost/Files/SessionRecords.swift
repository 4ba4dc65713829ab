import Logging

/// Which long-running command wrote a session record.
public enum SessionCommand: String, Sendable, CaseIterable {
    case advertise, monitor

    /// The record's file suffix: `session-PID.advertise`.
    var suffix: String { ".\(rawValue)" }
}

/// What a running `advertise` or `monitor` says of itself in the runtime directory, so that
/// `ibeacon status` can tell what this box advertises and monitors, on every path (raw HCI and
/// H4 keep no instance records): `session-PID.advertise` / `session-PID.monitor`, next to the
/// `hciN-PID.instances` records and believed on the same terms (`RuntimeRecords`).
///
/// Lines besides the writer's (`pid`, `start`, `boot`): `device D`, `profile P` (one a
/// profile), `state S` (`starting`, `advertising`, `recovering`, `monitoring`), `cause C`,
/// `since UNIXTIME` (when the state began), `unit U` (the systemd unit, from
/// `/proc/self/cgroup`). Values run to the end of the line; `%`, CR and LF are escaped as `%25`,
/// `%0D`, `%0A`.
public struct SessionRecord: Sendable, Equatable {
    public var command: SessionCommand
    public var record: RuntimeRecord
    public var device: String
    public var profiles: [String]
    public var state: String
    public var cause: String?
    public var since: Double?
    public var unit: String?

    /// The record's writer.
    public var pid: Int32 { record.writer.pid }

    /// Reads a session record's lines; nil when it names no device.
    public init?(_ record: RuntimeRecord, command: SessionCommand) {
        self.command = command
        self.record = record
        var device: String?
        profiles = []
        state = "starting"
        for line in record.lines {
            guard let space = line.firstIndex(of: " ") else { continue }
            let value = Self.unescaped(String(line[line.index(after: space)...]))
            switch line[..<space] {
            case "device": device = value
            case "profile": profiles.append(value)
            case "state": state = value
            case "cause": cause = value
            case "since": since = Double(value)
            case "unit": unit = value
            default: continue
            }
        }
        guard let device else { return nil }
        self.device = device
    }

    /// The lines after the writer's, for `RuntimeRecords.write`.
    static func lines(
        device: String, profiles: [String], state: String, cause: String?, since: Double, unit: String?
    ) -> [String] {
        var out = ["device \(escaped(device))"] + profiles.map { "profile \(escaped($0))" }
        out += ["state \(escaped(state))", "since \(String(format3: since))"]
        if let cause { out.append("cause \(escaped(cause))") }
        if let unit { out.append("unit \(escaped(unit))") }
        return out
    }

    static func escaped(_ s: String) -> String {
        s.replacingAll("%", with: "%25").replacingAll("\r", with: "%0D").replacingAll("\n", with: "%0A")
    }

    static func unescaped(_ s: String) -> String {
        s.replacingAll("%0A", with: "\n").replacingAll("%0D", with: "\r").replacingAll("%25", with: "%")
    }
}

/// The systemd unit a process runs in, from the lines of its `/proc/PID/cgroup`: the last
/// component of its cgroup path when that is a service (`0::/system.slice/ibeacon@store12.service`
/// → `ibeacon@store12.service`); nil for a login session or a shell (`….scope`).
public func systemdUnit(cgroup text: String) -> String? {
    for line in text.split(separator: "\n") {
        // cgroup v2: `0::PATH`; v1 keeps the unit in the `name=systemd` hierarchy.
        let parts = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "0" || parts[1] == "name=systemd" else { continue }
        if let last = parts[2].split(separator: "/").last, last.hasSuffix(".service") { return String(last) }
    }
    return nil
}

/// Keeps this process's session record up to date (each change rewrites it atomically) and
/// removes it on the way out. Failing to write is logged at debug level: `status` then does not
/// list this process, and nothing else depends on the record.
public struct SessionRecorder: Sendable {
    public let records: RuntimeRecords
    public let command: SessionCommand
    public let device: String
    public let profiles: [String]
    let unit: String?
    let wallClock: @Sendable () -> Double
    let logger: Logger

    public init(
        records: RuntimeRecords, command: SessionCommand, device: String, profiles: [String],
        wallClock: @escaping @Sendable () -> Double, logger: Logger
    ) {
        self.records = records
        self.command = command
        self.device = device
        self.profiles = profiles
        self.wallClock = wallClock
        self.logger = logger
        unit = (try? Sys.readFile("/proc/self/cgroup")).flatMap {
            systemdUnit(cgroup: String(decoding: $0, as: UTF8.self))
        }
    }

    var name: String { "session-\(Sys.processID())\(command.suffix)" }

    /// Records the state `state` (with its cause), beginning now.
    public func update(_ state: String, cause: String? = nil) {
        let lines = SessionRecord.lines(
            device: device, profiles: profiles, state: state, cause: cause, since: wallClock(), unit: unit)
        do throws(FileError) {
            try records.write(name: name, lines: lines)
        } catch {
            logger.debug("cannot record this \(command.rawValue) for `ibeacon status`: \(error)")
        }
    }

    /// Removes the record (the process ends cleanly).
    public func remove() {
        if let dir = try? records.writableDirectory() { try? Sys.unlink("\(dir)/\(name)") }
    }
}

extension RuntimeRecords {
    /// Every believed session record of the given command, with the records not believed.
    public func sessions(_ command: SessionCommand) -> (sessions: [SessionRecord], refused: [RefusedRecord]) {
        let (loaded, refused) = load(prefix: "session", suffix: command.suffix)
        return (loaded.compactMap { SessionRecord($0, command: command) }, refused)
    }

    /// Removes the session records whose writers are gone (`stop`'s part): those for `device`
    /// (as the user wrote it), or all with nil, belonging to root or this user. Returns the
    /// files removed.
    @discardableResult
    public func removeGoneSessions(device: String?) -> [String] {
        var removed: [String] = []
        for command in SessionCommand.allCases {
            for session in sessions(command).sessions
            where (device == nil || session.device == device) && writerIsGone(session.record)
                && (session.record.owner == 0 || session.record.owner == user)
            {
                remove(session.record)
                removed.append(session.record.file)
            }
        }
        return removed
    }
}

extension String {
    fileprivate init(format3 value: Double) {
        let millis = Int64((value * 1000).rounded())
        let fraction = String(abs(millis % 1000))
        self = "\(millis / 1000).\(String(repeating: "0", count: 3 - fraction.count))\(fraction)"
    }

    fileprivate func replacingAll(_ target: String, with replacement: String) -> String {
        split(separator: target, omittingEmptySubsequences: false).joined(separator: replacement)
    }
}
