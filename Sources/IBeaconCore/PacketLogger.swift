// Apple's PacketLogger format (`.pklg`): what PacketLogger.app saves and what an iPhone's
// sysdiagnose holds (logs/Bluetooth/bluetoothd-hci-*.pklg) once Apple's Bluetooth logging
// profile is installed; BTstack's hci_dump writes it too.
//
// Layout (Wireshark wiretap/packetlogger.c and epan/dissectors/packet-packetlogger.c): no file
// header; records of a 4-octet length (of what follows it: 8 + 1 + the packet), seconds and
// microseconds (4 octets each, Unix time), a type octet and the packet without an H4 type byte.
// The numbers are big-endian in older files (PacketLogger on macOS, BTstack) and little-endian
// in newer ones (iOS): Wireshark takes a first length whose low 16 bits are zero and high 16 bits
// are not for the other byte order, and so does this reader. Types 0x00–0x03 and 0x08–0x09 are
// HCI commands, events, ACL and SCO data; the others (LMP, syslog, kernel, notes, power,
// configuration, a new controller) carry no HCI packet and are skipped.

/// The type octet of a PacketLogger record.
public struct PacketLoggerType: RawRepresentable, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let hciCommand = Self(rawValue: 0x00)
    public static let hciEvent = Self(rawValue: 0x01)
    public static let sentACL = Self(rawValue: 0x02)
    public static let receivedACL = Self(rawValue: 0x03)
    public static let sentSCO = Self(rawValue: 0x08)
    public static let receivedSCO = Self(rawValue: 0x09)
    public static let lmpSent = Self(rawValue: 0x0A)
    public static let lmpReceived = Self(rawValue: 0x0B)
    public static let syslog = Self(rawValue: 0xF7)
    public static let kernel = Self(rawValue: 0xF8)
    public static let kernelDebug = Self(rawValue: 0xF9)
    public static let error = Self(rawValue: 0xFA)
    public static let power = Self(rawValue: 0xFB)
    public static let note = Self(rawValue: 0xFC)
    public static let config = Self(rawValue: 0xFD)
    public static let newController = Self(rawValue: 0xFE)

    /// The types Wireshark accepts in the records it checks before calling a file PacketLogger.
    public static let known: Set<Self> = [
        .hciCommand, .hciEvent, .sentACL, .receivedACL, .sentSCO, .receivedSCO, .lmpSent, .lmpReceived, .syslog,
        .kernel, .kernelDebug, .error, .power, .note, .config, .newController,
    ]

    /// The HCI packet type and direction; nil for the types that carry no HCI packet.
    public var packet: (type: H4PacketType, direction: PacketDirection)? {
        switch self {
        case .hciCommand: (.command, .sent)
        case .hciEvent: (.event, .received)
        case .sentACL: (.acl, .sent)
        case .receivedACL: (.acl, .received)
        case .sentSCO: (.sco, .sent)
        case .receivedSCO: (.sco, .received)
        default: nil
        }
    }

    /// The type that carries `type` in `direction`, if PacketLogger has one.
    public init?(packet type: H4PacketType, direction: PacketDirection) {
        switch (type, direction) {
        case (.command, .sent): self = .hciCommand
        case (.event, .received): self = .hciEvent
        case (.acl, .sent): self = .sentACL
        case (.acl, .received): self = .receivedACL
        case (.sco, .sent): self = .sentSCO
        case (.sco, .received): self = .receivedSCO
        default: return nil
        }
    }
}

/// Encoding helpers and constants.
public enum PacketLogger {
    /// Length, seconds, microseconds.
    public static let recordHeaderLength = 12
    /// The largest record the reader accepts after the length field: seconds, microseconds, the
    /// type octet and the largest HCI packet (`BTSnoop.maximumPacketLength` less its H4 octet).
    public static let maximumLength = 8 + BTSnoop.maximumPacketLength

    /// One record: big-endian (PacketLogger on macOS, BTstack) or little-endian (iOS).
    public static func encodeRecord(
        type: PacketLoggerType, data: [UInt8], unixMicroseconds: Int64, bigEndian: Bool = true
    ) -> [UInt8] {
        var w = ByteWriter()
        let seconds = UInt32(truncatingIfNeeded: unixMicroseconds / 1_000_000)
        let micros = UInt32(truncatingIfNeeded: unixMicroseconds % 1_000_000)
        for value in [UInt32(truncatingIfNeeded: 9 + data.count), seconds, micros] {
            if bigEndian { w.uint32BE(value) } else { w.uint32LE(value) }
        }
        w.uint8(type.rawValue)
        w.append(data)
        return w.bytes
    }

    /// A packet's record, or nil for one PacketLogger has no type for (an ISO packet).
    public static func encodeRecord(
        packet: H4Packet, direction: PacketDirection, unixMicroseconds: Int64, bigEndian: Bool = true
    ) -> [UInt8]? {
        guard let type = PacketLoggerType(packet: packet.type, direction: direction) else { return nil }
        return encodeRecord(type: type, data: packet.body, unixMicroseconds: unixMicroseconds, bigEndian: bigEndian)
    }

    /// What the first bytes of a file say, as Wireshark's reader decides it: `.yes(bigEndian:)`
    /// when they are a plausible PacketLogger record (length 8…65535, microseconds below one
    /// million, a known type), `.no` when they cannot be, `.needMore` until 13 bytes are there.
    public enum Recognition: Equatable, Sendable {
        case yes(bigEndian: Bool)
        case no
        case needMore
    }

