/// The management interface's table: one row per command, held by the command's type
/// (`static let spec`, as `HCICommandSpec` rows are), and one row per event (`MgmtEventSpec`),
/// each with its code, its title in BlueZ doc/mgmt-api.txt and the length of its parameters.
/// Everything else is derived from the rows: the names and shorthands of `MgmtOpcode` and
/// `MgmtEventCode`, the length checks of `MgmtEvent` and of every command's reply
/// (`MgmtCommand.decodeReturn`), and the fake kernel's refusal of a parameter length.

/// How many bytes a management packet's parameters take: exactly `n`, or at least `n` when a
/// variable part follows. The kernel checks every command this way before its handler runs
/// (`data_len` and `HCI_MGMT_VAR_LEN` in net/bluetooth/mgmt.c's handler table, checked by
/// hci_sock.c `hci_mgmt_cmd`, which answers Invalid Parameters otherwise).
public enum MgmtLength: Sendable, Equatable {
    case exactly(Int)
    case atLeast(Int)

    /// Whether `count` parameter bytes have this shape.
    public func admits(_ count: Int) -> Bool {
        switch self {
        case .exactly(let n): count == n
        case .atLeast(let n): count >= n
        }
    }

    /// Throws what reading `count` bytes of `what` would: truncated below the minimum,
    /// trailing bytes past an exact length.
    func check(_ count: Int, _ what: @autoclosure () -> String) throws(DecodingError) {
        switch self {
        case .exactly(let n) where count > n:
            throw .trailingBytes(what: what(), count: count - n)
        case .exactly(let n), .atLeast(let n):
            if count < n { throw .truncated(what: what(), needed: n, available: count) }
        }
    }
}

/// What a management command is, apart from its parameters: its row of the table.
public struct MgmtCommandSpec: CommandRow {
    public let opcode: MgmtOpcode
    /// The command's title in mgmt-api.txt, without "Command" (`Add Advertising`).
    public let name: String
    /// The Command Parameters' length.
    public let parameters: MgmtLength
    /// The Return Parameters' length in a successful Command Complete.
    public let returnParameters: MgmtLength

    /// `Add Advertising`.
    public var title: String { name }

    public func checkReturnLength(_ count: Int, _ what: String) throws(DecodingError) {
        try returnParameters.check(count, what)
    }

    public init(_ code: UInt16, _ name: String, parameters: MgmtLength, returns: MgmtLength) {
        opcode = MgmtOpcode(rawValue: code)
        self.name = name
        self.parameters = parameters
        self.returnParameters = returns
    }

    /// Every command type this package has, in opcode order: add a new command's type here.
    public static let commands: [any MgmtCommand.Type] = [
        MgmtReadVersion.self,
        MgmtReadIndexList.self,
        MgmtReadControllerInfo.self,
        MgmtDisconnect.self,
        MgmtReadAdvertisingFeatures.self,
        MgmtAddAdvertising.self,
        MgmtRemoveAdvertising.self,
        MgmtReadDefaultSystemConfiguration.self,
        MgmtSetDefaultSystemConfiguration.self,
        MgmtAddAdvPatternsMonitor.self,
        MgmtRemoveAdvMonitor.self,
        MgmtAddExtendedAdvertisingParameters.self,
        MgmtAddExtendedAdvertisingData.self,
    ]

    static let byOpcode: [MgmtOpcode: MgmtCommandSpec] = Dictionary(
        commands.map { ($0.spec.opcode, $0.spec) }, uniquingKeysWith: { first, _ in first })
}

extension MgmtOpcode {
    /// The command's row; nil for a code this package does not know.
    public var spec: MgmtCommandSpec? { MgmtCommandSpec.byOpcode[self] }

    /// `Add Advertising`; nil for a code this package does not know.
    public var name: String? { spec?.name }

    // Shorthands for matching opcodes (`opcode == .addAdvertising`), derived from the rows.
    public static let readVersion = MgmtReadVersion.opcode
    public static let readIndexList = MgmtReadIndexList.opcode
    public static let readControllerInfo = MgmtReadControllerInfo.opcode
    public static let disconnect = MgmtDisconnect.opcode
    public static let readAdvertisingFeatures = MgmtReadAdvertisingFeatures.opcode
    public static let addAdvertising = MgmtAddAdvertising.opcode
    public static let removeAdvertising = MgmtRemoveAdvertising.opcode
    public static let readDefaultSystemConfiguration = MgmtReadDefaultSystemConfiguration.opcode
    public static let setDefaultSystemConfiguration = MgmtSetDefaultSystemConfiguration.opcode
    public static let addAdvPatternsMonitor = MgmtAddAdvPatternsMonitor.opcode
    public static let removeAdvMonitor = MgmtRemoveAdvMonitor.opcode
    public static let addExtendedAdvertisingParameters = MgmtAddExtendedAdvertisingParameters.opcode
    public static let addExtendedAdvertisingData = MgmtAddExtendedAdvertisingData.opcode
}

