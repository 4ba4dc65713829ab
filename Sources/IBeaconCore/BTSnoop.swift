// The btsnoop capture format (what Wireshark, tshark, btmon and Android's "HCI snoop log"
// write), as the one pure codec of this package: recording, reading captures, fuzzing and
// tests all go through it.
//
// Layout (RFC 1761 "snoop" adapted by Symbian; BlueZ src/shared/btsnoop.h): a 16-octet file
// header (`btsnoop\0`, version 1, datalink), then records of a 24-octet header (original
// length, included length, flags, cumulative drops, timestamp in µs since 0 AD) and the
// packet, all big-endian.

/// Which side of the HCI a packet crossed.
public enum PacketDirection: Sendable, Hashable {
    /// Host to controller (commands, outgoing data). Flags bit 0 clear.
    case sent
    /// Controller to host (events, incoming data). Flags bit 0 set.
    case received
}

/// The datalink type in the file header: how each record's bytes are framed.
public struct BTSnoopDatalink: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// 1001, HCI without the H4 type byte: the record flags say command/event (bit 1 set) or
    /// data, and the direction (bit 0) which of the two (Wireshark: WTAP_ENCAP_BLUETOOTH_HCI).
    public static let h1 = BTSnoopDatalink(rawValue: 1001)
    /// 1002, "HCI UART (H4)": each packet starts with its H4 type byte. What Android's snoop
    /// log and this package write.
    public static let h4 = BTSnoopDatalink(rawValue: 1002)
    /// 1003, HCI BCSP.
    public static let bcsp = BTSnoopDatalink(rawValue: 1003)
    /// 1004, HCI Serial (H5).
    public static let h5 = BTSnoopDatalink(rawValue: 1004)
    /// 2001, the Linux monitor channel (`btmon -w`): the flags carry the controller index
    /// (upper 16 bits) and a packet opcode (lower 16 bits, `BTSnoopMonitorOpcode`).
    public static let linuxMonitor = BTSnoopDatalink(rawValue: 2001)

    /// The datalinks `BTSnoopDecoder` reads.
    public static let readable: [BTSnoopDatalink] = [.h1, .h4, .linuxMonitor]

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

/// The packet opcode of a Linux monitor (2001) record: the low 16 bits of its flags.
/// BlueZ src/shared/btsnoop.h, `BTSNOOP_OPCODE_*`.
public struct BTSnoopMonitorOpcode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let newIndex = Self(rawValue: 0)
    public static let deleteIndex = Self(rawValue: 1)
    public static let commandPacket = Self(rawValue: 2)
    public static let eventPacket = Self(rawValue: 3)
    public static let aclTxPacket = Self(rawValue: 4)
    public static let aclRxPacket = Self(rawValue: 5)
    public static let scoTxPacket = Self(rawValue: 6)
    public static let scoRxPacket = Self(rawValue: 7)
    public static let openIndex = Self(rawValue: 8)
    public static let closeIndex = Self(rawValue: 9)
    public static let indexInfo = Self(rawValue: 10)
    public static let vendorDiagnostic = Self(rawValue: 11)
    public static let systemNote = Self(rawValue: 12)
    public static let userLogging = Self(rawValue: 13)
    public static let isoTxPacket = Self(rawValue: 18)
    public static let isoRxPacket = Self(rawValue: 19)

    /// The HCI packet type and direction of a packet opcode; nil for the others (index
    /// added/removed, notes, logging, management channel), which carry no HCI packet.
    public var packet: (type: H4PacketType, direction: PacketDirection)? {
        switch self {
        case .commandPacket: (.command, .sent)
        case .eventPacket: (.event, .received)
        case .aclTxPacket: (.acl, .sent)
        case .aclRxPacket: (.acl, .received)
        case .scoTxPacket: (.sco, .sent)
        case .scoRxPacket: (.sco, .received)
        case .isoTxPacket: (.iso, .sent)
        case .isoRxPacket: (.iso, .received)
        default: nil
        }
    }

    /// The opcode that carries `type` in `direction`, if the monitor format has one.
    public init?(packet type: H4PacketType, direction: PacketDirection) {
        let sent = direction == .sent
        switch type {
        case .command where sent: self = .commandPacket
        case .event where !sent: self = .eventPacket
        case .acl: self = sent ? .aclTxPacket : .aclRxPacket
        case .sco: self = sent ? .scoTxPacket : .scoRxPacket
        case .iso: self = sent ? .isoTxPacket : .isoRxPacket
        default: return nil
        }
    }

    public var description: String { "monitor opcode \(rawValue)" }
}

