/// The packet indicator that precedes every packet on an H4 (UART) transport.
/// Core 5.4 Vol 4 Part A §2. The same byte prefixes packets on a BlueZ raw HCI socket.
public struct H4PacketType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let command = H4PacketType(rawValue: 0x01)
    public static let acl = H4PacketType(rawValue: 0x02)
    public static let sco = H4PacketType(rawValue: 0x03)
    public static let event = H4PacketType(rawValue: 0x04)
    public static let iso = H4PacketType(rawValue: 0x05)

    public var description: String {
        switch self {
        case .command: "command"
        case .acl: "ACL"
        case .sco: "SCO"
        case .event: "event"
        case .iso: "ISO"
        default: "unknown packet type (0x\([rawValue].hexString))"
        }
    }
}

/// One HCI packet: its H4 type and its body (header and parameters, without the type byte).
public struct H4Packet: Hashable, Sendable, CustomStringConvertible {
    public var type: H4PacketType
    public var body: [UInt8]

    public init(type: H4PacketType, body: [UInt8]) {
        self.type = type
        self.body = body
    }

    /// The packet as sent on the wire: type byte followed by the body.
    public var bytes: [UInt8] { [type.rawValue] + body }

    /// The bytes in hex, except for a packet carrying keys or pairing parameters
    /// (`carriesSecrets`): then only its kind and length.
    public var description: String {
        if let secret = secretKind { return "\(type) \(secret): \(body.count) bytes withheld (key material)" }
        return bytes.hexString(separator: " ")
    }
}

/// Why an H4 byte stream could not be framed.
public enum H4FramingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A byte that is not a known packet indicator was found where a packet must start.
    case unknownPacketType(UInt8, offset: Int)

    public var description: String {
        switch self {
        case .unknownPacketType(let t, let offset):
            return "H4 stream out of sync: byte 0x\([t].hexString) at offset \(offset) is not a packet type "
                + "(expected 01 command, 02 ACL, 03 SCO, 04 event or 05 ISO)"
        }
    }
}

/// Splits an H4 byte stream into packets. A pure state machine: feed it whatever a read
/// returned (a part of a packet, several packets, or both) and it returns the complete
/// packets and keeps the rest.
///
/// The header layout per packet type (Core 5.4 Vol 4 Part E §5.4):
/// command: opcode(2) + length(1); ACL: handle(2) + length(2); SCO: handle(2) + length(1);
/// event: code(1) + length(1); ISO: handle(2) + length(2, 14 bits).
public struct H4Framer: Sendable {
    private var buffer: [UInt8] = []
    private var consumed: Int = 0  // total bytes consumed, for error offsets
    /// Set once the stream is out of sync; every later `push` rethrows it.
    public private(set) var failure: H4FramingError?

    public init() {}

    /// Bytes held while waiting for the rest of a packet.
    public var pendingByteCount: Int { buffer.count }

    /// Adds bytes and returns every packet they complete.
    public mutating func push(_ bytes: some Sequence<UInt8>) throws(H4FramingError) -> [H4Packet] {
        if let failure { throw failure }
        buffer.append(contentsOf: bytes)
        var packets: [H4Packet] = []
        var start = 0
        while start < buffer.count {
            let type = H4PacketType(rawValue: buffer[start])
            let headerLength: Int
            switch type {
            case .command, .event: headerLength = type == .command ? 3 : 2
            case .sco: headerLength = 3
            case .acl, .iso: headerLength = 4
            default:
                let error = H4FramingError.unknownPacketType(buffer[start], offset: consumed + start)
                failure = error
                buffer.removeAll()
                throw error
            }
            let available = buffer.count - start - 1
            guard available >= headerLength else { break }
            let h = start + 1
            let payloadLength: Int
            switch type {
            case .command: payloadLength = Int(buffer[h + 2])
            case .event: payloadLength = Int(buffer[h + 1])
            case .sco: payloadLength = Int(buffer[h + 2])
            case .acl: payloadLength = Int(buffer[h + 2]) | Int(buffer[h + 3]) << 8
            default: payloadLength = (Int(buffer[h + 2]) | Int(buffer[h + 3]) << 8) & 0x3FFF
            }
            guard available >= headerLength + payloadLength else { break }
            packets.append(H4Packet(type: type, body: Array(buffer[h..<h + headerLength + payloadLength])))
            start = h + headerLength + payloadLength
        }
        if start > 0 {
            buffer.removeFirst(start)
            consumed += start
        }
        return packets
    }
}
