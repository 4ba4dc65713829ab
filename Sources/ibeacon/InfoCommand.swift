import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show what a controller is and what it can do for beacons.",
        discussion: """
            Address, HCI/LMP version, manufacturer, the LE features that matter (extended \
            advertising, 2M and coded PHY), advertising sets and maximum data length when extended \
            advertising exists, and the TX power the controller reports. Changes nothing. \
            On hciN managed by the kernel it asks the kernel's management interface instead \
            (no capability needed): address, name, settings, and the advertising instances \
            (maximum, in use, supported flags); raw:hciN asks the controller over raw HCI.
            """)

    @OptionGroup var device: DeviceOptions<ProgramsController>
    @Flag(help: "Print one JSON object.")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let description = try await device.opener(logger: logger).withAdapter { try await $0.describe() }
            if json {
                printOut(JSONValue.object(description.json).compactText())
                return
            }
            for line in description.lines { printOut(line) }
        }
    }
}
