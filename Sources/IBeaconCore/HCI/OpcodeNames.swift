// The commands this tool sends, with their opcodes (OGF << 10 | OCF) and the names the
// Core specification gives them (Core 5.4 Vol 4 Part E §7.3, §7.4, §7.8).
extension HCIOpcode {
    /// No operation: a controller sends Command Complete with opcode 0x0000 to say how many
    /// commands it accepts, e.g. at power-up. Core 5.4 Vol 4 Part E §7.7.14.
    public static let nop = HCIOpcode(rawValue: 0x0000)

    // Controller & Baseband commands, OGF 0x03 (§7.3).
    /// §7.3.1
    public static let setEventMask = HCIOpcode(ogf: 0x03, ocf: 0x0001)
    /// §7.3.2
    public static let reset = HCIOpcode(ogf: 0x03, ocf: 0x0003)

    // Informational parameters, OGF 0x04 (§7.4).
    /// §7.4.1
    public static let readLocalVersionInformation = HCIOpcode(ogf: 0x04, ocf: 0x0001)
    /// §7.4.2
    public static let readLocalSupportedCommands = HCIOpcode(ogf: 0x04, ocf: 0x0002)
    /// §7.4.6
    public static let readBDAddr = HCIOpcode(ogf: 0x04, ocf: 0x0009)

    // LE Controller commands, OGF 0x08 (§7.8).
    /// §7.8.1
    public static let leSetEventMask = HCIOpcode(ogf: 0x08, ocf: 0x0001)
    /// §7.8.3
    public static let leReadLocalSupportedFeatures = HCIOpcode(ogf: 0x08, ocf: 0x0003)
    /// §7.8.4
    public static let leSetRandomAddress = HCIOpcode(ogf: 0x08, ocf: 0x0005)
    /// §7.8.5
    public static let leSetAdvertisingParameters = HCIOpcode(ogf: 0x08, ocf: 0x0006)
    /// §7.8.6
    public static let leReadAdvertisingPhysicalChannelTxPower = HCIOpcode(ogf: 0x08, ocf: 0x0007)
    /// §7.8.7
    public static let leSetAdvertisingData = HCIOpcode(ogf: 0x08, ocf: 0x0008)
    /// §7.8.8
    public static let leSetScanResponseData = HCIOpcode(ogf: 0x08, ocf: 0x0009)
    /// §7.8.9
    public static let leSetAdvertisingEnable = HCIOpcode(ogf: 0x08, ocf: 0x000A)
    /// §7.8.10
    public static let leSetScanParameters = HCIOpcode(ogf: 0x08, ocf: 0x000B)
    /// §7.8.11
    public static let leSetScanEnable = HCIOpcode(ogf: 0x08, ocf: 0x000C)
    /// §7.8.52
    public static let leSetAdvertisingSetRandomAddress = HCIOpcode(ogf: 0x08, ocf: 0x0035)
    /// §7.8.53
    public static let leSetExtendedAdvertisingParameters = HCIOpcode(ogf: 0x08, ocf: 0x0036)
    /// §7.8.54
    public static let leSetExtendedAdvertisingData = HCIOpcode(ogf: 0x08, ocf: 0x0037)
    /// §7.8.55
    public static let leSetExtendedScanResponseData = HCIOpcode(ogf: 0x08, ocf: 0x0038)
    /// §7.8.56
    public static let leSetExtendedAdvertisingEnable = HCIOpcode(ogf: 0x08, ocf: 0x0039)
    /// §7.8.57
    public static let leReadMaximumAdvertisingDataLength = HCIOpcode(ogf: 0x08, ocf: 0x003A)
    /// §7.8.58
    public static let leReadNumberOfSupportedAdvertisingSets = HCIOpcode(ogf: 0x08, ocf: 0x003B)
    /// §7.8.59
    public static let leRemoveAdvertisingSet = HCIOpcode(ogf: 0x08, ocf: 0x003C)
    /// §7.8.60
    public static let leClearAdvertisingSets = HCIOpcode(ogf: 0x08, ocf: 0x003D)
    /// §7.8.64
    public static let leSetExtendedScanParameters = HCIOpcode(ogf: 0x08, ocf: 0x0041)
    /// §7.8.65
    public static let leSetExtendedScanEnable = HCIOpcode(ogf: 0x08, ocf: 0x0042)
    /// §7.8.74
    public static let leReadTransmitPower = HCIOpcode(ogf: 0x08, ocf: 0x004B)

