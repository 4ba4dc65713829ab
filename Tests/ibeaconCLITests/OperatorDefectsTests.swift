import Foundation
import Testing

/// Issue 41: the defects a new user and a store operator hit, through the real binary. Each
/// test failed before its fix.
@Suite struct OperatorDefectsTests {
    static let profile = """
        {"uuid": "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "major": 258, "minor": 772, "measuredPower": -59}

        """

    /// A scratch directory holding `p.json`, a valid profile.
    static func scratch() throws -> (URL, String) {
        let dir = try temporaryDirectory()
        let path = dir.appendingPathComponent("p.json").path
        try Data(profile.utf8).write(to: URL(fileURLWithPath: path))
        return (dir, path)
    }

    /// Defect 1: `advertise --profile X --btsnoop X --overwrite-btsnoop` replaced the profile
    /// with a capture. No output path of a command may be a profile it reads (by any name).
    @Test(arguments: ["advertise", "monitor"])
    func aCaptureNeverReplacesAProfileTheCommandReads(_ command: String) async throws {
        let (dir, path) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let alias = dir.appendingPathComponent("alias.json").path
        try FileManager.default.createSymbolicLink(atPath: alias, withDestinationPath: "p.json")
        for target in [path, alias] {
            let r = try await ibeacon([
                command, "--profile", path, "--btsnoop", target, "--overwrite-btsnoop",
                "--device", "tcp:127.0.0.1:9", "--duration", "1",
            ])
            #expect(r.status == 73, "\(r.stderr)")
            #expect(r.stderr.contains("is a profile this command reads (--profile \(path))"), "\(r.stderr)")
            #expect(r.stderr.contains("another file name"), "\(r.stderr)")
            #expect(try String(contentsOfFile: path, encoding: .utf8) == Self.profile)
        }
    }

