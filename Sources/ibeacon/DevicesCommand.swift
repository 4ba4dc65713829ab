import ArgumentParser
import IBeaconCore
import IBeaconHost
import IBeaconTransports
import Logging

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the Bluetooth adapters the kernel knows.",
        discussion: """
            Serial and TCP controllers are not listed: name them with --device. The last column \
            says which path advertise, stop and info take on that adapter: mgmt (the kernel's \
            management interface, next to bluetoothd) or raw (raw HCI: the kernel does not \
            manage it, or its LE is off).
            """)

    @Flag(help: "One JSON object per adapter, one per line.")
    var json = false

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let adapters = try listAdapters()
            let paths = await AdapterOpener.paths(adapters.map(\.index), logger: logger)
            if json {
                for a in adapters { printOut(a.json(path: paths[a.index])) }
                return
            }
            if adapters.isEmpty {
                printOut("no Bluetooth adapters (the kernel has Bluetooth support, but no controller is attached)")
                return
            }
            for a in adapters { printOut(a.line(path: paths[a.index])) }
        }
    }
}
