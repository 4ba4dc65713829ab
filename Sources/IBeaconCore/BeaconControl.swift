/// Steering advertised beacons over MQTT (`advertise --mqtt-control`): the command topics, what a
/// command may say, why one is refused, the applied settings the box publishes, and the Home
/// Assistant entities that send them. Pure: the broker, the air and the profile file are
/// IBeaconHost's.
///
/// ```
/// <base>/beacon/<name>/set/<key>   a command, not retained, QoS 1 (key: BeaconSettingKey)
/// <base>/beacon/<name>/settings    {"advertising":true,"measured_power":-59,…}  retained, applied values
/// ```

/// What a command sets: the last level of its topic.
public enum BeaconSettingKey: String, Sendable, CaseIterable {
    /// `ON` / `OFF`.
    case advertising
    /// Integer dBm within `Profile.measuredPowerRange`.
    case measuredPower = "measured_power"
    /// Integer dBm within `Profile.txPowerRange` (honoured with extended advertising only).
    case txPower = "tx_power"
    /// Integer milliseconds within `Profile.intervalMsRange`.
    case interval
    case major
    case minor
    /// `{"measuredPower": <int>, "calibration": <the record ibeacon calibrate writes>}`.
    case calibration

    /// The largest payload a command of this key may have, in bytes: a number or ON/OFF is a
    /// few bytes; a calibration record a few hundred (its strings are a receiver's name and an
    /// estimator's).
    public var maximumPayload: Int { self == .calibration ? 2048 : 16 }

    /// The accepted values, as a refusal says them.
    public var allowed: String {
        switch self {
        case .advertising: "ON or OFF"
        case .measuredPower:
            "an integer \(Profile.measuredPowerRange.lowerBound)…\(Profile.measuredPowerRange.upperBound) (dBm)"
        case .txPower: "an integer \(Profile.txPowerRange.lowerBound)…\(Profile.txPowerRange.upperBound) (dBm)"
        case .interval: "an integer \(Profile.intervalMsRange.lowerBound)…\(Profile.intervalMsRange.upperBound) (ms)"
        case .major, .minor: "an integer 0…65535"
        case .calibration:
            "a JSON object {\"measuredPower\": integer -127…-1, \"calibration\": the record ibeacon calibrate writes}"
        }
    }
}

/// Why a command was refused: nothing changed on the air or on disk.
public struct CommandRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case retained
        case foreignTopic = "foreign-topic"
        case unknownBeacon = "unknown-beacon"
        case unknownKey = "unknown-key"
        case oversized, malformed
        case outOfRange = "out-of-range"
        case rateLimited = "rate-limited"
        /// The controller or the kernel refused the new advertising (the old one was put back), or
        /// did not take it in time (the controller lost): nothing changed.
        case notApplied = "not-applied"
        /// The profile could not be written (the old advertising was put back).
        case notWritten = "not-written"
    }
    public var kind: Kind
    public var reason: String
    public init(_ kind: Kind, _ reason: String) {
        self.kind = kind
        self.reason = reason
    }
    public var description: String { reason }
}

/// One beacon's settings as the box applies them: what `<base>/beacon/<name>/settings` says.
public struct BeaconSettings: Sendable, Equatable {
    public var advertising: Bool
    public var measuredPower: Int
    public var txPower: Int?
    public var intervalMs: Int
    public var major: Int
    public var minor: Int

    public init(advertising: Bool, measuredPower: Int, txPower: Int?, intervalMs: Int, major: Int, minor: Int) {
        self.advertising = advertising
        self.measuredPower = measuredPower
        self.txPower = txPower
        self.intervalMs = intervalMs
        self.major = major
        self.minor = minor
    }

    /// The settings a profile holds.
    public init(profile: Profile) {
        self.init(
            advertising: profile.advertisingEnabled, measuredPower: Int(profile.measuredPower),
            txPower: profile.txPower.map { Int($0) }, intervalMs: profile.intervalMs, major: Int(profile.major),
            minor: Int(profile.minor))
    }

    /// A key's value as the settings topic and the events say it (`calibration`: the measured power).
    public func value(of key: BeaconSettingKey) -> JSONValue {
        switch key {
        case .advertising: .bool(advertising)
        case .measuredPower, .calibration: .integer(Int64(measuredPower))
        case .txPower: txPower.map { .integer(Int64($0)) } ?? .null
        case .interval: .integer(Int64(intervalMs))
        case .major: .integer(Int64(major))
        case .minor: .integer(Int64(minor))
        }
    }

