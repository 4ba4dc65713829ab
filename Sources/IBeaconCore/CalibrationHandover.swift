/// A calibration measured here for a beacon another box advertises (`calibrate --apply-to
/// NAME`): the command that box takes on `<base>/beacon/<name>/set/calibration`, and how its
/// answers (its applied settings, its events) are read. Pure: the client is in IBeaconHost.
///
/// ```
/// <base>/beacon/<name>/set/calibration  {"measuredPower":-59,"calibration":{…}}  QoS 1, not retained
/// <base>/beacon/<name>/settings         {"measured_power":-59,…}                retained, after applying
/// <base>/event                          {"source":…,"old":…,"new":…,"reason":…} each accepted/refused change
/// ```
public struct CalibrationHandover: Sendable, Equatable {
    /// The profile's name on the box that advertises it (its topic level is made safe here).
    public var beacon: String
    public var measuredPower: Int
    /// The evidence: samples, interval, method, receiver, time — as `calibrate` writes it into a
    /// profile, so the box keeps the same record it would have written itself.
    public var record: CalibrationRecord
    /// Where the box publishes (`--mqtt-base` of the box, not of this machine).
    public var base: String

    public init(beacon: String, measuredPower: Int, record: CalibrationRecord, base: String) {
        self.beacon = beacon
        self.measuredPower = measuredPower
        self.record = record
        self.base = base
    }

    var beaconTopic: String { "\(base)/beacon/\(MQTTTopic.level(beacon))" }
    /// The command topic of the box's `calibration` setting.
    public var commandTopic: String { "\(beaconTopic)/set/calibration" }
    /// The box's applied settings (retained).
    public var settingsTopic: String { "\(beaconTopic)/settings" }
    public var eventTopic: String { "\(base)/event" }

    /// `{"measuredPower":-59,"calibration":{"timestamp":…,"samples":…,…}}`.
    public var payload: String {
        JSONValue.object(
            JSONObject([("measuredPower", .integer(Int64(measuredPower))), ("calibration", record.json)])
        ).compactText()
    }

    /// What the box answered.
    public enum Answer: Sendable, Equatable {
        /// Applied and written: what it said (`measured_power -59 in …/settings`).
        case confirmed(String)
        /// Refused, with the box's reason.
        case refused(String)
    }

    /// Largest answer read: settings and events are a few hundred bytes.
    static let maximumAnswerBytes = 16384

    /// What `payload` on `topic` says about this handover: nil when it is about something else
    /// (another beacon, another setting, another value). Only live messages may be given: a
    /// retained settings message from before the command says nothing about it.
    public func answer(topic: String, payload: String) -> Answer? {
        guard payload.utf8.count <= Self.maximumAnswerBytes,
            let object = try? JSONValue.parse(Array(payload.utf8)).objectValue
        else { return nil }
        if topic == settingsTopic {
            guard object["measured_power"]?.integerValue == Int64(measuredPower) else { return nil }
            return .confirmed("measured_power \(measuredPower) in \(settingsTopic)")
        }
        guard topic == eventTopic, isAboutThisBeacon(object) else { return nil }
        if let reason = refusalReason(object) { return .refused(reason) }
        guard Self.measuredPower(in: object["new"]) == Int64(measuredPower) else { return nil }
        return .confirmed("an accepted change to \(measuredPower) dBm in \(eventTopic)")
    }

    /// An event of this beacon's `calibration` or `measured_power` setting (an event that names
    /// no key is taken as one of the beacon's).
    func isAboutThisBeacon(_ object: JSONObject) -> Bool {
        let name = ["beacon", "profile", "name"].lazy.compactMap { object[$0]?.stringValue }.first
        guard name == beacon || name.map(MQTTTopic.level) == MQTTTopic.level(beacon) else { return false }
        let key = ["key", "setting"].lazy.compactMap { object[$0]?.stringValue }.first
        return key == nil || key == "calibration" || key == "measured_power"
    }

    /// The reason of a refusal: a non-empty `reason` in an event that says it refused
    /// (`"accepted":false`, or `refused` in `event`/`result`/`outcome`).
    func refusalReason(_ object: JSONObject) -> String? {
        guard let reason = object["reason"]?.stringValue, !reason.isEmpty else { return nil }
        let says = ["event", "result", "outcome"].compactMap { object[$0]?.stringValue?.lowercased() }
        let refused = object["accepted"] == .bool(false) || says.contains { $0.contains("refus") || $0 == "rejected" }
        return refused ? reason : nil
    }

    /// The measured power an event's `new` carries: the number itself, or the command's object.
    static func measuredPower(in value: JSONValue?) -> Int64? {
        if let n = value?.integerValue { return n }
        if let s = value?.stringValue { return Int64(s) }
        return value?.objectValue.flatMap { $0["measuredPower"]?.integerValue ?? $0["measured_power"]?.integerValue }
    }
}

extension CalibrationHandover {
    /// Why `calibrate`'s `--apply-to` cannot be used as given (nil: it can): it needs the broker
    /// and the box's base topic (the default, this machine's, is seldom the box's), and it
    /// replaces writing a profile here.
    public static func optionProblem(
        _ given: (applyTo: String?, mqtt: Bool, base: Bool, write: String?)
    ) -> String? {
        guard let name = given.applyTo else {
            return given.mqtt ? "--mqtt is for --apply-to NAME (calibrate publishes nothing else)" : nil
        }
        if name.isEmpty || MQTTTopic.level(name) != name || MQTTTopic.noncharacter(in: name) != nil {
            return
                "--apply-to \(name): a profile name is one topic level: not empty, without / + # or control characters"
        }
        if !given.mqtt { return "--apply-to needs --mqtt URL (the broker the box listens to)" }
        if !given.base {
            return "--apply-to needs --mqtt-base BASE: the base topic of the box that advertises \(name) "
                + "(its advertise --mqtt-base)"
        }
        if given.write != nil { return "--apply-to sends the result to the box instead of writing it: drop --write" }
        return nil
    }
}
