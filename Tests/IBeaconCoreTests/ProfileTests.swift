import Foundation
import Testing

@testable import IBeaconCore

@Suite struct ProfileTests {
    static let valid = """
        {
          "name": "Store 12 entrance",
          "uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e",
          "major": 258,
          "minor": 772,
          "measuredPower": -59
        }
        """

    func load(_ text: String, file: String = "store12.json") throws(ProfileError) -> Profile {
        try Profile.load(bytes: Array(text.utf8), file: file)
    }

    func error(_ bytes: [UInt8]) -> ProfileError? {
        do {
            _ = try Profile.load(bytes: bytes, file: "store12.json")
            return nil
        } catch {
            return error
        }
    }

    /// `valid` with one key's value replaced (raw JSON text), or removed when nil.
    static func with(_ key: String, _ raw: String?) -> String {
        var lines: [String] = []
        var found = false
        for line in valid.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("  \"\(key)\":") {
                found = true
                if let raw { lines.append("  \"\(key)\": \(raw)" + (line.hasSuffix(",") ? "," : "")) }
            } else {
                lines.append(String(line))
            }
        }
        if !found, let raw { lines.insert("  \"\(key)\": \(raw),", at: 1) }
        var text = lines.joined(separator: "\n")
        if raw == nil, key == "measuredPower" { text = text.replacingOccurrences(of: "772,", with: "772") }
        return text
    }

    @Test func loadsValidProfile() throws {
        let p = try load(Self.valid)
        #expect(p.proximityUUID.uuidString == "F7826DA6-4FA2-4E98-8024-BC5B71E0893E")
        #expect(p.major == 0x0102 && p.minor == 0x0304 && p.measuredPower == -59)
        #expect(p.name == "Store 12 entrance")
        #expect(p.intervalMs == 100 && p.txPower == nil && p.address == .public && p.calibration == nil)
        #expect(p.iBeacon.advertisingData.count == 30)
    }

    @Test(arguments: [
        ("\"public\"", Profile.AddressKind.public),
        ("\"random-static\"", .randomStatic),
        ("\"non-resolvable\"", .nonResolvable),
        ("\"c3:12:34:56:78:9a\"", .fixed(BDAddress("C3:12:34:56:78:9A")!)),
    ])
    func addressChoices(_ c: (String, Profile.AddressKind)) throws {
        let p = try load(Self.with("address", c.0))
        #expect(p.address == c.1)
        // The profile's spelling comes back (an address in upper case).
        let spelled = String(c.0.dropFirst().dropLast())
        #expect(p.address.description == (spelled.contains(":") ? spelled.uppercased() : spelled))
    }

    @Test func shippedProfilesLoad() throws {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("profiles")
        let a = try Profile.load(
            bytes: Array(try Data(contentsOf: dir.appendingPathComponent("store12.json"))), file: "store12.json")
        let b = try Profile.load(
            bytes: Array(try Data(contentsOf: dir.appendingPathComponent("store12-bakery.json"))),
            file: "store12-bakery.json")
        #expect(
            a.name == "Store 12 entrance" && a.major == 12 && a.minor == 1 && a.measuredPower == -59
                && a.intervalMs == 100)
        #expect(b.major == 12 && b.minor == 7 && a.proximityUUID == b.proximityUUID)
        // The schema is itself JSON our parser accepts, and names every key the validator knows.
        let schema = try JSONValue.parse(Array(try Data(contentsOf: dir.appendingPathComponent("schema.json"))))
        let properties = try #require(schema.objectValue?["properties"]?.objectValue)
        #expect(properties.keys.sorted() == Profile.knownKeys.sorted())
        #expect(schema.objectValue?["required"] == .array(Profile.requiredKeys.map { .string($0) }))
        // A shipped file rewrites to exactly itself.
        #expect(a.encoded() == Array(try Data(contentsOf: dir.appendingPathComponent("store12.json"))))
    }

    /// (profile text, key, problem, words the full message must contain)
    static let malformed: [(String, String, ProfileIssue.Problem, String)] = [
        (with("uuid", "\"F7826DA6-4FA2-4E98-8024-BC5B71E0893\""), "uuid", .invalidFormat, "31 hex digits"),
        (with("uuid", "\"F7826DA64FA24E988024BC5B71E0893E\""), "uuid", .invalidFormat, "8-4-4-4-12"),
        (with("uuid", "\"G7826DA6-4FA2-4E98-8024-BC5B71E0893E\""), "uuid", .invalidFormat, "\"G7826DA6"),
        (with("uuid", "\"{F7826DA6-4FA2-4E98-8024-BC5B71E0893E}\""), "uuid", .invalidFormat, "UUID string"),
        (with("uuid", "\"F7826DA6_4FA2_4E98_8024_BC5B71E0893E\""), "uuid", .invalidFormat, "hyphens"),
        (with("uuid", "12"), "uuid", .wrongType, "\"uuid\" is 12"),
        (with("uuid", nil), "uuid", .missing, "\"uuid\" is missing"),
        (with("major", "70000"), "major", .outOfRange, "\"major\" is 70000, must be an integer 0…65535"),
        (with("major", "-1"), "major", .outOfRange, "\"major\" is -1"),
        (with("major", "12.5"), "major", .notAnInteger, "fractional part"),
        (with("major", "12.0"), "major", .notAnInteger, "write 12 without a decimal point"),
        (with("major", "1.2e1"), "major", .notAnInteger, "write 12 without"),
        (with("major", "\"12\""), "major", .wrongType, "without quotes"),
        (with("major", "true"), "major", .wrongType, "\"major\" is true"),
        (with("major", "null"), "major", .wrongType, "\"major\" is null"),
        (with("major", "[12]"), "major", .wrongType, "an array"),
        (with("major", "99999999999999999999"), "major", .outOfRange, "99999999999999999999"),
        (with("major", nil), "major", .missing, "\"major\" is missing, must be an integer 0…65535"),
        (with("minor", "65536"), "minor", .outOfRange, "\"minor\" is 65536"),
        (with("minor", "{}"), "minor", .wrongType, "an empty object"),
        (with("measuredPower", "0"), "measuredPower", .outOfRange, "-127…-1 dBm"),
        (with("measuredPower", "59"), "measuredPower", .outOfRange, "\"measuredPower\" is 59"),
        (with("measuredPower", "-128"), "measuredPower", .outOfRange, "-128"),
        (with("measuredPower", "-59.4"), "measuredPower", .notAnInteger, "-59.4"),
        (with("measuredPower", "\"-59 dBm\""), "measuredPower", .wrongType, "the string \"-59 dBm\""),
        (with("measuredPower", nil), "measuredPower", .missing, "measuredPower"),
        (
            with("measuredpower", "-59").replacingOccurrences(of: "  \"measuredPower\": -59\n", with: "  \"x\": 0\n"),
            "measuredPower", .missing, "keys are case-sensitive"
        ),
        (with("intervalMs", "19"), "intervalMs", .outOfRange, "20…10240 ms"),
        (with("intervalMs", "10241"), "intervalMs", .outOfRange, "10241"),
        (with("intervalMs", "100.0"), "intervalMs", .notAnInteger, "write 100"),
        (with("txPower", "21"), "txPower", .outOfRange, "-127…20 dBm"),
        (with("txPower", "\"high\""), "txPower", .wrongType, "\"high\""),
        (
            with("address", "\"random\""), "address", .invalidFormat,
            "\"public\", \"random-static\", \"non-resolvable\" or a static random address"
        ),
        // A public-looking address (top bits 00) is not a static random one.
        (with("address", "\"00:1A:7D:DA:71:13\""), "address", .invalidFormat, "first octet must be C0…FF"),
        // Static, but the random part all 0 / all 1 (Core Vol 6 Part B §1.3.2.1).
        (with("address", "\"C0:00:00:00:00:00\""), "address", .invalidFormat, "not a static random address"),
        (with("address", "\"FF:FF:FF:FF:FF:FF\""), "address", .invalidFormat, "not a static random address"),
        (with("address", "\"C3:12:34:56:78\""), "address", .invalidFormat, "\"C3:12:34:56:78\""),
        (with("address", "1"), "address", .wrongType, "\"address\" is 1"),
        (with("name", "42"), "name", .wrongType, "\"name\" is 42, must be a string"),
        (with("calibration", "[1, 2]"), "calibration", .wrongType, "must be an object"),
        (with("calibration", "\"yesterday\""), "calibration", .wrongType, "\"yesterday\""),
    ]

    @Test(arguments: malformed)
    func invalidValues(_ c: (String, String, ProfileIssue.Problem, String)) throws {
        let e = try #require(error(Array(c.0.utf8)), "should be rejected:\n\(c.0)")
        guard case .invalid(let file, let issues) = e else {
            Issue.record("expected .invalid, got \(e)")
            return
        }
        #expect(file == "store12.json")
        #expect(issues.count == 1, "\(issues)")
        let issue = try #require(issues.first)
        #expect(issue.key == c.1)
        #expect(issue.problem == c.2, "\(issue)")
        let message = e.description
        #expect(message.hasPrefix("store12.json: \"\(c.1)\""), "\(message)")
        #expect(message.contains(c.3), "\(message) should contain \(c.3)")
    }

    /// Whole-file problems: (bytes, words the message must contain, expected position if syntax).
    static let broken: [([UInt8], String, (Int, Int)?)] = [
        ([], "the file is empty", nil),
        (Array(" \n\t\n".utf8), "the file is empty", nil),
        (Array("[1, 2]".utf8), "the top level is an array, must be a JSON object", nil),
        (Array("\"uuid\"".utf8), "the top level is a string", nil),
        (Array("42".utf8), "the top level is an integer", nil),
        (Array("null".utf8), "the top level is null", nil),
        ([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "binary data", (1, 1)),  // a PNG header
        ([0x7B, 0x22, 0x6E, 0x61, 0x6D, 0x65, 0x22, 0x3A, 0x22, 0xC3, 0x28, 0x22, 0x7D], "invalid UTF-8", (1, 10)),
        ([0xEF, 0xBB, 0xBF] + Array(valid.utf8), "byte order mark", (1, 1)),
        (Array(valid.dropLast().utf8), "not closed with }", (7, 1)),
        (Array(valid.replacingOccurrences(of: "772,", with: "772").utf8), "expected , or }", (6, 3)),
        (Array(valid.replacingOccurrences(of: "258", with: "0258").utf8), "leading zeros", (4, 12)),
        (Array((valid + "\n{}").utf8), "after the end of the JSON value", (8, 1)),
        (
            Array((String(repeating: "[", count: 70) + String(repeating: "]", count: 70)).utf8), "deeper than 64",
            (1, 65)
        ),
        (
            Array(#"{"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "uuid": "x"}"#.utf8), "duplicate key \"uuid\"",
            (1, 50)
        ),
        (Array("major = 12\n".utf8), "unexpected character 'm'", (1, 1)),
    ]

    @Test(arguments: broken)
    func brokenFiles(_ c: ([UInt8], String, (Int, Int)?)) throws {
        let e = try #require(error(c.0))
        #expect(e.file == "store12.json")
        #expect(e.description.hasPrefix("store12.json"))
        #expect(e.description.contains(c.1), "\(e)")
        if let (line, column) = c.2 {
            guard case .syntax(_, let l, let col, _) = e else {
                Issue.record("expected a syntax error, got \(e)")
                return
            }
            #expect(l == line && col == column, "\(e)")
            #expect(e.description.hasPrefix("store12.json:\(line):\(column): not valid JSON"))
        }
    }

    @Test func reportsEveryProblemAtOnce() throws {
        let text = """
            {"uuid": "nope", "major": 70000, "minor": 1.5, "measuredPower": "-59", "intervalMs": 5, "address": "x"}
            """
        let e = try #require(error(Array(text.utf8)))
        guard case .invalid(_, let issues) = e else {
            Issue.record("expected .invalid, got \(e)")
            return
        }
        #expect(issues.map(\.key) == ["uuid", "major", "minor", "measuredPower", "intervalMs", "address"])
        #expect(e.description.hasPrefix("store12.json: 6 problems"))
        #expect(e.description.contains("store12.json: \"major\" is 70000, must be an integer 0…65535"))
        #expect(e.description.contains("\"intervalMs\" is 5, must be an integer 20…10240 ms"))
        // Missing keys are all listed too.
        let empty = try #require(error(Array("{}".utf8)))
        guard case .invalid(_, let missing) = empty else {
            Issue.record("expected .invalid")
            return
        }
        #expect(missing.map(\.key) == Profile.requiredKeys && missing.allSatisfy { $0.problem == .missing })
    }

    @Test func roundTripKeepsUnknownKeysAndOrder() throws {
        let text = """
            {
              "comment": "installed 2024-05 by Jo",
              "minor": 772,
              "uuid": "f7826da6-4fa2-4e98-8024-bc5b71e0893e",
              "vendor": {"model": "X1", "tags": [1, 2.50, "a"]},
              "major": 258,
              "measuredPower": -59,
              "zzz": null
            }
            """
        let p = try load(text)
        let out = String(decoding: p.encoded(), as: UTF8.self)
        let expected = """
            {
              "comment": "installed 2024-05 by Jo",
              "minor": 772,
              "uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E",
              "vendor": {
                "model": "X1",
                "tags": [
                  1,
                  2.50,
                  "a"
                ]
              },
              "major": 258,
              "measuredPower": -59,
              "zzz": null
            }

            """
        #expect(out == expected)
        // And loading the output gives the same profile.
        #expect(try load(out) == p)
    }

    @Test func applyCalibrationSetsInPlaceAndAppends() throws {
        var p = try load(Self.valid + "\n")
        let record = CalibrationRecord(
            timestamp: iso8601(unixSeconds: 1_740_837_731, milliseconds: false), samples: 97, estimate: -61.236,
            interval95: 0.981, spread: 4.1, method: MeasuredPowerEstimator.methodName, receiver: "hci1",
            receiverAddress: "00:AA:01:01:00:01", offset: 0, txPower: nil)
        try p.applyCalibration(measuredPower: -61, record: record)
        #expect(p.measuredPower == -61)
        #expect(p.document.keys == ["name", "uuid", "major", "minor", "measuredPower", "calibration"])
        #expect(p.calibrationRecord?.samples == 97)
        #expect(p.calibrationRecord?.estimate == -61.24)
        let out = String(decoding: p.encoded(), as: UTF8.self)
        #expect(
            out.contains(
                """
                  "measuredPower": -61,
                  "calibration": {
                    "timestamp": "2025-03-01T14:02:11Z",
                    "samples": 97,
                    "estimate": -61.24,
                    "interval95": 0.98,
                    "spread": 4.10,
                    "method": "biweight-c3-upper-scale",
                    "receiver": "hci1",
                    "receiverAddress": "00:AA:01:01:00:01",
                    "offset": 0.00,
                    "txPower": null
                  }
                }
                """))
        // A second calibration replaces the record where it is.
        try p.set("note", to: .string("after"))
        try p.applyCalibration(measuredPower: -60, record: record)
        #expect(p.document.keys == ["name", "uuid", "major", "minor", "measuredPower", "calibration", "note"])
        // An out-of-range result is refused, not written.
        #expect(throws: ProfileError.self) { try p.applyCalibration(measuredPower: 3, record: record) }
        #expect(p.measuredPower == -60)
    }

    @Test func newProfileKeyOrder() throws {
        let uuid = try #require(UUID(uuidString: "F7826DA6-4FA2-4E98-8024-BC5B71E0893E"))
        let p = try Profile.new(uuid: uuid, major: 12, minor: 1, measuredPower: -59, name: "Store 12 entrance")
        #expect(p.document.keys == ["name", "uuid", "major", "minor", "measuredPower", "intervalMs"])
        let q = try Profile.new(uuid: uuid, major: 12, minor: 1, measuredPower: -59)
        #expect(q.document.keys == ["uuid", "major", "minor", "measuredPower", "intervalMs"])
        #expect(throws: ProfileError.self) { try Profile.new(uuid: uuid, major: 1, minor: 1, measuredPower: 0) }
    }
}
