// Open value sets shared by several commands and events.

/// An HCI event code. Core 5.4 Vol 4 Part E §7.7. Open: unknown codes survive decoding.
public struct HCIEventCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// §7.7.5
    public static let disconnectionComplete = HCIEventCode(rawValue: 0x05)
    /// §7.7.8
    public static let encryptionChange = HCIEventCode(rawValue: 0x08)
    /// §7.7.12
    public static let readRemoteVersionInformationComplete = HCIEventCode(rawValue: 0x0C)
    /// §7.7.14
    public static let commandComplete = HCIEventCode(rawValue: 0x0E)
    /// §7.7.15
    public static let commandStatus = HCIEventCode(rawValue: 0x0F)
    /// §7.7.16
    public static let hardwareError = HCIEventCode(rawValue: 0x10)
    /// §7.7.19
    public static let numberOfCompletedPackets = HCIEventCode(rawValue: 0x13)
    /// §7.7.26
    public static let dataBufferOverflow = HCIEventCode(rawValue: 0x1A)
    /// §7.7.65
    public static let leMeta = HCIEventCode(rawValue: 0x3E)
    /// Not in the Core specification: BlueZ's "Stack Internal" event (`EVT_STACK_INTERNAL`,
    /// lib/hci.h), which the Linux kernel delivers on raw HCI sockets, e.g. device up/down.
    public static let stackInternal = HCIEventCode(rawValue: 0xFD)
    /// §5.4.4: event code 0xFF is reserved for vendor-specific debugging events.
    public static let vendorSpecific = HCIEventCode(rawValue: 0xFF)

    public var name: String? {
        switch self {
        case .disconnectionComplete: "Disconnection Complete"
        case .encryptionChange: "Encryption Change"
        case .readRemoteVersionInformationComplete: "Read Remote Version Information Complete"
        case .commandComplete: "Command Complete"
        case .commandStatus: "Command Status"
        case .hardwareError: "Hardware Error"
        case .numberOfCompletedPackets: "Number Of Completed Packets"
        case .dataBufferOverflow: "Data Buffer Overflow"
        case .leMeta: "LE Meta"
        case .stackInternal: "Stack Internal (BlueZ)"
        case .vendorSpecific: "Vendor Specific"
        default: nil
        }
    }

    /// `Command Complete (0x0E)`, or `unknown event (0x99)`.
    public var description: String { "\(name ?? "unknown event") (0x\([rawValue].hexString.uppercased()))" }
}

/// The subevent code of an LE Meta event. Core 5.4 Vol 4 Part E §7.7.65.
public struct LEMetaSubevent: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// §7.7.65.1
    public static let connectionComplete = LEMetaSubevent(rawValue: 0x01)
    /// §7.7.65.2
    public static let advertisingReport = LEMetaSubevent(rawValue: 0x02)
    /// §7.7.65.3
    public static let connectionUpdateComplete = LEMetaSubevent(rawValue: 0x03)
    /// §7.7.65.10
    public static let enhancedConnectionComplete = LEMetaSubevent(rawValue: 0x0A)
    /// §7.7.65.11
    public static let directedAdvertisingReport = LEMetaSubevent(rawValue: 0x0B)
    /// §7.7.65.13
    public static let extendedAdvertisingReport = LEMetaSubevent(rawValue: 0x0D)
    /// §7.7.65.17
    public static let scanTimeout = LEMetaSubevent(rawValue: 0x11)
    /// §7.7.65.18
    public static let advertisingSetTerminated = LEMetaSubevent(rawValue: 0x12)
    /// §7.7.65.19
    public static let scanRequestReceived = LEMetaSubevent(rawValue: 0x13)
    /// §7.7.65.20
    public static let channelSelectionAlgorithm = LEMetaSubevent(rawValue: 0x14)

    public var name: String? {
        switch self {
        case .connectionComplete: "LE Connection Complete"
        case .advertisingReport: "LE Advertising Report"
        case .connectionUpdateComplete: "LE Connection Update Complete"
        case .enhancedConnectionComplete: "LE Enhanced Connection Complete"
        case .directedAdvertisingReport: "LE Directed Advertising Report"
        case .extendedAdvertisingReport: "LE Extended Advertising Report"
        case .scanTimeout: "LE Scan Timeout"
        case .advertisingSetTerminated: "LE Advertising Set Terminated"
        case .scanRequestReceived: "LE Scan Request Received"
        case .channelSelectionAlgorithm: "LE Channel Selection Algorithm"
        default: nil
        }
    }

    /// `LE Advertising Report (0x02)`, or `unknown LE subevent (0x30)`.
    public var description: String { "\(name ?? "unknown LE subevent") (0x\([rawValue].hexString.uppercased()))" }
}

