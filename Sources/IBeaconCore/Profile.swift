#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// A beacon profile: the JSON file `ibeacon advertise --profile` reads and `ibeacon calibrate`
/// rewrites (see `profiles/README.md` and `profiles/schema.json`).
///
/// The JSON document is the source of truth: typed fields are derived from it by `load`, and
/// every change goes through the same validation, so a `Profile` value is always valid and
/// `encoded()` rewrites the file with unknown keys and key order kept.
public struct Profile: Sendable, Equatable {
    /// The whole document, unknown keys included, in file order.
    public private(set) var document: JSONObject
    /// Where it came from, for messages.
    public private(set) var file: String

    public private(set) var proximityUUID: UUID
    public private(set) var major: UInt16
    public private(set) var minor: UInt16
    /// RSSI in dBm a receiver sees at 1 m, as advertised in the iBeacon payload.
    public private(set) var measuredPower: Int8
    public private(set) var name: String?
    /// Advertising interval in milliseconds; 100 (Apple's recommendation) when absent.
    public private(set) var intervalMs: Int
    /// Requested transmit power in dBm, when the profile pins one.
    public private(set) var txPower: Int8?
    public private(set) var address: AddressKind
    /// The `calibration` object as written (validated to be an object).
    public private(set) var calibration: JSONValue?

    /// Which address the beacon advertises from (key `address`). Address-keyed receivers (Home
    /// Assistant's iBeacon tracker, Theengs Gateway, MAC allow-lists) see a new device whenever it
    /// changes, so every choice but `nonResolvable` keeps one address across restarts.
    public enum AddressKind: Sendable, Equatable, CustomStringConvertible {
        /// `"public"` (the default): the adapter's identity address.
        case `public`
        /// `"random-static"`: a static random address derived from the UUID, major and minor
        /// (`BDAddress.staticRandom(for:)`), so recalibrating does not change it.
        case randomStatic
        /// `"C3:12:34:56:78:9A"`: this static random address.
        case fixed(BDAddress)
        /// `"non-resolvable"`: a new non-resolvable private address at every start (the kernel's
        /// choice for non-connectable advertising).
        case nonResolvable

        /// The profile's spelling.
        public var description: String {
            switch self {
            case .public: "public"
            case .randomStatic: "random-static"
            case .fixed(let address): address.description
            case .nonResolvable: "non-resolvable"
            }
        }

        static let allowed =
            "\"public\", \"random-static\", \"non-resolvable\" or a static random address such as \"C3:12:34:56:78:9A\""

        /// Parses the profile's spelling; nil, with the problem added to `issues`, when it is not one.
        static func parse(_ text: String, found: String, _ issues: inout [ProfileIssue]) -> AddressKind? {
            switch text {
            case "public": return .public
            case "random-static": return .randomStatic
            case "non-resolvable": return .nonResolvable
            default: break
            }
            guard let address = BDAddress(text) else {
                issues.append(
                    ProfileIssue(key: "address", found: found, problem: .invalidFormat, allowed: allowed, note: nil))
                return nil
            }
            guard address.isStaticRandom else {
                // Core 5.4 Vol 6 Part B §1.3.2.1: the two most significant bits of a static
                // address are 1, and its random part is neither all 0 nor all 1.
                issues.append(
                    ProfileIssue(
                        key: "address", found: found, problem: .invalidFormat, allowed: allowed,
                        note:
                            "not a static random address: its first octet must be C0…FF and the rest not all 00 "
                            + "or all FF (Core Vol 6 Part B §1.3.2.1); for the adapter's own address write \"public\""
                    ))
                return nil
            }
            return .fixed(address)
        }
    }

    /// The typed view of `calibration`, or nil when absent or not in the shape
    /// `CalibrationRecord` writes.
    public var calibrationRecord: CalibrationRecord? {
        calibration.flatMap { try? CalibrationRecord(json: $0) }
    }

    /// The iBeacon this profile advertises.
    public var iBeacon: IBeacon {
        IBeacon(proximityUUID: proximityUUID, major: major, minor: minor, measuredPower: measuredPower)
    }

    // MARK: key rules (kept in step with profiles/schema.json)

