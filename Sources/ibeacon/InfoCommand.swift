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

    @OptionGroup var device: DeviceOptions
    @Flag(help: "Print one JSON object.")
    var json = false
    @OptionGroup var logging: LoggingOptions

    func run() async throws {
        let logger = logging.makeLogger()
        try await reporting {
            if let kernel = try await device.kernelPath(logger: logger) {
                try await printKernelInfo(kernel, json: json)
                return
            }
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
            printOut("path:                raw HCI (the controller's own answers)")
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

/// `info` through the kernel's management interface.
func printKernelInfo(_ kernel: KernelPath, json: Bool) async throws {
    defer { Task { await kernel.client.close() } }
    let index = MgmtIndex(kernel.index)
    let info = try await kernel.client.execute(MgmtReadControllerInfo(), index: index)
    let features = try? await kernel.client.execute(MgmtReadAdvertisingFeatures(), index: index)
    let version = try? await kernel.client.execute(MgmtReadVersion(), index: .none)
    if json {
        printOut(
            jsonLine([
                "device": kernel.name, "path": "mgmt", "address": info.address.description, "name": info.name,
                "manufacturer": Int(info.manufacturer),
                "manufacturerName": CompanyIdentifier(rawValue: info.manufacturer).description,
                "powered": info.currentSettings.contains(.powered),
                "lowEnergy": info.currentSettings.contains(.lowEnergy),
                "settings": info.currentSettings.description,
                "supportedSettings": info.supportedSettings.description,
                "managementVersion": version.map { "\($0.version).\($0.revision)" },
                "maxAdvertisingInstances": features.map { Int($0.maxInstances) },
                "advertisingInstances": features.map { $0.instances.map { Int($0) } },
                "maxAdvertisingDataLength": features.map { Int($0.maxAdvertisingDataLength) },
                "advertisingFlags": features.map { $0.supportedFlags.description },
                "canSetTxPower": features.map { $0.supportedFlags.contains(.canSetTxPower) },
            ]))
        return
    }
    printOut("device:              \(kernel.name)")
    printOut(
        "path:                the kernel's management interface"
            + (version.map { " \($0.version).\($0.revision)" } ?? "") + " (raw:\(kernel.name) for raw HCI)")
    printOut("address:             \(info.address)")
    printOut("name:                \(info.name)")
    printOut("manufacturer:        \(CompanyIdentifier(rawValue: info.manufacturer))")
    printOut("powered:             \(info.currentSettings.contains(.powered) ? "yes" : "no")")
    printOut("Low Energy:          \(info.currentSettings.contains(.lowEnergy) ? "on" : "off")")
    printOut("settings:            \(info.currentSettings)")
    if let f = features {
        let used = f.instances.isEmpty ? "none" : f.instances.map(String.init).joined(separator: ", ")
        printOut("advertising instances: \(f.maxInstances) (in use: \(used))")
        printOut("max adv data length: \(f.maxAdvertisingDataLength) bytes")
        printOut("advertising flags:   \(f.supportedFlags)")
        printOut("TX power settable:   \(f.supportedFlags.contains(.canSetTxPower) ? "yes" : "no")")
    }
}