    public static func recognize(_ bytes: some Collection<UInt8>) -> Recognition {
        let b = Array(bytes.prefix(recordHeaderLength + 1))
        guard b.count >= recordHeaderLength else { return .needMore }
        let bigEndian = isBigEndian(firstLength: b)
        let length = uint32(b, at: 0, bigEndian: bigEndian)
        let micros = uint32(b, at: 8, bigEndian: bigEndian)
        guard length >= 8, length < 65536, micros < 1_000_000 else { return .no }
        guard length > 8 else { return .yes(bigEndian: bigEndian) }
        guard b.count > recordHeaderLength else { return .needMore }
        return PacketLoggerType.known.contains(PacketLoggerType(rawValue: b[recordHeaderLength]))
            ? .yes(bigEndian: bigEndian) : .no
    }

    /// Wireshark's rule on the first record's length field (at least 4 bytes), read little-endian:
    /// low 16 bits zero and high 16 bits not means the file is big-endian.
    public static func isBigEndian(firstLength b: [UInt8], at i: Int = 0) -> Bool {
        let little = uint32(b, at: i, bigEndian: false)
        return little & 0xFFFF == 0 && little & 0xFFFF_0000 != 0
    }

    static func uint32(_ b: [UInt8], at i: Int, bigEndian: Bool) -> UInt32 {
        bigEndian
            ? UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
            : UInt32(b[i]) | UInt32(b[i + 1]) << 8 | UInt32(b[i + 2]) << 16 | UInt32(b[i + 3]) << 24
    }
}

/// Reads PacketLogger records from a byte stream: the same pure state machine as
/// `BTSnoopDecoder` (`append`, `next` until nil, `finish` at the end), giving `BTSnoopRecord`s
/// (timestamps in the btsnoop epoch) so everything after the reader is shared. The byte order is
/// fixed by the first record. Total: a record whose length is below 8 or above
/// `PacketLogger.maximumLength` throws `BTSnoopError.invalidRecord` (nothing after it can be
/// framed), a cut one `truncatedRecord` at `finish`; never a trap.
public struct PacketLoggerDecoder: Sendable {
    /// Known once the first record's header is there.
    public private(set) var bigEndian: Bool?
    public private(set) var recordsRead = 0
    /// Records that carried no HCI packet (notes, syslog, LMP…), skipped by readers.
    public private(set) var otherRecords = 0
    var buffer: [UInt8] = []
    var position = 0
    /// File offset of `buffer[position]`.
    public private(set) var offset = 0
    private var failure: BTSnoopError?

    public init() {}

    public mutating func append(_ bytes: some Collection<UInt8>) {
        if position > 0 && position >= buffer.count / 2 {
            buffer.removeFirst(position)
            position = 0
        }
        buffer.append(contentsOf: bytes)
    }

    private mutating func fail(_ error: BTSnoopError) -> BTSnoopError {
        failure = error
        return error
    }

    /// The next complete record (its `packet` nil for a record of another type), or nil when
    /// more bytes are needed.
    public mutating func next() throws(BTSnoopError) -> BTSnoopRecord? {
        if let failure { throw failure }
        let available = buffer.count - position
        guard available >= PacketLogger.recordHeaderLength else { return nil }
        let p = position
        let big = bigEndian ?? PacketLogger.isBigEndian(firstLength: buffer, at: p)
        bigEndian = big
        let length = Int(PacketLogger.uint32(buffer, at: p, bigEndian: big))
        guard length >= 8 else {
            throw fail(
                .invalidRecord(
                    index: recordsRead, offset: offset,
                    reason: "has a length of \(length), less than the 8 bytes of its time stamp"))
        }
        guard length <= PacketLogger.maximumLength else {
            throw fail(
                .invalidRecord(
                    index: recordsRead, offset: offset,
                    reason:
                        "claims \(length) bytes, more than the largest HCI packet's record (\(PacketLogger.maximumLength))"
                ))
        }
        let total = 4 + length
        guard available >= total else { return nil }
        let seconds = Int64(PacketLogger.uint32(buffer, at: p + 4, bigEndian: big))
        let micros = Int64(PacketLogger.uint32(buffer, at: p + 8, bigEndian: big))
        var record = BTSnoopRecord(
            packet: nil, direction: .received,
            timestampMicros: BTSnoop.timestamp(unixMicroseconds: seconds * 1_000_000 + micros),
            originalLength: max(0, length - 9))
        if length > 8, let (type, direction) = PacketLoggerType(rawValue: buffer[p + 12]).packet {
            record.packet = H4Packet(type: type, body: Array(buffer[(p + 13)..<(p + total)]))
            record.direction = direction
        } else {
            otherRecords += 1
        }
        position += total
        offset += total
        recordsRead += 1
        return record
    }

    /// Call at the end of the input: throws when bytes are left that do not make a record.
    public mutating func finish() throws(BTSnoopError) {
        if let failure { throw failure }
        let available = buffer.count - position
        guard available > 0 else { return }
        var needed = PacketLogger.recordHeaderLength
        if available >= 4 {
            let big = bigEndian ?? PacketLogger.isBigEndian(firstLength: buffer, at: position)
            needed = max(needed, 4 + Int(PacketLogger.uint32(buffer, at: position, bigEndian: big)))
        }
        throw fail(.truncatedRecord(index: recordsRead, offset: offset, needed: needed, available: available))
    }
}