/// Own_Address_Type of the advertising and scanning commands. Core 5.4 Vol 4 Part E §7.8.5.
public struct OwnAddressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// The controller's public device address.
    public static let `public` = OwnAddressType(rawValue: 0x00)
    /// The random address set with LE Set Random Address (or per set, §7.8.52).
    public static let random = OwnAddressType(rawValue: 0x01)
    /// A resolvable private address from the resolving list, else the public address.
    public static let resolvableOrPublic = OwnAddressType(rawValue: 0x02)
    /// A resolvable private address from the resolving list, else the random address.
    public static let resolvableOrRandom = OwnAddressType(rawValue: 0x03)

    public var description: String {
        switch self {
        case .public: "public"
        case .random: "random"
        case .resolvableOrPublic: "resolvable or public"
        case .resolvableOrRandom: "resolvable or random"
        default: "unknown own address type (0x\([rawValue].hexString.uppercased()))"
        }
    }
}

/// The type of a peer's address (Peer_Address_Type, Address_Type in advertising reports).
/// Core 5.4 Vol 4 Part E §7.7.65.2, §7.7.65.13.
public struct LEAddressType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let `public` = LEAddressType(rawValue: 0x00)
    public static let random = LEAddressType(rawValue: 0x01)
    /// A public identity address resolved by the controller.
    public static let publicIdentity = LEAddressType(rawValue: 0x02)
    /// A random (static) identity address resolved by the controller.
    public static let randomIdentity = LEAddressType(rawValue: 0x03)
    /// No address provided (anonymous advertisement), extended reports only.
    public static let anonymous = LEAddressType(rawValue: 0xFF)

    public var description: String {
        switch self {
        case .public: "public"
        case .random: "random"
        case .publicIdentity: "public identity"
        case .randomIdentity: "random identity"
        case .anonymous: "anonymous"
        default: "unknown address type (0x\([rawValue].hexString.uppercased()))"
        }
    }
}

/// Advertising_Channel_Map: which of the primary advertising channels 37, 38, 39 are used.
/// Core 5.4 Vol 4 Part E §7.8.5.
public struct AdvertisingChannelMap: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let channel37 = AdvertisingChannelMap(rawValue: 1 << 0)
    public static let channel38 = AdvertisingChannelMap(rawValue: 1 << 1)
    public static let channel39 = AdvertisingChannelMap(rawValue: 1 << 2)
    /// 0x07, the spec's default.
    public static let all: AdvertisingChannelMap = [.channel37, .channel38, .channel39]
}

/// Advertising_Filter_Policy. Core 5.4 Vol 4 Part E §7.8.5.
public struct AdvertisingFilterPolicy: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Process scan and connection requests from all devices (the default).
    public static let acceptAll = AdvertisingFilterPolicy(rawValue: 0x00)
    public static let filterScanRequests = AdvertisingFilterPolicy(rawValue: 0x01)
    public static let filterConnectionRequests = AdvertisingFilterPolicy(rawValue: 0x02)
    public static let filterBoth = AdvertisingFilterPolicy(rawValue: 0x03)
}

/// A PHY as named in advertising commands and reports (Primary_Advertising_PHY,
/// Secondary_PHY …). Core 5.4 Vol 4 Part E §7.8.53, §7.7.65.13.
public struct LEPHY: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// Secondary_PHY only: "No packets on the secondary advertising physical channel".
    public static let none = LEPHY(rawValue: 0x00)
    public static let le1M = LEPHY(rawValue: 0x01)
    public static let le2M = LEPHY(rawValue: 0x02)
    public static let leCoded = LEPHY(rawValue: 0x03)

    public var description: String {
        switch self {
        case .none: "none"
        case .le1M: "LE 1M"
        case .le2M: "LE 2M"
        case .leCoded: "LE Coded"
        default: "unknown PHY (0x\([rawValue].hexString.uppercased()))"
        }
    }
}

/// The events the controller may send, for Set Event Mask. Core 5.4 Vol 4 Part E §7.3.1.
public struct EventMask: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let disconnectionComplete = EventMask(rawValue: 1 << 4)
    public static let encryptionChange = EventMask(rawValue: 1 << 7)
    public static let hardwareError = EventMask(rawValue: 1 << 15)
    public static let dataBufferOverflow = EventMask(rawValue: 1 << 25)
    /// Bit 61: without it no LE Meta event (advertising reports, set terminated …) arrives.
    public static let leMeta = EventMask(rawValue: 1 << 61)

    /// 0x00001FFFFFFFFFFF, the value after Reset (§7.3.1). It does not include `.leMeta`.
    public static let defaultAfterReset = EventMask(rawValue: 0x0000_1FFF_FFFF_FFFF)
}

/// The LE Meta subevents the controller may send, for LE Set Event Mask.
/// Core 5.4 Vol 4 Part E §7.8.1. Bit n enables subevent n + 1.
public struct LEEventMask: OptionSet, Hashable, Sendable {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let connectionComplete = LEEventMask(rawValue: 1 << 0)
    public static let advertisingReport = LEEventMask(rawValue: 1 << 1)
    public static let connectionUpdateComplete = LEEventMask(rawValue: 1 << 2)
    public static let enhancedConnectionComplete = LEEventMask(rawValue: 1 << 9)
    public static let directedAdvertisingReport = LEEventMask(rawValue: 1 << 10)
    /// Bit 12, 0x0000000000001000: not in the default mask.
    public static let extendedAdvertisingReport = LEEventMask(rawValue: 1 << 12)
    public static let scanTimeout = LEEventMask(rawValue: 1 << 16)
    /// Bit 17, 0x0000000000020000.
    public static let advertisingSetTerminated = LEEventMask(rawValue: 1 << 17)
    public static let scanRequestReceived = LEEventMask(rawValue: 1 << 18)

