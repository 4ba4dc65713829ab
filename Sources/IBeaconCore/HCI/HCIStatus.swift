/// An HCI status / error code, as carried in Command Complete, Command Status and other events.
/// Core 5.4 Vol 1 Part F §1.3 ("List of error codes"). An open value set: codes the table
/// below does not know survive decoding and print as `unknown status (0x7F)`.
public struct HCIStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public var isSuccess: Bool { rawValue == 0x00 }

    /// The name Core 5.4 Vol 1 Part F §1.3 gives the code, or nil above 0x45.
    /// The table's gaps (0x2B, 0x31, 0x33) and the retired 0x3F are named as the table names them.
    public var name: String? { Self.row(rawValue)?.name }

    /// `Command Disallowed (0x0C)`, or `unknown status (0x7F)`.
    public var description: String {
        "\(name ?? "unknown status") (0x\([rawValue].hexString.uppercased()))"
    }

    /// What the status usually means for a tool that only advertises and scans, when that
    /// helps a user more than the spec's name does; nil otherwise.
    public var hint: String? { Self.row(rawValue)?.hint }
}

// Named codes: only those the code base refers to; every other code is in the table alone.
extension HCIStatus {
    public static let success = HCIStatus(rawValue: 0x00)
    public static let unknownHCICommand = HCIStatus(rawValue: 0x01)
    public static let hardwareFailure = HCIStatus(rawValue: 0x03)
    public static let memoryCapacityExceeded = HCIStatus(rawValue: 0x07)
    public static let commandDisallowed = HCIStatus(rawValue: 0x0C)
    public static let unsupportedFeatureOrParameterValue = HCIStatus(rawValue: 0x11)
    public static let invalidHCICommandParameters = HCIStatus(rawValue: 0x12)
    public static let unspecifiedError = HCIStatus(rawValue: 0x1F)
    public static let controllerBusy = HCIStatus(rawValue: 0x3A)
    public static let advertisingTimeout = HCIStatus(rawValue: 0x3C)
    public static let unknownAdvertisingIdentifier = HCIStatus(rawValue: 0x42)
    public static let limitReached = HCIStatus(rawValue: 0x43)
    public static let packetTooLong = HCIStatus(rawValue: 0x45)
}

extension HCIStatus {
    /// One row of the table: a code, its name in the specification, a hint for users.
    struct Row: Sendable {
        var code: UInt8
        var name: String
        var hint: String?
        init(_ code: UInt8, _ name: String, hint: String? = nil) {
            self.code = code
            self.name = name
            self.hint = hint
        }
    }

    static func row(_ code: UInt8) -> Row? { Int(code) < table.count ? table[Int(code)] : nil }

    /// One row per code of Core 5.4 Vol 1 Part F §1.3, in code order (index = code; a test checks).
    static let table: [Row] = [
        Row(0x00, "Success"),
        Row(
            0x01, "Unknown HCI Command",
            hint: "the controller does not support this command"),
        Row(0x02, "Unknown Connection Identifier"),
        Row(0x03, "Hardware Failure"),
        Row(0x04, "Page Timeout"),
        Row(0x05, "Authentication Failure"),
        Row(0x06, "PIN or Key Missing"),
        Row(
            0x07, "Memory Capacity Exceeded",
            hint:
                "the controller has no memory left for this, e.g. too many advertising sets or too much advertising data"
        ),
        Row(0x08, "Connection Timeout"),
        Row(0x09, "Connection Limit Exceeded"),
        Row(0x0A, "Synchronous Connection Limit To A Device Exceeded"),
        Row(0x0B, "Connection Already Exists"),
        Row(
            0x0C, "Command Disallowed",
            hint: "the controller is busy with an operation that conflicts, e.g. legacy and extended advertising "
                + "commands mixed, or parameters changed while advertising is enabled"),
        Row(0x0D, "Connection Rejected due to Limited Resources"),
        Row(0x0E, "Connection Rejected Due To Security Reasons"),
        Row(0x0F, "Connection Rejected due to Unacceptable BD_ADDR"),
        Row(0x10, "Connection Accept Timeout Exceeded"),
        Row(
            0x11, "Unsupported Feature or Parameter Value",
            hint:
                "the controller does not support this feature or one of the parameter values, e.g. a PHY or TX power it lacks"
        ),
        Row(
            0x12, "Invalid HCI Command Parameters",
            hint: "a parameter is out of the range this controller accepts"),
        Row(0x13, "Remote User Terminated Connection"),
        Row(0x14, "Remote Device Terminated Connection due to Low Resources"),
        Row(0x15, "Remote Device Terminated Connection due to Power Off"),
        Row(0x16, "Connection Terminated By Local Host"),
        Row(0x17, "Repeated Attempts"),
        Row(0x18, "Pairing Not Allowed"),
        Row(0x19, "Unknown LMP PDU"),
        Row(0x1A, "Unsupported Remote Feature"),
        Row(0x1B, "SCO Offset Rejected"),
        Row(0x1C, "SCO Interval Rejected"),
        Row(0x1D, "SCO Air Mode Rejected"),
        Row(0x1E, "Invalid LMP Parameters / Invalid LL Parameters"),
        Row(0x1F, "Unspecified Error"),
        Row(0x20, "Unsupported LMP Parameter Value / Unsupported LL Parameter Value"),
        Row(0x21, "Role Change Not Allowed"),
        Row(0x22, "LMP Response Timeout / LL Response Timeout"),
        Row(0x23, "LMP Error Transaction Collision / LL Procedure Collision"),
        Row(0x24, "LMP PDU Not Allowed"),
        Row(0x25, "Encryption Mode Not Acceptable"),
        Row(0x26, "Link Key cannot be Changed"),
        Row(0x27, "Requested QoS Not Supported"),
        Row(0x28, "Instant Passed"),
        Row(0x29, "Pairing With Unit Key Not Supported"),
        Row(0x2A, "Different Transaction Collision"),
        Row(0x2B, "Reserved for future use"),
        Row(0x2C, "QoS Unacceptable Parameter"),
        Row(0x2D, "QoS Rejected"),
        Row(0x2E, "Channel Classification Not Supported"),
        Row(0x2F, "Insufficient Security"),
        Row(0x30, "Parameter Out Of Mandatory Range"),
        Row(0x31, "Reserved for future use"),
        Row(0x32, "Role Switch Pending"),
        Row(0x33, "Reserved for future use"),
        Row(0x34, "Reserved Slot Violation"),
        Row(0x35, "Role Switch Failed"),
        Row(0x36, "Extended Inquiry Response Too Large"),
        Row(0x37, "Secure Simple Pairing Not Supported By Host"),
        Row(0x38, "Host Busy - Pairing"),
        Row(0x39, "Connection Rejected due to No Suitable Channel Found"),
        Row(0x3A, "Controller Busy"),
        Row(0x3B, "Unacceptable Connection Parameters"),
        Row(0x3C, "Advertising Timeout"),
        Row(0x3D, "Connection Terminated due to MIC Failure"),
        Row(0x3E, "Connection Failed to be Established / Synchronization Timeout"),
        Row(0x3F, "Previously used (MAC Connection Failed)"),
        Row(0x40, "Coarse Clock Adjustment Rejected but Will Try to Adjust Using Clock Dragging"),
        Row(0x41, "Type0 Submap Not Defined"),
        Row(0x42, "Unknown Advertising Identifier"),
        Row(0x43, "Limit Reached"),
        Row(0x44, "Operation Cancelled by Host"),
        Row(0x45, "Packet Too Long"),
    ]
}
