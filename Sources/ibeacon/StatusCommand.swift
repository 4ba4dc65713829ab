import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what this box advertises and monitors, and what is left over.",
        discussion: """
            Each beacon: profile, adapter, instance, on the air or not and why, since when, its \
            process and systemd unit; then what `ibeacon stop` would remove. From the records in \
            /run/ibeacon (as stop reads them) and the kernel's management interface (no capability \
            needed). Changes nothing. Exits 0 when all is well, 82 when something is off.
            """)

    @Flag(help: "Print one JSON object.")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let status = await BoxStatus.gather(
                records: RuntimeRecords.current(), openMgmt: { try await AdapterOpener.mgmtSocket(logger, .seconds(2)) }
            )
            if json {
                printOut(JSONValue.object(status.json).compactText())
            } else {
                for line in status.lines { printOut(line) }
            }
            if !status.allWell { throw ExitCode(Exit.statusOff) }
        }
    }
}
