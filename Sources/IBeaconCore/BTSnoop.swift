// The btsnoop capture format (what Wireshark, tshark and btmon open), as a pure codec.
// Layout per the format's description (RFC 1761 "snoop" adapted by Symbian/Android/BlueZ):
// a 16-octet file header, then records of a 24-octet header and the packet, all big-endian.

/// Which way a packet went.
public enum BTSnoopDirection: Sendable, Hashable {
    /// Host to controller (commands, outgoing data). Flags bit 0 clear.
    case sent
    /// Controller to host (events, incoming data). Flags bit 0 set.
    case received
}

/// The datalink type in the file header: how each record's bytes are framed.
public struct BTSnoopDatalink: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// 1001, H1: unframed HCI packets without the type byte; the record flags say whether a
    /// packet is a command/event or data (Wireshark reads it as WTAP_ENCAP_BLUETOOTH_HCI).
    public static let h1 = BTSnoopDatalink(rawValue: 1001)
    /// 1002, "HCI UART (H4)": each packet starts with its H4 type byte. What this package
    /// writes, and what Wireshark writes for Bluetooth H4 captures.
    public static let h4 = BTSnoopDatalink(rawValue: 1002)
    /// 1003, HCI BCSP.
    public static let bcsp = BTSnoopDatalink(rawValue: 1003)
    /// 1004, HCI Serial (H5).
    public static let h5 = BTSnoopDatalink(rawValue: 1004)
    /// 2001, the Linux monitor channel (`btmon -w`): packet type and adapter index in the flags.
    public static let linuxMonitor = BTSnoopDatalink(rawValue: 2001)

    public var description: String {
        switch self {
        case .h1: "HCI unframed (H1, 1001)"
        case .h4: "HCI UART (H4, 1002)"
        case .bcsp: "HCI BCSP (1003)"
        case .h5: "HCI Serial (H5, 1004)"
        case .linuxMonitor: "Linux monitor (2001)"
        default: "unknown datalink (\(rawValue))"
        }
    }
}

/// One captured packet.
public struct BTSnoopRecord: Hashable, Sendable {
    public var packet: H4Packet
    public var direction: BTSnoopDirection
    /// Microseconds since midnight, 1 January 0 AD (the btsnoop epoch).
    public var timestampMicros: Int64
    /// Original Length: the packet's size before any truncation by the capturing tool.
    public var originalLength: Int
    public var cumulativeDrops: UInt32

    public init(
        packet: H4Packet, direction: BTSnoopDirection, timestampMicros: Int64, originalLength: Int? = nil,
        cumulativeDrops: UInt32 = 0
    ) {
        self.packet = packet
        self.direction = direction
        self.timestampMicros = timestampMicros
        self.originalLength = originalLength ?? packet.bytes.count
        self.cumulativeDrops = cumulativeDrops
    }

    /// Microseconds since 1970-01-01 00:00 UTC.
    public var unixMicroseconds: Int64 { BTSnoop.unixMicroseconds(timestamp: timestampMicros) }
}

/// Why a btsnoop file could not be read.
public enum BTSnoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Fewer than the 16 octets of the file header.
    case truncatedHeader(available: Int)
    /// The file does not start with `btsnoop\0`.
    case badMagic([UInt8])
    case unsupportedVersion(UInt32)
    case unsupportedDatalink(UInt32)
    /// Record number `index` (0-based) at byte `offset` needs `needed` octets, `available` are left.
    case truncatedRecord(index: Int, offset: Int, needed: Int, available: Int)
    /// Record number `index` at byte `offset` is inconsistent.
    case invalidRecord(index: Int, offset: Int, reason: String)

    public var description: String {
        switch self {
        case .truncatedHeader(let available):
            return "not a btsnoop file: \(available) byte(s), the header alone has 16"
        case .badMagic(let bytes):
            return "not a btsnoop file: starts with \(bytes.hexString(separator: " ")), expected \"btsnoop\\0\""
        case .unsupportedVersion(let v):
            return "btsnoop version \(v) is not supported (only version 1 exists)"
        case .unsupportedDatalink(let d):
            return "btsnoop datalink \(BTSnoopDatalink(rawValue: d)) is not supported: "
                + "expected HCI UART (H4, 1002) or H1 (1001)"
        case .truncatedRecord(let index, let offset, let needed, let available):
            return "btsnoop record \(index) at byte \(offset) is truncated: needs \(needed) byte(s), \(available) left"
        case .invalidRecord(let index, let offset, let reason):
            return "btsnoop record \(index) at byte \(offset) is invalid: \(reason)"
        }
    }
}

/// Encoding helpers and constants.
public enum BTSnoop {
    /// The identification pattern, `btsnoop\0`.
    public static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    public static let version: UInt32 = 1
    public static let fileHeaderLength = 16
    public static let recordHeaderLength = 24

    /// Microseconds from 0 AD to 1970-01-01 00:00 UTC: timestamps are counted from 0 AD.
    public static let unixEpochOffsetMicros: Int64 = 0x00DC_DDB3_0F2F_8000

    public static func timestamp(unixMicroseconds: Int64) -> Int64 {
        unixMicroseconds &+ unixEpochOffsetMicros
    }

    public static func unixMicroseconds(timestamp: Int64) -> Int64 {
        timestamp &- unixEpochOffsetMicros
    }