    /// 0x000000000000001F, the value after Reset (§7.8.1).
    public static let defaultAfterReset = LEEventMask(rawValue: 0x1F)
}

/// The LE features a controller supports (LE_Features of LE Read Local Supported Features).
/// Core 5.4 Vol 6 Part B §4.6 gives the bit numbers.
public struct LEFeatures: OptionSet, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64
    public init(rawValue: UInt64) { self.rawValue = rawValue }

    public static let encryption = LEFeatures(rawValue: 1 << 0)
    public static let connectionParametersRequestProcedure = LEFeatures(rawValue: 1 << 1)
    public static let extendedRejectIndication = LEFeatures(rawValue: 1 << 2)
    public static let peripheralInitiatedFeaturesExchange = LEFeatures(rawValue: 1 << 3)
    public static let ping = LEFeatures(rawValue: 1 << 4)
    public static let dataPacketLengthExtension = LEFeatures(rawValue: 1 << 5)
    public static let llPrivacy = LEFeatures(rawValue: 1 << 6)
    public static let extendedScannerFilterPolicies = LEFeatures(rawValue: 1 << 7)
    public static let le2MPHY = LEFeatures(rawValue: 1 << 8)
    public static let stableModulationIndexTransmitter = LEFeatures(rawValue: 1 << 9)
    public static let stableModulationIndexReceiver = LEFeatures(rawValue: 1 << 10)
    public static let leCodedPHY = LEFeatures(rawValue: 1 << 11)
    /// Bit 12: the controller has the extended advertising commands (0x2036…).
    public static let extendedAdvertising = LEFeatures(rawValue: 1 << 12)
    public static let periodicAdvertising = LEFeatures(rawValue: 1 << 13)
    public static let channelSelectionAlgorithm2 = LEFeatures(rawValue: 1 << 14)
    public static let powerClass1 = LEFeatures(rawValue: 1 << 15)
    public static let minimumNumberOfUsedChannelsProcedure = LEFeatures(rawValue: 1 << 16)
    public static let powerControlRequest = LEFeatures(rawValue: 1 << 33)
    public static let pathLossMonitoring = LEFeatures(rawValue: 1 << 35)

    private static let bitNames: [Int: String] = [
        0: "LE Encryption",
        1: "Connection Parameters Request Procedure",
        2: "Extended Reject Indication",
        3: "Peripheral-initiated Features Exchange",
        4: "LE Ping",
        5: "LE Data Packet Length Extension",
        6: "LL Privacy",
        7: "Extended Scanner Filter Policies",
        8: "LE 2M PHY",
        9: "Stable Modulation Index - Transmitter",
        10: "Stable Modulation Index - Receiver",
        11: "LE Coded PHY",
        12: "LE Extended Advertising",
        13: "LE Periodic Advertising",
        14: "Channel Selection Algorithm #2",
        15: "LE Power Class 1",
        16: "Minimum Number of Used Channels Procedure",
        17: "Connection CTE Request",
        18: "Connection CTE Response",
        19: "Connectionless CTE Transmitter",
        20: "Connectionless CTE Receiver",
        21: "Antenna Switching During CTE Transmission (AoD)",
        22: "Antenna Switching During CTE Reception (AoA)",
        23: "Receiving Constant Tone Extensions",
        24: "Periodic Advertising Sync Transfer - Sender",
        25: "Periodic Advertising Sync Transfer - Recipient",
        26: "Sleep Clock Accuracy Updates",
        27: "Remote Public Key Validation",
        28: "Connected Isochronous Stream - Central",
        29: "Connected Isochronous Stream - Peripheral",
        30: "Isochronous Broadcaster",
        31: "Synchronized Receiver",
        32: "Connected Isochronous Stream (Host Support)",
        33: "LE Power Control Request",
        34: "LE Power Control Request",
        35: "LE Path Loss Monitoring",
        36: "Periodic Advertising ADI support",
        37: "Connection Subrating",
        38: "Connection Subrating (Host Support)",
        39: "Channel Classification",
        40: "Advertising Coding Selection",
        41: "Advertising Coding Selection (Host Support)",
        43: "Periodic Advertising with Responses - Advertiser",
        44: "Periodic Advertising with Responses - Scanner",
    ]

    /// The names of the set bits, lowest bit first; bits without a name print as `bit 50`.
    public var names: [String] {
        (0..<64).compactMap { bit -> String? in
            guard rawValue & (1 << UInt64(bit)) != 0 else { return nil }
            return Self.bitNames[bit] ?? "bit \(bit)"
        }
    }

    public var description: String { names.isEmpty ? "none" : names.joined(separator: ", ") }
}
