import IBeaconCore

/// What `ibeacon info` shows. Reading it changes nothing on the controller, and it never
/// mixes legacy and extended advertising commands: the TX power comes from LE Read Transmit
/// Power on extended controllers, from LE Read Advertising Physical Channel Tx Power otherwise.
public struct ControllerInfo: Sendable {
    public var address: BDAddress
    public var version: ReadLocalVersionInformation.ReturnParameters?
    public var features: LEFeatures
    public var advertisingSets: UInt8?
    public var maximumAdvertisingDataLength: UInt16?
    public var advertisingTxPower: Int8?
    public var txPowerRange: (min: Int8, max: Int8)?

    public static func read(from client: ControllerClient) async throws -> ControllerInfo {
        let address = try await client.execute(ReadBDAddr())
        let version = try? await client.execute(ReadLocalVersionInformation())
        let features = try await client.execute(LEReadLocalSupportedFeatures())
        var info = ControllerInfo(address: address, version: version, features: features)
        if features.contains(.extendedAdvertising) {
            info.advertisingSets = try? await client.execute(LEReadNumberOfSupportedAdvertisingSets())
            info.maximumAdvertisingDataLength = try? await client.execute(LEReadMaximumAdvertisingDataLength())
            if let range = try? await client.execute(LEReadTransmitPower()) {
                info.txPowerRange = (range.min, range.max)
            }
        } else {
            info.advertisingTxPower = try? await client.execute(LEReadAdvertisingPhysicalChannelTxPower())
        }
        return info
    }
}
