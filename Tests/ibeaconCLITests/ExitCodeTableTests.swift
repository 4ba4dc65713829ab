import Foundation
import Testing

/// The exit codes are listed in three places besides the code that returns them: `ibeacon
/// --help` (`Exit.helpText`), README's table and docs/ARCHITECTURE.md's. All must name the same
/// codes as `Sources/IBeaconHost/ExitCodes.swift` defines.
@Suite struct ExitCodeTableTests {
    /// The codes `enum Exit` defines (`public static let name: Int32 = N`).
    static func definedCodes() throws -> Set<Int> {
        let source = try String(
            contentsOf: packageRoot.appendingPathComponent("Sources/IBeaconHost/ExitCodes.swift"), encoding: .utf8)
        var codes: Set<Int> = []
        for line in source.split(separator: "\n") {
            let words = line.split(separator: " ").drop { $0 == "public" }.map { $0 }
            guard words.count == 6, words[0] == "static", words[1] == "let", words[3] == "Int32", words[4] == "=",
                let code = Int(words[5])
            else { continue }
            codes.insert(code)
        }
        return codes
    }

    /// The codes of the first Markdown table after `heading`: the number in each row's first cell.
    static func tableCodes(_ file: String, heading: String) throws -> Set<Int> {
        let text = try String(contentsOf: packageRoot.appendingPathComponent(file), encoding: .utf8)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        guard let start = lines.firstIndex(of: heading) else {
            Issue.record("\(file) has no heading \(heading)")
            return []
        }
        var codes: Set<Int> = []
        var inTable = false
        for line in lines[(start + 1)...] {
            if line.hasPrefix("|") {
                inTable = true
                let cell = line.split(separator: "|").first?.trimmingCharacters(in: .whitespaces) ?? ""
                if let code = Int(cell) { codes.insert(code) }
            } else if inTable {
                break
            }
        }
        return codes
    }

    @Test func readmeListsEveryExitCodeTheCodeDefines() throws {
        let defined = try Self.definedCodes()
        #expect(defined.count >= 15)
        #expect(try Self.tableCodes("README.md", heading: "## Exit codes") == defined)
    }

    @Test func architectureListsEveryExitCodeTheCodeDefines() throws {
        let defined = try Self.definedCodes()
        #expect(try Self.tableCodes("docs/ARCHITECTURE.md", heading: "### Exit codes (sysexits)") == defined)
    }

    @Test func helpListsEveryExitCodeTheCodeDefines() async throws {
        let result = try await ibeacon(["--help"])
        var listed: Set<Int> = []
        for line in result.stdout.split(separator: "\n") {
            let words = line.split(separator: " ")
            if line.hasPrefix("  "), !line.hasPrefix("   "), let first = words.first, let code = Int(first) {
                listed.insert(code)
            }
        }
        #expect(listed == (try Self.definedCodes()))
    }
}
