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
            let paths = await kernelPaths(adapters.map(\.index), logger: logger)
            if json {
                for a in adapters {
                    printOut(
                        jsonLine([
                            "name": a.name, "address": a.address.description, "up": a.isUp, "bus": "\(a.bus)",
                            "path": paths[a.index] ?? "raw",
                        ]))
                }
                return
            }
            if adapters.isEmpty {
                printOut("no Bluetooth adapters (the kernel has Bluetooth support, but no controller is attached)")
                return
            }
            for a in adapters {
                printOut(
                    "\(a.name.escapedForTerminal)\t\(a.address)\t\(a.isUp ? "up" : "down")\t\(a.bus)\t\(paths[a.index] ?? "raw")"
                )
            }
        }
    }
}

/// `mgmt` for each index the kernel's management interface lists with LE on (or powered off:
/// bluetoothd may power it later), `raw` otherwise; empty when the interface cannot be asked.
func kernelPaths(_ indices: [UInt16], logger: Logger) async -> [UInt16: String] {
    guard let client = try? await openMgmtClient(logger: logger, timeout: .seconds(2)) else { return [:] }
    defer { Task { await client.close() } }
    guard let listed = try? await client.execute(MgmtReadIndexList(), index: .none) else { return [:] }
    var out: [UInt16: String] = [:]
    for index in indices {
        guard listed.contains(index),
            let info = try? await client.execute(MgmtReadControllerInfo(), index: MgmtIndex(index))
        else {
            out[index] = "raw"
            continue
        }
        let leOff = info.currentSettings.contains(.powered) && !info.currentSettings.contains(.lowEnergy)
        out[index] = leOff ? "raw" : "mgmt"
    }
    return out
}