    /// The 16-octet file header.
    public static func fileHeader(datalink: BTSnoopDatalink = .h4) -> [UInt8] {
        var w = ByteWriter()
        w.append(magic)
        w.uint32BE(version)
        w.uint32BE(datalink.rawValue)
        return w.bytes
    }

    /// Packet flags: bit 0 set when received by the host, bit 1 set for commands and events.
    public static func flags(type: H4PacketType, direction: BTSnoopDirection) -> UInt32 {
        (direction == .received ? 0x01 : 0x00) | (type == .command || type == .event ? 0x02 : 0x00)
    }

    /// One record for an H4 (1002) file: original length, included length, flags, cumulative
    /// drops, timestamp (µs since 0 AD), then the packet with its type byte.
    public static func encodeRecord(packet: H4Packet, direction: BTSnoopDirection, timestampMicros: Int64) -> [UInt8] {
        let bytes = packet.bytes
        var w = ByteWriter()
        w.uint32BE(UInt32(truncatingIfNeeded: bytes.count))  // HCI packets are < 64 KiB
        w.uint32BE(UInt32(truncatingIfNeeded: bytes.count))
        w.uint32BE(flags(type: packet.type, direction: direction))
        w.uint32BE(0)
        w.uint64BE(UInt64(bitPattern: timestampMicros))
        w.append(bytes)
        return w.bytes
    }

    public static func encodeRecord(_ record: BTSnoopRecord) -> [UInt8] {
        encodeRecord(packet: record.packet, direction: record.direction, timestampMicros: record.timestampMicros)
    }
}

/// Reads a btsnoop file held in memory. Total: bad headers and truncated or inconsistent
/// records throw `BTSnoopError`, never trap.
///
/// Datalink 1002 (H4) records carry the packet-type byte. Datalink 1001 (H1) records do
/// not; the type is inferred from the flags: command (sent) or event (received) when bit 1
/// is set, else ACL (H1 cannot tell SCO from ACL).
public struct BTSnoopReader: Sendable {
    public let datalink: BTSnoopDatalink
    private let bytes: [UInt8]
    private var offset: Int
    private var index = 0

    public init(bytes: [UInt8]) throws(BTSnoopError) {
        guard bytes.count >= BTSnoop.fileHeaderLength else { throw .truncatedHeader(available: bytes.count) }
        guard Array(bytes[0..<8]) == BTSnoop.magic else { throw .badMagic(Array(bytes[0..<8])) }
        var r = ByteReader(bytes[8..<16])
        // The reads cannot fail: exactly 8 bytes are there.
        let version = (try? r.readUInt32BE("version")) ?? 0
        let datalink = (try? r.readUInt32BE("datalink")) ?? 0
        guard version == BTSnoop.version else { throw .unsupportedVersion(version) }
        let link = BTSnoopDatalink(rawValue: datalink)
        guard link == .h4 || link == .h1 else { throw .unsupportedDatalink(datalink) }
        self.datalink = link
        self.bytes = bytes
        self.offset = BTSnoop.fileHeaderLength
    }

    /// The next record, or nil at the end of the file.
    public mutating func next() throws(BTSnoopError) -> BTSnoopRecord? {
        guard offset < bytes.count else { return nil }
        let start = offset
        let available = bytes.count - start
        guard available >= BTSnoop.recordHeaderLength else {
            throw .truncatedRecord(
                index: index, offset: start, needed: BTSnoop.recordHeaderLength, available: available)
        }
        var r = ByteReader(bytes[start..<start + BTSnoop.recordHeaderLength])
        let original = Int((try? r.readUInt32BE()) ?? 0)
        let included = Int((try? r.readUInt32BE()) ?? 0)
        let flags = (try? r.readUInt32BE()) ?? 0
        let drops = (try? r.readUInt32BE()) ?? 0
        let timestamp = Int64(bitPattern: (try? r.readUInt64BE()) ?? 0)
        guard included <= original else {
            throw .invalidRecord(
                index: index, offset: start,
                reason: "included length \(included) exceeds original length \(original)")
        }
        let dataStart = start + BTSnoop.recordHeaderLength
        guard bytes.count - dataStart >= included else {
            throw .truncatedRecord(
                index: index, offset: start, needed: BTSnoop.recordHeaderLength + included, available: available)
        }
        let data = Array(bytes[dataStart..<dataStart + included])
        let direction: BTSnoopDirection = flags & 0x01 != 0 ? .received : .sent
        let packet: H4Packet
        if datalink == .h4 {
            guard let type = data.first else {
                throw .invalidRecord(index: index, offset: start, reason: "empty packet: no H4 type byte")
            }
            packet = H4Packet(type: H4PacketType(rawValue: type), body: Array(data.dropFirst()))
        } else {
            let type: H4PacketType = flags & 0x02 != 0 ? (direction == .sent ? .command : .event) : .acl
            packet = H4Packet(type: type, body: data)
        }
        offset = dataStart + included
        index += 1
        return BTSnoopRecord(
            packet: packet, direction: direction, timestampMicros: timestamp, originalLength: original,
            cumulativeDrops: drops)
    }

    /// Every remaining record.
    public mutating func records() throws(BTSnoopError) -> [BTSnoopRecord] {
        var out: [BTSnoopRecord] = []
        while let record = try next() { out.append(record) }
        return out
    }
}
