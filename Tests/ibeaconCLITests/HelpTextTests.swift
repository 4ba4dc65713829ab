import Foundation
import Testing

/// The help of every command is part of the interface: it is pinned here. After an intended
/// change, regenerate with `UPDATE_HELP=1 swift test --filter HelpTextTests` and review the diff.
@Suite struct HelpTextTests {
    static let commands: [[String]] = [
        [], ["profile"], ["profile", "new"], ["profile", "check"], ["encode"], ["decode"], ["devices"], ["info"],
        ["advertise"], ["stop"], ["scan"], ["calibrate"],
    ]

    @Test(arguments: commands)
    func helpIsPinned(_ command: [String]) throws {
        let result = try ibeacon(command + ["--help"])
        #expect(result.status == 0)
        let name = (["ibeacon"] + command).joined(separator: "-")
        let pinned = packageRoot.appendingPathComponent("Tests/ibeaconCLITests/help/\(name).txt")
        if ProcessInfo.processInfo.environment["UPDATE_HELP"] == "1" {
            try FileManager.default.createDirectory(
                at: pinned.deletingLastPathComponent(), withIntermediateDirectories: true)
            try Data(result.stdout.utf8).write(to: pinned)
            return
        }
        let expected = try String(contentsOf: pinned, encoding: .utf8)
        #expect(
            result.stdout == expected, "help of `ibeacon \(command.joined(separator: " "))` changed; see \(pinned.path)"
        )
    }

    /// Prose is wrapped by the argument parser to the terminal; the hand-laid tables (devices,
    /// exit codes) must fit an 80-column terminal too, or they break mid-row.
    @Test(arguments: commands)
    func helpFitsEightyColumns(_ command: [String]) throws {
        let help = try ibeacon(command + ["--help"], environment: ["COLUMNS": "80"]).stdout
        for line in help.split(separator: "\n") where !line.hasPrefix("USAGE:") {
            #expect(
                line.count <= 80, "`ibeacon \(command.joined(separator: " ")) --help`: \(line.count) columns: \(line)")
        }
    }

    @Test func rootHelpListsTheExitCodes() throws {
        let help = try ibeacon(["--help"]).stdout
        for code in ["0", "64", "65", "66", "68", "69", "70", "73", "74", "75", "76", "77"] {
            #expect(help.contains("\n  \(code)  "), "exit code \(code) is not documented in --help")
        }
    }
}
