// Advertising commands: legacy (Core 5.4 Vol 4 Part E §7.8.5–§7.8.9) and extended
// (§7.8.52–§7.8.60). A controller must not get both kinds in one session: once it has seen
// one since power-on or Reset, the other returns Command Disallowed (0x0C) (§3.1).

/// Advertising_Handle: 0x00…0xEF. Core 5.4 Vol 4 Part E §7.8.53.
func validateAdvertisingHandle(_ handle: UInt8) throws(ParameterError) {
    guard handle <= 0xEF else {
        throw .outOfRange(
            what: "Advertising_Handle", value: "0x\([handle].hexString.uppercased())", allowed: "0x00…0xEF",
            reference: "Core 5.4 Vol 4 Part E §7.8.53")
    }
}

// MARK: Legacy advertising

/// HCI_LE_Set_Advertising_Parameters. Core 5.4 Vol 4 Part E §7.8.5. 15 parameter octets.
public struct LESetAdvertisingParameters: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0006, "LE Set Advertising Parameters", supportedCommandsBit: (25, 5))

    /// Advertising_Type, 1 octet. An open set.
    public struct AdvertisingType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        /// Connectable and scannable undirected (the spec's default).
        public static let advInd = AdvertisingType(rawValue: 0x00)
        /// Connectable high duty cycle directed.
        public static let advDirectIndHigh = AdvertisingType(rawValue: 0x01)
        /// Scannable undirected.
        public static let advScanInd = AdvertisingType(rawValue: 0x02)
        /// Non-connectable undirected: what an iBeacon uses.
        public static let advNonconnInd = AdvertisingType(rawValue: 0x03)
        /// Connectable low duty cycle directed.
        public static let advDirectIndLow = AdvertisingType(rawValue: 0x04)

        public var description: String {
            switch self {
            case .advInd: "ADV_IND"
            case .advDirectIndHigh: "ADV_DIRECT_IND (high duty cycle)"
            case .advScanInd: "ADV_SCAN_IND"
            case .advNonconnInd: "ADV_NONCONN_IND"
            case .advDirectIndLow: "ADV_DIRECT_IND (low duty cycle)"
            default: "unknown advertising type (0x\([rawValue].hexString.uppercased()))"
            }
        }
    }

    /// Advertising_Interval_Min, 2 octets.
    public let intervalMin: AdvertisingInterval
    /// Advertising_Interval_Max, 2 octets.
    public let intervalMax: AdvertisingInterval
    /// Advertising_Type, 1 octet.
    public let advertisingType: AdvertisingType
    /// Own_Address_Type, 1 octet.
    public let ownAddressType: OwnAddressType
    /// Peer_Address_Type, 1 octet (directed advertising only).
    public let peerAddressType: LEAddressType
    /// Peer_Address, 6 octets (directed advertising only).
    public let peerAddress: BDAddress
    /// Advertising_Channel_Map, 1 octet.
    public let channelMap: AdvertisingChannelMap
    /// Advertising_Filter_Policy, 1 octet.
    public let filterPolicy: AdvertisingFilterPolicy

    /// Checks the intervals against the legacy range 0x0020…0x4000, min ≤ max, and a
    /// non-empty channel map.
    public init(
        intervalMin: AdvertisingInterval,
        intervalMax: AdvertisingInterval,
        advertisingType: AdvertisingType,
        ownAddressType: OwnAddressType = .public,
        peerAddressType: LEAddressType = .public,
        peerAddress: BDAddress = .zero,
        channelMap: AdvertisingChannelMap = .all,
        filterPolicy: AdvertisingFilterPolicy = .acceptAll
    ) throws(ParameterError) {
        let reference = "Core 5.4 Vol 4 Part E §7.8.5"
        for (name, interval) in [("Advertising_Interval_Min", intervalMin), ("Advertising_Interval_Max", intervalMax)] {
            guard AdvertisingInterval.legacyRange.contains(interval.slots) else {
                throw .outOfRange(
                    what: name, value: interval.description, allowed: "20 ms…10240 ms (32…16384 slots)",
                    reference: reference)
            }
        }
        // §7.8.5: Advertising_Interval_Min shall be ≤ Advertising_Interval_Max.
        guard intervalMin <= intervalMax else {
            throw .inconsistent(
                what: "advertising interval",
                reason: "minimum \(intervalMin) is greater than maximum \(intervalMax)", reference: reference)
        }
        // §7.8.5: at least one channel bit shall be set.
        guard !channelMap.intersection(.all).isEmpty else {
            throw .outOfRange(
                what: "Advertising_Channel_Map", value: "0x\([channelMap.rawValue].hexString.uppercased())",
                allowed: "at least one of channels 37, 38, 39 (0x01…0x07)", reference: reference)
        }
        self.intervalMin = intervalMin
        self.intervalMax = intervalMax
        self.advertisingType = advertisingType
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.channelMap = channelMap
        self.filterPolicy = filterPolicy
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint16LE(UInt16(truncatingIfNeeded: intervalMin.slots))  // ≤ 0x4000, checked in init
        w.uint16LE(UInt16(truncatingIfNeeded: intervalMax.slots))
        w.uint8(advertisingType.rawValue)
        w.uint8(ownAddressType.rawValue)
        w.uint8(peerAddressType.rawValue)
        w.append(peerAddress.bytes)
        w.uint8(channelMap.rawValue)
        w.uint8(filterPolicy.rawValue)
    }
}

