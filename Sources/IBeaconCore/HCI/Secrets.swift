// HCI packets that carry keys, passkeys or pairing parameters (issue 40, hole 1). A raw HCI
// socket sees the events of every program using the adapter (bluetoothd's pairings among
// them), and a serial or TCP controller is a whole controller: such packets are never
// printed, logged or written to a capture.

extension H4Packet {
    /// Events whose parameters are keys, passkeys or pairing parameters (Core 5.4 Vol 4 Part E
    /// §7.7): Return Link Keys, PIN Code Request, Link Key Request, Link Key Notification,
    /// IO Capability Request/Response, User Confirmation Request (the numeric value), User
    /// Passkey Request, Remote OOB Data Request, Simple Pairing Complete, User Passkey
    /// Notification, Keypress Notification.
    public static let secretEvents: [UInt8: String] = [
        0x15: "Return Link Keys", 0x16: "PIN Code Request", 0x17: "Link Key Request",
        0x18: "Link Key Notification", 0x31: "IO Capability Request", 0x32: "IO Capability Response",
        0x33: "User Confirmation Request", 0x34: "User Passkey Request", 0x35: "Remote OOB Data Request",
        0x36: "Simple Pairing Complete", 0x3B: "User Passkey Notification", 0x3C: "Keypress Notification",
    ]

    /// LE Meta subevents (§7.7.65) with key material: LE Long Term Key Request (Rand, EDIV),
    /// LE Read Local P-256 Public Key Complete, LE Generate DHKey Complete (the DHKey).
    static let secretLESubevents: [UInt8: String] = [
        0x05: "LE Long Term Key Request", 0x08: "LE Read Local P-256 Public Key Complete",
        0x09: "LE Generate DHKey Complete",
    ]

    /// Commands whose parameters (sent) or return parameters (in Command Complete) are keys or
    /// pairing data: Link Key / PIN Code / User Passkey / Remote OOB (Extended) Data Request
    /// Reply, Read Local OOB (Extended) Data, Write Stored Link Key, LE Encrypt, LE Rand,
    /// LE Enable Encryption, LE Long Term Key Request Reply, LE Generate DHKey (v1, v2),
    /// LE Add Device To Resolving List (IRKs).
    static let secretCommands: [UInt16: String] = [
        0x040B: "Link Key Request Reply", 0x040D: "PIN Code Request Reply",
        0x042E: "User Passkey Request Reply", 0x0430: "Remote OOB Data Request Reply",
        0x0435: "Remote OOB Extended Data Request Reply", 0x0C11: "Write Stored Link Key",
        0x0C1C: "Read Local OOB Data", 0x0C7D: "Read Local OOB Extended Data", 0x2017: "LE Encrypt",
        0x2018: "LE Rand", 0x2019: "LE Enable Encryption", 0x201A: "LE Long Term Key Request Reply",
        0x2026: "LE Generate DHKey", 0x205E: "LE Generate DHKey v2", 0x2027: "LE Add Device To Resolving List",
    ]

    /// What makes this packet secret (`Link Key Notification`), nil for one that may be shown.
    /// A command, an event of the lists above, or a Command Complete answering a listed command.
    public var secretKind: String? {
        switch type {
        case .command:
            guard body.count >= 2 else { return nil }
            return Self.secretCommands[UInt16(body[0]) | UInt16(body[1]) << 8]
        case .event:
            guard let code = body.first else { return nil }
            if let name = Self.secretEvents[code] { return name }
            if code == HCIEventCode.leMeta.rawValue, body.count >= 3 {
                return Self.secretLESubevents[body[2]]
            }
            if code == HCIEventCode.commandComplete.rawValue, body.count >= 5 {
                return Self.secretCommands[UInt16(body[3]) | UInt16(body[4]) << 8].map { "Command Complete of \($0)" }
            }
            return nil
        default:
            return nil
        }
    }

    /// True for a packet that must never be shown, logged or recorded.
    public var carriesSecrets: Bool { secretKind != nil }
}

extension HCIEvent {
    /// The event codes `decode` takes apart and this package acts on: the only ones a raw HCI
    /// socket asks the kernel for (a raw socket otherwise sees every program's events, Link Key
    /// Notification among them).
    public static let decodedCodes: [HCIEventCode] = [
        .commandComplete, .commandStatus, .hardwareError, .leMeta, .stackInternal,
    ]

    /// The 64-bit event mask of a BlueZ `hci_filter` letting through `decodedCodes` only. The
    /// kernel tests bit `code & 63` (`HCI_FLT_EVENT_BITS`), so 0xFD (Stack Internal) shares its
    /// bit with 0x3D (Remote Host Supported Features Notification, no secret); no event with
    /// keys or pairing parameters (`H4Packet.secretEvents`) shares a bit with a decoded one.
    public static var socketFilterEventMask: UInt64 {
        decodedCodes.reduce(0) { $0 | 1 << UInt64($1.rawValue & 63) }
    }
}