    public static let defaultIntervalMs = 100
    public static let majorRange: ClosedRange<Int64> = 0...65535
    public static let minorRange: ClosedRange<Int64> = 0...65535
    public static let measuredPowerRange: ClosedRange<Int64> = -127...(-1)
    /// Legacy advertising interval 0x0020…0x4000 slots of 0.625 ms (Core 5.4 Vol 4 Part E §7.8.5).
    public static let intervalMsRange: ClosedRange<Int64> = 20...10240
    public static let txPowerRange: ClosedRange<Int64> = -127...20
    public static let requiredKeys = ["uuid", "major", "minor", "measuredPower"]
    public static let knownKeys = [
        "name", "uuid", "major", "minor", "measuredPower", "intervalMs", "txPower", "address", "calibration",
        "advertising",
    ]

    // MARK: loading

    /// Parses and validates a profile file. Reports every problem at once.
    public static func load(bytes: [UInt8], file: String) throws(ProfileError) -> Profile {
        if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) {
            throw .empty(file: file)
        }
        let value: JSONValue
        do {
            value = try JSONValue.parse(bytes)
        } catch {
            throw .syntax(file: file, line: error.line, column: error.column, message: error.message)
        }
        guard case .object(let object) = value else {
            throw .notAnObject(file: file, found: value.kindName)
        }
        return try Profile(document: object, file: file)
    }

    /// Validates `document` in full and derives the typed fields.
    public init(document: JSONObject, file: String) throws(ProfileError) {
        var issues: [ProfileIssue] = []
        var doc = document

        let uuid = Self.checkUUID(doc["uuid"], &issues)
        if let uuid { doc["uuid"] = .string(uuid.uuid.uuidString) }
        let major = Self.checkInteger("major", doc, Self.majorRange, required: true, &issues)
        let minor = Self.checkInteger("minor", doc, Self.minorRange, required: true, &issues)
        let power = Self.checkInteger(
            "measuredPower", doc, Self.measuredPowerRange, required: true, unit: " dBm", &issues)
        let interval = Self.checkInteger("intervalMs", doc, Self.intervalMsRange, required: false, unit: " ms", &issues)
        let tx = Self.checkInteger("txPower", doc, Self.txPowerRange, required: false, unit: " dBm", &issues)

        var name: String?
        if let v = doc["name"] {
            if case .string(let s) = v {
                name = s
            } else {
                issues.append(
                    ProfileIssue(key: "name", found: v.description, problem: .wrongType, allowed: "a string", note: nil)
                )
            }
        }
        var address = AddressKind.public
        if let v = doc["address"] {
            if case .string(let s) = v {
                address = AddressKind.parse(s, found: v.description, &issues) ?? .public
            } else {
                issues.append(
                    ProfileIssue(
                        key: "address", found: v.description, problem: .wrongType, allowed: AddressKind.allowed,
                        note: nil))
            }
        }
        let calibration = doc["calibration"]
        if let calibration, calibration.objectValue == nil {
            issues.append(
                ProfileIssue(
                    key: "calibration", found: calibration.description, problem: .wrongType,
                    allowed: "an object (written by `ibeacon calibrate`)", note: "remove the key to clear it"))
        }

        if let v = doc["advertising"], case .bool = v {
        } else if let v = doc["advertising"] {
            issues.append(
                ProfileIssue(
                    key: "advertising", found: v.description, problem: .wrongType,
                    allowed: "true or false (false: kept off the air, as switched from Home Assistant)", note: nil))
        }

        guard issues.isEmpty, let uuid, let major, let minor, let power else {
            throw .invalid(file: file, issues: issues)
        }
        self.document = doc
        self.file = file
        self.proximityUUID = uuid.uuid
        self.major = UInt16(major)
        self.minor = UInt16(minor)
        self.measuredPower = Int8(power)
        self.name = name
        self.intervalMs = interval.map { Int($0) } ?? Self.defaultIntervalMs
        self.txPower = tx.map { Int8($0) }
        self.address = address
        self.calibration = calibration
    }

    // MARK: writing

    /// Pretty JSON in the original key order; new keys at the end; trailing newline.
    public func encoded() -> [UInt8] { JSONValue.object(document).serialized() }

    /// A fresh profile for `ibeacon profile new`. Key order: name (if any), uuid, major, minor,
    /// measuredPower, intervalMs.
    public static func new(
        uuid: UUID, major: UInt16, minor: UInt16, measuredPower: Int, name: String? = nil,
        file: String = "new profile"
    ) throws(ProfileError) -> Profile {
        var doc = JSONObject()
        if let name { doc["name"] = .string(name) }
        doc["uuid"] = .string(uuid.uuidString)
        doc["major"] = .integer(Int64(major))
        doc["minor"] = .integer(Int64(minor))
        doc["measuredPower"] = .integer(Int64(measuredPower))
        doc["intervalMs"] = .integer(Int64(defaultIntervalMs))
        return try Profile(document: doc, file: file)
    }

    /// Sets one key (known or not) and re-validates the whole document; the key keeps its
    /// position, or is appended when new. `nil` removes it.
    public mutating func set(_ key: String, to value: JSONValue?) throws(ProfileError) {
        var doc = document
        doc[key] = value
        self = try Profile(document: doc, file: file)
    }

    /// Writes a calibration result: `measuredPower` in place and the `calibration` record
    /// (in place when present, else appended).
    public mutating func applyCalibration(measuredPower: Int, record: CalibrationRecord) throws(ProfileError) {
        var doc = document
        doc["measuredPower"] = .integer(Int64(measuredPower))
        doc["calibration"] = record.json
        self = try Profile(document: doc, file: file)
    }

    // MARK: checks

    private static func checkInteger(
        _ key: String, _ doc: JSONObject, _ range: ClosedRange<Int64>, required: Bool, unit: String = "",
        _ issues: inout [ProfileIssue]
    ) -> Int64? {
        let allowed = "an integer \(range.lowerBound)…\(range.upperBound)\(unit)"
        guard let v = doc[key] else {
            if required {
                issues.append(
                    ProfileIssue(
                        key: key, found: nil, problem: .missing, allowed: allowed, note: misspelling(of: key, in: doc)))
            }
            return nil
        }
        switch v {
        case .integer(let i):
            if range.contains(i) { return i }
            issues.append(
                ProfileIssue(key: key, found: v.description, problem: .outOfRange, allowed: allowed, note: nil))
        case .number(let d, let text):
            if !text.contains(where: { $0 == "." || $0 == "e" || $0 == "E" }) {
                // An integer literal too large for Int64.
                issues.append(ProfileIssue(key: key, found: text, problem: .outOfRange, allowed: allowed, note: nil))
                return nil
            }
            let whole = d == d.rounded() && abs(d) < 1e15
            let note = whole ? "write \(Int64(d)) without a decimal point or exponent" : "it has a fractional part"
            issues.append(ProfileIssue(key: key, found: text, problem: .notAnInteger, allowed: allowed, note: note))
        case .string(let s):
            let note = Int64(s.trimmingWhitespace()) != nil ? "write \(s.trimmingWhitespace()) without quotes" : nil
            issues.append(
                ProfileIssue(
                    key: key, found: "the string \(v.description)", problem: .wrongType, allowed: allowed, note: note))
        default:
            issues.append(
                ProfileIssue(key: key, found: v.description, problem: .wrongType, allowed: allowed, note: nil))
        }
        return nil
    }

    private static func checkUUID(_ v: JSONValue?, _ issues: inout [ProfileIssue]) -> ParsedUUID? {
        let allowed = "a UUID string of 8-4-4-4-12 hex digits, like \"F7826DA6-4FA2-4E98-8024-BC5B71E0893E\""
        guard let v else {
            issues.append(ProfileIssue(key: "uuid", found: nil, problem: .missing, allowed: allowed, note: nil))
            return nil
        }
        guard case .string(let s) = v else {
            issues.append(
                ProfileIssue(key: "uuid", found: v.description, problem: .wrongType, allowed: allowed, note: nil))
            return nil
        }
        guard let parsed = ParsedUUID(s) else {
            let digits = s.filter(\.isHexDigit).count
            let note =
                digits != 32
                ? "it has \(digits) hex digits, a UUID has 32" : "put hyphens after digits 8, 12, 16 and 20"
            issues.append(
                ProfileIssue(key: "uuid", found: v.description, problem: .invalidFormat, allowed: allowed, note: note))
            return nil
        }
        return parsed
    }

    /// "did you mean …" when the document has a key differing only in case.
    private static func misspelling(of key: String, in doc: JSONObject) -> String? {
        doc.keys.first { $0 != key && $0.lowercased() == key.lowercased() }.map {
            "found \"\($0)\"; keys are case-sensitive"
        }
    }
}