/// HCI_LE_Read_Advertising_Physical_Channel_Tx_Power: the power legacy advertising uses,
/// in dBm (−127…+20). Core 5.4 Vol 4 Part E §7.8.6. Legacy controllers cannot be asked for a
/// power, only report theirs.
public struct LEReadAdvertisingPhysicalChannelTxPower: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0007, "LE Read Advertising Physical Channel Tx Power", supportedCommandsBit: (25, 6))
    /// TX_Power_Level, 1 octet, signed.
    public typealias ReturnParameters = Int8
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

/// The row of one of a pair of commands that share their parameters, advertising data and scan
/// response data (legacy `LESetLegacyData`, extended `LESetExtendedData`): the opcode, name
/// and Supported_Commands bit, and how errors name the data and cite its limit.
public protocol DataCommandRow: Sendable {
    static var spec: HCICommandSpec { get }
    /// `advertising data`, as a `ParameterError` names it.
    static var dataName: String { get }
    /// The section that limits the data, `Core 5.4 Vol 4 Part E §7.8.7`.
    static var reference: String { get }
}

/// HCI_LE_Set_Advertising_Data and HCI_LE_Set_Scan_Response_Data (`Row` says which): the data's
/// length (1 octet, 0…31) and the data, always 31 octets zero-padded (Core 5.4 Vol 4 Part E
/// §7.8.7, §7.8.8).
public struct LESetLegacyData<Row: DataCommandRow>: HCICommand, Hashable {
    public static var spec: HCICommandSpec { Row.spec }
    public static var maximumLength: Int { 31 }
    public let data: [UInt8]

    /// Throws if `data` is longer than 31 octets; never truncates.
    public init(data: [UInt8]) throws(ParameterError) {
        guard data.count <= Self.maximumLength else {
            throw .tooLong(
                what: Row.dataName, count: data.count, maximum: Self.maximumLength, reference: Row.reference)
        }
        self.data = data
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(UInt8(data.count))  // ≤ 31, checked in init
        w.append(data)
        w.append(repeatElement(0, count: Self.maximumLength - data.count))
    }
}

/// HCI_LE_Set_Advertising_Data. Core 5.4 Vol 4 Part E §7.8.7: Advertising_Data_Length
/// (1 octet, 0…31) and Advertising_Data (31 octets).
public typealias LESetAdvertisingData = LESetLegacyData<LESetAdvertisingDataRow>

public enum LESetAdvertisingDataRow: DataCommandRow {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0008, "LE Set Advertising Data", supportedCommandsBit: (25, 7))
    public static let dataName = "advertising data"
    public static let reference = "Core 5.4 Vol 4 Part E §7.8.7"
}

/// HCI_LE_Set_Scan_Response_Data. Core 5.4 Vol 4 Part E §7.8.8: Scan_Response_Data_Length
/// (1 octet, 0…31) and Scan_Response_Data (31 octets).
public typealias LESetScanResponseData = LESetLegacyData<LESetScanResponseDataRow>

