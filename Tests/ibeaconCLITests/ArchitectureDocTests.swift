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

    // MARK: every name the documents quote exists

    /// Names the documents quote that are not this package's: other modules and their types,
    /// generic parameters spoken of by name, and the worked example of a command to add.
    static let notOurs: Set<String> = [
        "Glibc", "Logging", "SystemPackage", "FoundationEssentials", "ContinuousClock", "AsyncStream", "Task",
        "ParsableArguments", "FileHandle", "DispatchQueue", "Errno", "FileDescriptor", "FilePath", "Stat",
        "CLBeaconRegion", "Package", "Sources", "Use", "Help", "LEReadFilterAcceptListSize",
    ]

    /// Every Swift file of the package (Sources and Tests), by path.
    static func swiftSources() throws -> [String: String] {
        var out: [String: String] = [:]
        for folder in ["Sources", "Tests"] {
            let root = packageRoot.appendingPathComponent(folder)
            guard let walk = FileManager.default.enumerator(at: root, includingPropertiesForKeys: nil) else { continue }
            for case let url as URL in walk where url.pathExtension == "swift" {
                out[url.path] = try String(contentsOf: url, encoding: .utf8)
            }
        }
        return out
    }

    /// The quoted `Type` and `Type.member` names of a Markdown text (fenced blocks left out;
    /// `Type.member(…)` and `Type<…>` count; file names such as `Package.swift` do not): each
    /// as (type, member), member nil for a bare type. A type has a lower-case letter, so that
    /// `IBEACON_DEVICE` and `AT_SECURE` are not taken for one.
    static func quotedTypeNames(_ markdown: String) -> [(type: String, member: String?)] {
        let unfenced = markdown.split(separator: "```", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 0 }.map(\.element).joined(separator: "\n")
        let pattern = /^([A-Z][A-Za-z0-9_]*)(?:\.([A-Za-z_][A-Za-z0-9_]*))?(?:\(.*|<.*>)?$/
        var out: [(String, String?)] = []
        for span in quotedNames(unfenced) {
            guard let match = span.wholeMatch(of: pattern) else { continue }
            let type = String(match.1)
            let member = match.2.map(String.init)
            guard type.contains(where: \.isLowercase) else { continue }
            if let member, ["swift", "md", "sh", "py", "json", "resolved", "h"].contains(member) { continue }
            out.append((type, member))
        }
        return out
    }

    /// The lines one level inside each declaration of each type (`struct`, `enum`, `class`,
    /// `protocol`, `actor`, `extension`; a `typealias` declares the type only): the type's own
    /// members, not those of the types nested in it. The formatter's indentation delimits them.
    static func memberLines(_ sources: [String: String]) -> [String: [Substring]] {
        let declaration =
            /^( *)(?:@[A-Za-z_]+(?:\([^)]*\))? +)*(?:[a-z]+(?:\([a-z]+\))? +)*(struct|enum|class|protocol|actor|extension|typealias) +([A-Z][A-Za-z0-9_]*)/
        let keywords = ["struct ", "enum ", "class ", "protocol ", "actor ", "extension ", "typealias "]
        var out: [String: [Substring]] = [:]
        for text in sources.values {
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            for (i, line) in lines.enumerated() {
                guard keywords.contains(where: { line.contains($0) }),
                    let match = line.prefixMatch(of: declaration)
                else { continue }
                let type = String(match.3)
                out[type, default: []].append(contentsOf: [])
                if match.2 == "typealias" || line.hasSuffix("{}") { continue }
                let indent = match.1.count
                let closing = String(repeating: " ", count: indent) + "}"
                let inner = String(repeating: " ", count: indent + 4)
                for member in lines[(i + 1)...] {
                    if member.hasPrefix(closing) { break }
                    if member.hasPrefix(inner) && member.dropFirst(indent + 4).first?.isWhitespace == false {
                        out[type, default: []].append(member.dropFirst(indent + 4))
                    }
                }
            }
        }
        return out
    }

    /// Whether one of `lines` (a type's own) declares `member`: a `func`, `var`, `let`, `case`
    /// (one of a list), `init`, `subscript` or nested type of that name.
    static func declares(_ lines: [Substring], _ member: String) -> Bool {
        let head =
            /^(?:@[A-Za-z_]+(?:\([^)]*\))? +)*(?:[a-z]+(?:\([a-z]+\))? +)*?(func|var|let|case|init|subscript|typealias|struct|enum|class|actor|protocol)\b[ ?]*`?([^\n]*)/
        for line in lines {
            guard let match = line.prefixMatch(of: head) else { continue }
            let rest = match.2
            switch match.1 {
            case "init", "subscript": if member == String(match.1) { return true }
            case "case":
                let names = rest.split(separator: ",").map {
                    $0.drop { $0 == " " }.prefix { $0.isLetter || $0.isNumber || $0 == "_" }
                }
                if names.contains(Substring(member)) { return true }
            default:
                if rest.prefix(while: { $0.isLetter || $0.isNumber || $0 == "_" }) == member { return true }
            }
        }
        return false
    }

    /// The names in `names` that no Swift file of the package declares: a type by a
    /// declaration or an extension, a member among the type's own (`memberLines`).
    static func undeclared(
        _ names: [(type: String, member: String?)], in sources: [String: String], modules: Set<String>
    ) -> [String] {
        let members = memberLines(sources)
        var missing: [String] = []
        for (type, member) in names where !notOurs.contains(type) && !modules.contains(type) {
            let name = member.map { "\(type).\($0)" } ?? type
            guard let lines = members[type] else {
                missing.append(name)
                continue
            }
            if let member, !declares(lines, member) { missing.append(name) }
        }
        return missing
    }

    static func modules() throws -> Set<String> {
        Set(try packageTargets().keys).union(["IBeaconCoreTests", "IBeaconHostTests", "IBeaconTransportsTests"])
    }

    @Test func everyTypeAndMemberTheArchitectureQuotesExists() throws {
        let names = Self.quotedTypeNames(try Self.text("docs/ARCHITECTURE.md"))
        #expect(names.count > 300)
        #expect(names.contains { $0.type == "AdapterOpener" && $0.member == "withAdapter" })
        let missing = Self.undeclared(names, in: try Self.swiftSources(), modules: try Self.modules())
        #expect(missing == [], "docs/ARCHITECTURE.md quotes names that no source declares")
    }

    @Test func theReadmeQuotesNoAPIThatIsNotThere() throws {
        let names = Self.quotedTypeNames(try Self.text("README.md"))
        let missing = Self.undeclared(names, in: try Self.swiftSources(), modules: try Self.modules())
        #expect(missing == [], "README.md quotes names that no source declares")
    }

    /// The check itself: a wrong type, a wrong member of a real type, and what it leaves alone.
    @Test func theNameCheckFindsAWrongTypeAndAWrongMember() throws {
        let markdown = """
            `AdapterOpener.withAdapter` and `SafeFile.read(_:)`, `RangingRun.Outcome`, `Profile.load(path:)`
            `ProfileStore.readSecret` `NoSuchType` `IBEACON_DEVICE` `Package.swift` `make lint`
            ```
            `AlsoNoSuchType`
            ```
            """
        let names = Self.quotedTypeNames(markdown)
        #expect(
            names.map { name in name.member.map { "\(name.type).\($0)" } ?? name.type } == [
                "AdapterOpener.withAdapter", "SafeFile.read", "RangingRun.Outcome", "Profile.load",
                "ProfileStore.readSecret", "NoSuchType",
            ])
        let missing = Self.undeclared(names, in: try Self.swiftSources(), modules: try Self.modules())
        #expect(missing == ["ProfileStore.readSecret", "NoSuchType"])
    }
}
