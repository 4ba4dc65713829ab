import Testing

/// --major, --minor and --uuid of the commands that take a beacon's identity: one range check
/// (`validateMajorMinor`) and one UUID form check (`validateUUIDForm`) give every command the
/// same message and exit 64, before any file or controller is touched.
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
    func outOfRangeIsAUsageError(_ index: Int) async throws {
        let (arguments, message) = Self.cases[index]
        let result = try await ibeacon(arguments)
        #expect(!result.crashed)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stderr.split(separator: "\n").first.map(String.init) == "Error: " + message, "\(result.stderr)")
    }
}