    /// The retained settings payload: the keys of the command topics, in this order.
    public var json: String {
        let keys: [BeaconSettingKey] = [.advertising, .measuredPower, .txPower, .interval, .major, .minor]
        return JSONValue.object(JSONObject(keys.map { ($0.rawValue, value(of: $0)) })).compactText()
    }
}

/// One accepted command's new value.
public enum BeaconCommand: Sendable, Equatable {
    case advertising(Bool)
    case measuredPower(Int)
    case txPower(Int)
    case interval(Int)
    case major(Int)
    case minor(Int)
    case calibration(measuredPower: Int, record: CalibrationRecord)

    public var key: BeaconSettingKey {
        switch self {
        case .advertising: .advertising
        case .measuredPower: .measuredPower
        case .txPower: .txPower
        case .interval: .interval
        case .major: .major
        case .minor: .minor
        case .calibration: .calibration
        }
    }

    /// Checks a command's key and payload: the size first (nothing larger is even parsed), then
    /// the syntax (an integer is `-?[0-9]+`, nothing else: no spaces, no `+`, no `12.0`), then the range.
    public static func parse(key text: String, payload: [UInt8]) throws(CommandRefusal) -> BeaconCommand {
        guard let key = BeaconSettingKey(rawValue: text) else {
            let shown = text.count > 40 ? String(text.prefix(40)) + "…" : text
            throw CommandRefusal(
                .unknownKey,
                "unknown setting \(JSONWriter.quoted(shown)); known: "
                    + BeaconSettingKey.allCases.map(\.rawValue).joined(separator: ", "))
        }
        guard payload.count <= key.maximumPayload else {
            throw CommandRefusal(
                .oversized,
                "\(key.rawValue): a payload of \(payload.count) bytes, more than the \(key.maximumPayload) allowed")
        }
        switch key {
        case .advertising:
            switch payload {
            case Array("ON".utf8): return .advertising(true)
            case Array("OFF".utf8): return .advertising(false)
            default: throw malformed(key, payload)
            }
        case .measuredPower: return .measuredPower(try integer(key, payload, Profile.measuredPowerRange))
        case .txPower: return .txPower(try integer(key, payload, Profile.txPowerRange))
        case .interval: return .interval(try integer(key, payload, Profile.intervalMsRange))
        case .major: return .major(try integer(key, payload, Profile.majorRange))
        case .minor: return .minor(try integer(key, payload, Profile.minorRange))
        case .calibration: return try calibration(payload)
        }
    }

    /// `-?[0-9]+` within `range`.
    static func integer(_ key: BeaconSettingKey, _ payload: [UInt8], _ range: ClosedRange<Int64>)
        throws(CommandRefusal) -> Int
    {
        let digits = payload.first == UInt8(ascii: "-") ? payload.dropFirst() : payload[...]
        guard !digits.isEmpty, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { throw malformed(key, payload) }
        guard let value = Int64(String(decoding: payload, as: UTF8.self)), range.contains(value)
        else {
            throw CommandRefusal(
                .outOfRange,
                "\(key.rawValue): \(shown(payload)) is out of range; allowed: \(key.allowed)")
        }
        return Int(value)
    }

    static func calibration(_ payload: [UInt8]) throws(CommandRefusal) -> BeaconCommand {
        let value: JSONValue
        do {
            value = try JSONValue.parse(payload)
        } catch {
            throw CommandRefusal(
                .malformed, "calibration: not JSON (\(error)); expected \(BeaconSettingKey.calibration.allowed)")
        }
        guard let object = value.objectValue else { throw malformed(.calibration, payload) }
        if let extra = object.keys.first(where: { $0 != "measuredPower" && $0 != "calibration" }) {
            throw CommandRefusal(
                .unknownKey,
                "calibration: unknown member \(JSONWriter.quoted(String(extra.prefix(40)))); expected \(BeaconSettingKey.calibration.allowed)"
            )
        }
        guard let power = object["measuredPower"]?.integerValue else {
            throw CommandRefusal(
                .malformed,
                "calibration: measuredPower is \(object["measuredPower"].map(\.description) ?? "missing"); expected an integer"
            )
        }
        guard Profile.measuredPowerRange.contains(power) else {
            throw CommandRefusal(
                .outOfRange, "calibration: measuredPower \(power) is out of range; allowed: -127…-1 (dBm)")
        }
        guard let recordValue = object["calibration"] else {
            throw CommandRefusal(.malformed, "calibration: the calibration record is missing")
        }
        let record: CalibrationRecord
        do {
            record = try CalibrationRecord(json: recordValue)
        } catch {
            throw CommandRefusal(.malformed, "calibration: the record does not fit: \(error)")
        }
        return .calibration(measuredPower: Int(power), record: record)
    }

