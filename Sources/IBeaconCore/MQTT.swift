/// The pure parts of publishing to an MQTT broker: the broker URL, safe topic levels, and the
/// payloads (region states, beacon status, ranging, Home Assistant discovery). No I/O: the
/// client (libmosquitto) lives in IBeaconTransports, the bookkeeping in IBeaconHost.

/// Why an MQTT setting cannot be used; the message names the setting and says how to fix it.
public struct MQTTSettingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// A broker address from `--mqtt`: `mqtt://[user@]host[:port]` or `mqtts://…` (TLS).
///
/// A password is never taken from the URL (it would show in `ps`, the journal and shell
/// history): it comes from a file or the environment.
public struct MQTTBrokerURL: Sendable, Equatable, CustomStringConvertible {
    public var tls: Bool
    /// A host name, an IPv4 address, or an IPv6 address (without its brackets).
    public var host: String
    public var port: Int
    public var user: String?

    /// The IANA ports: 1883 for MQTT, 8883 for MQTT over TLS.
    public static let defaultPort = 1883
    public static let defaultTLSPort = 8883

    public init(tls: Bool, host: String, port: Int? = nil, user: String? = nil) {
        self.tls = tls
        self.host = host
        self.port = port ?? (tls ? Self.defaultTLSPort : Self.defaultPort)
        self.user = user
    }

    /// `mqtts://broker.lan:8883` (no user: it goes to the log).
    public var description: String {
        let h = host.contains(":") ? "[\(host)]" : host
        return "\(tls ? "mqtts" : "mqtt")://\(h):\(port)"
    }

    /// Where a password goes instead of the URL (the CLI's wording).
    public static let passwordAdvice =
        "put the password in a file readable only by the service and give it with --mqtt-password-file FILE, "
        + "or set IBEACON_MQTT_PASSWORD"

    public init(parsing text: String) throws(MQTTSettingError) {
        let shown = Self.redacted(text)
        let fail = { (why: String) -> MQTTSettingError in
            MQTTSettingError("--mqtt \(shown): \(why) (expected mqtt://HOST[:PORT] or mqtts://HOST[:PORT])")
        }
        guard let colon = text.firstIndex(of: ":"), text[colon...].hasPrefix("://") else { throw fail("no scheme") }
        tls = try Self.isTLS(scheme: text[..<colon].lowercased(), fail)
        var rest = try Self.authority(text[colon...].dropFirst(3), fail)
        user = try Self.takeUser(from: &rest, fail)
        let portText: Substring?
        (host, portText) = try Self.hostAndPortText(rest, fail)
        port = try Self.port(portText, tls: tls, fail)
    }

    private typealias Failure = (String) -> MQTTSettingError