public enum LESetScanResponseDataRow: DataCommandRow {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0009, "LE Set Scan Response Data", supportedCommandsBit: (26, 0))
    public static let dataName = "scan response data"
    public static let reference = "Core 5.4 Vol 4 Part E §7.8.8"
}

/// HCI_LE_Set_Advertising_Enable. Core 5.4 Vol 4 Part E §7.8.9. Advertising_Enable, 1 octet.
public struct LESetAdvertisingEnable: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x000A, "LE Set Advertising Enable", supportedCommandsBit: (26, 1))
    public var enabled: Bool
    public init(enabled: Bool) { self.enabled = enabled }
    public func encodeParameters(into writer: inout ByteWriter) { writer.uint8(enabled ? 0x01 : 0x00) }
}

// MARK: Extended advertising

/// Advertising_Event_Properties of LE Set Extended Advertising Parameters, 2 octets.
/// Core 5.4 Vol 4 Part E §7.8.53.
public struct AdvertisingEventProperties: OptionSet, Hashable, Sendable {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let connectable = AdvertisingEventProperties(rawValue: 1 << 0)
    public static let scannable = AdvertisingEventProperties(rawValue: 1 << 1)
    public static let directed = AdvertisingEventProperties(rawValue: 1 << 2)
    public static let highDutyDirected = AdvertisingEventProperties(rawValue: 1 << 3)
    /// Use legacy advertising PDUs (what phones scanning for iBeacons hear).
    public static let legacy = AdvertisingEventProperties(rawValue: 1 << 4)
    public static let anonymous = AdvertisingEventProperties(rawValue: 1 << 5)
    public static let includeTxPower = AdvertisingEventProperties(rawValue: 1 << 6)

    /// The only values allowed with legacy PDUs (Core 5.4 Vol 4 Part E §7.8.53, Table 7.2).
    /// ADV_IND 0x13.
    public static let legacyAdvInd: AdvertisingEventProperties = [.legacy, .connectable, .scannable]
    /// ADV_DIRECT_IND low duty cycle 0x15.
    public static let legacyAdvDirectIndLow: AdvertisingEventProperties = [.legacy, .connectable, .directed]
    /// ADV_DIRECT_IND high duty cycle 0x1D.
    public static let legacyAdvDirectIndHigh: AdvertisingEventProperties = [
        .legacy, .connectable, .directed, .highDutyDirected,
    ]
    /// ADV_SCAN_IND 0x12.
    public static let legacyAdvScanInd: AdvertisingEventProperties = [.legacy, .scannable]
    /// ADV_NONCONN_IND 0x10: the iBeacon PDU.
    public static let legacyAdvNonconnInd: AdvertisingEventProperties = [.legacy]
}

/// HCI_LE_Set_Advertising_Set_Random_Address. Core 5.4 Vol 4 Part E §7.8.52.
public struct LESetAdvertisingSetRandomAddress: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0035, "LE Set Advertising Set Random Address", supportedCommandsBit: (36, 1))
    /// Advertising_Handle, 1 octet (0x00…0xEF).
    public let advertisingHandle: UInt8
    /// Random_Address, 6 octets.
    public let randomAddress: BDAddress

    public init(advertisingHandle: UInt8, randomAddress: BDAddress) throws(ParameterError) {
        try validateAdvertisingHandle(advertisingHandle)
        self.advertisingHandle = advertisingHandle
        self.randomAddress = randomAddress
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(advertisingHandle)
        w.append(randomAddress.bytes)
    }
}

