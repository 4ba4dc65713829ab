/// What a command is, apart from its parameters: one row per command, held by the command's type
/// (`static let spec`) next to the parameter encoding and the return type. Every other view —
/// `HCIOpcode.name`, `HCIOpcode.allKnown`, the `HCIOpcode` shorthands below,
/// `ReadLocalSupportedCommands.ReturnParameters.supports(_:)` — is derived from these rows.
public struct HCICommandSpec: CommandRow {
    /// OGF << 10 | OCF. Core 5.4 Vol 4 Part E §5.4.1.
    public let opcode: HCIOpcode
    /// The command's title in the Core specification, without the `HCI_` prefix.
    public let name: String
    /// Octet and bit of the command in Supported_Commands (Core 5.4 Vol 4 Part E §6.27,
    /// cross-checked against Bumble's HCI_SUPPORTED_COMMANDS_MASKS); nil for commands without one.
    public let supportedCommandsBit: (octet: Int, bit: Int)?

    /// `LE Set Advertising Enable (0x200A)`.
    public var title: String { opcode.description }

    /// HCI's rows hold no lengths: the return parameters' own reads check them.
    public func checkReturnLength(_ count: Int, _ what: String) throws(DecodingError) {}

    public init(ogf: UInt8, ocf: UInt16, _ name: String, supportedCommandsBit: (octet: Int, bit: Int)?) {
        opcode = HCIOpcode(ogf: ogf, ocf: ocf)
        self.name = name
        self.supportedCommandsBit = supportedCommandsBit
    }

    /// No operation: a controller sends Command Complete with opcode 0x0000 to say how many
    /// commands it accepts, e.g. at power-up. Core 5.4 Vol 4 Part E §7.7.14. Not a command anyone sends.
    public static let nop = HCICommandSpec(ogf: 0, ocf: 0, "NOP", supportedCommandsBit: nil)

    /// Every command type this package has, in opcode order: add a new command's type here.
    public static let commands: [any HCICommand.Type] = [
        SetEventMask.self,
        Reset.self,
        ReadLocalVersionInformation.self,
        ReadLocalSupportedCommands.self,
        ReadBDAddr.self,
        LESetEventMask.self,
        LEReadLocalSupportedFeatures.self,
        LESetRandomAddress.self,
        LESetAdvertisingParameters.self,
        LEReadAdvertisingPhysicalChannelTxPower.self,
        LESetAdvertisingData.self,
        LESetScanResponseData.self,
        LESetAdvertisingEnable.self,
        LESetScanParameters.self,
        LESetScanEnable.self,
        LESetAdvertisingSetRandomAddress.self,
        LESetExtendedAdvertisingParameters.self,
        LESetExtendedAdvertisingData.self,
        LESetExtendedScanResponseData.self,
        LESetExtendedAdvertisingEnable.self,
        LEReadMaximumAdvertisingDataLength.self,
        LEReadNumberOfSupportedAdvertisingSets.self,
        LERemoveAdvertisingSet.self,
        LEClearAdvertisingSets.self,
        LESetExtendedScanParameters.self,
        LESetExtendedScanEnable.self,
        LEReadTransmitPower.self,
    ]

    /// Every row: NOP and the commands' specs, by opcode.
    static let byOpcode: [HCIOpcode: HCICommandSpec] = Dictionary(
        ([nop] + commands.map { $0.spec }).map { ($0.opcode, $0) }, uniquingKeysWith: { first, _ in first })
}

extension HCIOpcode {
    /// The command's row, nil for opcodes this package does not know.
    public var spec: HCICommandSpec? { HCICommandSpec.byOpcode[self] }

    /// The command's title in the Core specification, without the `HCI_` prefix
    /// (`LE Set Advertising Enable`); nil for opcodes this package does not know.
    public var name: String? { spec?.name }

    /// Every opcode with a name, in opcode order.
    public static let allKnown: [HCIOpcode] = HCICommandSpec.byOpcode.keys.sorted { $0.rawValue < $1.rawValue }

    // Shorthands for matching opcodes in events (`opcode == .reset`), derived from the rows.
    public static let nop = HCICommandSpec.nop.opcode
    public static let setEventMask = SetEventMask.opcode
    public static let reset = Reset.opcode
    public static let readLocalVersionInformation = ReadLocalVersionInformation.opcode
    public static let readLocalSupportedCommands = ReadLocalSupportedCommands.opcode
    public static let readBDAddr = ReadBDAddr.opcode
    public static let leSetEventMask = LESetEventMask.opcode
    public static let leReadLocalSupportedFeatures = LEReadLocalSupportedFeatures.opcode
    public static let leSetRandomAddress = LESetRandomAddress.opcode
    public static let leSetAdvertisingParameters = LESetAdvertisingParameters.opcode
    public static let leReadAdvertisingPhysicalChannelTxPower = LEReadAdvertisingPhysicalChannelTxPower.opcode
    public static let leSetAdvertisingData = LESetAdvertisingData.opcode
    public static let leSetScanResponseData = LESetScanResponseData.opcode
    public static let leSetAdvertisingEnable = LESetAdvertisingEnable.opcode
    public static let leSetScanParameters = LESetScanParameters.opcode
    public static let leSetScanEnable = LESetScanEnable.opcode
    public static let leSetAdvertisingSetRandomAddress = LESetAdvertisingSetRandomAddress.opcode
    public static let leSetExtendedAdvertisingParameters = LESetExtendedAdvertisingParameters.opcode
    public static let leSetExtendedAdvertisingData = LESetExtendedAdvertisingData.opcode
    public static let leSetExtendedScanResponseData = LESetExtendedScanResponseData.opcode
    public static let leSetExtendedAdvertisingEnable = LESetExtendedAdvertisingEnable.opcode
    public static let leReadMaximumAdvertisingDataLength = LEReadMaximumAdvertisingDataLength.opcode
    public static let leReadNumberOfSupportedAdvertisingSets = LEReadNumberOfSupportedAdvertisingSets.opcode
    public static let leRemoveAdvertisingSet = LERemoveAdvertisingSet.opcode
    public static let leClearAdvertisingSets = LEClearAdvertisingSets.opcode
    public static let leSetExtendedScanParameters = LESetExtendedScanParameters.opcode
    public static let leSetExtendedScanEnable = LESetExtendedScanEnable.opcode
    public static let leReadTransmitPower = LEReadTransmitPower.opcode
}