    /// Every opcode with a name, in opcode order.
    public static let allKnown: [HCIOpcode] = [
        .nop, .setEventMask, .reset, .readLocalVersionInformation, .readLocalSupportedCommands,
        .readBDAddr, .leSetEventMask, .leReadLocalSupportedFeatures, .leSetRandomAddress,
        .leSetAdvertisingParameters, .leReadAdvertisingPhysicalChannelTxPower, .leSetAdvertisingData,
        .leSetScanResponseData, .leSetAdvertisingEnable, .leSetScanParameters, .leSetScanEnable,
        .leSetAdvertisingSetRandomAddress, .leSetExtendedAdvertisingParameters,
        .leSetExtendedAdvertisingData, .leSetExtendedScanResponseData, .leSetExtendedAdvertisingEnable,
        .leReadMaximumAdvertisingDataLength, .leReadNumberOfSupportedAdvertisingSets,
        .leRemoveAdvertisingSet, .leClearAdvertisingSets, .leSetExtendedScanParameters,
        .leSetExtendedScanEnable, .leReadTransmitPower,
    ]

    /// The command's title in the Core specification, without the `HCI_` prefix
    /// (`LE Set Advertising Enable`); nil for opcodes this package does not know.
    public var name: String? {
        switch self {
        case .nop: "NOP"
        case .setEventMask: "Set Event Mask"
        case .reset: "Reset"
        case .readLocalVersionInformation: "Read Local Version Information"
        case .readLocalSupportedCommands: "Read Local Supported Commands"
        case .readBDAddr: "Read BD_ADDR"
        case .leSetEventMask: "LE Set Event Mask"
        case .leReadLocalSupportedFeatures: "LE Read Local Supported Features"
        case .leSetRandomAddress: "LE Set Random Address"
        case .leSetAdvertisingParameters: "LE Set Advertising Parameters"
        case .leReadAdvertisingPhysicalChannelTxPower: "LE Read Advertising Physical Channel Tx Power"
        case .leSetAdvertisingData: "LE Set Advertising Data"
        case .leSetScanResponseData: "LE Set Scan Response Data"
        case .leSetAdvertisingEnable: "LE Set Advertising Enable"
        case .leSetScanParameters: "LE Set Scan Parameters"
        case .leSetScanEnable: "LE Set Scan Enable"
        case .leSetAdvertisingSetRandomAddress: "LE Set Advertising Set Random Address"
        case .leSetExtendedAdvertisingParameters: "LE Set Extended Advertising Parameters"
        case .leSetExtendedAdvertisingData: "LE Set Extended Advertising Data"
        case .leSetExtendedScanResponseData: "LE Set Extended Scan Response Data"
        case .leSetExtendedAdvertisingEnable: "LE Set Extended Advertising Enable"
        case .leReadMaximumAdvertisingDataLength: "LE Read Maximum Advertising Data Length"
        case .leReadNumberOfSupportedAdvertisingSets: "LE Read Number of Supported Advertising Sets"
        case .leRemoveAdvertisingSet: "LE Remove Advertising Set"
        case .leClearAdvertisingSets: "LE Clear Advertising Sets"
        case .leSetExtendedScanParameters: "LE Set Extended Scan Parameters"
        case .leSetExtendedScanEnable: "LE Set Extended Scan Enable"
        case .leReadTransmitPower: "LE Read Transmit Power"
        default: nil
        }
    }
}
