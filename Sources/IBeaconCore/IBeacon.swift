#if canImport(FoundationEssentials)
    import FoundationEssentials
#else
    import Foundation
#endif

/// An iBeacon advertisement: Apple's Manufacturer Specific Data with type 0x02, length 0x15.
///
/// Manufacturer data layout (25 bytes, see FIELD.md):
/// `4C 00` company Apple (LE) · `02` type · `15` remaining length 21 · 16-byte proximity UUID as
/// written · major (BE) · minor (BE) · measured power (int8).
public struct IBeacon: Hashable, Sendable, CustomStringConvertible {
    public var proximityUUID: UUID
    public var major: UInt16
    public var minor: UInt16
    /// RSSI in dBm at 1 m (signed, e.g. -59 = 0xC5).
    public var measuredPower: Int8

    public init(proximityUUID: UUID, major: UInt16, minor: UInt16, measuredPower: Int8) {
        self.proximityUUID = proximityUUID
        self.major = major
        self.minor = minor
        self.measuredPower = measuredPower
    }

    static let type: UInt8 = 0x02
    static let remainingLength: UInt8 = 0x15

    /// The AD data of the Manufacturer Specific Data structure, company id included.
    /// The only place the big-endian iBeacon fields are written.
    public var manufacturerData: [UInt8] {
        var w = ByteWriter()
        w.uint16LE(CompanyIdentifier.apple.rawValue)
        w.uint8(Self.type)
        w.uint8(Self.remainingLength)
        w.append(proximityUUID.bytes)
        w.uint16BE(major)
        w.uint16BE(minor)
        w.int8(measuredPower)
        return w.bytes
    }

    /// Flags (LE General Discoverable, BR/EDR Not Supported) + the manufacturer data.
    public var adStructures: [ADStructure] {
        [
            ADStructure(type: .flags, data: [0x06]),
            ADStructure(type: .manufacturerSpecificData, data: manufacturerData),
        ]
    }

    /// The 30 bytes of legacy advertising data (without the zero padding to 31).
    public var advertisingData: [UInt8] {
        var w = ByteWriter()
        for s in adStructures {
            w.uint8(UInt8(s.data.count + 1))  // 2 and 26: both structures are fixed-size
            w.uint8(s.type.rawValue)
            w.append(s.data)
        }
        return w.bytes
    }

    /// Decodes Manufacturer Specific Data (company id first). Throws saying why it is not an
    /// iBeacon.
    public static func decode(manufacturerData data: [UInt8]) throws(DecodingError) -> IBeacon {
        var r = ByteReader(data)
        let company = try r.readUInt16LE("company identifier")
        guard company == CompanyIdentifier.apple.rawValue else {
            throw .invalidValue(what: "iBeacon company identifier", value: Int(company), allowed: "0x004C (Apple)")
        }
        let type = try r.readUInt8("iBeacon type")
        guard type == Self.type else { throw .invalidValue(what: "iBeacon type", value: Int(type), allowed: "0x02") }
        let length = try r.readUInt8("iBeacon length")
        guard length == Self.remainingLength else {
            throw .invalidValue(what: "iBeacon length", value: Int(length), allowed: "0x15 (21)")
        }
        let uuid = try r.readBytes(16, "iBeacon proximity UUID")
        let major = try r.readUInt16BE("iBeacon major")
        let minor = try r.readUInt16BE("iBeacon minor")
        let power = try r.readInt8("iBeacon measured power")
        try r.expectEnd("iBeacon manufacturer data")
        return IBeacon(proximityUUID: UUID(bytes: uuid), major: major, minor: minor, measuredPower: power)
    }

    /// nil unless `data` is exactly `4C 00 02 15` + 21 bytes.
    public init?(manufacturerData data: [UInt8]) {
        guard let b = try? IBeacon.decode(manufacturerData: data) else { return nil }
        self = b
    }

    /// The first iBeacon among the structures' Manufacturer Specific Data.
    public static func find(in structures: [ADStructure]) -> IBeacon? {
        for s in structures where s.type == .manufacturerSpecificData {
            if let b = IBeacon(manufacturerData: s.data) { return b }
        }
        return nil
    }

    /// `iBeacon F7826DA6-4FA2-4E98-8024-BC5B71E0893E major 258 minor 772 measured power -59 dBm`
    public var description: String {
        "iBeacon \(proximityUUID.uuidString) major \(major) minor \(minor) measured power \(measuredPower) dBm"
    }
}

extension IBeacon {
    /// The proximity UUID, upper-case 8-4-4-4-12.
    public var uuidString: String { proximityUUID.uuidString }
}

extension IBeacon {
    /// The first iBeacon in raw advertising data, or nil when there is none or the data is
    /// malformed. Gives exactly `find(in: ADStructure.parse(data))` (a test checks it on random
    /// input) but walks the bytes in place without allocating: scanning decodes every report
    /// of every event, and most of them are not iBeacons.
    public static func find(inAdvertisingData data: [UInt8]) -> IBeacon? {
        find(inAdvertisingData: data.span)
    }

    /// `find(inAdvertisingData:)` of the bytes of a slice.
    public static func find(inAdvertisingData data: ArraySlice<UInt8>) -> IBeacon? {
        find(inAdvertisingData: data.span)
    }

    /// `find(inAdvertisingData:)` of the bytes a span views.
    public static func find(inAdvertisingData data: Span<UInt8>) -> IBeacon? {
        var found: IBeacon?
        var i = 0
        let n = data.count
        while i < n {
            let length = Int(data[i])
            if length == 0 {
                // Core 5.4 Vol 3 Part C §11: only zero padding may follow a zero length.
                var j = i + 1
                while j < n {
                    if data[j] != 0 { return nil }
                    j += 1
                }
                return found
            }
            guard length <= n - i - 1 else { return nil }  // runs past the end
            // Flags-independent match: AD type 0xFF, Apple (4C 00), iBeacon type 02, length 15.
            if found == nil, length == 26, data[i + 1] == 0xFF, data[i + 2] == 0x4C, data[i + 3] == 0x00,
                data[i + 4] == Self.type, data[i + 5] == Self.remainingLength
            {
                let u = i + 6
                let uuid = UUID(
                    uuid: (
                        data[u], data[u + 1], data[u + 2], data[u + 3], data[u + 4], data[u + 5], data[u + 6],
                        data[u + 7], data[u + 8], data[u + 9], data[u + 10], data[u + 11], data[u + 12],
                        data[u + 13], data[u + 14], data[u + 15]
                    ))
                found = IBeacon(
                    proximityUUID: uuid, major: UInt16(data[u + 16]) << 8 | UInt16(data[u + 17]),
                    minor: UInt16(data[u + 18]) << 8 | UInt16(data[u + 19]),
                    measuredPower: Int8(bitPattern: data[u + 20]))
            }
            i += 1 + length
        }
        return found
    }
}