    /// `text` as it may be quoted in a message: whatever could be a password — from the first
    /// `:` of the user part (after `://`, or from the start when there is none) to the last `@`
    /// — becomes `***`, however malformed the rest is (`http://box:pw@host` → `http://box:***@host`).
    public static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        var start = text.firstRange(of: "://")?.upperBound ?? text.startIndex
        if start > at { start = text.startIndex }
        guard let colon = text[start..<at].firstIndex(of: ":") else { return text }
        return String(text[...colon]) + "***" + String(text[at...])
    }

    /// `mqtt` or `mqtts`, whatever the case.
    private static func isTLS(scheme: String, _ fail: Failure) throws(MQTTSettingError) -> Bool {
        switch scheme {
        case "mqtt": return false
        case "mqtts": return true
        default: throw fail("the scheme must be mqtt or mqtts, not \(scheme.isEmpty ? "empty" : scheme)")
        }
    }

    /// What follows `://` up to an optional lone trailing `/`: `[user@]host[:port]`.
    private static func authority(_ afterScheme: Substring, _ fail: Failure) throws(MQTTSettingError) -> Substring {
        var rest = afterScheme
        if rest.contains(where: { $0 == "?" || $0 == "#" }) { throw fail("a query or fragment has no meaning here") }
        if let slash = rest.firstIndex(of: "/") {
            guard rest[slash...] == "/" else {
                throw fail("a path has no meaning here; topics are set with --mqtt-base")
            }
            rest = rest[..<slash]
        }
        return rest
    }

    /// Removes `user@` from the front of `rest` and returns the decoded user; refuses a password.
    private static func takeUser(from rest: inout Substring, _ fail: Failure) throws(MQTTSettingError) -> String? {
        guard let at = rest.lastIndex(of: "@") else { return nil }
        let info = rest[..<at]
        rest = rest[rest.index(after: at)...]
        if info.contains(":") {
            throw MQTTSettingError(
                "--mqtt: a password in the URL is refused (it would show in the process list and the logs): "
                    + Self.passwordAdvice)
        }
        guard let decoded = Self.percentDecoded(info), !decoded.isEmpty else {
            throw fail("the user name is empty or badly %-encoded")
        }
        guard !decoded.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw fail("the user name contains a control character")
        }
        return decoded
    }

    /// `[v6]:port`, `host:port`, or either without a port.
    private static func hostAndPortText(
        _ authority: Substring, _ fail: Failure
    ) throws(MQTTSettingError) -> (String, Substring?) {
        var rest = authority
        var portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw fail("an IPv6 address lacks its closing ]") }
            let host = String(rest[rest.index(after: rest.startIndex)..<close])
            let after = rest[rest.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("unexpected text after the IPv6 address") }
                portText = after.dropFirst()
            }
            guard !host.isEmpty, host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw fail("[\(host)] is not an IPv6 address")
            }
            return (host, portText)
        }
        if let colon = rest.firstIndex(of: ":") {
            portText = rest[rest.index(after: colon)...]
            rest = rest[..<colon]
        }
        let host = String(rest)
        guard !host.isEmpty else { throw fail("no host") }
        let allowed = host.unicodeScalars.allSatisfy {
            ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "-"
                || $0 == "." || $0 == "_"
        }
        guard allowed, host.count <= 253 else { throw fail("\(host) is not a host name or address") }
        return (host, portText)
    }

    /// The port given, or the scheme's IANA port.
    private static func port(_ portText: Substring?, tls: Bool, _ fail: Failure) throws(MQTTSettingError) -> Int {
        guard let portText else { return tls ? defaultTLSPort : defaultPort }
        guard let p = Int(portText), (1...65535).contains(p), portText.allSatisfy(\.isASCII) else {
            throw fail("the port must be a number within 1…65535, got \(portText.isEmpty ? "nothing" : portText)")
        }
        return p
    }

    /// `%41` → `A`; nil when an escape is broken or the result is not UTF-8.
    static func percentDecoded(_ s: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = s.utf8.startIndex
        let u = s.utf8
        while i < u.endIndex {
            let b = u[i]
            if b == UInt8(ascii: "%") {
                let h1 = u.index(after: i)
                guard h1 < u.endIndex, u.index(after: h1) < u.endIndex else { return nil }
                let h2 = u.index(after: h1)
                guard let v = UInt8(String(decoding: [u[h1], u[h2]], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(v)
                i = u.index(after: h2)
            } else {
                bytes.append(b)
                i = u.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// Topic names (MQTT 3.1.1 §4.7): levels separated by `/`, `+` and `#` are wildcards that a
/// published topic must not contain, and a leading `$` is the broker's own (`$SYS`).
public enum MQTTTopic {
    /// One topic level made from a name (a region's, a profile's, a room's): `/`, `+`, `#` and
    /// control characters (C0, DEL, C1) become `_`, so a name can neither add a level nor act as a
    /// wildcard; an empty name is `_`, and a leading `$` becomes `_`.
    public static func level(_ name: String) -> String {
        var out = ""
        for scalar in name.unicodeScalars {
            let v = scalar.value
            let unsafe = v < 0x20 || (0x7F...0x9F).contains(v) || v == 0x2F || v == 0x2B || v == 0x23
            out.unicodeScalars.append(unsafe ? "_" : scalar)
        }
        if out.hasPrefix("$") { out = "_" + out.dropFirst() }
        return out.isEmpty ? "_" : out
    }

    /// An identifier Home Assistant accepts in a discovery topic and as an object id:
    /// `[a-zA-Z0-9_-]`, every other character `_`.
    public static func identifier(_ name: String) -> String {
        let out = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { s in
                    ("a"..."z").contains(s) || ("A"..."Z").contains(s) || ("0"..."9").contains(s) || s == "-"
                        || s == "_"
                        ? s : "_"
                }))
        return out.isEmpty ? "_" : out
    }

    /// The longest topic name MQTT can carry: a UTF-8 string with a two-byte length (MQTT 3.1.1
    /// §1.5.3, 5.0 §1.5.4). libmosquitto refuses to publish to a longer one.
    public static let maximumTopicBytes = 65_535

    /// The first Unicode noncharacter in `text` (U+FDD0…U+FDEF, and U+FFFE and U+FFFF of every
    /// plane), nil when there is none. MQTT says a topic should not contain one (3.1.1 §1.5.3,
    /// 5.0 §1.5.4), and libmosquitto refuses to publish to such a topic (`mosquitto_validate_utf8`,
    /// MOSQ_ERR_MALFORMED_UTF8): the message would stay first in line for ever.
    public static func noncharacter(in text: String) -> Unicode.Scalar? {
        text.unicodeScalars.first { s in
            (0xFDD0...0xFDEF).contains(s.value) || s.value & 0xFFFE == 0xFFFE
        }
    }

    /// `U+FFFE`.
    static func codePoint(_ s: Unicode.Scalar) -> String {
        let hex = String(s.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// Refuses a name (a region's, a profile's) that would make one of its `topics` unusable:
    /// a Unicode noncharacter, or a topic over `maximumTopicBytes`. Either would make libmosquitto
    /// refuse the message, and the publisher keeps a refused retained message first in line, so
    /// every later message of every name would wait behind it.
    public static func checkName(_ name: String, kind: String, topics: [String]) throws(MQTTSettingError) {
        let shown = JSONWriter.quoted(name.count > 40 ? String(name.prefix(40)) + "…" : name)
        if let bad = noncharacter(in: name) {
            throw MQTTSettingError(
                "the \(kind) \(shown) contains the Unicode noncharacter \(codePoint(bad)), which MQTT does not allow "
                    + "in a topic name (the broker's client library refuses to publish it): rename the \(kind)")
        }
        if let long = topics.first(where: { $0.utf8.count > maximumTopicBytes }) {
            throw MQTTSettingError(
                "the \(kind) \(shown) makes the MQTT topic \(long.prefix(60))… \(long.utf8.count) bytes long; MQTT "
                    + "allows at most \(maximumTopicBytes): give the \(kind) a shorter name")
        }
    }

    /// Checks a topic prefix given by the user (`--mqtt-base`, `--mqtt-discovery-prefix`):
    /// non-empty levels, no wildcard, no control character, no leading `$`, at most 200 bytes.
    public static func validatePrefix(_ text: String, option: String) throws(MQTTSettingError) {
        func fail(_ why: String) -> MQTTSettingError { MQTTSettingError("\(option) \(text): \(why)") }
        if text.isEmpty { throw fail("empty") }
        if text.utf8.count > 200 { throw fail("longer than 200 bytes") }
        if text.contains("+") || text.contains("#") { throw fail("+ and # are MQTT wildcards, not topic characters") }
        if text.unicodeScalars.contains(where: { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) }) {
            throw fail("contains a control character")
        }
        if let bad = noncharacter(in: text) {
            throw fail("contains the Unicode noncharacter \(codePoint(bad)), which MQTT does not allow in a topic")
        }
        if text.hasPrefix("$") { throw fail("topics starting with $ belong to the broker") }
        if text.split(separator: "/", omittingEmptySubsequences: false).contains(where: \.isEmpty) {
            throw fail("an empty topic level (a leading, trailing or doubled /)")
        }
    }

    /// Refuses names that would share a topic or a Home Assistant object id once made safe
    /// (`a/b` and `a_b`): each must have its own retained state.
    public static func checkDistinct(_ names: [String], kind: String) throws(MQTTSettingError) {
        var seen: [String: String] = [:]
        for name in names {
            let id = identifier(name).lowercased()
            if let other = seen[id], other != name {
                throw MQTTSettingError(
                    "the \(kind)s \(JSONWriter.quoted(other)) and \(JSONWriter.quoted(name)) would publish under the same "
                        + "MQTT topic and Home Assistant id (\(id)): name them apart")
            }
            seen[id] = name
        }
    }
}

/// A region's state as Core Location keeps it (FIELD.md "Region state"), as MQTT publishes it:
/// the monitor's own state, one type.
public typealias RegionPresence = RegionMonitor.State

extension RegionMonitor.State {
    /// The payload of the region's state topic, as a Home Assistant `binary_sensor` reads it
    /// with its default `payload_on`/`payload_off`: `ON`, `OFF`, and `None` for unknown.
    public var payload: String {
        switch self {
        case .inside: "ON"
        case .outside: "OFF"
        case .unknown: "None"
        }
    }

    /// How Home Assistant reads `payload` from the region's attributes (`presence`): `ON`, `OFF`,
    /// or `None` (unknown).
    public static let valueTemplate = "{{ {'inside': 'ON', 'outside': 'OFF'}.get(value_json.presence, 'None') }}"
}

/// An advertised beacon's state: on the air, being put back after the controller lost it, or
/// taken off the air (the command ended).
public enum BeaconRunState: String, Sendable, Equatable {
    case advertising, recovering, stopped

    /// `ON` only while on the air (a `binary_sensor` of device class `running`).
    public var payload: String { self == .advertising ? "ON" : "OFF" }

    /// How Home Assistant reads `payload` from the beacon's attributes (`status`).
    public static let valueTemplate = "{{ 'ON' if value_json.status == 'advertising' else 'OFF' }}"
}

/// This program's name and version, as a Home Assistant device's `sw_version` and a
/// discovery's `origin` show them (and `ibeacon --version`).
public enum ProgramInfo {
    public static let name = "ibeacon"
    public static let version = "0.1.0"
}

/// Where everything goes, from the base topic and the discovery prefix.
///
/// ```
/// <base>/<command>/availability   online | offline            retained; offline is the Last Will
/// <base>/<command>/box            {"node":…,"host":…,"adapter":…} retained: who publishes here
/// <base>/region/<name>/state      ON | OFF | None             retained
/// <base>/region/<name>/attributes {"presence":"inside",…}     retained; Home Assistant reads both
/// <base>/beacon/<name>/state      ON | OFF                    retained
/// <base>/beacon/<name>/attributes {"status":"advertising",…}  retained; Home Assistant reads both
/// <base>/event                    each event as --json prints it, not retained
/// room_presence/<room>            {"id","name","distance"}    not retained (mqtt_room)
/// <prefix>/binary_sensor/<node>/<object>/config              retained (discovery)
/// ```
///
/// The node (this box in Home Assistant: its device, its discovery topics, its entities'
/// `unique_id`) is the host name, the adapter's Bluetooth address and a digest of the base
/// topic (`box-1_lan_f0f1f2f3f40a_1a2b3c4d`). Neither the host name nor the address tells
/// boxes apart: images cloned onto many boxes share the host name, and cheap CSR-clone dongles
/// share one address (00:1A:7D:DA:71:13). The base is what the operator gives each box (a shared
/// one is reported on `boxTopic`), so two boxes under chain/store12 and chain/store13 never
/// publish one discovery config — with steering, that would send one store's command to the
/// other's beacon. The digest, not the base itself: a base may be 200 bytes, and
/// `MQTTTopic.identifier` would fold `a/b` and `a_b` into one.
public struct MQTTLayout: Sendable, Equatable {
    public var base: String
    /// The command publishing (`monitor`, `advertise`, `scan`): each has its own availability.
    public var command: String
    /// nil: no Home Assistant discovery.
    public var discoveryPrefix: String?
    /// This box: the device in Home Assistant, and the `node_id` of its discovery topics.
    public var node: String
    /// The host name as given.
    public var host: String
    /// The adapter's Bluetooth address (`F0:F1:F2:F3:F4:F5`), nil when there is none (a capture).
    public var adapter: String?
    public var room: String
    public var roomTopic: String
    /// `advertise --mqtt-control`: the beacons take commands on their `set` topics.
    public var control = false

    public init(
        base: String, command: String, discoveryPrefix: String?, node: String, adapter: String? = nil,
        room: String, roomTopic: String = "room_presence"
    ) {
        self.base = base
        self.command = command
        self.discoveryPrefix = discoveryPrefix
        self.host = node
        self.adapter = adapter
        self.node = Self.node(host: node, adapter: adapter) + "_" + Self.baseDigest(base)
        self.room = room
        self.roomTopic = roomTopic
    }

    /// The host name and the adapter's address as one identifier (the node before the base
    /// digest, and the whole node of earlier versions).
    static func node(host: String, adapter: String?) -> String {
        MQTTTopic.identifier(host)
            + (adapter.map { "_" + MQTTTopic.identifier($0.filter { $0 != ":" }.lowercased()) } ?? "")
    }

    /// Eight hex digits of FNV-1a (64 bit) over the base topic's UTF-8, mixed by MurmurHash3's
    /// 64-bit finalizer (FNV alone changes only a few top bits for bases that differ in their
    /// last character: store12 and store13). Stable across runs, versions and machines, so the
    /// node (and every `unique_id`) never changes while the base does not. 32 bits: a fleet of
    /// 1,000 bases shares one with a chance of about 1 in 10,000.
    public static func baseDigest(_ base: String) -> String {
        var h = fnv1a64(Array(base.utf8))
        h = (h ^ (h >> 33)) &* 0xff51_afd7_ed55_8ccd
        h = (h ^ (h >> 33)) &* 0xc4ce_b9fe_1a85_ec53
        h ^= h >> 33
        let digits = String(UInt32(truncatingIfNeeded: h >> 32), radix: 16)
        return String(repeating: "0", count: 8 - digits.count) + digits
    }

    /// Where earlier versions put this box's discovery configs: under the host name and the
    /// adapter's address, and before that under the host name alone. Subscribed to, so that
    /// configs left there (those of this base: `staleDiscovery` checks the availability topic)
    /// are removed.
    public var earlierNodes: [String] {
        let withAdapter = Self.node(host: host, adapter: adapter)
        let hostOnly = MQTTTopic.identifier(host)
        return withAdapter == hostOnly ? [hostOnly] : [withAdapter, hostOnly]
    }

    public var availabilityTopic: String { "\(base)/\(command)/availability" }
    /// Where this process says which box it is (retained): another box's name there is a clash.
    public var boxTopic: String { "\(base)/\(command)/box" }
    public var eventTopic: String { "\(base)/event" }
    /// Home Assistant announces its restart here (`online`).
    public var homeAssistantStatusTopic: String? { discoveryPrefix.map { "\($0)/status" } }
    /// Every discovery config of this box, whatever the component: subscribed to at connect, to
    /// remove the entities of regions and beacons it no longer has.
    public var ownDiscoveryFilter: String? { discoveryPrefix.map { "\($0)/+/\(node)/+/config" } }
    public var rangingTopic: String { "\(roomTopic)/\(MQTTTopic.level(room))" }

    /// The topics to subscribe to: Home Assistant's status, this box's own discovery configs (to
    /// remove what it no longer has; also those under `earlierNodes`, where earlier versions put
    /// them) and the box topic (to notice another box there).
    public var subscriptions: [String] {
        let legacy = discoveryPrefix.map { prefix in earlierNodes.map { "\(prefix)/+/\($0)/+/config" } } ?? []
        return [homeAssistantStatusTopic, ownDiscoveryFilter].compactMap { $0 } + legacy + [boxTopic]
    }

    /// The command topics subscribed to (with `control` only; QoS 1, retain flag as published).
    public var commandSubscriptions: [String] { control ? [beaconCommandFilter] : [] }

    public func regionStateTopic(_ name: String) -> String { "\(base)/region/\(MQTTTopic.level(name))/state" }
    public func regionAttributesTopic(_ name: String) -> String {
        "\(base)/region/\(MQTTTopic.level(name))/attributes"
    }
    public func beaconStateTopic(_ name: String) -> String { "\(base)/beacon/\(MQTTTopic.level(name))/state" }
    public func beaconAttributesTopic(_ name: String) -> String {
        "\(base)/beacon/\(MQTTTopic.level(name))/attributes"
    }

    /// Refuses region names that cannot be published: two that would share a topic, or one
    /// whose topics MQTT cannot carry (`MQTTTopic.checkName`).
    public func checkRegionNames(_ names: [String]) throws(MQTTSettingError) {
        try MQTTTopic.checkDistinct(names, kind: "region")
        for name in names {
            let topics = [regionStateTopic(name), regionAttributesTopic(name), regionDiscovery(name)?.topic]
            try MQTTTopic.checkName(name, kind: "region", topics: topics.compactMap { $0 })
        }
    }

    /// The same for the names of advertised profiles.
    public func checkBeaconNames(_ names: [String]) throws(MQTTSettingError) {
        try MQTTTopic.checkDistinct(names, kind: "profile")
        for name in names {
            let topics = [beaconStateTopic(name), beaconAttributesTopic(name), beaconDiscovery(name)?.topic]
            try MQTTTopic.checkName(name, kind: "profile", topics: topics.compactMap { $0 })
        }
    }

    /// `BASE/NAME/health`: the receiver's health (monitor), retained.
    public var healthTopic: String { "\(base)/\(command)/health" }

    /// The diagnostic sensors read from `healthTopic`: the receiver's state (its attributes: the
    /// reason, the adapter, the last recovery, the version) and the reports heard per minute.
    public func healthDiscovery() -> [(topic: String, payload: String)] {
        guard let discoveryPrefix else { return [] }
        let id = MQTTTopic.identifier(command)
        let sensors: [(object: String, name: String, template: String, extra: [JSONObject.Member])] = [
            (
                "\(id)_receiver", "\(command) receiver", "{{ value_json.receiver }}",
                [("json_attributes_topic", .string(healthTopic))]
            ),
            (
                "\(id)_reports", "\(command) reports heard", "{{ value_json.reportsPerMinute }}",
                [("unit_of_measurement", .string("reports/min")), ("state_class", .string("measurement"))]
            ),
        ]
        return sensors.map { s in
            var config = JSONObject([
                ("name", .string(s.name)), ("unique_id", .string("ibeacon_\(node)_\(s.object)")),
                ("object_id", .string("ibeacon_\(node)_\(s.object)")), ("entity_category", .string("diagnostic")),
                ("state_topic", .string(healthTopic)), ("value_template", .string(s.template)),
            ])
            for m in s.extra { config[m.key] = m.value }
            config["availability_topic"] = .string(availabilityTopic)
            config["device"] = deviceJSON
            config["origin"] = originJSON
            return ("\(discoveryPrefix)/sensor/\(node)/\(s.object)/config", JSONValue.object(config).compactText())
        }
    }

    /// The retained payload of `boxTopic`.
    public var boxPayload: String {
        JSONValue.object(
            JSONObject([
                ("node", .string(node)), ("host", .string(host)), ("adapter", adapter.map(JSONValue.string) ?? .null),
            ])
        ).compactText()
    }

    /// The node another process names in `payload` of `boxTopic`, when it is not this box.
    public func otherBox(inBoxPayload payload: String) -> String? {
        guard let object = try? JSONValue.parse(Array(payload.utf8)).objectValue,
            let other = object["node"]?.stringValue, other != node
        else { return nil }
        return other
    }

    /// The device every entity of this box belongs to (Home Assistant groups them by `identifiers`).
    public var deviceJSON: JSONValue {
        .object(
            JSONObject([
                ("identifiers", .array([.string("ibeacon_\(node)")])),
                ("name", .string("ibeacon \(host)" + (adapter.map { " \($0)" } ?? "") + " (\(base))")),
                ("manufacturer", .string(ProgramInfo.name)),
                ("model", .string("ibeacon (Linux)")),
                ("sw_version", .string(ProgramInfo.version)),
            ]))
    }

    /// What published the entity (Home Assistant logs it and shows it with the device).
    public var originJSON: JSONValue {
        .object(JSONObject([("name", .string(ProgramInfo.name)), ("sw_version", .string(ProgramInfo.version))]))
    }

    /// The discovery message of a region's presence sensor; nil without discovery.
    public func regionDiscovery(_ name: String) -> (topic: String, payload: String)? {
        discovery(
            kind: "region", name: name, displayName: name, deviceClass: "presence",
            topic: regionAttributesTopic(name), valueTemplate: RegionPresence.valueTemplate)
    }

    /// The discovery message of an advertised beacon's running sensor; nil without discovery.
    public func beaconDiscovery(_ name: String) -> (topic: String, payload: String)? {
        discovery(
            kind: "beacon", name: name, displayName: "\(name) advertising", deviceClass: "running",
            topic: beaconAttributesTopic(name), valueTemplate: BeaconRunState.valueTemplate)
    }

    /// `<prefix>/binary_sensor/<node>/<kind>_<name>/config` with a `binary_sensor` config in
    /// Home Assistant's long key names (FIELD.md "MQTT, Home Assistant and the fleet"). State and
    /// attributes come from one retained JSON message (`topic`), so Home Assistant records each
    /// change once, with the attributes that go with it.
    func discovery(
        kind: String, name: String, displayName: String, deviceClass: String, topic: String, valueTemplate: String
    ) -> (topic: String, payload: String)? {
        guard let discoveryPrefix else { return nil }
        let object = "\(kind)_\(MQTTTopic.identifier(name))"
        let config = JSONObject([
            ("name", .string(displayName)),
            ("unique_id", .string("ibeacon_\(node)_\(object)")),
            ("object_id", .string("ibeacon_\(node)_\(object)")),
            ("device_class", .string(deviceClass)),
            ("state_topic", .string(topic)),
            ("value_template", .string(valueTemplate)),
            ("payload_on", .string("ON")),
            ("payload_off", .string("OFF")),
            ("json_attributes_topic", .string(topic)),
            ("availability_topic", .string(availabilityTopic)),
            ("payload_available", .string("online")),
            ("payload_not_available", .string("offline")),
            ("device", deviceJSON),
            ("origin", originJSON),
        ])
        return ("\(discoveryPrefix)/binary_sensor/\(node)/\(object)/config", JSONValue.object(config).compactText())
    }

    /// A retained discovery config of this box's node that this process published once and no
    /// longer has (`current`: the config topics it publishes now): the config topic, and its
    /// state and attribute topics under `base`, to be emptied (an empty retained config removes
    /// the entity from Home Assistant). Another process's entities (another availability topic)
    /// are left alone.
    /// `BASE/region/NAME/state`, `BASE/beacon/NAME/attributes` and the like: one level of name;
    /// and a steered beacon's `BASE/beacon/NAME/settings` (`--mqtt-control`).
    func isEntityStateTopic(_ topic: String) -> Bool {
        guard topic.hasPrefix(base + "/"), !topic.contains("+"), !topic.contains("#") else { return false }
        let levels = topic.dropFirst(base.count + 1).split(separator: "/", omittingEmptySubsequences: false)
        guard levels.count == 3, levels[0] == "region" || levels[0] == "beacon", !levels[1].isEmpty else {
            return false
        }
        return levels[2] == "state" || levels[2] == "attributes" || (levels[0] == "beacon" && levels[2] == "settings")
    }

    public func staleDiscovery(topic: String, payload: String, current: Set<String>) -> [String] {
        guard let discoveryPrefix, !payload.isEmpty, !current.contains(topic), topic.hasPrefix(discoveryPrefix + "/"),
            topic.hasSuffix("/config"),
            let config = try? JSONValue.parse(Array(payload.utf8)).objectValue,
            config["availability_topic"]?.stringValue == availabilityTopic
        else { return [] }
        // Only an entity's own state topics (BASE/region|beacon/NAME/state|attributes), never
        // another of the base (availability, another command's): the config can be forged
        // (issue 40, hole 2), and the publisher also keeps every topic it publishes now.
        let mine = ["state_topic", "json_attributes_topic"].compactMap { config[$0]?.stringValue }
            .filter { isEntityStateTopic($0) }
        var out = [topic]
        for t in mine {
            // The plain ON/OFF topic beside the attributes goes too.
            let siblings = t.hasSuffix("/attributes") ? [t, String(t.dropLast("attributes".count)) + "state"] : [t]
            for s in siblings where !out.contains(s) { out.append(s) }
        }
        return out
    }
}

/// The payloads, one JSON object each, keys in a fixed order.
public enum MQTTPayload {
    /// A region's attributes: its presence, why, and when (UTC, or null when the time is a
    /// capture's). Not `state`: Home Assistant drops that key from attributes
    /// (`MQTT_ATTRIBUTES_BLOCKED`).
    public static func regionAttributes(
        name: String, state: RegionPresence, reason: String, time: String?, identity: String
    ) -> String {
        JSONValue.object(
            JSONObject([
                ("region", .string(name)), ("presence", .string(state.rawValue)), ("reason", .string(reason)),
                ("time", time.map(JSONValue.string) ?? .null), ("identity", .string(identity)),
            ])
        ).compactText()
    }

    /// One `mqtt_room` reading: `{"id":…,"name":…,"distance":…}`, the distance in metres with
    /// two decimals (FIELD.md: Home Assistant's `mqtt_room` reads exactly these keys).
    public static func ranging(id: String, name: String, distance: Double) -> String {
        JSONValue.object(
            JSONObject([
                ("id", .string(id)), ("name", .string(name)),
                ("distance", JSONValue.decimal(distance, fractionDigits: 2)),
            ])
        ).compactText()
    }

    /// The `mqtt_room` id of a beacon: `<uuid lower case>-<major>-<minor>`.
    public static func rangingID(_ beacon: IBeacon) -> String {
        "\(beacon.uuidString.lowercased())-\(beacon.major)-\(beacon.minor)"
    }

    /// The same id from a ranged identity.
    public static func rangingID(_ identity: BeaconIdentity) -> String {
        "\(identity.proximityUUID.uuidString.lowercased())-\(identity.major)-\(identity.minor)"
    }
}

/// What `monitor` says about its own receiver (Home Assistant's diagnostic entities): whether it
/// hears, and why not; how much it hears; which adapter; the last time it stopped hearing and why.
public struct ReceiverHealth: Sendable, Equatable {
    /// nil while it hears.
    public var deafness: Deafness?
    public var reportsPerMinute: Int
    public var device: String
    public var adapter: String?
    /// When it last stopped hearing (UTC) and why.
    public var lastRecovery: String?
    public var lastRecoveryCause: String?

    public init(device: String, adapter: String?) {
        self.device = device
        self.adapter = adapter
        self.reportsPerMinute = 0
    }

    /// The receiver sensor's state: `hearing`, or `deaf` (the reason in `reason`).
    public var receiver: String { deafness == nil ? "hearing" : "deaf" }

    public var json: String {
        func opt(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        return JSONValue.object(
            JSONObject([
                ("receiver", .string(receiver)), ("reason", opt(deafness?.reason)),
                ("cause", opt(deafness?.cause.rawValue)), ("reportsPerMinute", .integer(Int64(reportsPerMinute))),
                ("device", .string(device)), ("adapter", opt(adapter)), ("version", .string(ProgramInfo.version)),
                ("lastRecovery", opt(lastRecovery)), ("lastRecoveryCause", opt(lastRecoveryCause)),
            ])
        ).compactText()
    }
}

/// What `advertise` says about one beacon: its state, its profile's fields, and its last
/// recovery (when the controller lost the advertising and it was put back) with the cause.
public struct BeaconStatusMessage: Sendable, Equatable {
    /// The profile's name (its file name without `.json` when it has none): the topic level.
    public var name: String
    public var state: BeaconRunState
    public var beacon: IBeacon
    public var intervalMilliseconds: Int?
    public var txPower: Int?
    public var device: String
    /// The address it advertises from (nil: a new non-resolvable one, or not known).
    public var address: String?
    /// When the state last changed (UTC, ISO 8601).
    public var since: String
    /// The latest loss of the advertising: when (UTC) and why.
    public var lastRecovery: String?
    public var lastRecoveryCause: String?

    public init(
        name: String, state: BeaconRunState, beacon: IBeacon, intervalMilliseconds: Int?, txPower: Int?,
        device: String, address: String? = nil, since: String, lastRecovery: String? = nil,
        lastRecoveryCause: String? = nil
    ) {
        self.name = name
        self.state = state
        self.beacon = beacon
        self.intervalMilliseconds = intervalMilliseconds
        self.txPower = txPower
        self.device = device
        self.address = address
        self.since = since
        self.lastRecovery = lastRecovery
        self.lastRecoveryCause = lastRecoveryCause
    }

    /// The retained attributes: `{"status":"advertising","profile":…,"uuid":…,…}`.
    public var json: String {
        func opt(_ v: Int?) -> JSONValue { v.map { .integer(Int64($0)) } ?? .null }
        func opt(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
        return JSONValue.object(
            JSONObject([
                ("status", .string(state.rawValue)), ("profile", .string(name)), ("device", .string(device)),
                ("address", opt(address)),
                ("uuid", .string(beacon.uuidString)), ("major", .integer(Int64(beacon.major))),
                ("minor", .integer(Int64(beacon.minor))), ("measuredPower", .integer(Int64(beacon.measuredPower))),
                ("intervalMs", opt(intervalMilliseconds)), ("txPower", opt(txPower)), ("since", .string(since)),
                ("lastRecovery", opt(lastRecovery)), ("lastRecoveryCause", opt(lastRecoveryCause)),
            ])
        ).compactText()
    }
}