/// HCI_LE_Set_Extended_Advertising_Parameters (v1, opcode 0x2036).
/// Core 5.4 Vol 4 Part E §7.8.53. 25 parameter octets. The only way to ask for a TX power.
public struct LESetExtendedAdvertisingParameters: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0036, "LE Set Extended Advertising Parameters", supportedCommandsBit: (36, 2))

    /// Advertising_Handle, 1 octet (0x00…0xEF).
    public let advertisingHandle: UInt8
    /// Advertising_Event_Properties, 2 octets.
    public let eventProperties: AdvertisingEventProperties
    /// Primary_Advertising_Interval_Min, 3 octets.
    public let primaryIntervalMin: AdvertisingInterval
    /// Primary_Advertising_Interval_Max, 3 octets.
    public let primaryIntervalMax: AdvertisingInterval
    /// Primary_Advertising_Channel_Map, 1 octet.
    public let primaryChannelMap: AdvertisingChannelMap
    /// Own_Address_Type, 1 octet.
    public let ownAddressType: OwnAddressType
    /// Peer_Address_Type, 1 octet.
    public let peerAddressType: LEAddressType
    /// Peer_Address, 6 octets.
    public let peerAddress: BDAddress
    /// Advertising_Filter_Policy, 1 octet.
    public let filterPolicy: AdvertisingFilterPolicy
    /// Advertising_TX_Power, 1 octet: the most the host wants, −127…+20 dBm; nil is 0x7F,
    /// "Host has no preference". The controller answers with the power it selected.
    public let advertisingTxPower: Int8?
    /// Primary_Advertising_PHY, 1 octet: LE 1M or LE Coded.
    public let primaryPHY: LEPHY
    /// Secondary_Advertising_Max_Skip, 1 octet.
    public let secondaryMaxSkip: UInt8
    /// Secondary_Advertising_PHY, 1 octet: LE 1M, LE 2M or LE Coded.
    public let secondaryPHY: LEPHY
    /// Advertising_SID, 1 octet (0x00…0x0F).
    public let advertisingSID: UInt8
    /// Scan_Request_Notification_Enable, 1 octet.
    public let scanRequestNotification: Bool

    public init(
        advertisingHandle: UInt8,
        eventProperties: AdvertisingEventProperties,
        primaryIntervalMin: AdvertisingInterval,
        primaryIntervalMax: AdvertisingInterval,
        primaryChannelMap: AdvertisingChannelMap = .all,
        ownAddressType: OwnAddressType = .public,
        peerAddressType: LEAddressType = .public,
        peerAddress: BDAddress = .zero,
        filterPolicy: AdvertisingFilterPolicy = .acceptAll,
        advertisingTxPower: Int8? = nil,
        primaryPHY: LEPHY = .le1M,
        secondaryMaxSkip: UInt8 = 0,
        secondaryPHY: LEPHY = .le1M,
        advertisingSID: UInt8 = 0,
        scanRequestNotification: Bool = false
    ) throws(ParameterError) {
        try validateAdvertisingHandle(advertisingHandle)
        try Self.validate(eventProperties)
        try Self.validatePrimary(intervalMin: primaryIntervalMin, max: primaryIntervalMax, channels: primaryChannelMap)
        try Self.validate(
            txPower: advertisingTxPower, primaryPHY: primaryPHY, secondaryPHY: secondaryPHY, sid: advertisingSID)
        self.advertisingHandle = advertisingHandle
        self.eventProperties = eventProperties
        self.primaryIntervalMin = primaryIntervalMin
        self.primaryIntervalMax = primaryIntervalMax
        self.primaryChannelMap = primaryChannelMap
        self.ownAddressType = ownAddressType
        self.peerAddressType = peerAddressType
        self.peerAddress = peerAddress
        self.filterPolicy = filterPolicy
        self.advertisingTxPower = advertisingTxPower
        self.primaryPHY = primaryPHY
        self.secondaryMaxSkip = secondaryMaxSkip
        self.secondaryPHY = secondaryPHY
        self.advertisingSID = advertisingSID
        self.scanRequestNotification = scanRequestNotification
    }

    private static let reference = "Core 5.4 Vol 4 Part E §7.8.53"

    /// Advertising_Event_Properties: a Table 7.2 value with legacy PDUs, otherwise not both
    /// connectable and scannable and not high duty cycle directed.
    private static func validate(_ eventProperties: AdvertisingEventProperties) throws(ParameterError) {
        if eventProperties.contains(.legacy) {
            // §7.8.53: with legacy PDUs the properties shall be one of the values in Table 7.2.
            let allowed: [AdvertisingEventProperties] = [
                .legacyAdvInd, .legacyAdvDirectIndLow, .legacyAdvDirectIndHigh, .legacyAdvScanInd, .legacyAdvNonconnInd,
            ]
            guard allowed.contains(eventProperties) else {
                throw .outOfRange(
                    what: "Advertising_Event_Properties with legacy PDUs",
                    value: "0x\(paddedHex(UInt32(eventProperties.rawValue), 4))",
                    allowed: "0x0013, 0x0015, 0x001D, 0x0012 or 0x0010",
                    reference: reference + " Table 7.2")
            }
        } else if eventProperties.contains(.connectable) && eventProperties.contains(.scannable) {
            // §7.8.53: with extended PDUs an advertisement shall not be both connectable and scannable.
            throw .inconsistent(
                what: "Advertising_Event_Properties",
                reason: "extended advertising cannot be both connectable and scannable", reference: reference)
        } else if eventProperties.contains(.highDutyDirected) {
            // §7.8.53: with extended PDUs, high duty cycle directed advertising shall not be used.
            throw .inconsistent(
                what: "Advertising_Event_Properties",
                reason: "high duty cycle directed advertising needs legacy PDUs", reference: reference)
        }
    }

    /// Primary_Advertising_Interval_Min/Max within 0x000020…0xFFFFFF and in order; at least one
    /// primary channel.
    private static func validatePrimary(
        intervalMin primaryIntervalMin: AdvertisingInterval, max primaryIntervalMax: AdvertisingInterval,
        channels primaryChannelMap: AdvertisingChannelMap
    ) throws(ParameterError) {
        for (name, interval) in [
            ("Primary_Advertising_Interval_Min", primaryIntervalMin),
            ("Primary_Advertising_Interval_Max", primaryIntervalMax),
        ] {
            guard AdvertisingInterval.extendedRange.contains(interval.slots) else {
                throw .outOfRange(
                    what: name, value: interval.description, allowed: "0x000020…0xFFFFFF slots", reference: reference)
            }
        }
        guard primaryIntervalMin <= primaryIntervalMax else {
            throw .inconsistent(
                what: "primary advertising interval",
                reason: "minimum \(primaryIntervalMin) is greater than maximum \(primaryIntervalMax)",
                reference: reference)
        }
        guard !primaryChannelMap.intersection(.all).isEmpty else {
            throw .outOfRange(
                what: "Primary_Advertising_Channel_Map",
                value: "0x\([primaryChannelMap.rawValue].hexString.uppercased())",
                allowed: "at least one of channels 37, 38, 39 (0x01…0x07)", reference: reference)
        }
    }

    /// Advertising_TX_Power, Primary/Secondary_Advertising_PHY and Advertising_SID ranges.
    private static func validate(
        txPower advertisingTxPower: Int8?, primaryPHY: LEPHY, secondaryPHY: LEPHY, sid advertisingSID: UInt8
    ) throws(ParameterError) {
        if let power = advertisingTxPower, !(-127...20).contains(power) {
            throw .outOfRange(
                what: "Advertising_TX_Power", value: "\(power) dBm", allowed: "−127…+20 dBm, or no preference",
                reference: reference)
        }
        guard primaryPHY == .le1M || primaryPHY == .leCoded else {
            throw .outOfRange(
                what: "Primary_Advertising_PHY", value: primaryPHY.description, allowed: "LE 1M or LE Coded",
                reference: reference)
        }
        guard [LEPHY.le1M, .le2M, .leCoded].contains(secondaryPHY) else {
            throw .outOfRange(
                what: "Secondary_Advertising_PHY", value: secondaryPHY.description, allowed: "LE 1M, LE 2M or LE Coded",
                reference: reference)
        }
        guard advertisingSID <= 0x0F else {
            throw .outOfRange(
                what: "Advertising_SID", value: "\(advertisingSID)", allowed: "0…15", reference: reference)
        }
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(advertisingHandle)
        w.uint16LE(eventProperties.rawValue)
        w.uint24LE(primaryIntervalMin.slots)
        w.uint24LE(primaryIntervalMax.slots)
        w.uint8(primaryChannelMap.rawValue)
        w.uint8(ownAddressType.rawValue)
        w.uint8(peerAddressType.rawValue)
        w.append(peerAddress.bytes)
        w.uint8(filterPolicy.rawValue)
        w.int8(advertisingTxPower ?? 0x7F)
        w.uint8(primaryPHY.rawValue)
        w.uint8(secondaryMaxSkip)
        w.uint8(secondaryPHY.rawValue)
        w.uint8(advertisingSID)
        w.uint8(scanRequestNotification ? 0x01 : 0x00)
    }

    public struct ReturnParameters: ReturnParametersDecodable, Hashable {
        /// Selected_TX_Power, 1 octet, dBm: the power the controller will use.
        public var selectedTxPower: Int8

        public init(selectedTxPower: Int8) { self.selectedTxPower = selectedTxPower }

        public init(decoding r: inout ByteReader) throws(DecodingError) {
            selectedTxPower = try r.readInt8("Selected_TX_Power")
        }
    }
}

