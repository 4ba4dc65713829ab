import Foundation

/// An iBeacon: Apple's manufacturer-specific advertisement carrying a proximity UUID, a major
/// and a minor number, and the measured power (RSSI at 1 m).
public struct IBeacon: Hashable, Sendable {
    public var proximityUUID: UUID
    public var major: UInt16
    public var minor: UInt16
    /// RSSI in dBm that a receiver sees at 1 m. Sent as a signed byte (0xC5 = -59).
    public var measuredPower: Int8

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    /// Upper-case canonical 8-4-4-4-12.
    public var uuidString: String { proximityUUID.uuidString }

    /// Apple's iBeacon type (0x02) and the length of what follows it (0x15 = 21).
    static let typeAndLength: [UInt8] = [0x02, 0x15]

    /// The manufacturer-specific data after the company identifier: type, length, UUID,
    /// major, minor, power. The big-endian fields are written here and nowhere else.
    public var payload: [UInt8] {
        var w = ByteWriter()
        w.append(Self.typeAndLength)
        w.append(uuidBytes)
        w.uint16BE(major)
        w.uint16BE(minor)
        w.int8(measuredPower)
        return w.bytes
    }

    public var uuidBytes: [UInt8] {
        let u = proximityUUID.uuid
        return [
            u.0, u.1, u.2, u.3, u.4, u.5, u.6, u.7, u.8, u.9, u.10, u.11, u.12, u.13, u.14, u.15,
        ]
    }

    /// The 30 bytes of legacy advertising data: Flags (LE General Discoverable, BR/EDR not
    /// supported) and the manufacturer-specific data for company 0x004C (little-endian).
    public var advertisingData: [UInt8] {
        [0x02, ADType.flags.rawValue, 0x06, 0x1A, ADType.manufacturerSpecificData.rawValue, 0x4C, 0x00] + payload
    }

    /// Reads an iBeacon from manufacturer-specific data (company id first, as in the AD
    /// structure). Nil unless it is Apple's, of iBeacon type, and exactly 25 bytes long.
    public init?(manufacturerData data: [UInt8]) {
        guard data.count == 25, data[0] == 0x4C, data[1] == 0x00, data[2] == 0x02, data[3] == 0x15 else {
            return nil
        }
        var r = ByteReader(data.dropFirst(4))
        guard let uuid = try? r.readBytes(16, "proximity UUID"), let major = try? r.readUInt16BE("major"),
            let minor = try? r.readUInt16BE("minor"), let power = try? r.readInt8("measured power")
        else { return nil }
        self.init(
            proximityUUID: UUID(
                uuid: (
                    uuid[0], uuid[1], uuid[2], uuid[3], uuid[4], uuid[5], uuid[6], uuid[7], uuid[8], uuid[9], uuid[10],
                    uuid[11], uuid[12], uuid[13], uuid[14], uuid[15]
                )), major: major, minor: minor, measuredPower: power)
    }

    /// The first iBeacon among the AD structures of an advertisement.
    public static func find(in structures: [ADStructure]) -> IBeacon? {
        for s in structures where s.type == .manufacturerSpecificData {
            if let b = IBeacon(manufacturerData: s.data) { return b }
        }
        return nil
    }
}