/// A canonical 8-4-4-4-12 UUID string parsed to 16 bytes.
struct ParsedUUID {
    var bytes: [UInt8]

    init?(_ s: String) {
        let u = Array(s.utf8)
        guard u.count == 36 else { return nil }
        var out: [UInt8] = []
        var k = 0
        while k < 36 {
            if k == 8 || k == 13 || k == 18 || k == 23 {
                guard u[k] == UInt8(ascii: "-") else { return nil }
                k += 1
                continue
            }
            guard let hi = hexValue(u[k]), let lo = hexValue(u[k + 1]) else { return nil }
            out.append(hi << 4 | lo)
            k += 2
        }
        bytes = out
    }

    var uuid: UUID { UUID(bytes: bytes) }
}

private func hexValue(_ b: UInt8) -> UInt8? {
    switch b {
    case 0x30...0x39: return b - 0x30
    case 0x41...0x46: return b - 0x41 + 10
    case 0x61...0x66: return b - 0x61 + 10
    default: return nil
    }
}

extension UUID {
    /// The 16 bytes in the order the string is written (big-endian, as iBeacon carries them).
    public var bytes: [UInt8] { withUnsafeBytes(of: uuid) { Array($0) } }

    /// From exactly 16 bytes in written order; shorter input is zero-padded, longer truncated —
    /// callers pass 16 (every decoder checks the length first).
    init(bytes b: [UInt8]) {
        let x = b + [UInt8](repeating: 0, count: max(0, 16 - b.count))
        self.init(
            uuid: (x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13], x[14], x[15])
        )
    }
}

