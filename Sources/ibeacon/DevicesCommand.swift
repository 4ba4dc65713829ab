import ArgumentParser
import IBeaconTransports

struct DevicesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List the Bluetooth adapters the kernel knows.",
        discussion: "Serial and TCP controllers are not listed: name them with --device.")

    @Flag(help: "One JSON object per adapter, one per line.")
    var json = false

    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        try await reporting {
            let adapters = try listAdapters()
            if json {
                for a in adapters {
                    printOut(
                        jsonLine(["name": a.name, "address": a.address.description, "up": a.isUp, "bus": "\(a.bus)"]))
                }
                return
            }
            if adapters.isEmpty {
                printOut("no Bluetooth adapters (the kernel has Bluetooth support, but no controller is attached)")
                return
            }
            for a in adapters {
                printOut("\(a.name)\t\(a.address)\t\(a.isUp ? "up" : "down")\t\(a.bus)")
            }
        }
    }
}
