/// The kernel's Bluetooth management interface (BlueZ doc/mgmt-api.txt): packets exchanged on an
/// HCI socket bound to `HCI_CHANNEL_CONTROL`. Unlike H4 there is no type byte: every packet is a
/// 6-byte header (opcode or event code, controller index, parameter length; little-endian)
/// followed by its parameters.

/// A controller index: `hciN` is index N; `none` (0xFFFF, "<non-controller>") addresses the
/// management interface itself (mgmt-api.txt "Packet Structures").
public struct MgmtIndex: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }
    public init(_ index: UInt16) { self.rawValue = index }

    public static let none = MgmtIndex(rawValue: 0xFFFF)

    public var description: String { self == .none ? "no controller" : "hci\(rawValue)" }
}

/// A management command code. Open: codes the table (`MgmtCommandSpec`) does not name print as
/// `management command 0x00NN`.
public struct MgmtOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// `0x003E`.
    public var hex: String { mgmtHex(rawValue) }

    /// `Add Advertising (0x003E)`.
    public var description: String {
        name.map { "\($0) (\(hex))" } ?? "management command \(hex)"
    }
}

/// A management event code. Open, like `MgmtOpcode`; its names come from `MgmtEventSpec`.
public struct MgmtEventCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// `Advertising Added (0x0023)`.
    public var description: String {
        name.map { "\($0) (\(mgmtHex(rawValue)))" } ?? "management event \(mgmtHex(rawValue))"
    }
}

/// `0x003E`: four uppercase hex digits, as mgmt-api.txt writes codes.
func mgmtHex(_ code: UInt16) -> String {
    "0x" + paddedHex(UInt32(code), 4)
}

/// A management status code (mgmt-api.txt "Error Codes", 0x00–0x14). Open: unknown codes
/// survive and print as `unknown management status (0x7F)`.
public struct MgmtStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public var isSuccess: Bool { rawValue == 0 }

    public static let success = MgmtStatus(rawValue: 0x00)
    public static let unknownCommand = MgmtStatus(rawValue: 0x01)
    public static let notConnected = MgmtStatus(rawValue: 0x02)
    public static let failed = MgmtStatus(rawValue: 0x03)
    public static let connectFailed = MgmtStatus(rawValue: 0x04)
    public static let authenticationFailed = MgmtStatus(rawValue: 0x05)
    public static let notPaired = MgmtStatus(rawValue: 0x06)
    public static let noResources = MgmtStatus(rawValue: 0x07)
    public static let timeout = MgmtStatus(rawValue: 0x08)
    public static let alreadyConnected = MgmtStatus(rawValue: 0x09)
    public static let busy = MgmtStatus(rawValue: 0x0A)
    public static let rejected = MgmtStatus(rawValue: 0x0B)
    public static let notSupported = MgmtStatus(rawValue: 0x0C)
    public static let invalidParameters = MgmtStatus(rawValue: 0x0D)
    public static let disconnected = MgmtStatus(rawValue: 0x0E)
    public static let notPowered = MgmtStatus(rawValue: 0x0F)
    public static let cancelled = MgmtStatus(rawValue: 0x10)
    public static let invalidIndex = MgmtStatus(rawValue: 0x11)
    public static let rfkilled = MgmtStatus(rawValue: 0x12)
    public static let alreadyPaired = MgmtStatus(rawValue: 0x13)
    public static let permissionDenied = MgmtStatus(rawValue: 0x14)

    static let names = [
        "Success", "Unknown Command", "Not Connected", "Failed", "Connect Failed", "Authentication Failed",
        "Not Paired", "No Resources", "Timeout", "Already Connected", "Busy", "Rejected", "Not Supported",
        "Invalid Parameters", "Disconnected", "Not Powered", "Cancelled", "Invalid Index", "RFKilled",
        "Already Paired", "Permission Denied",
    ]

    /// `Busy (0x0A)`.
    public var description: String {
        let hex = "0x" + paddedHex(UInt32(rawValue), 2)
        return Int(rawValue) < Self.names.count
            ? "\(Self.names[Int(rawValue)]) (\(hex))" : "unknown management status (\(hex))"
    }

    /// What a user can do about it, when that is clear from the status alone.
    public var hint: String? {
        switch self {
        case .permissionDenied:
            "the management interface needs CAP_NET_ADMIN: run as root, or join the group the package "
                + "grants it to (`sudo adduser $USER ibeacon`, then log in again); a binary installed by hand: "
                + "`sudo setcap cap_net_admin+ep $(command -v ibeacon)`"
        case .notPowered: "the adapter is powered off: `bluetoothctl power on`"
        case .rfkilled: "the adapter is blocked by rfkill: `rfkill unblock bluetooth`"
        case .invalidIndex: "no such adapter; list them with `ibeacon devices`"
        case .busy: "the kernel is busy with another request on this adapter; try again"
        default: nil
        }
    }
}

/// One management packet: header plus parameters (mgmt-api.txt "Packet Structures").
public struct MgmtPacket: Hashable, Sendable, CustomStringConvertible {
    /// The command code (host → kernel) or event code (kernel → host).
    public var code: UInt16
    public var index: MgmtIndex
    public var parameters: [UInt8]

    public init(code: UInt16, index: MgmtIndex, parameters: [UInt8]) {
        self.code = code
        self.index = index
        self.parameters = parameters
    }

    public static let headerSize = 6

    /// The wire form: code, index, parameter length (little-endian), parameters.
    public var bytes: [UInt8] {
        var w = ByteWriter()
        w.uint16LE(code)
        w.uint16LE(index.rawValue)
        w.uint16LE(UInt16(truncatingIfNeeded: parameters.count))
        w.append(parameters)
        return w.bytes
    }

    /// Decodes one whole packet (one `read` of the control socket returns exactly one). The
    /// parameter length must match what follows the header.
    public init(decoding bytes: some Collection<UInt8>) throws(DecodingError) {
        var r = ByteReader(bytes)
        code = try r.readUInt16LE("management packet code")
        index = MgmtIndex(rawValue: try r.readUInt16LE("management packet controller index"))
        let length = Int(try r.readUInt16LE("management packet parameter length"))
        parameters = try r.readBytes(length, "management packet parameters")
        try r.expectEnd("management packet")
    }

    /// Code, index and length, never the parameters: every management socket opened with
    /// CAP_NET_ADMIN receives New Link Key, New Long Term Key, New IRK/CSRK and the pairing
    /// requests, and an event this package does not decode is shown by this description.
    /// `parameterDump` shows the bytes of a command this process sends.
    public var description: String {
        "mgmt 0x\(paddedHex(UInt32(code), 4, uppercase: false)) \(index), \(parameters.count) parameter bytes"
    }

    /// The parameters in hex, for the commands this process composes (none carries a key).
    public var parameterDump: String { "[\(parameters.hexString(separator: " "))]" }
}
