import Testing

@testable import IBeaconCore

/// Issue 41, defect 7: `--forget-after -1` was "Missing value"; the parser now sees `--forget-after=-1`.
@Suite struct CommandLineArgumentsTests {
    @Test func aNegativeNumberAfterAnOptionIsItsValue() {
        #expect(
            CommandLineArguments.joiningNegativeValues(["scan", "--forget-after", "-1", "--json"])
                == ["scan", "--forget-after=-1", "--json"])
        #expect(
            CommandLineArguments.joiningNegativeValues(["calibrate", "--offset", "-2.5", "--precision", "-1e3"])
                == ["calibrate", "--offset=-2.5", "--precision=-1e3"])
    }

    @Test func otherWordsAreLeftAlone() {
        let untouched: [[String]] = [
            ["scan", "--forget-after=-1"],  // already joined
            ["scan", "-v", "-1"],  // after a short option
            ["profile", "check", "--json", "-1.json"],  // a file name, not a number
            ["profile", "check", "--", "--json", "-1"],  // after --
            ["scan", "--index", "-x"], ["scan", "--index", "-"], ["scan", "--index", "-1e"],
        ]
        for words in untouched { #expect(CommandLineArguments.joiningNegativeValues(words) == words, "\(words)") }
    }
}
