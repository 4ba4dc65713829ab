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

    @Test func rootHelpListsTheExitCodes() throws {
        let help = try ibeacon(["--help"]).stdout
        for code in ["64", "65", "66", "69", "70", "73", "74", "77"] {
            #expect(help.contains("\n  \(code)  "), "exit code \(code) is not documented in --help")
        }
    }
}
