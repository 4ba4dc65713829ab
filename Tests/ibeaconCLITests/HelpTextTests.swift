import Foundation
import Testing

/// The help of every command is part of the interface: it is pinned here. After an intended
/// change, regenerate with `UPDATE_HELP=1 swift test --filter HelpTextTests` and review the diff.
@Suite struct HelpTextTests {
    static let commands: [[String]] = [
        [], ["profile"], ["profile", "new"], ["profile", "check"], ["encode"], ["decode"], ["devices"], ["info"],
        ["advertise"], ["stop"], ["status"], ["scan"], ["calibrate"], ["monitor"],
    ]

    @Test(arguments: commands)
    func helpIsPinned(_ command: [String]) async throws {
        let result = try await ibeacon(command + ["--help"])
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

    /// Prose is wrapped by the argument parser to the terminal, but the hand-laid tables
    /// (devices, exit codes) must fit an 80-column terminal as written: a row the parser has to
    /// re-wrap loses its indentation and breaks the table. Every table row (a line of the
    /// description starting with two spaces) printed for a very wide terminal must appear
    /// unchanged at 80 columns.
    @Test(arguments: commands)
    func helpTablesFitEightyColumns(_ command: [String]) async throws {
        func description(columns: Int) async throws -> [Substring] {
            let help = try await ibeacon(command + ["--help"], environment: ["COLUMNS": "\(columns)"]).stdout
            return help.split(separator: "\n").prefix { !$0.hasPrefix("USAGE:") }
        }
        let narrow = Set(try await description(columns: 80))
        for row in try await description(columns: 400) where row.hasPrefix("  ") {
            #expect(
                narrow.contains(row),
                "`ibeacon \(command.joined(separator: " ")) --help` re-wraps at 80 columns: \(row)")
        }
    }

    @Test func rootHelpListsTheExitCodes() async throws {
        let help = try await ibeacon(["--help"]).stdout
        for code in ["0", "64", "65", "66", "68", "69", "70", "73", "74", "75", "76", "77"] {
            #expect(help.contains("\n  \(code)  "), "exit code \(code) is not documented in --help")
        }
    }
}