    static func malformed(_ key: BeaconSettingKey, _ payload: [UInt8]) -> CommandRefusal {
        CommandRefusal(.malformed, "\(key.rawValue): \(shown(payload)) is not \(key.allowed)")
    }

    /// A payload as a message quotes it: at most 40 characters, escaped.
    static func shown(_ payload: [UInt8]) -> String {
        let text = String(decoding: payload.prefix(40), as: UTF8.self)
        return JSONWriter.quoted(text) + (payload.count > 40 ? "…" : "")
    }

    /// The settings with this command applied.
    public func applied(to settings: BeaconSettings) -> BeaconSettings {
        var s = settings
        switch self {
        case .advertising(let on): s.advertising = on
        case .measuredPower(let v), .calibration(let v, _): s.measuredPower = v
        case .txPower(let v): s.txPower = v
        case .interval(let v): s.intervalMs = v
        case .major(let v): s.major = v
        case .minor(let v): s.minor = v
        }
        return s
    }

    /// Writes the command into a profile: the one key it sets (calibration: measuredPower and
    /// the record, as `ibeacon calibrate` writes them); every other key stays as it is.
    public func apply(to profile: inout Profile) throws(ProfileError) {
        switch self {
        case .advertising(let on): try profile.set(Profile.advertisingKey, to: on ? nil : .bool(false))
        case .measuredPower(let v): try profile.set("measuredPower", to: .integer(Int64(v)))
        case .txPower(let v): try profile.set("txPower", to: .integer(Int64(v)))
        case .interval(let v): try profile.set("intervalMs", to: .integer(Int64(v)))
        case .major(let v): try profile.set("major", to: .integer(Int64(v)))
        case .minor(let v): try profile.set("minor", to: .integer(Int64(v)))
        case .calibration(let v, let record): try profile.applyCalibration(measuredPower: v, record: record)
        }
    }
}

/// At most `limit` commands in any `window` (default: 4 a second) for the whole box; the rest
/// are refused. Counts every command that reaches the check, accepted or not, so a flood of
/// bad ones cannot make the box log and publish without bound either.
public struct CommandRateLimit: Sendable, Equatable {
    public let limit: Int
    public let window: Duration
    private var recent: [Duration] = []

    public static let defaultLimit = 4

    public init(limit: Int = CommandRateLimit.defaultLimit, window: Duration = .seconds(1)) {
        self.limit = max(1, limit)
        self.window = window
    }

    /// A command arrived at `now` (any clock's elapsed time): true when it may be handled.
    public mutating func admit(at now: Duration) -> Bool {
        recent.removeAll { now - $0 >= window || $0 > now }
        guard recent.count < limit else { return false }
        recent.append(now)
        return true
    }
}

extension Profile {
    /// The profile key that keeps a beacon off the air (`"advertising": false`); absent: on.
    public static let advertisingKey = "advertising"

    /// False when the profile says `"advertising": false` (switched off from Home Assistant).
    public var advertisingEnabled: Bool { document[Self.advertisingKey] != .bool(false) }
}

extension MQTTLayout {
    /// This layout with the beacons' commands subscribed to (`advertise --mqtt-control`).
    public func controlled() -> MQTTLayout {
        var layout = self
        layout.control = true
        return layout
    }

    /// `<base>/beacon/<name>/set/<key>`.
    public func beaconCommandTopic(_ name: String, _ key: BeaconSettingKey) -> String {
        "\(base)/beacon/\(MQTTTopic.level(name))/set/\(key.rawValue)"
    }

    /// `<base>/beacon/<name>/settings`: the applied settings, retained.
    public func beaconSettingsTopic(_ name: String) -> String { "\(base)/beacon/\(MQTTTopic.level(name))/settings" }

    /// Every command topic of this box: one subscription.
    public var beaconCommandFilter: String { "\(base)/beacon/+/set/+" }

