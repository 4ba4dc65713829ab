import IBeaconCore

extension BoxStatus {
    /// The members of `status --json`, in order; each is always present (`null` when unknown).
    /// Scripts may rely on these names and on `ok` agreeing with the exit code.
    public static let members = [
        "ok", "records", "kernel", "adapters", "beacons", "monitors", "leftovers", "problems", "notes",
    ]

    /// One JSON object (`members`): `ok`, `records` (the directory), `kernel` (null, or why the
    /// kernel could not be asked), `adapters` [{`device`, `address`, `powered`, `instances`,
    /// `error`}], `beacons` [{`profile`, `device`, `instance`, `onAir`, `reason`, `since`,
    /// `sinceUnix`, `pid`, `running`, `unit`}], `monitors` [{`device`, `profiles`, `state`, `since`,
    /// `sinceUnix`, `pid`, `running`, `unit`}], `leftovers` {`records` [{`file`, `pid`, `device`,
    /// `command`}], `instances` [{`device`, `instance`}], `unowned` [{`device`, `instance`}]},
    /// `problems` and `notes` (strings).
    public var json: JSONObject {
        func when(_ t: Double?) -> (JSONValue, JSONValue) {
            guard let t else { return (.null, .null) }
            return (.string(iso8601(unixSeconds: t, milliseconds: false)), .integer(Int64(t.rounded(.down))))
        }
        func instance(_ device: String, _ n: UInt8) -> JSONValue {
            .object(JSONObject([("device", .string(device)), ("instance", .integer(Int64(n)))]))
        }
        let adapters: [JSONValue] = adapters.map { a in
            .object(
                JSONObject([
                    ("device", .string(a.name)), ("address", .nullable(a.address)), ("powered", .nullable(a.powered)),
                    ("instances", .array(a.instances.map { .integer(Int64($0)) })), ("error", .nullable(a.error)),
                ]))
        }
        let beacons: [JSONValue] = beacons.map { b in
            let (since, unix) = when(b.since)
            return .object(
                JSONObject([
                    ("profile", .string(b.profile)), ("device", .string(b.device)),
                    ("instance", .nullable(b.instance.map { Int($0) })), ("onAir", .bool(b.onAir)),
                    ("reason", .string(b.reason)), ("since", since), ("sinceUnix", unix),
                    ("pid", .integer(Int64(b.pid))), ("running", .bool(b.running)), ("unit", .nullable(b.unit)),
                ]))
        }
        let monitors: [JSONValue] = monitors.map { m in
            let (since, unix) = when(m.since)
            return .object(
                JSONObject([
                    ("device", .string(m.device)), ("profiles", .array(m.profiles.map { .string($0) })),
                    ("state", .string(m.state)), ("since", since), ("sinceUnix", unix),
                    ("pid", .integer(Int64(m.pid))), ("running", .bool(m.running)), ("unit", .nullable(m.unit)),
                ]))
        }
        let records: [JSONValue] = leftovers.goneRecords.map { r in
            .object(
                JSONObject([
                    ("file", .string(r.file)), ("pid", .integer(Int64(r.pid))), ("device", .string(r.device)),
                    ("command", .string(r.command)),
                ]))
        }
        let left = JSONObject([
            ("records", .array(records)),
            ("instances", .array(leftovers.instances.map { instance($0.device, $0.instance) })),
            ("unowned", .array(leftovers.unowned.map { instance($0.device, $0.instance) })),
        ])
        return JSONObject([
            ("ok", .bool(allWell)), ("records", .string(directory)), ("kernel", .nullable(kernelError)),
            ("adapters", .array(adapters)), ("beacons", .array(beacons)), ("monitors", .array(monitors)),
            ("leftovers", .object(left)), ("problems", .array(problems.map { .string($0) })),
            ("notes", .array(notes.map { .string($0) })),
        ])
    }

    /// The text `status` prints: adapters, beacons, monitors, leftovers, then the verdict.
    public var lines: [String] {
        func since(_ t: Double?) -> String { t.map { " since \(iso8601(unixSeconds: $0, milliseconds: false))" } ?? "" }
        func who(_ pid: Int32, _ running: Bool, _ unit: String?) -> String {
            "pid \(pid)\(running ? "" : ", gone")" + (unit.map { ", unit \($0)" } ?? "")
        }
        var out = ["records: \(directory)"]
        if let kernelError { out.append("kernel: not asked (\(kernelError))") }
        for a in adapters {
            let powered = a.powered.map { $0 ? "powered" : "powered off" } ?? "unknown"
            let listed = a.instances.isEmpty ? "none" : a.instances.map(String.init).joined(separator: ", ")
            out.append("\(a.name) (\(a.address ?? "address unknown")): \(powered), advertising instances: \(listed)")
        }
        if beacons.isEmpty && monitors.isEmpty { out.append("no ibeacon advertise or monitor runs on this box") }
        for b in beacons {
            let on = b.onAir ? "ON AIR" : "OFF AIR"
            let instance = b.instance.map { ", instance \($0)" } ?? ""
            out.append(
                "beacon \(b.profile) on \(b.device)\(instance): \(on)\(since(b.since)) — \(b.reason) "
                    + "(\(who(b.pid, b.running, b.unit)))")
        }
        for m in monitors {
            let profiles = m.profiles.isEmpty ? "" : " (\(m.profiles.joined(separator: ", ")))"
            out.append(
                "monitor on \(m.device)\(profiles): \(m.state)\(since(m.since)) (\(who(m.pid, m.running, m.unit)))")
        }
        for r in leftovers.goneRecords {
            out.append("leftover: \(r.file) (\(r.command), pid \(r.pid) gone, \(r.device))")
        }
        for l in leftovers.instances { out.append("leftover: instance \(l.instance) on \(l.device), its ibeacon gone") }
        for u in leftovers.unowned {
            out.append("other program's: instance \(u.instance) on \(u.device) (no ibeacon record; stop leaves it)")
        }
        for n in notes { out.append("note: \(n)") }
        if allWell {
            out.append("all well")
        } else {
            out.append("something is off (\(problems.count)):")
            out += problems.map { "  - \($0)" }
        }
        return out
    }
}