/// Operation of LE Set Extended Advertising / Scan Response Data, 1 octet.
/// Core 5.4 Vol 4 Part E §7.8.54.
public struct AdvertisingDataOperation: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let intermediateFragment = AdvertisingDataOperation(rawValue: 0x00)
    public static let firstFragment = AdvertisingDataOperation(rawValue: 0x01)
    public static let lastFragment = AdvertisingDataOperation(rawValue: 0x02)
    /// All the data in one command: what a ≤ 31-octet iBeacon payload uses.
    public static let complete = AdvertisingDataOperation(rawValue: 0x03)
    /// Keep the data, change only the Advertising DID.
    public static let unchanged = AdvertisingDataOperation(rawValue: 0x04)
}

/// HCI_LE_Set_Extended_Advertising_Data and HCI_LE_Set_Extended_Scan_Response_Data (`Row` says
/// which): Advertising_Handle, Operation, Fragment_Preference, the data's length (1 octet) and at
/// most 251 octets of data (Core 5.4 Vol 4 Part E §7.8.54, §7.8.55).
public struct LESetExtendedData<Row: DataCommandRow>: HCICommand, Hashable {
    public static var spec: HCICommandSpec { Row.spec }
    public static var maximumLength: Int { 251 }
    public let advertisingHandle: UInt8
    public let operation: AdvertisingDataOperation
    /// Fragment_Preference 0x01: the host asks the controller not to fragment, or to fragment
    /// as little as possible (0x00: the controller may fragment all data).
    public let avoidFragmentation: Bool
    public let data: [UInt8]

