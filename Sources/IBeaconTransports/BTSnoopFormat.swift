import IBeaconCore
import IBeaconHost

/// The btsnoop capture format, as much of it as recording and replay need. All fields are
/// big-endian. (A fuller codec lives in IBeaconCore; this one is private to the transports.)
///
/// File header: `btsnoop\0`, version (4 bytes) = 1, datalink (4 bytes).
/// Record: original length (4), included length (4), flags (4), cumulative drops (4),
/// timestamp (8, signed, microseconds since midnight 1 January 0 AD), then the packet.
enum BTSnoopFormat {
    static let magic: [UInt8] = Array("btsnoop".utf8) + [0]
    static let version: UInt32 = 1
    static let headerSize = 16
    static let recordHeaderSize = 24
    /// Microseconds from 0 AD to the Unix epoch.
    static let unixEpochOffset: Int64 = 0x00dc_ddb3_0f2f_8000

    /// What the record bytes are.
    struct Datalink: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
        let rawValue: UInt32
        init(rawValue: UInt32) { self.rawValue = rawValue }
        /// HCI packets without the H4 type byte; flags tell commands/events from data.
        static let hciUnencapsulated = Datalink(rawValue: 1001)
        /// H4: each record starts with the packet type byte. What we write.
        static let h4 = Datalink(rawValue: 1002)
        /// BlueZ monitor (`btmon -w`): flags carry the adapter index and an opcode.
        static let linuxMonitor = Datalink(rawValue: 2001)

        var description: String {
            switch self {
            case .hciUnencapsulated: "1001 (HCI, unencapsulated)"
            case .h4: "1002 (HCI UART/H4)"
            case .linuxMonitor: "2001 (Linux monitor)"
            default: "\(rawValue)"
            }
        }
    }

    /// Record flags. Bit 0: direction (0 = sent by the host, 1 = received by the host);
    /// bit 1: 0 = data, 1 = command or event.
    static func flags(for packet: H4Packet, direction: PacketDirection) -> UInt32 {
        let received: UInt32 = direction == .received ? 1 : 0
        let control: UInt32 = packet.type == .command || packet.type == .event ? 2 : 0
        return received | control
    }

    static func fileHeader(datalink: Datalink = .h4) -> [UInt8] {
        var w = ByteWriter()
        w.append(magic)
        w.uint32BE(version)
        w.uint32BE(datalink.rawValue)
        return w.bytes
    }

    /// One H4 record; `unixMicroseconds` is wall-clock time since 1970.
    static func record(_ packet: H4Packet, direction: PacketDirection, unixMicroseconds: Int64) -> [UInt8] {
        let data = packet.bytes
        var w = ByteWriter()
        w.uint32BE(UInt32(data.count))  // original length
        w.uint32BE(UInt32(data.count))  // included length: we never truncate
        w.uint32BE(flags(for: packet, direction: direction))
        w.uint32BE(0)  // cumulative drops
        w.uint64BE(UInt64(bitPattern: unixMicroseconds + unixEpochOffset))
        w.append(data)
        return w.bytes
    }

    struct Record: Sendable, Equatable {
        var packet: H4Packet
        var direction: PacketDirection
        /// Microseconds since 0 AD, as stored.
        var timestamp: Int64
    }

    /// Decodes a whole capture; a problem is reported with the file name and byte offset.
    static func decode(_ bytes: [UInt8], file: String) throws(TransportError) -> [Record] {
        func bad(_ offset: Int, _ why: String) -> TransportError {
            TransportError(.io, "\(file) is not a usable btsnoop capture: \(why) at offset \(offset)")
        }
        var r = ByteReader(bytes)
        guard let magicBytes = try? r.readBytes(8), magicBytes == magic else {
            throw bad(0, "missing the 'btsnoop' signature")
        }
        guard let version = try? r.readUInt32BE(), version == self.version else {
            throw bad(8, "unsupported version (only 1 exists)")
        }
        guard let datalinkValue = try? r.readUInt32BE() else { throw bad(12, "truncated header") }
        let datalink = Datalink(rawValue: datalinkValue)
        guard [.h4, .hciUnencapsulated, .linuxMonitor].contains(datalink) else {
            throw bad(12, "unsupported datalink \(datalink) (expected 1001, 1002 or 2001)")
        }
        var records: [Record] = []
        while !r.isAtEnd {
            let start = r.offset
            guard r.remaining >= recordHeaderSize,
                let original = try? r.readUInt32BE(), let included = try? r.readUInt32BE(),
                let flags = try? r.readUInt32BE(), (try? r.readUInt32BE()) != nil,
                let timestamp = try? r.readUInt64BE()
            else { throw bad(start, "truncated record header (\(r.remaining) byte(s) left)") }
            guard included <= original else {
                throw bad(start, "included length \(included) exceeds original length \(original)")
            }
            guard let data = try? r.readBytes(Int(included)) else {
                throw bad(start, "record of \(included) byte(s) is truncated")
            }
            let stamp = Int64(bitPattern: timestamp)
            switch datalink {
            case .h4:
                guard let type = data.first else { throw bad(start, "empty record") }
                records.append(
                    Record(
                        packet: H4Packet(type: H4PacketType(rawValue: type), body: Array(data.dropFirst())),
                        direction: flags & 1 == 1 ? .received : .sent, timestamp: stamp))
            case .hciUnencapsulated:
                let received = flags & 1 == 1
                let type: H4PacketType = flags & 2 == 2 ? (received ? .event : .command) : .acl
                records.append(
                    Record(
                        packet: H4Packet(type: type, body: data), direction: received ? .received : .sent,
                        timestamp: stamp))
            default:
                // BlueZ src/shared/btsnoop.h: opcode in the low 16 bits of flags.
                let packet: (H4PacketType, PacketDirection)? =
                    switch flags & 0xFFFF {
                    case 2: (.command, .sent)
                    case 3: (.event, .received)
                    case 4: (.acl, .sent)
                    case 5: (.acl, .received)
                    case 6: (.sco, .sent)
                    case 7: (.sco, .received)
                    case 18: (.iso, .sent)
                    case 19: (.iso, .received)
                    default: nil  // index added/removed, notes, system notes: not packets
                    }
                if let (type, direction) = packet {
                    records.append(
                        Record(packet: H4Packet(type: type, body: data), direction: direction, timestamp: stamp))
                }
            }
        }
        return records
    }
}