extension String {
    fileprivate func trimmingWhitespace() -> String {
        String(
            unicodeScalars.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" })
                .reversed().map(Character.init))
    }
}

/// One problem with one key of a profile.
public struct ProfileIssue: Sendable, Equatable, CustomStringConvertible {
    public enum Problem: String, Sendable {
        case missing = "missing"
        case wrongType = "wrong type"
        case notAnInteger = "not an integer"
        case outOfRange = "out of range"
        case invalidFormat = "invalid format"
    }

    /// The JSON key, e.g. `major`.
    public var key: String
    /// The value as written in the file (`70000`, `12.0`, `the string "12"`), nil when missing.
    public var found: String?
    public var problem: Problem
    /// What is allowed, e.g. `an integer 0…65535`.
    public var allowed: String
    /// How to fix it, when there is more to say than `allowed`.
    public var note: String?

    public init(key: String, found: String?, problem: Problem, allowed: String, note: String?) {
        self.key = key
        self.found = found
        self.problem = problem
        self.allowed = allowed
        self.note = note
    }

    /// `"major" is 70000, must be an integer 0…65535`
    public var description: String {
        "\"\(key)\" is \(found ?? "missing"), must be \(allowed)" + (note.map { " (\($0))" } ?? "")
    }
}

/// Why a profile file could not be used.
public enum ProfileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file has no content (or only whitespace).
    case empty(file: String)
    /// Not JSON text; `line`/`column` are 1-based.
    case syntax(file: String, line: Int, column: Int, message: String)
    /// JSON, but not an object at the top level.
    case notAnObject(file: String, found: String)
    /// An object with one or more invalid keys; every problem found is listed.
    case invalid(file: String, issues: [ProfileIssue])

    public var file: String {
        switch self {
        case .empty(let f), .syntax(let f, _, _, _), .notAnObject(let f, _), .invalid(let f, _): return f
        }
    }

    public var description: String {
        switch self {
        case .empty(let file):
            return
                "\(file): the file is empty; a profile is a JSON object with at least \"uuid\", \"major\", \"minor\" "
                + "and \"measuredPower\" — create one with `ibeacon profile new` (see profiles/README.md)"
        case .syntax(let file, let line, let column, let message):
            return "\(file):\(line):\(column): not valid JSON: \(message)"
        case .notAnObject(let file, let found):
            return
                "\(file): the top level is \(found), must be a JSON object { … } with \"uuid\", \"major\", \"minor\" "
                + "and \"measuredPower\" (see profiles/README.md)"
        case .invalid(let file, let issues):
            if issues.count == 1 { return "\(file): \(issues[0]); fix the file and try again" }
            return "\(file): \(issues.count) problems; fix them and try again:\n"
                + issues.map { "  \(file): \($0)" }.joined(separator: "\n")
        }
    }
}

// MARK: - calibration record