/// One captured record.
public struct BTSnoopRecord: Hashable, Sendable {
    /// The HCI packet; nil for a monitor (2001) record that carries none (index added or
    /// removed, a note) and for an empty H4 record.
    public var packet: H4Packet?
    public var direction: PacketDirection
    /// Microseconds since midnight, 1 January 0 AD (the btsnoop epoch).
    public var timestampMicros: Int64
    /// The controller index of a monitor (2001) record; nil in the other datalinks.
    public var controllerIndex: UInt16?
    /// The packet opcode of a monitor (2001) record; nil in the other datalinks.
    public var monitorOpcode: BTSnoopMonitorOpcode?
    /// Original Length: the packet's size before any truncation by the capturing tool.
    public var originalLength: Int
    public var cumulativeDrops: UInt32

    public init(
        packet: H4Packet?, direction: PacketDirection, timestampMicros: Int64, controllerIndex: UInt16? = nil,
        monitorOpcode: BTSnoopMonitorOpcode? = nil, originalLength: Int? = nil, cumulativeDrops: UInt32 = 0
    ) {
        self.packet = packet
        self.direction = direction
        self.timestampMicros = timestampMicros
        self.controllerIndex = controllerIndex
        self.monitorOpcode = monitorOpcode
        self.originalLength = originalLength ?? packet?.bytes.count ?? 0
        self.cumulativeDrops = cumulativeDrops
    }

    /// Microseconds since 1970-01-01 00:00 UTC.
    public var unixMicroseconds: Int64 { BTSnoop.unixMicroseconds(timestamp: timestampMicros) }
}

