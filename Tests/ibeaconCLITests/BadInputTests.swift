import Foundation
import Testing

/// Malformed profiles and hex through the real binary: each must give exit 65 (bad data)
/// with a message naming the problem, never crash, and never change the file.
@Suite struct BadInputTests {
    static let good = """
        {"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "major": 258, "minor": 772, "measuredPower": -59}
        """

    /// (name, file content, what the message must mention)
    static let profiles: [(String, [UInt8], String)] = [
        (
            "uuid not a uuid", json(replacing: "\"F7826DA6-4FA2-4E98-8024-BC5B71E0893E\"", with: "\"not-a-uuid\""),
            "\"uuid\""
        ),
        ("uuid one digit short", json(replacing: "BC5B71E0893E", with: "BC5B71E0893"), "\"uuid\""),
        (
            "uuid in braces",
            json(
                replacing: "\"F7826DA6-4FA2-4E98-8024-BC5B71E0893E\"",
                with: "\"{F7826DA6-4FA2-4E98-8024-BC5B71E0893E}\""), "\"uuid\""
        ),
        (
            "uuid without dashes",
            json(replacing: "\"F7826DA6-4FA2-4E98-8024-BC5B71E0893E\"", with: "\"F7826DA64FA24E988024BC5B71E0893E\""),
            "\"uuid\""
        ),
        ("uuid a number", json(replacing: "\"F7826DA6-4FA2-4E98-8024-BC5B71E0893E\"", with: "12"), "\"uuid\""),
        ("major too large", json(replacing: "258", with: "70000"), "\"major\""),
        ("major negative", json(replacing: "258", with: "-1"), "\"major\""),
        ("minor too large", json(replacing: "772", with: "65536"), "\"minor\""),
        ("major a fraction", json(replacing: "258", with: "12.5"), "\"major\""),
        ("major a float with zero fraction", json(replacing: "258", with: "12.0"), "\"major\""),
        ("major with exponent", json(replacing: "258", with: "1e3"), "\"major\""),
        ("major a string", json(replacing: "258", with: "\"12\""), "\"major\""),
        ("major a boolean", json(replacing: "258", with: "true"), "\"major\""),
        ("major null", json(replacing: "258", with: "null"), "\"major\""),
        ("measured power zero", json(replacing: "-59", with: "0"), "\"measuredPower\""),
        ("measured power below -127", json(replacing: "-59", with: "-128"), "\"measuredPower\""),
        ("measured power a fraction", json(replacing: "-59", with: "-59.5"), "\"measuredPower\""),
        ("uuid missing", Array(#"{"major": 1, "minor": 2, "measuredPower": -59}"#.utf8), "\"uuid\""),
        (
            "measured power missing",
            Array(#"{"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "major": 1, "minor": 2}"#.utf8),
            "\"measuredPower\""
        ),
        ("interval too short", json(adding: "\"intervalMs\": 10"), "\"intervalMs\""),
        ("interval too long", json(adding: "\"intervalMs\": 20000"), "\"intervalMs\""),
        ("tx power too high", json(adding: "\"txPower\": 21"), "\"txPower\""),
        ("address unknown", json(adding: "\"address\": \"random\""), "\"address\""),
        ("name a number", json(adding: "\"name\": 12"), "\"name\""),
        ("calibration a string", json(adding: "\"calibration\": \"yes\""), "\"calibration\""),
        ("two problems at once", json(replacing: "258", with: "70000").replacing("772", with: "-5"), "\"minor\""),
        (
            "trailing comma", Array(#"{"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "major": 1,}"#.utf8),
            "not valid JSON"
        ),
        ("missing closing brace", Array(#"{"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E""#.utf8), "not valid JSON"),
        ("empty file", [], "empty"),
        ("whitespace only", Array("  \n\t\n".utf8), "empty"),
        ("binary junk", [0xFF, 0xFE, 0x00, 0x01, 0x80, 0xC3, 0x28, 0x7B], "not valid JSON"),
        ("top-level array", Array("[1, 2, 3]".utf8), "top level"),
        (
            "nested a thousand deep",
            Array((String(repeating: "[", count: 1000) + String(repeating: "]", count: 1000)).utf8), "not valid JSON"
        ),
        ("single quotes", Array("{'uuid': 'x'}".utf8), "not valid JSON"),
    ]

    static func json(replacing a: String, with b: String) -> [UInt8] {
        Array(good.replacingOccurrences(of: a, with: b).utf8)
    }
    static func json(adding member: String) -> [UInt8] {
        Array(good.replacingOccurrences(of: "\"major\"", with: "\(member), \"major\"").utf8)
    }

    @Test func theCorpusIsBigEnough() {
        #expect(Self.profiles.count >= 25)
    }

    /// Every command that reads a profile refuses each malformed one before touching anything.
    @Test(arguments: Self.profiles.indices)
    func malformedProfileIsRefusedAndLeftAlone(_ index: Int) async throws {
        let (name, content, mention) = Self.profiles[index]
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("bad.json")
        try Data(content).write(to: file)
        let commands: [[String]] = [
            ["profile", "check", file.path],
            ["encode", "--profile", file.path],
            // A closed port: the profile must be refused before any connection is tried.
            ["advertise", "--profile", file.path, "--device", "tcp:127.0.0.1:9"],
            ["calibrate", "--profile", file.path, "--device", "tcp:127.0.0.1:9", "--duration", "1"],
        ]
        for command in commands {
            let r = try await ibeacon(command)
            #expect(!r.crashed, "\(name): `\(command.joined(separator: " "))` crashed")
            #expect(r.status == 65, "\(name): `\(command[0])` exited \(r.status): \(r.stderr)")
            #expect(r.stderr.contains(mention), "\(name): message does not mention \(mention): \(r.stderr)")
            #expect(r.stderr.contains(file.path), "\(name): message does not name the file: \(r.stderr)")
            #expect(!r.stderr.contains("Fatal error") && !r.stderr.contains("internal error"))
            #expect(try Data(contentsOf: file) == Data(content), "\(name): `\(command[0])` changed the file")
            let leftovers = try FileManager.default.contentsOfDirectory(atPath: dir.path)
            #expect(leftovers == ["bad.json"], "\(name): files left behind: \(leftovers)")
        }
    }

    @Test func everyProblemOfAProfileIsReportedAtOnce() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let file = dir.appendingPathComponent("multi.json")
        try Data(#"{"uuid": "nope", "major": 70000, "minor": -1, "measuredPower": 5, "intervalMs": 1}"#.utf8).write(
            to: file)
        let r = try await ibeacon(["profile", "check", file.path])
        #expect(r.status == 65)
        for key in ["uuid", "major", "minor", "measuredPower", "intervalMs"] {
            #expect(r.stderr.contains("\"\(key)\""), "\(key) not reported: \(r.stderr)")
        }
    }

    @Test func missingAndUnreadableFilesAreNoInput() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = try await ibeacon(["profile", "check", dir.appendingPathComponent("nope.json").path])
        #expect(missing.status == 66)
        #expect(missing.stderr.contains("nope.json"))
        let directory = try await ibeacon(["encode", "--profile", dir.path])
        #expect(directory.status == 66)
        #expect(directory.stderr.contains("directory"))
    }

    static let hexInputs: [(String, [String], String)] = [
        ("not hex", ["zz"], "not hex"),
        ("odd number of digits", ["020"], "not hex"),
        ("length past the end", ["0201"], "truncated"),
        ("manufacturer data cut short", ["1aff4c00"], "truncated"),
        ("32 bytes of legacy advertising data", ["1f" + String(repeating: "ff", count: 31)], "at most 31"),
        ("AD length byte claiming 32", ["20" + String(repeating: "ff", count: 30)], "truncated"),
        ("junk after the terminator", ["020106" + "00" + "05"], "terminator"),
        // LE Advertising Report whose only report lacks its RSSI byte.
        ("truncated advertising report", ["043e0e02010300f5f4f3f2f1f003020106"], "truncated"),
        // Two reports announced; the second one's address is one byte short.
        ("second report cut short", ["043e16" + "0202" + "0300f5f4f3f2f1f003020106c5" + "0300f5f4f3f2f1"], "truncated"),
        ("event with trailing bytes", ["043e0c02010300f5f4f3f2f1f003020106"], "unexpected"),
        ("event length disagrees", ["043e05020100"], "truncated"),
        ("empty", [""], "no bytes"),
    ]

    @Test(arguments: Self.hexInputs.indices)
    func malformedHexIsBadData(_ index: Int) async throws {
        let (name, args, mention) = Self.hexInputs[index]
        for json in [false, true] {
            let r = try await ibeacon(["decode"] + args + (json ? ["--json"] : []))
            #expect(!r.crashed, "\(name) crashed")
            #expect(r.status == 65, "\(name): exit \(r.status) \(r.stdout) \(r.stderr)")
            #expect(r.stderr.lowercased().contains(mention), "\(name): \(r.stderr)")
        }
    }
}

extension Array where Element == UInt8 {
    func replacing(_ a: String, with b: String) -> [UInt8] {
        Array(String(decoding: self, as: UTF8.self).replacingOccurrences(of: a, with: b).utf8)
    }
}