    /// Throws if `data` exceeds 251 octets (one command's worth) or the handle exceeds 0xEF.
    public init(
        advertisingHandle: UInt8, operation: AdvertisingDataOperation = .complete, avoidFragmentation: Bool = true,
        data: [UInt8]
    ) throws(ParameterError) {
        try validateAdvertisingHandle(advertisingHandle)
        guard data.count <= Self.maximumLength else {
            throw .tooLong(
                what: Row.dataName, count: data.count, maximum: Self.maximumLength, reference: Row.reference)
        }
        self.advertisingHandle = advertisingHandle
        self.operation = operation
        self.avoidFragmentation = avoidFragmentation
        self.data = data
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(advertisingHandle)
        w.uint8(operation.rawValue)
        w.uint8(avoidFragmentation ? 0x01 : 0x00)
        w.uint8(UInt8(data.count))  // ≤ 251, checked in init
        w.append(data)
    }
}

/// HCI_LE_Set_Extended_Advertising_Data. Core 5.4 Vol 4 Part E §7.8.54.
public typealias LESetExtendedAdvertisingData = LESetExtendedData<LESetExtendedAdvertisingDataRow>

public enum LESetExtendedAdvertisingDataRow: DataCommandRow {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0037, "LE Set Extended Advertising Data", supportedCommandsBit: (36, 3))
    public static let dataName = "extended advertising data fragment"
    public static let reference = "Core 5.4 Vol 4 Part E §7.8.54"
}

/// HCI_LE_Set_Extended_Scan_Response_Data. Core 5.4 Vol 4 Part E §7.8.55.
public typealias LESetExtendedScanResponseData = LESetExtendedData<LESetExtendedScanResponseDataRow>

