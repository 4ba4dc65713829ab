import Testing

/// `--duration` of advertise, scan and monitor is one option group with one range check
/// (`DurationOption`): each command refuses the same values with the same message and exit 64,
/// before touching a controller (the device is a port nothing listens on: 69 if it got there).
@Suite struct DurationOptionTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    static let commands: [[String]] = [
        ["advertise", "--profile", packageRoot.appendingPathComponent("profiles/store12.json").path],
        ["scan"],
        ["monitor", "--region", uuid],
    ]
    /// The value given and how the message prints it.
    static let refused: [(String, String)] = [
        ("nan", "nan"), ("inf", "inf"), ("0", "0.0"), ("0.0005", "0.0005"), ("1e16", "1e+16"),
        ("31622401", "31622401.0"),
    ]

    @Test(arguments: commands.indices, refused.indices)
    func outOfRangeIsAUsageError(_ command: Int, _ value: Int) async throws {
        let (given, printed) = Self.refused[value]
        let arguments = Self.commands[command] + ["--device", "tcp:127.0.0.1:1", "--duration", given]
        let result = try await ibeacon(arguments)
        #expect(!result.crashed)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(
            lines.first == "Error: --duration must be a number of seconds within 0.001…31622400, got \(printed)",
            "\(arguments): \(result.stderr)")
        #expect(lines.dropFirst().first == "Usage: ibeacon \(Self.commands[command][0]) <options>")
    }

    @Test(arguments: commands.indices)
    func theLongestDurationGetsAsFarAsTheController(_ command: Int) async throws {
        let arguments = Self.commands[command] + ["--device", "tcp:127.0.0.1:1", "--duration", "31622400"]
        let result = try await ibeacon(arguments)
        #expect(result.status == 69, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains("nothing is listening on 127.0.0.1:1"), "\(result.stderr)")
    }
}
