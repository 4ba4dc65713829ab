import Foundation
import Testing

/// `ibeacon monitor` refuses bad options before touching a controller: usage mistakes exit 64
/// with a message naming the option, a hook program that does not exist 66, a bad profile 65 or
/// 66. Every case points at a port nothing listens on, so none of them gets as far as scanning.
@Suite struct MonitorOptionsTests {
    static let uuid = "E2C56DB5-DFFB-48D2-B060-D0F5A71096E0"
    static let device = ["--device", "tcp:127.0.0.1:1"]

    static let usageErrors: [([String], String)] = [
        ([], "give at least one region"),
        (["--region", uuid, "--exit-after", "nan"], "--exit-after must be a number of seconds within 0.1…86400"),
        (["--region", uuid, "--exit-after", "inf"], "--exit-after"),
        (["--region", uuid, "--exit-after", "0"], "--exit-after"),
        (["--region", uuid, "--exit-after", "-5"], "--exit-after"),
        (["--region", uuid, "--exit-after", "1e9"], "--exit-after"),
        (["--region", uuid, "--min-rssi", "-128"], "--min-rssi must be in -127…20 dBm, got -128"),
        (["--region", uuid, "--min-rssi", "21"], "--min-rssi"),
        (["--region", uuid, "--min-rssi", "loud"], "--min-rssi"),
        (["--region", uuid, "--hysteresis", "nan"], "--hysteresis must be a number of dB within 0…40"),
        (["--region", uuid, "--hysteresis", "41"], "--hysteresis"),
        (["--region", uuid, "--exec-timeout", "0"], "--exec-timeout"),
        (["--region", uuid, "--exec-timeout", "inf"], "--exec-timeout"),
        (["--region", uuid, "--duration", "nan"], "--duration must be a number of seconds within 0.001…31622400"),
        (["--region", uuid, "--duration", "1e16"], "--duration"),
        (["--region", uuid, "--duration", "inf"], "--duration"),
        (["--region", uuid, "--duration", "0"], "--duration"),
        (["--region", "not-a-uuid"], "region not-a-uuid: not-a-uuid is not a UUID"),
        (["--region", "\(uuid):1:2:3"], "expected [NAME=]UUID[:MAJOR[:MINOR]]"),
        (["--region", "\(uuid):70000"], "major 70000 is not an integer in 0…65535"),
        (["--region", "=\(uuid)"], "the name before = is empty"),
        (["--uuid", uuid, "--minor", "3"], "--minor needs --major"),
        (["--major", "3"], "give --uuid too"),
        (["--uuid", uuid, "--major", "65536"], "--major 65536 is outside 0…65535"),
        (["--region", uuid, "--exec-shell"], "--exec-shell needs --exec"),
        (["--region", uuid, "--exec", "echo 'open"], "unterminated '"),
        (["--region", uuid, "--exec", "  "], "the command is empty"),
        (["--region", "a=\(uuid)", "--region", "a=\(uuid):1"], "two regions are named a"),
        (["--region", "a=\(uuid):1:2@0s"], "region a=\(uuid):1:2@0s: exit delay @0s is not a number of seconds"),
        (["--region", "a=\(uuid)@soon"], "exit delay @soon is not a number of seconds within 0.1…86400"),
        (["--region", uuid, "--watchdog", "0.5"], "--watchdog must be a number of seconds within 1…86400, or 0"),
        (["--region", uuid, "--watchdog", "nan"], "--watchdog"),
        (["--region", uuid, "--smoothing", "7200"], "--smoothing must be a number of seconds within 0.1…3600"),
        (["--region", uuid, "--state-every", "inf"], "--state-every must be a number of seconds within 1…86400"),
    ]

    @Test(arguments: usageErrors.indices)
    func usageErrorsExit64(_ index: Int) async throws {
        let (arguments, message) = Self.usageErrors[index]
        let result = try await ibeacon(["monitor"] + Self.device + arguments)
        #expect(!result.crashed)
        #expect(result.status == 64, "\(arguments): \(result.stderr)")
        #expect(result.stderr.contains(message), "\(arguments): \(result.stderr)")
    }

    @Test func aHookProgramThatDoesNotExistExits66() async throws {
        let missing = try await ibeacon(
            ["monitor", "--region", Self.uuid, "--exec", "no-such-alarm-program --now"] + Self.device)
        #expect(missing.status == 66, "\(missing.stderr)")
        #expect(missing.stderr.contains("no-such-alarm-program is not an executable in $PATH"))
        let path = try await ibeacon(["monitor", "--region", Self.uuid, "--exec", "/nonexistent/alarm"] + Self.device)
        #expect(path.status == 66, "\(path.stderr)")
        #expect(path.stderr.contains("/nonexistent/alarm does not exist or is not executable"))
        // Through a shell the command is the shell's business: it gets as far as the device.
        let shell = try await ibeacon(
            ["monitor", "--region", Self.uuid, "--exec", "no-such-alarm-program", "--exec-shell"] + Self.device)
        #expect(shell.status == 69, "\(shell.stderr)")
    }

    @Test func profilesThatAreMissingOrMalformed() async throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: dir) }
        let missing = try await ibeacon(
            ["monitor", "--profile", dir.appendingPathComponent("none.json").path] + Self.device)
        #expect(missing.status == 66, "\(missing.stderr)")
        let bad = dir.appendingPathComponent("bad.json")
        try Data(#"{"uuid": "x", "major": 1, "minor": 2, "measuredPower": -59}"#.utf8).write(to: bad)
        let malformed = try await ibeacon(["monitor", "--profile", bad.path] + Self.device)
        #expect(malformed.status == 65, "\(malformed.stderr)")
        #expect(malformed.stderr.contains("\"uuid\""))
    }
}
