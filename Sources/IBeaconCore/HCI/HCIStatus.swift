/// An HCI status / error code, as carried in Command Complete, Command Status and other events.
/// Core 5.4 Vol 1 Part F §1.3 ("List of error codes"). An open value set: codes this table
/// does not know survive decoding and print as `unknown status (0x7F)`.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public var isSuccess: Bool { rawValue == 0x00 }

    public static let success = HCIStatus(rawValue: 0x00)
    public static let unknownHCICommand = HCIStatus(rawValue: 0x01)
    public static let unknownConnectionIdentifier = HCIStatus(rawValue: 0x02)
    public static let hardwareFailure = HCIStatus(rawValue: 0x03)
    public static let pageTimeout = HCIStatus(rawValue: 0x04)
    public static let authenticationFailure = HCIStatus(rawValue: 0x05)
    public static let pinOrKeyMissing = HCIStatus(rawValue: 0x06)
    public static let memoryCapacityExceeded = HCIStatus(rawValue: 0x07)
    public static let connectionTimeout = HCIStatus(rawValue: 0x08)
    public static let connectionLimitExceeded = HCIStatus(rawValue: 0x09)
    public static let synchronousConnectionLimitExceeded = HCIStatus(rawValue: 0x0A)
    public static let connectionAlreadyExists = HCIStatus(rawValue: 0x0B)
    public static let commandDisallowed = HCIStatus(rawValue: 0x0C)
    public static let connectionRejectedLimitedResources = HCIStatus(rawValue: 0x0D)
    public static let connectionRejectedSecurityReasons = HCIStatus(rawValue: 0x0E)
    public static let connectionRejectedUnacceptableBDAddr = HCIStatus(rawValue: 0x0F)
    public static let connectionAcceptTimeoutExceeded = HCIStatus(rawValue: 0x10)
    public static let unsupportedFeatureOrParameterValue = HCIStatus(rawValue: 0x11)
    public static let invalidHCICommandParameters = HCIStatus(rawValue: 0x12)
    public static let remoteUserTerminatedConnection = HCIStatus(rawValue: 0x13)
    public static let remoteDeviceTerminatedLowResources = HCIStatus(rawValue: 0x14)
    public static let remoteDeviceTerminatedPowerOff = HCIStatus(rawValue: 0x15)
    public static let connectionTerminatedByLocalHost = HCIStatus(rawValue: 0x16)
    public static let repeatedAttempts = HCIStatus(rawValue: 0x17)
    public static let pairingNotAllowed = HCIStatus(rawValue: 0x18)
    public static let unknownLMPPDU = HCIStatus(rawValue: 0x19)
    public static let unsupportedRemoteFeature = HCIStatus(rawValue: 0x1A)
    public static let scoOffsetRejected = HCIStatus(rawValue: 0x1B)
    public static let scoIntervalRejected = HCIStatus(rawValue: 0x1C)
    public static let scoAirModeRejected = HCIStatus(rawValue: 0x1D)
    public static let invalidLLParameters = HCIStatus(rawValue: 0x1E)
    public static let unspecifiedError = HCIStatus(rawValue: 0x1F)
    public static let unsupportedLLParameterValue = HCIStatus(rawValue: 0x20)
    public static let roleChangeNotAllowed = HCIStatus(rawValue: 0x21)
    public static let llResponseTimeout = HCIStatus(rawValue: 0x22)
    public static let llProcedureCollision = HCIStatus(rawValue: 0x23)
    public static let lmpPDUNotAllowed = HCIStatus(rawValue: 0x24)
    public static let encryptionModeNotAcceptable = HCIStatus(rawValue: 0x25)
    public static let linkKeyCannotBeChanged = HCIStatus(rawValue: 0x26)
    public static let requestedQoSNotSupported = HCIStatus(rawValue: 0x27)
    public static let instantPassed = HCIStatus(rawValue: 0x28)
    public static let pairingWithUnitKeyNotSupported = HCIStatus(rawValue: 0x29)
    public static let differentTransactionCollision = HCIStatus(rawValue: 0x2A)
    public static let qosUnacceptableParameter = HCIStatus(rawValue: 0x2C)
    public static let qosRejected = HCIStatus(rawValue: 0x2D)
    public static let channelClassificationNotSupported = HCIStatus(rawValue: 0x2E)
    public static let insufficientSecurity = HCIStatus(rawValue: 0x2F)
    public static let parameterOutOfMandatoryRange = HCIStatus(rawValue: 0x30)
    public static let roleSwitchPending = HCIStatus(rawValue: 0x32)
    public static let reservedSlotViolation = HCIStatus(rawValue: 0x34)
    public static let roleSwitchFailed = HCIStatus(rawValue: 0x35)
    public static let extendedInquiryResponseTooLarge = HCIStatus(rawValue: 0x36)
    public static let secureSimplePairingNotSupportedByHost = HCIStatus(rawValue: 0x37)
    public static let hostBusyPairing = HCIStatus(rawValue: 0x38)
    public static let connectionRejectedNoSuitableChannel = HCIStatus(rawValue: 0x39)
    public static let controllerBusy = HCIStatus(rawValue: 0x3A)
    public static let unacceptableConnectionParameters = HCIStatus(rawValue: 0x3B)
    public static let advertisingTimeout = HCIStatus(rawValue: 0x3C)
    public static let connectionTerminatedMICFailure = HCIStatus(rawValue: 0x3D)
    public static let connectionFailedToBeEstablished = HCIStatus(rawValue: 0x3E)
    public static let coarseClockAdjustmentRejected = HCIStatus(rawValue: 0x40)
    public static let type0SubmapNotDefined = HCIStatus(rawValue: 0x41)
    public static let unknownAdvertisingIdentifier = HCIStatus(rawValue: 0x42)
    public static let limitReached = HCIStatus(rawValue: 0x43)
    public static let operationCancelledByHost = HCIStatus(rawValue: 0x44)
    public static let packetTooLong = HCIStatus(rawValue: 0x45)

    /// The name Core 5.4 Vol 1 Part F §1.3 gives the code, or nil above 0x45.
    /// The table's gaps (0x2B, 0x31, 0x33) and the retired 0x3F are named as the table names them.
    public var name: String? {
        let index = Int(rawValue)
        return index < Self.names.count ? Self.names[index] : nil
    }

    /// `Command Disallowed (0x0C)`, or `unknown status (0x7F)`.
    public var description: String {
        "\(name ?? "unknown status") (0x\([rawValue].hexString.uppercased()))"
    }

    /// What the status usually means for a tool that only advertises and scans, when that
    /// helps a user more than the spec's name does; nil otherwise.
    public var hint: String? {
        switch self {
        case .unknownHCICommand:
            "the controller does not support this command"
        case .memoryCapacityExceeded:
            "the controller has no memory left for this, e.g. too many advertising sets or too much advertising data"
        case .commandDisallowed:
            "the controller is busy with an operation that conflicts, e.g. legacy and extended advertising "
                + "commands mixed, or parameters changed while advertising is enabled"
        case .unsupportedFeatureOrParameterValue:
            "the controller does not support this feature or one of the parameter values, e.g. a PHY or TX power it lacks"
        case .invalidHCICommandParameters:
            "a parameter is out of the range this controller accepts"
        default:
            nil
        }
    }

    // Indexed by code, 0x00…0x45.
    private static let names: [String] = [
        "Success",  // 0x00
        "Unknown HCI Command",  // 0x01
        "Unknown Connection Identifier",  // 0x02
        "Hardware Failure",  // 0x03
        "Page Timeout",  // 0x04
        "Authentication Failure",  // 0x05
        "PIN or Key Missing",  // 0x06
        "Memory Capacity Exceeded",  // 0x07
        "Connection Timeout",  // 0x08
        "Connection Limit Exceeded",  // 0x09
        "Synchronous Connection Limit To A Device Exceeded",  // 0x0A
        "Connection Already Exists",  // 0x0B
        "Command Disallowed",  // 0x0C
        "Connection Rejected due to Limited Resources",  // 0x0D
        "Connection Rejected Due To Security Reasons",  // 0x0E
        "Connection Rejected due to Unacceptable BD_ADDR",  // 0x0F
        "Connection Accept Timeout Exceeded",  // 0x10
        "Unsupported Feature or Parameter Value",  // 0x11
        "Invalid HCI Command Parameters",  // 0x12
        "Remote User Terminated Connection",  // 0x13
        "Remote Device Terminated Connection due to Low Resources",  // 0x14
        "Remote Device Terminated Connection due to Power Off",  // 0x15
        "Connection Terminated By Local Host",  // 0x16
        "Repeated Attempts",  // 0x17
        "Pairing Not Allowed",  // 0x18
        "Unknown LMP PDU",  // 0x19
        "Unsupported Remote Feature",  // 0x1A
        "SCO Offset Rejected",  // 0x1B
        "SCO Interval Rejected",  // 0x1C
        "SCO Air Mode Rejected",  // 0x1D
        "Invalid LMP Parameters / Invalid LL Parameters",  // 0x1E
        "Unspecified Error",  // 0x1F
        "Unsupported LMP Parameter Value / Unsupported LL Parameter Value",  // 0x20
        "Role Change Not Allowed",  // 0x21
        "LMP Response Timeout / LL Response Timeout",  // 0x22
        "LMP Error Transaction Collision / LL Procedure Collision",  // 0x23
        "LMP PDU Not Allowed",  // 0x24
        "Encryption Mode Not Acceptable",  // 0x25
        "Link Key cannot be Changed",  // 0x26
        "Requested QoS Not Supported",  // 0x27
        "Instant Passed",  // 0x28
        "Pairing With Unit Key Not Supported",  // 0x29
        "Different Transaction Collision",  // 0x2A
        "Reserved for future use",  // 0x2B
        "QoS Unacceptable Parameter",  // 0x2C
        "QoS Rejected",  // 0x2D
        "Channel Classification Not Supported",  // 0x2E
        "Insufficient Security",  // 0x2F
        "Parameter Out Of Mandatory Range",  // 0x30
        "Reserved for future use",  // 0x31
        "Role Switch Pending",  // 0x32
        "Reserved for future use",  // 0x33
        "Reserved Slot Violation",  // 0x34
        "Role Switch Failed",  // 0x35
        "Extended Inquiry Response Too Large",  // 0x36
        "Secure Simple Pairing Not Supported By Host",  // 0x37
        "Host Busy - Pairing",  // 0x38
        "Connection Rejected due to No Suitable Channel Found",  // 0x39
        "Controller Busy",  // 0x3A
        "Unacceptable Connection Parameters",  // 0x3B
        "Advertising Timeout",  // 0x3C
        "Connection Terminated due to MIC Failure",  // 0x3D
        "Connection Failed to be Established / Synchronization Timeout",  // 0x3E
        "Previously used (MAC Connection Failed)",  // 0x3F
        "Coarse Clock Adjustment Rejected but Will Try to Adjust Using Clock Dragging",  // 0x40
        "Type0 Submap Not Defined",  // 0x41
        "Unknown Advertising Identifier",  // 0x42
        "Limit Reached",  // 0x43
        "Operation Cancelled by Host",  // 0x44
        "Packet Too Long",  // 0x45
    ]
}