public enum LESetExtendedScanResponseDataRow: DataCommandRow {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0038, "LE Set Extended Scan Response Data", supportedCommandsBit: (36, 4))
    public static let dataName = "extended scan response data fragment"
    public static let reference = "Core 5.4 Vol 4 Part E §7.8.55"
}

/// HCI_LE_Set_Extended_Advertising_Enable. Core 5.4 Vol 4 Part E §7.8.56: Enable, Num_Sets,
/// then for each set Advertising_Handle (1), Duration (2), Max_Extended_Advertising_Events (1).
public struct LESetExtendedAdvertisingEnable: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0039, "LE Set Extended Advertising Enable", supportedCommandsBit: (36, 5))

    public struct AdvertisingSet: Hashable, Sendable {
        /// Advertising_Handle[i], 0x00…0xEF.
        public let handle: UInt8
        /// Duration[i] in units of 10 ms; 0 advertises until disabled.
        public let duration: UInt16
        /// Max_Extended_Advertising_Events[i]; 0 means no maximum.
        public let maxExtendedEvents: UInt8

        public init(handle: UInt8, duration: UInt16 = 0, maxExtendedEvents: UInt8 = 0) throws(ParameterError) {
            try validateAdvertisingHandle(handle)
            self.handle = handle
            self.duration = duration
            self.maxExtendedEvents = maxExtendedEvents
        }
    }

    public let enable: Bool
    public let sets: [AdvertisingSet]

    /// Num_Sets is 0x01…0x3F when enabling; disabling with no sets disables every set.
    public init(enable: Bool, sets: [AdvertisingSet]) throws(ParameterError) {
        let reference = "Core 5.4 Vol 4 Part E §7.8.56"
        guard sets.count <= 0x3F else {
            throw .tooLong(what: "advertising set list", count: sets.count, maximum: 0x3F, reference: reference)
        }
        // §7.8.56: enabling with Num_Sets 0 is answered with Invalid HCI Command Parameters (0x12).
        guard !(enable && sets.isEmpty) else {
            throw .inconsistent(
                what: "LE Set Extended Advertising Enable", reason: "enabling needs at least one advertising set",
                reference: reference)
        }
        self.enable = enable
        self.sets = sets
    }

    public func encodeParameters(into w: inout ByteWriter) {
        w.uint8(enable ? 0x01 : 0x00)
        w.uint8(UInt8(sets.count))  // ≤ 0x3F, checked in init
        for set in sets {
            w.uint8(set.handle)
            w.uint16LE(set.duration)
            w.uint8(set.maxExtendedEvents)
        }
    }
}

/// HCI_LE_Read_Maximum_Advertising_Data_Length. Core 5.4 Vol 4 Part E §7.8.57.
/// Returns Max_Advertising_Data_Length, 2 octets (0x001F…0x0672).
public struct LEReadMaximumAdvertisingDataLength: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x003A, "LE Read Maximum Advertising Data Length", supportedCommandsBit: (36, 6))
    public typealias ReturnParameters = UInt16
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

/// HCI_LE_Read_Number_of_Supported_Advertising_Sets. Core 5.4 Vol 4 Part E §7.8.58.
/// Returns Num_Supported_Advertising_Sets, 1 octet.
public struct LEReadNumberOfSupportedAdvertisingSets: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x003B, "LE Read Number of Supported Advertising Sets", supportedCommandsBit: (36, 7))
    public typealias ReturnParameters = UInt8
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

/// HCI_LE_Remove_Advertising_Set. Core 5.4 Vol 4 Part E §7.8.59.
public struct LERemoveAdvertisingSet: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x003C, "LE Remove Advertising Set", supportedCommandsBit: (37, 0))
    /// Advertising_Handle, 1 octet.
    public let advertisingHandle: UInt8

    public init(advertisingHandle: UInt8) throws(ParameterError) {
        try validateAdvertisingHandle(advertisingHandle)
        self.advertisingHandle = advertisingHandle
    }

    public func encodeParameters(into writer: inout ByteWriter) { writer.uint8(advertisingHandle) }
}

/// HCI_LE_Clear_Advertising_Sets. Core 5.4 Vol 4 Part E §7.8.60.
public struct LEClearAdvertisingSets: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x003D, "LE Clear Advertising Sets", supportedCommandsBit: (37, 1))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}
