import Foundation
import Testing

/// docs/ARCHITECTURE.md states two lists that code defines: the module table (the targets of
/// Package.swift and what each depends on) and the cases of `HCIEvent`. Both are read from the
/// sources, as `ExitCodeTableTests` reads the exit codes, so the document cannot drift again.
@Suite struct ArchitectureDocTests {
    static func text(_ file: String) throws -> String {
        try String(contentsOf: packageRoot.appendingPathComponent(file), encoding: .utf8)
    }

    /// The names between backticks in `text`, in order.
    static func quotedNames(_ text: some StringProtocol) -> [String] {
        text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }
            .map { String($0.element) }
    }

    /// Every target of Package.swift but the test targets, with the targets of this package it
    /// depends on (products of other packages left out).
    static func packageTargets() throws -> [String: Set<String>] {
        let manifest = try text("Package.swift")
        guard let targets = manifest.range(of: "targets: [") else {
            Issue.record("Package.swift has no `targets: [`")
            return [:]
        }
        let kinds = [".target(", ".executableTarget(", ".systemLibrary(", ".testTarget("]
        var declarations: [(kind: String, body: Substring)] = []
        var rest = manifest[targets.upperBound...]
        while let next = kinds.compactMap({ kind in rest.range(of: kind).map { (kind, $0) } })
            .min(by: { $0.1.lowerBound < $1.1.lowerBound })
        {
            let after = rest[next.1.upperBound...]
            let end = kinds.compactMap { after.range(of: $0)?.lowerBound }.min() ?? after.endIndex
            declarations.append((next.0, after[..<end]))
            rest = after[end...]
        }
        var out: [String: Set<String>] = [:]
        for (kind, body) in declarations where kind != ".testTarget(" {
            guard let name = body.range(of: "name: \"") else { continue }
            let tail = body[name.upperBound...]
            let target = String(tail[..<(tail.firstIndex(of: "\"") ?? tail.endIndex)])
            var dependencies: Set<String> = []
            if let list = body.range(of: "dependencies: [") {
                let parts = body[list.upperBound...].prefix { $0 != "]" }
                    .split(separator: "\"", omittingEmptySubsequences: false)
                // A string after `name: ` or `package: ` is part of another package's
                // `.product(name: "Logging", package: "swift-log")`.
                for i in stride(from: 1, to: parts.count, by: 2)
                where !parts[i - 1].hasSuffix("name: ") && !parts[i - 1].hasSuffix("package: ") {
                    dependencies.insert(String(parts[i]))
                }
            }
            out[target] = dependencies
        }
        return out
    }

    /// The module table of docs/ARCHITECTURE.md (`| module | depends on | … |`): each row's
    /// module and the modules its second cell names ("—" for none).
    static func documentedModules() throws -> [String: Set<String>] {
        let lines = try text("docs/ARCHITECTURE.md").split(separator: "\n", omittingEmptySubsequences: false)
        guard let header = lines.firstIndex(where: { $0.hasPrefix("| module | depends on |") }) else {
            Issue.record("docs/ARCHITECTURE.md has no `| module | depends on |` table")
            return [:]
        }
        var out: [String: Set<String>] = [:]
        for line in lines[(header + 2)...] {
            guard line.hasPrefix("|") else { break }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).dropFirst()
            guard cells.count >= 2, let module = quotedNames(cells[cells.startIndex]).first else {
                Issue.record("a row of the module table names no module: \(line)")
                continue
            }
            #expect(out[module] == nil, "the module table has two rows for \(module)")
            out[module] = Set(quotedNames(cells[cells.startIndex + 1]))
        }
        return out
    }

    @Test func theModuleTableNamesEveryTargetAndItsDependencies() throws {
        let targets = try Self.packageTargets()
        #expect(targets.count >= 9)
        #expect(targets["IBeaconTransports"] == ["IBeaconCore", "IBeaconHost", "CBlueZ", "CMosquitto"])
        let documented = try Self.documentedModules()
        #expect(documented.keys.sorted() == targets.keys.sorted())
        for (module, dependencies) in targets.sorted(by: { $0.key < $1.key }) {
            guard let stated = documented[module] else { continue }
            #expect(stated == dependencies, "docs/ARCHITECTURE.md: the dependencies of \(module)")
        }
    }

    /// The cases `enum HCIEvent` declares: its lines `    case name(…)` before its first function.
    static func eventCases() throws -> [String] {
        let source = try text("Sources/IBeaconCore/HCI/HCIEvent.swift")
        guard let start = source.range(of: "public enum HCIEvent:"),
            let end = source[start.upperBound...].range(of: "func ")
        else {
            Issue.record("HCIEvent.swift declares no `public enum HCIEvent:` with a function")
            return []
        }
        return source[start.upperBound..<end.lowerBound].split(separator: "\n").compactMap { line in
            guard line.hasPrefix("    case ") else { return nil }
            return String(line.dropFirst(9).prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
    }

    /// The cases the bullet on `HCIEvent.decode` lists after "Cases:" (`.name` or `.name(…)`).
    static func documentedEventCases() throws -> [String] {
        let doc = try text("docs/ARCHITECTURE.md")
        guard let bullet = doc.range(of: "- `HCIEvent.decode("),
            let cases = doc[bullet.upperBound...].range(of: "Cases:")
        else {
            Issue.record("docs/ARCHITECTURE.md has no bullet on `HCIEvent.decode(` listing its Cases:")
            return []
        }
        let list = doc[cases.upperBound...]
        let paragraph = list[..<(list.range(of: "\n- ")?.lowerBound ?? list.endIndex)]
        return quotedNames(paragraph).filter { $0.hasPrefix(".") }.map {
            String($0.dropFirst().prefix { $0.isLetter || $0.isNumber || $0 == "_" })
        }
    }

    @Test func theHCIEventCaseListIsTheEnumsCases() throws {
        let declared = try Self.eventCases()
        #expect(declared.count >= 9)
        #expect(declared.contains("commandComplete"))
        let documented = try Self.documentedEventCases()
        #expect(documented == declared, "docs/ARCHITECTURE.md: the cases of HCIEvent")
    }
}