    /// Defect 3: `profile check -- FILE` was refused by a message that recommends `--`.
    @Test func profileCheckTakesFilesAfterDoubleDash() async throws {
        let (dir, path) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let dash = dir.appendingPathComponent("-dash.json").path
        try Data(Self.profile.utf8).write(to: URL(fileURLWithPath: dash))
        let r = try await ibeacon(["profile", "check", "--", path, dash])
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("\(path): ok") && r.stdout.contains("\(dash): ok"), "\(r.stdout)")
        let none = try await ibeacon(["profile", "check", "--"])
        #expect(none.status == 64 && none.stderr.contains("Missing expected argument"), "\(none.stderr)")
    }

    /// Defect 4: a missing `--mqtt-password-file`/`--mqtt-ca` said "create one with `ibeacon
    /// profile new`"; the message names the option.
    @Test(arguments: [
        ["--mqtt", "mqtt://127.0.0.1:1", "--mqtt-password-file", "/nonexistent-41/pw"],
        ["--mqtt", "mqtts://127.0.0.1:1", "--mqtt-ca", "/nonexistent-41/ca.pem"],
    ])
    func aMissingMQTTFileNamesItsOption(_ options: [String]) async throws {
        let r = try await ibeacon(["scan", "--device", "tcp:127.0.0.1:9", "--duration", "1"] + options)
        #expect(r.status == 66, "\(r.stderr)")
        #expect(r.stderr.contains("check the path given to \(options[2])"), "\(r.stderr)")
        #expect(!r.stderr.contains("profile new"), "\(r.stderr)")
    }

    /// Defect 6: `--precision 0` said "must be within 0…20", which 0 is.
    @Test func precisionZeroIsExplained() async throws {
        let r = try await ibeacon([
            "calibrate", "--uuid", "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "--major", "1",
            "--minor", "2", "--dry-run", "--precision", "0",
        ])
        #expect(r.status == 64)
        #expect(r.stderr.contains("--precision must be more than 0 and at most 20 dB"), "\(r.stderr)")
        #expect(r.stderr.contains("got 0"), "\(r.stderr)")
    }

    /// Defect 7: a negative value of a positive-only option said "Missing value"; now the
    /// option's own message, as with `--option=-1`.
    @Test(arguments: [
        (["scan", "--forget-after", "-1"], "--forget-after must be a number of seconds within 1…3600, got -1"),
        (
            ["monitor", "--region", "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "--hysteresis", "-1"],
            "--hysteresis must be a number of dB within 0…40, got -1"
        ),
        (["scan", "--index", "-1"], "The value '-1' is invalid for '--index <n>'"),
        (["scan", "--duration", "-2.5"], "--duration must be a number of seconds"),
    ])
    func negativeValuesGetTheOptionsOwnMessage(_ arguments: [String], _ message: String) async throws {
        let r = try await ibeacon(arguments)
        #expect(r.status == 64)
        #expect(r.stderr.contains(message), "\(r.stderr)")
        #expect(!r.stderr.contains("Missing value"), "\(r.stderr)")
    }

    /// Defect 8: `encode --help` offered `--mode auto`, which encode refuses.
    @Test func encodeOffersOnlyTheModesItTakes() async throws {
        let help = try await ibeacon(["encode", "--help"])
        #expect(!help.stdout.contains("auto, legacy"), "\(help.stdout)")
        #expect(help.stdout.contains("(values: legacy,"), "\(help.stdout)")
    }

    /// Defect 10: the message refusing a capture where a controller is needed left out monitor.
    @Test func theCaptureRefusalNamesMonitor() async throws {
        let (dir, path) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        let r = try await ibeacon(["advertise", "--profile", path, "--device", "btsnoop:\(path)"])
        #expect(r.status == 64)
        #expect(r.stderr.contains("use it with scan, monitor or calibrate --dry-run"), "\(r.stderr)")
    }

    /// Defect 15: a usage error piped into `head` ended with 141 (SIGPIPE), not 64.
    @Test func aUsageErrorIntoAClosedPipeIsStillAUsageError() async throws {
        let r = try await shell("\(ibeaconBinary.path) scan --bogus 2>&1 | true; echo ${PIPESTATUS[0]}")
        #expect(r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "64", "\(r)")
        let help = try await shell("\(ibeaconBinary.path) --help | true; echo ${PIPESTATUS[0]}")
        #expect(help.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "0", "\(help)")
    }

    /// Defect 15: `profile new /proc/x.json` said "directory /proc/x.json does not exist".
    @Test func aFileSystemThatTakesNoFilesIsNotAMissingDirectory() async throws {
        let r = try await ibeacon([
            "profile", "new", "/proc/ibeacon-41.json", "--uuid",
            "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "--major", "1", "--minor", "2",
        ])
        #expect(r.status == 73)
        #expect(!r.stderr.contains("does not exist"), "\(r.stderr)")
        #expect(r.stderr.contains("its directory takes no new files"), "\(r.stderr)")
    }

    /// Defect 13: the monitor's start-up line ignored per-region exit delays (`door=…@10s`);
    /// defect 15: log lines carried swift-log's source module (`[IBeaconHost]`).
    @Test func theStartLineHasEachRegionsDelayAndNoModuleName() async throws {
        let r = try await ibeacon([
            "monitor", "--region", "door=F7826DA6-4FA2-4E98-8024-BC5B71E0893E@10s", "--region",
            "deli=E2C56DB5-DFFB-48D2-B060-D0F5A71096E0", "--device", "tcp:127.0.0.1:9", "--duration", "1",
        ])
        let line = try #require(r.stderr.split(separator: "\n").first { $0.contains("monitoring 2 region(s)") })
        #expect(line.contains("door (F7826DA6-4FA2-4E98-8024-BC5B71E0893E) exit after 10 s of silence"), "\(line)")
        #expect(line.hasSuffix("the others exit after 30 s of silence"), "\(line)")
        #expect(line.contains(" notice ibeacon: monitoring"), "\(line)")
        #expect(!r.stderr.contains("[IBeacon"), "\(r.stderr)")
    }

    /// Defect 9: options one command honours were accepted and ignored by others
    /// (`advertise --mqtt-room`, `monitor --mqtt-room`, `advertise --index` on tcp:).
    @Test(arguments: [
        (["advertise", "--mqtt", "mqtt://127.0.0.1:1", "--mqtt-room", "kitchen"], "--mqtt-room is scan's"),
        (["monitor", "--mqtt", "mqtt://127.0.0.1:1", "--mqtt-room", "kitchen"], "--mqtt-room is scan's"),
        (["advertise", "--index", "1"], "--index 1 picks a controller in a btsnoop:FILE capture"),
        (["info", "--index", "1"], "--index 1 picks a controller in a btsnoop:FILE capture"),
        (["stop", "--index", "1"], "--index 1 picks a controller in a btsnoop:FILE capture"),
        (["info", "--overwrite-btsnoop"], "--overwrite-btsnoop needs --btsnoop FILE"),
    ])
    func optionsACommandDoesNotHonourAreRefused(_ options: [String], _ message: String) async throws {
        let (dir, path) = try Self.scratch()
        defer { try? FileManager.default.removeItem(at: dir) }
        var arguments = options + ["--device", "tcp:127.0.0.1:9"]
        switch options[0] {
        case "advertise": arguments += ["--profile", path, "--duration", "1"]
        case "monitor": arguments += ["--region", "F7826DA6-4FA2-4E98-8024-BC5B71E0893E", "--duration", "1"]
        default: break
        }
        let r = try await ibeacon(arguments)
        #expect(r.status == 64, "\(r.stderr)")
        #expect(r.stderr.contains(message), "\(r.stderr)")
    }

    /// Defect 9: `info`, `advertise` and `stop` documented `btsnoop:` and `--index`, then
    /// refused them; scan still offers both (and only scan offers `--mqtt-room`).
    @Test(arguments: ["info", "advertise", "stop", "scan", "monitor", "calibrate"])
    func helpOffersOnlyWhatTheCommandTakes(_ command: String) async throws {
        let help = try await ibeacon([command, "--help"], environment: ["COLUMNS": "400"]).stdout
        let readsCaptures = ["scan", "monitor", "calibrate"].contains(command)
        #expect(help.contains("btsnoop:FILE") == readsCaptures, "\(help)")
        #expect(help.contains("--index") == readsCaptures, "\(help)")
        #expect(help.contains("--mqtt-room") == (command == "scan"), "\(help)")
    }

    /// Runs `command` with bash (for pipes).
    func shell(_ command: String) async throws -> RunResult {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", command]
        let out = Pipe()
        process.standardOutput = out
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return RunResult(
            status: process.terminationStatus, stdout: String(decoding: data, as: UTF8.self), stderr: "",
            crashed: false)
    }
}
