import ArgumentParser
import IBeaconCore
import IBeaconHost

struct ProfileCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "profile",
        abstract: "Create and check beacon profiles.",
        subcommands: [New.self, Check.self])

    struct New: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new profile (a random proximity UUID unless --uuid is given).",
            discussion: "Refuses to replace an existing file unless --force is given. The file is written atomically.")

        @Argument(help: ArgumentHelp("The profile file to write, e.g. profiles/store12.json.", valueName: "file"))
        var file: String
        @Option(
            parsing: .unconditional, help: ArgumentHelp("Major: the store, \(FieldRange.major.bounds).", valueName: "n")
        )
        var major: Major
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp("Minor: the department, \(FieldRange.minor.bounds).", valueName: "n"))
        var minor: Minor
        @Option(help: ArgumentHelp("Proximity UUID (8-4-4-4-12); default: a new random one.", valueName: "uuid"))
        var uuid: UUIDArgument?
        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "Measured power (RSSI at 1 m) in dBm, \(FieldRange.measuredPower.bounds); calibrate to get it right.",
                valueName: "dBm"))
        var measuredPower = MeasuredPower(-59)
        @Option(help: ArgumentHelp("A name for people, e.g. \"Store 12 entrance\".", valueName: "text"))
        var name: String?
        @Flag(help: "Replace the file if it exists.")
        var force = false

        func validate() throws {
            try major.checked()
            try minor.checked()
            try measuredPower.checked()
            _ = try uuid?.checked()
        }

        func run() async throws {
            try await reporting {
                let profile = try Profile.new(
                    uuid: try uuid?.checked().uuid ?? ProximityUUID.random().uuid, major: major.value,
                    minor: minor.value, measuredPower: measuredPower.number, name: name, file: file)
                try SafeFile.create(file, profile.encoded(), overwrite: force)
                printOut(
                    "wrote \(file): \(profile.proximityUUID.uuidString) major \(major) minor \(minor), measured power \(measuredPower) dBm"
                )
            }
        }
    }

    struct Check: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Validate profiles and show what each beacon will look like.",
            discussion: "Every problem in every file is reported, each naming the file, the key and the allowed range.")

        // Unrecognized options are collected too, so that `-dash.json` is a file name (not
        // -d -a -s -h …, which printed the help) and `--jsn` gets a message naming it.
        @Argument(parsing: .allUnrecognized, help: ArgumentHelp("Profile files.", valueName: "file"))
        var files: [String]
        @Flag(help: "One JSON object per file.")
        var json = false

        func validate() throws {
            if let problem = ProfileStore.fileArgumentsProblem(files) { throw ValidationError(problem) }
        }

        func run() async throws {
            var worst: (any Error)?
            for file in ProfileStore.fileArguments(files) {
                do {
                    let p = try Profile.load(path: file)
                    printOut(json ? p.checkJSON(file: file) : p.checkLines(file: file).joined(separator: "\n"))
                } catch {
                    let (message, _) = classify(error)
                    if json {
                        printOut(jsonLine(["file": file, "valid": false, "error": message]))
                    } else {
                        printError("ibeacon: " + message)
                    }
                    if worst == nil { worst = error }
                }
            }
            if let worst { throw ExitCode(classify(worst).code) }
        }
    }
}