/// Why a btsnoop file could not be read (further).
public enum BTSnoopError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The file ends inside the 16-octet file header, and what is there is a header's start.
    case truncatedHeader(available: Int)
    /// The file does not start with `btsnoop\0`: its first bytes, up to the first that differs.
    case badMagic([UInt8])
    /// Neither a btsnoop nor a PacketLogger capture (`CaptureDecoder`): its first bytes.
    case unknownFormat([UInt8])
    case unsupportedVersion(UInt32)
    case unsupportedDatalink(UInt32)
    /// Record number `index` (0-based) at byte `offset` needs `needed` octets, `available` are left.
    case truncatedRecord(index: Int, offset: Int, needed: Int, available: Int)
    /// Record number `index` at byte `offset` is inconsistent; nothing after it can be framed.
    case invalidRecord(index: Int, offset: Int, reason: String)

    /// True when the file is a btsnoop capture whose end is missing or damaged: every record
    /// before `offset` was read.
    public var isDamagedTail: Bool {
        switch self {
        case .truncatedHeader, .truncatedRecord, .invalidRecord: true
        case .badMagic, .unknownFormat, .unsupportedVersion, .unsupportedDatalink: false
        }
    }

    /// The byte offset where reading stopped.
    public var offset: Int {
        switch self {
        case .truncatedHeader(let available): available
        case .badMagic, .unknownFormat: 0
        case .unsupportedVersion: 8
        case .unsupportedDatalink: 12
        case .truncatedRecord(_, let offset, _, _), .invalidRecord(_, let offset, _): offset
        }
    }

    public var description: String {
        switch self {
        case .truncatedHeader(let available):
            return "truncated: the file ends after \(available) of the 16 bytes of the btsnoop header"
        case .badMagic(let bytes):
            return "not a btsnoop file: it starts with \(bytes.hexString(separator: " ")), "
                + "a btsnoop capture starts with \"btsnoop\\0\" (62 74 73 6E 6F 6F 70 00)"
        case .unknownFormat(let bytes):
            return
                "not a btsnoop file nor a PacketLogger (.pklg) file: it starts with \(bytes.hexString(separator: " ")); "
                + "a btsnoop capture starts with \"btsnoop\\0\", a PacketLogger record with its length (8…65535)"
        case .unsupportedVersion(let v):
            return "btsnoop version \(v) at byte 8 is not supported (only version 1 exists)"
        case .unsupportedDatalink(let d):
            return "btsnoop datalink \(BTSnoopDatalink(rawValue: d)) at byte 12 is not supported: "
                + "expected HCI UART (H4, 1002), HCI unframed (H1, 1001) or Linux monitor (2001)"
        case .truncatedRecord(let index, let offset, let needed, let available):
            return
                "truncated: record \(index + 1) at byte \(offset) needs \(needed) byte(s), the file has \(available) left"
        case .invalidRecord(let index, let offset, let reason):
            return "damaged: record \(index + 1) at byte \(offset) \(reason)"
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
    /// The largest included length the decoder accepts: an H4 type byte, an ACL header (4)
    /// and 65,535 octets of data, the largest HCI packet (Core 5.4 Vol 4 Part E §5.4.2).
    /// A larger length is damage, not a packet, and would make a reader buffer gigabytes.
    public static let maximumPacketLength = 1 + 4 + 65535

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

    /// Packet flags of datalinks 1001 and 1002: bit 0 set when received by the host, bit 1 set
    /// for commands and events.
    public static func flags(type: H4PacketType, direction: PacketDirection) -> UInt32 {
        (direction == .received ? 0x01 : 0x00) | (type == .command || type == .event ? 0x02 : 0x00)
    }

    /// One record: original length, included length, flags, cumulative drops, timestamp (µs
    /// since 0 AD), then the packet — with its H4 type byte in datalink 1002, without it in
    /// 1001 and 2001 (where the flags say what it is; 2001 puts `controllerIndex` in the upper
    /// 16 bits). Returns nil for a packet the datalink cannot carry (e.g. a sent event in 2001).
    public static func encodeRecord(
        packet: H4Packet, direction: PacketDirection, timestampMicros: Int64, datalink: BTSnoopDatalink = .h4,
        controllerIndex: UInt16 = 0
    ) -> [UInt8]? {
        let flags: UInt32
        let data: [UInt8]
        switch datalink {
        case .linuxMonitor:
            guard let opcode = BTSnoopMonitorOpcode(packet: packet.type, direction: direction) else { return nil }
            flags = UInt32(controllerIndex) << 16 | UInt32(opcode.rawValue)
            data = packet.body
        case .h1:
            flags = Self.flags(type: packet.type, direction: direction)
            data = packet.body
        default:
            flags = Self.flags(type: packet.type, direction: direction)
            data = packet.bytes
        }
        return encodeRecord(data: data, flags: flags, timestampMicros: timestampMicros)
    }

    /// A record around `data` as it is, for any datalink.
    public static func encodeRecord(data: [UInt8], flags: UInt32, timestampMicros: Int64, drops: UInt32 = 0)
        -> [UInt8]
    {
        var w = ByteWriter()
        w.uint32BE(UInt32(truncatingIfNeeded: data.count))  // HCI packets are < 64 KiB
        w.uint32BE(UInt32(truncatingIfNeeded: data.count))
        w.uint32BE(flags)
        w.uint32BE(drops)
        w.uint64BE(UInt64(bitPattern: timestampMicros))
        w.append(data)
        return w.bytes
    }

    /// An H4 (1002) record, what the recorder writes.
    public static func encodeRecord(packet: H4Packet, direction: PacketDirection, timestampMicros: Int64) -> [UInt8] {
        encodeRecord(
            data: packet.bytes, flags: flags(type: packet.type, direction: direction), timestampMicros: timestampMicros)
    }

    public static func encodeRecord(_ record: BTSnoopRecord) -> [UInt8] {
        encodeRecord(
            data: record.packet?.bytes ?? [],
            flags: flags(type: record.packet?.type ?? .acl, direction: record.direction),
            timestampMicros: record.timestampMicros)
    }
}

/// Reads btsnoop records from a byte stream: a pure state machine. Feed it whatever a read
/// returned with `append` and take records with `next()` until it returns nil; at the end of
/// the file `finish()` says whether bytes were left over (a truncated file). It keeps at most
/// one record plus what was appended and not yet taken, so memory does not grow with the file.
///
/// Total: bad headers and inconsistent records throw `BTSnoopError`, never trap. A record
/// that throws stops the reader (nothing after it can be framed); every record before it was
/// returned.
public struct BTSnoopDecoder: Sendable {
    /// Known once the 16-octet file header has been read.
    public private(set) var datalink: BTSnoopDatalink?
    /// Records returned so far.
    public private(set) var recordsRead = 0
    @usableFromInline var buffer: [UInt8] = []
    @usableFromInline var position = 0
    /// File offset of `buffer[position]`.
    public private(set) var offset = 0
    private var failure: BTSnoopError?

    public init() {}

    /// Bytes appended and not yet returned as part of a record.
    public var pendingByteCount: Int { buffer.count - position }

    @inlinable public mutating func append(_ bytes: some Collection<UInt8>) {
        compact()
        buffer.append(contentsOf: bytes)
    }

    /// Drops the bytes already returned once they are half the buffer (amortised O(1) per byte).
    @usableFromInline mutating func compact() {
        if position > 0 && position >= buffer.count / 2 {
            buffer.removeFirst(position)
            position = 0
        }
    }

    private func uint32(at i: Int) -> UInt32 {
        UInt32(buffer[i]) << 24 | UInt32(buffer[i + 1]) << 16 | UInt32(buffer[i + 2]) << 8 | UInt32(buffer[i + 3])
    }

    private mutating func fail(_ error: BTSnoopError) -> BTSnoopError {
        failure = error
        return error
    }

    /// Reads the file header if it is complete (true once it has been read). Throws when the
    /// bytes so far cannot start a btsnoop file, even before all 16 are there.
    public mutating func readHeader() throws(BTSnoopError) -> Bool {
        if let failure { throw failure }
        if datalink != nil { return true }
        let available = buffer.count - position
        let magicSeen = min(available, 8)
        if let k = (0..<magicSeen).first(where: { buffer[position + $0] != BTSnoop.magic[$0] }) {
            // The bytes up to the first that differs: the same however the file arrives in chunks.
            throw fail(.badMagic(Array(buffer[position...(position + k)])))
        }
        guard available >= BTSnoop.fileHeaderLength else { return false }
        let version = uint32(at: position + 8)
        guard version == BTSnoop.version else { throw fail(.unsupportedVersion(version)) }
        let link = BTSnoopDatalink(rawValue: uint32(at: position + 12))
        guard BTSnoopDatalink.readable.contains(link) else { throw fail(.unsupportedDatalink(link.rawValue)) }
        datalink = link
        position += BTSnoop.fileHeaderLength
        offset += BTSnoop.fileHeaderLength
        return true
    }

    /// The next complete record, or nil when more bytes are needed.
    public mutating func next() throws(BTSnoopError) -> BTSnoopRecord? {
        if let failure { throw failure }
        if datalink == nil {
            guard try readHeader() else { return nil }
        }
        guard let datalink else { return nil }
        let available = buffer.count - position
        guard available >= BTSnoop.recordHeaderLength else { return nil }
        let p = position
        // The 24-octet header, big-endian fields (`available` covers it).
        let (original, included, flags, drops, timestamp) = buffer.withUnsafeBytes { raw in
            func field(_ at: Int) -> UInt32 { raw.loadUnaligned(fromByteOffset: p + at, as: UInt32.self).bigEndian }
            return (
                Int(field(0)), Int(field(4)), field(8), field(12),
                Int64(bitPattern: raw.loadUnaligned(fromByteOffset: p + 16, as: UInt64.self).bigEndian)
            )
        }
        guard included <= original else {
            throw fail(
                .invalidRecord(
                    index: recordsRead, offset: offset,
                    reason: "has an included length (\(included)) larger than its original length (\(original))"))
        }
        guard included <= BTSnoop.maximumPacketLength else {
            throw fail(
                .invalidRecord(
                    index: recordsRead, offset: offset,
                    reason:
                        "claims \(included) bytes, more than the largest HCI packet (\(BTSnoop.maximumPacketLength))"
                ))
        }
        let total = BTSnoop.recordHeaderLength + included
        guard available >= total else { return nil }
        let start = p + BTSnoop.recordHeaderLength
        let data = buffer[start..<(p + total)]
        var record = BTSnoopRecord(
            packet: nil, direction: flags & 0x01 != 0 ? .received : .sent, timestampMicros: timestamp,
            originalLength: original, cumulativeDrops: drops)
        switch datalink {
        case .h4:
            if included > 0 {
                record.packet = H4Packet(type: H4PacketType(rawValue: buffer[start]), body: Array(data.dropFirst()))
            }
        case .h1:
            // Bit 1: command or event (which one by the direction), else data; H1 cannot tell
            // SCO from ACL.
            let type: H4PacketType = flags & 0x02 != 0 ? (record.direction == .sent ? .command : .event) : .acl
            record.packet = H4Packet(type: type, body: Array(data))
        default:
            let opcode = BTSnoopMonitorOpcode(rawValue: UInt16(truncatingIfNeeded: flags))
            record.controllerIndex = UInt16(truncatingIfNeeded: flags >> 16)
            record.monitorOpcode = opcode
            if let (type, direction) = opcode.packet {
                record.packet = H4Packet(type: type, body: Array(data))
                record.direction = direction
            }
        }
        position += total
        offset += total
        recordsRead += 1
        return record
    }

    /// Call at the end of the input: throws when bytes are left that do not make a record
    /// (the file was cut) or the header never completed.
    public mutating func finish() throws(BTSnoopError) {
        if let failure { throw failure }
        let available = buffer.count - position
        if datalink == nil {
            throw fail(.truncatedHeader(available: available))
        }
        guard available > 0 else { return }
        var needed = BTSnoop.recordHeaderLength
        if available >= BTSnoop.recordHeaderLength { needed += Int(uint32(at: position + 4)) }
        throw fail(.truncatedRecord(index: recordsRead, offset: offset, needed: needed, available: available))
    }
}

/// Reads a btsnoop file held in memory (tests, fuzzing): the header at `init`, then one
/// record per `next()`; nil at a clean end, `BTSnoopError` at a truncated or damaged one.
public struct BTSnoopReader: Sendable {
    private var decoder = BTSnoopDecoder()
    private var finished = false

    public init(bytes: [UInt8]) throws(BTSnoopError) {
        decoder.append(bytes)
        if !(try decoder.readHeader()) { try decoder.finish() }  // throws: the header is incomplete
    }

    public var datalink: BTSnoopDatalink { decoder.datalink ?? .h4 }

    /// The next record, or nil at the end of the file.
    public mutating func next() throws(BTSnoopError) -> BTSnoopRecord? {
        if let record = try decoder.next() { return record }
        if !finished {
            finished = true
            try decoder.finish()
        }
        return nil
    }

    /// Every remaining record.
    public mutating func records() throws(BTSnoopError) -> [BTSnoopRecord] {
        var out: [BTSnoopRecord] = []
        while let record = try next() { out.append(record) }
        return out
    }
}
