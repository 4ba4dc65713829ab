import ArgumentParser
import IBeaconCore
import IBeaconHost

struct InfoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "info",
        abstract: "Show what a controller is and what it can do for beacons.",
        discussion: """
            Address, HCI/LMP version, manufacturer, the LE features that matter (extended \
            advertising, 2M and coded PHY), advertising sets and maximum data length when extended \
            advertising exists, and the TX power the controller reports. Changes nothing.
            """)

    @OptionGroup var device: DeviceOptions
    @Flag(help: "Print one JSON object.")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            let client = try await device.connect(logger: logger)
            defer { Task { await client.close() } }
            let info = try await ControllerInfo.read(from: client)
            if json {
                printOut(
                    jsonLine([
                        "device": device.deviceText, "address": info.address.description,
                        "hciVersion": info.version.map { Int($0.hciVersion) },
                        "hciVersionName": info.version.map { coreVersionName($0.hciVersion) },
                        "lmpVersion": info.version.map { Int($0.lmpVersion) },
                        "manufacturer": info.version.map { Int($0.companyIdentifier) },
                        "manufacturerName": info.version.map {
                            CompanyIdentifier(rawValue: $0.companyIdentifier).description
                        },
                        "leFeatures": "0x" + String(info.features.rawValue, radix: 16),
                        "extendedAdvertising": info.features.contains(.extendedAdvertising),
                        "le2MPHY": info.features.contains(.le2MPHY),
                        "leCodedPHY": info.features.contains(.leCodedPHY),
                        "advertisingSets": info.advertisingSets.map { Int($0) },
                        "maxAdvertisingDataLength": info.maximumAdvertisingDataLength.map { Int($0) },
                        "advertisingTxPower": info.advertisingTxPower.map { Int($0) },
                        "txPowerRange": info.txPowerRange.map { [Int($0.min), Int($0.max)] },
                    ]))
                return
            }
            printOut("device:              \(device.deviceText)")
            printOut("address:             \(info.address)")
            if let v = info.version {
                printOut(
                    "HCI version:         \(coreVersionName(v.hciVersion)) (0x\([v.hciVersion].hexString)), revision 0x\(String(v.hciSubversion, radix: 16))"
                )
                printOut(
                    "LMP version:         \(coreVersionName(v.lmpVersion)) (0x\([v.lmpVersion].hexString)), subversion 0x\(String(v.lmpSubversion, radix: 16))"
                )
                printOut("manufacturer:        \(CompanyIdentifier(rawValue: v.companyIdentifier))")
            }
            printOut("LE features:         0x\(String(info.features.rawValue, radix: 16, uppercase: true))")
            printOut("  extended advertising: \(info.features.contains(.extendedAdvertising) ? "yes" : "no")")
            printOut("  LE 2M PHY:            \(info.features.contains(.le2MPHY) ? "yes" : "no")")
            printOut("  LE Coded PHY:         \(info.features.contains(.leCodedPHY) ? "yes" : "no")")
            if let sets = info.advertisingSets { printOut("advertising sets:    \(sets)") }
            if let max = info.maximumAdvertisingDataLength { printOut("max adv data length: \(max) bytes") }
            if let p = info.advertisingTxPower { printOut("advertising TX power: \(p) dBm") }
            if let r = info.txPowerRange { printOut("TX power range:      \(r.min) … \(r.max) dBm") }
        }
    }
}

/// `Bluetooth 5.4` for HCI/LMP version numbers, from Core's table (Assigned Numbers §2.1).
func coreVersionName(_ v: UInt8) -> String {
    ReadLocalVersionInformation.ReturnParameters.coreVersionName(v).map { "Bluetooth \($0)" } ?? "unknown version"
}