/// The `calibration` object `ibeacon calibrate` writes into a profile.
public struct CalibrationRecord: Sendable, Equatable {
    /// When the measurement finished, ISO 8601 UTC (`2025-03-01T14:02:11Z`).
    public var timestamp: String
    /// RSSI samples used.
    public var samples: Int
    /// Estimated RSSI at 1 m in dBm (written with 2 decimals).
    public var estimate: Double
    /// Half-width of the 95 % confidence interval of `estimate`, dB.
    public var interval95: Double
    /// Robust standard deviation of the samples, dB.
    public var spread: Double
    /// Estimator name (`MeasuredPowerEstimate.method`).
    public var method: String
    /// The receiving device, e.g. `hci1` or `tcp:127.0.0.1:9000`.
    public var receiver: String
    /// The receiver's address, `AA:BB:CC:DD:EE:FF`.
    public var receiverAddress: String
    /// Correction in dB added to the receiver's RSSI before estimating (0 when none).
    public var offset: Double
    /// Transmit power in dBm the beacon used while calibrating, nil when unknown.
    public var txPower: Int?

    public init(
        timestamp: String, samples: Int, estimate: Double, interval95: Double, spread: Double, method: String,
        receiver: String, receiverAddress: String, offset: Double, txPower: Int?
    ) {
        self.timestamp = timestamp
        self.samples = samples
        self.estimate = estimate
        self.interval95 = interval95
        self.spread = spread
        self.method = method
        self.receiver = receiver
        self.receiverAddress = receiverAddress
        self.offset = offset
        self.txPower = txPower
    }

    /// The object as written to the file, in this key order.
    public var json: JSONValue {
        var o = JSONObject()
        o["timestamp"] = .string(timestamp)
        o["samples"] = .integer(Int64(samples))
        o["estimate"] = .decimal(estimate, fractionDigits: 2)
        o["interval95"] = .decimal(interval95, fractionDigits: 2)
        o["spread"] = .decimal(spread, fractionDigits: 2)
        o["method"] = .string(method)
        o["receiver"] = .string(receiver)
        o["receiverAddress"] = .string(receiverAddress)
        o["offset"] = .decimal(offset, fractionDigits: 2)
        o["txPower"] = txPower.map { .integer(Int64($0)) } ?? .null
        return .object(o)
    }

    /// Reads the typed view; throws naming the first key that does not fit.
    public init(json: JSONValue) throws(ProfileError) {
        guard case .object(let o) = json else {
            throw .invalid(
                file: "calibration",
                issues: [
                    ProfileIssue(
                        key: "calibration", found: json.description, problem: .wrongType, allowed: "an object",
                        note: nil)
                ])
        }
        var issues: [ProfileIssue] = []
        func string(_ k: String) -> String {
            if let s = o[k]?.stringValue { return s }
            issues.append(
                ProfileIssue(
                    key: "calibration.\(k)", found: o[k]?.description, problem: o[k] == nil ? .missing : .wrongType,
                    allowed: "a string", note: nil))
            return ""
        }
        func number(_ k: String) -> Double {
            if let d = o[k]?.doubleValue { return d }
            issues.append(
                ProfileIssue(
                    key: "calibration.\(k)", found: o[k]?.description, problem: o[k] == nil ? .missing : .wrongType,
                    allowed: "a number", note: nil))
            return 0
        }
        func integer(_ k: String) -> Int? {
            if let i = o[k]?.integerValue, let v = Int(exactly: i) { return v }
            if o[k] == .null || o[k] == nil { return nil }
            issues.append(
                ProfileIssue(
                    key: "calibration.\(k)", found: o[k]?.description, problem: .wrongType,
                    allowed: "an integer or null", note: nil))
            return nil
        }
        timestamp = string("timestamp")
        let count = integer("samples")
        if count == nil, o["samples"] == nil || o["samples"] == .null {
            issues.append(
                ProfileIssue(
                    key: "calibration.samples", found: o["samples"]?.description, problem: .missing,
                    allowed: "an integer", note: nil))
        }
        samples = count ?? 0
        estimate = number("estimate")
        interval95 = number("interval95")
        spread = number("spread")
        method = string("method")
        receiver = string("receiver")
        receiverAddress = string("receiverAddress")
        offset = number("offset")
        txPower = integer("txPower")
        if !issues.isEmpty { throw .invalid(file: "calibration", issues: issues) }
    }
}

extension Profile {
    /// The one profile-name rule: a profile file's name is its file name without `.json`
    /// (`profiles/a.b.json` is `a.b`). It names the beacon's MQTT topics and, when the profile
    /// has no `name`, its region in `monitor`.
    public static func name(ofFile path: String) -> String {
        let file = path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
        return file.hasSuffix(".json") && file.count > 5 ? String(file.dropLast(5)) : file
    }

    /// What the profile is called: its `name`, or `name(ofFile:)`.
    public func displayName(file path: String) -> String {
        if let name, !name.isEmpty { return name }
        return Self.name(ofFile: path)
    }
}
