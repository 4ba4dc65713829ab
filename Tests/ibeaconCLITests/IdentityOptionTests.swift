import Testing

/// --major, --minor and --uuid of the commands that take a beacon's identity: one range check
/// and one UUID form check (the typed values `Major`, `Minor`, `UUIDArgument`, their forms and
/// ranges Core's) give every command the same message and exit 64, before any file or
/// controller is touched.
@Suite struct IdentityOptionTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    static let device = ["--device", "tcp:127.0.0.1:1"]
    static let cases: [([String], String)] = [
        (["scan", "--major", "65536"] + device, "--major 65536 is outside 0…65535"),
        (["scan", "--major", "1", "--minor", "70000"] + device, "--minor 70000 is outside 0…65535"),
        (["monitor", "--uuid", uuid, "--major", "65536"] + device, "--major 65536 is outside 0…65535"),
        (["monitor", "--uuid", uuid, "--major", "2", "--minor", "99999"] + device, "--minor 99999 is outside 0…65535"),
        (["encode", "--uuid", uuid, "--major", "65536", "--minor", "1"], "--major 65536 is outside 0…65535"),
        (["encode", "--uuid", uuid, "--major", "1", "--minor", "70000"], "--minor 70000 is outside 0…65535"),
        (
            ["profile", "new", "/nonexistent/p.json", "--major", "65536", "--minor", "1"],
            "--major 65536 is outside 0…65535"
        ),
        (
            ["profile", "new", "/nonexistent/p.json", "--major", "1", "--minor", "65536"],
            "--minor 65536 is outside 0…65535"
        ),
        (
            ["encode", "--uuid", "E2C56DB5DFFB48D2B060D0F5A71096E0", "--major", "1", "--minor", "2"],
            "--uuid E2C56DB5DFFB48D2B060D0F5A71096E0 is not a UUID like F7826DA6-4FA2-4E98-8024-BC5B71E0893E"
        ),
        (
            ["profile", "new", "/nonexistent/p.json", "--major", "1", "--minor", "2", "--uuid", "nope"],
            "--uuid nope is not a UUID like F7826DA6-4FA2-4E98-8024-BC5B71E0893E"
        ),
    ]

    @Test(arguments: cases.indices)
    func outOfRangeIsAUsageError(_ index: Int) throws {
        let (arguments, message) = Self.cases[index]
        let result = try ibeacon(arguments)
        #expect(!result.crashed)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stderr.split(separator: "\n").first.map(String.init) == "Error: " + message, "\(result.stderr)")
    }

    /// Each command's way to a --major/--minor/--uuid it validates, the rest of its arguments valid.
    static let commands: [(String, @Sendable (_ major: String, _ minor: String, _ uuid: String) -> [String])] = [
        ("scan", { ["scan", "--uuid", $2, "--major", $0, "--minor", $1] + device }),
        ("monitor", { ["monitor", "--uuid", $2, "--major", $0, "--minor", $1] + device }),
        ("encode", { ["encode", "--uuid", $2, "--major", $0, "--minor", $1] }),
        ("profile new", { ["profile", "new", "/nonexistent/p.json", "--major", $0, "--minor", $1, "--uuid", $2] }),
        ("calibrate", { ["calibrate", "--uuid", $2, "--major", $0, "--minor", $1, "--dry-run"] + device }),
    ]

    /// Issue 22: calibrate said "--major and --minor must be within 0…65535", scan and
    /// calibrate "--uuid X is not a UUID", monitor "region X: X is not a UUID (8-4-4-4-12 hex
    /// digits)", and a negative number was "Missing value for '--major <n>'" everywhere. Now
    /// every command words each bad value alike.
    static let badValues: [(major: String, minor: String, uuid: String, message: String)] = [
        ("65536", "1", uuid, "--major 65536 is outside 0…65535"),
        ("-1", "1", uuid, "--major -1 is outside 0…65535"),
        ("1", "-1", uuid, "--minor -1 is outside 0…65535"),
        ("1", "65536", uuid, "--minor 65536 is outside 0…65535"),
        ("x", "1", uuid, "The value 'x' is invalid for '--major <n>'"),
        ("1", "1.5", uuid, "The value '1.5' is invalid for '--minor <n>'"),
        ("1", "2", "nope", "--uuid nope is not a UUID like F7826DA6-4FA2-4E98-8024-BC5B71E0893E"),
        (
            "1", "2", "{\(uuid)}",
            "--uuid {\(uuid)} is not a UUID like F7826DA6-4FA2-4E98-8024-BC5B71E0893E"
        ),
    ]

    @Test(arguments: badValues.indices)
    func everyCommandRefusesABadValueWithTheSameMessage(_ index: Int) throws {
        let bad = Self.badValues[index]
        for (command, arguments) in Self.commands {
            let result = try ibeacon(arguments(bad.major, bad.minor, bad.uuid))
            #expect(!result.crashed)
            #expect(result.status == 64, "\(command): \(result.stderr)")
            #expect(
                result.stderr.split(separator: "\n").first.map(String.init) == "Error: " + bad.message,
                "\(command): \(result.stderr)")
        }
    }
}