/// What a management event is, apart from its parameters: one row per event `MgmtEvent`
/// decodes (mgmt-api.txt "Events"). A code without a row decodes as `.unknown`.
public struct MgmtEventSpec: Sendable {
    public let code: MgmtEventCode
    /// The event's title in mgmt-api.txt, without "Event" (`Advertising Added`).
    public let name: String
    /// The Event Parameters' length.
    public let parameters: MgmtLength

    init(_ code: UInt16, _ name: String, _ parameters: MgmtLength) {
        self.code = MgmtEventCode(rawValue: code)
        self.name = name
        self.parameters = parameters
    }

    /// Command_Opcode (2), Status (1), Return_Parameters.
    public static let commandComplete = MgmtEventSpec(0x0001, "Command Complete", .atLeast(3))
    /// Command_Opcode (2), Status (1).
    public static let commandStatus = MgmtEventSpec(0x0002, "Command Status", .exactly(3))
    /// Error_Code (1).
    public static let controllerError = MgmtEventSpec(0x0003, "Controller Error", .exactly(1))
    public static let indexAdded = MgmtEventSpec(0x0004, "Index Added", .exactly(0))
    public static let indexRemoved = MgmtEventSpec(0x0005, "Index Removed", .exactly(0))
    /// Current_Settings (4).
    public static let newSettings = MgmtEventSpec(0x0006, "New Settings", .exactly(4))
    /// Address (6), Address_Type (1), Flags (4), EIR_Data_Length (2), EIR_Data.
    public static let deviceConnected = MgmtEventSpec(0x000B, "Device Connected", .atLeast(13))
    /// Address (6), Address_Type (1), Reason (1).
    public static let deviceDisconnected = MgmtEventSpec(0x000C, "Device Disconnected", .exactly(8))
    /// Address (6), Address_Type (1), RSSI (1), Flags (4), AD_Data_Length (2), AD_Data.
    public static let deviceFound = MgmtEventSpec(0x0012, "Device Found", .atLeast(14))
    /// Instance (1).
    public static let advertisingAdded = MgmtEventSpec(0x0023, "Advertising Added", .exactly(1))
    /// Instance (1).
    public static let advertisingRemoved = MgmtEventSpec(0x0024, "Advertising Removed", .exactly(1))
    /// Monitor_Handle (2), then as Device Found.
    public static let advMonitorDeviceFound = MgmtEventSpec(0x002F, "Adv Monitor Device Found", .atLeast(16))

    /// Every row, in code order.
    public static let events: [MgmtEventSpec] = [
        commandComplete, commandStatus, controllerError, indexAdded, indexRemoved, newSettings, deviceConnected,
        deviceDisconnected, deviceFound, advertisingAdded, advertisingRemoved, advMonitorDeviceFound,
    ]

    static let byCode: [MgmtEventCode: MgmtEventSpec] = Dictionary(
        events.map { ($0.code, $0) }, uniquingKeysWith: { first, _ in first })
}

extension MgmtEventCode {
    /// The event's row; nil for a code this package does not know.
    public var spec: MgmtEventSpec? { MgmtEventSpec.byCode[self] }

    /// `Advertising Added`; nil for a code this package does not know.
    public var name: String? { spec?.name }

    // Shorthands for matching event codes, derived from the rows.
    public static let commandComplete = MgmtEventSpec.commandComplete.code
    public static let commandStatus = MgmtEventSpec.commandStatus.code
    public static let controllerError = MgmtEventSpec.controllerError.code
    public static let indexAdded = MgmtEventSpec.indexAdded.code
    public static let indexRemoved = MgmtEventSpec.indexRemoved.code
    public static let newSettings = MgmtEventSpec.newSettings.code
    public static let deviceConnected = MgmtEventSpec.deviceConnected.code
    public static let deviceDisconnected = MgmtEventSpec.deviceDisconnected.code
    public static let deviceFound = MgmtEventSpec.deviceFound.code
    public static let advertisingAdded = MgmtEventSpec.advertisingAdded.code
    public static let advertisingRemoved = MgmtEventSpec.advertisingRemoved.code
    public static let advMonitorDeviceFound = MgmtEventSpec.advMonitorDeviceFound.code
}
