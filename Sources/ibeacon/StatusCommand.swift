import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports

struct StatusCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what this box advertises and monitors, and what is left over.",
        discussion: """
            Reads the records that advertise and monitor keep in /run/ibeacon (or \
            $IBEACON_RUNTIME_DIR, unless run with file capabilities or set-user-ID) and asks the \
            kernel's management interface (no capability needed) which adapters are powered and \
            which advertising instances they hold. For each beacon: its profile, adapter, \
            instance, on the air or not and why, since when, the process and its systemd unit. \
            Then what `ibeacon stop` would remove (records of processes now gone, their instances) \
            and the instances of other programs it leaves alone. Changes nothing. Exits 0 when \
            all is well, 82 when something is off (a beacon off the air, a process gone without \
            cleaning up); --json prints one object whose "ok" agrees with the exit code.
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