    /// The beacon level and key of a command topic under this box's base; nil for any other topic.
    public func commandTarget(_ topic: String) -> (beacon: String, key: String)? {
        guard topic.hasPrefix(base + "/beacon/") else { return nil }
        let levels = topic.dropFirst(base.count + "/beacon/".count).split(
            separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 3, levels[1] == "set", !levels[0].isEmpty else { return nil }
        return (String(levels[0]), String(levels[2]))
    }

    /// The Home Assistant entities that steer a beacon (`--mqtt-control`): a switch for
    /// advertising and numbers for measured power, TX power, interval, major and minor, each
    /// sending to its command topic and showing what the settings topic says was applied.
    public func beaconControlDiscovery(_ name: String) -> [(topic: String, payload: String)] {
        guard let discoveryPrefix else { return [] }
        let object = "beacon_\(MQTTTopic.identifier(name))"
        let settings = beaconSettingsTopic(name)
        func config(_ key: BeaconSettingKey, _ label: String, _ extra: [JSONObject.Member]) -> JSONObject {
            var c = JSONObject([
                ("name", .string("\(name) \(label)")),
                ("unique_id", .string("ibeacon_\(node)_\(object)_\(key.rawValue)")),
                ("object_id", .string("ibeacon_\(node)_\(object)_\(key.rawValue)")),
                ("command_topic", .string(beaconCommandTopic(name, key))),
                ("state_topic", .string(settings)),
                ("qos", .integer(1)), ("retain", .bool(false)),
            ])
            for m in extra { c[m.key] = m.value }
            c["availability_topic"] = .string(availabilityTopic)
            c["device"] = deviceJSON
            c["origin"] = originJSON
            return c
        }
        func number(_ key: BeaconSettingKey, _ label: String, _ range: ClosedRange<Int64>, _ unit: String?)
            -> (String, String)
        {
            var extra: [JSONObject.Member] = [
                ("value_template", .string("{{ value_json.\(key.rawValue) }}")),
                ("min", .integer(range.lowerBound)), ("max", .integer(range.upperBound)), ("step", .integer(1)),
                ("mode", .string("box")),
            ]
            if let unit { extra.append(("unit_of_measurement", .string(unit))) }
            return (
                "\(discoveryPrefix)/number/\(node)/\(object)_\(key.rawValue)/config",
                JSONValue.object(config(key, label, extra)).compactText()
            )
        }
        let toggle = config(
            .advertising, "advertising on",
            [
                ("value_template", .string("{{ 'ON' if value_json.advertising else 'OFF' }}")),
                ("payload_on", .string("ON")), ("payload_off", .string("OFF")),
                ("state_on", .string("ON")), ("state_off", .string("OFF")),
            ])
        return [
            ("\(discoveryPrefix)/switch/\(node)/\(object)_advertising/config", JSONValue.object(toggle).compactText()),
            number(.measuredPower, "measured power", Profile.measuredPowerRange, "dBm"),
            number(.txPower, "TX power", Profile.txPowerRange, "dBm"),
            number(.interval, "interval", Profile.intervalMsRange, "ms"),
            number(.major, "major", Profile.majorRange, nil),
            number(.minor, "minor", Profile.minorRange, nil),
        ]
    }
}

/// One command's outcome, as `<base>/event` and the journal say it.
public struct BeaconCommandEvent: Sendable, Equatable {
    public var beacon: String
    public var key: String
    /// Where the command came from: `mqtt:<topic>`.
    public var source: String
    public var old: JSONValue
    public var new: JSONValue
    /// nil: accepted and applied.
    public var refusal: CommandRefusal?
    /// UTC, ISO 8601.
    public var time: String

    public init(
        beacon: String, key: String, source: String, old: JSONValue, new: JSONValue, refusal: CommandRefusal?,
        time: String
    ) {
        self.beacon = beacon
        self.key = key
        self.source = source
        self.old = old
        self.new = new
        self.refusal = refusal
        self.time = time
    }

    /// `{"event":"command","result":"applied"|"refused",…}`, one compact line.
    public var json: String {
        var o = JSONObject([
            ("event", .string("command")), ("result", .string(refusal == nil ? "applied" : "refused")),
            ("beacon", .string(beacon)), ("key", .string(key)), ("source", .string(source)), ("old", old),
            ("new", new),
        ])
        if let refusal {
            o["refusal"] = .string(refusal.kind.rawValue)
            o["reason"] = .string(refusal.reason)
        }
        o["time"] = .string(time)
        return JSONValue.object(o).compactText()
    }

    /// The journal's line.
    public var text: String {
        if let refusal {
            return "command refused: \(beacon) \(key) from \(source): \(refusal.reason)"
        }
        return "command applied: \(beacon) \(key) \(old) -> \(new) from \(source)"
    }
}
