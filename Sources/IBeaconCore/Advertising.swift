/// An AD type (Bluetooth Assigned Numbers §2.3, "Common Data Types"). An open value set:
/// unknown types survive decoding and print as `unknown AD type (0x77)`.
public struct ADType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let flags = ADType(rawValue: 0x01)
    public static let incompleteList16BitServiceUUIDs = ADType(rawValue: 0x02)
    public static let completeList16BitServiceUUIDs = ADType(rawValue: 0x03)
    public static let incompleteList32BitServiceUUIDs = ADType(rawValue: 0x04)
    public static let completeList32BitServiceUUIDs = ADType(rawValue: 0x05)
    public static let incompleteList128BitServiceUUIDs = ADType(rawValue: 0x06)
    public static let completeList128BitServiceUUIDs = ADType(rawValue: 0x07)
    public static let shortenedLocalName = ADType(rawValue: 0x08)
    public static let completeLocalName = ADType(rawValue: 0x09)
    public static let txPowerLevel = ADType(rawValue: 0x0A)
    public static let classOfDevice = ADType(rawValue: 0x0D)
    public static let peripheralConnectionIntervalRange = ADType(rawValue: 0x12)
    public static let list16BitServiceSolicitationUUIDs = ADType(rawValue: 0x14)
    public static let list128BitServiceSolicitationUUIDs = ADType(rawValue: 0x15)
    public static let serviceData16BitUUID = ADType(rawValue: 0x16)
    public static let publicTargetAddress = ADType(rawValue: 0x17)
    public static let randomTargetAddress = ADType(rawValue: 0x18)
    public static let appearance = ADType(rawValue: 0x19)
    public static let advertisingInterval = ADType(rawValue: 0x1A)
    public static let leBluetoothDeviceAddress = ADType(rawValue: 0x1B)
    public static let leRole = ADType(rawValue: 0x1C)
    public static let list32BitServiceSolicitationUUIDs = ADType(rawValue: 0x1F)
    public static let serviceData32BitUUID = ADType(rawValue: 0x20)
    public static let serviceData128BitUUID = ADType(rawValue: 0x21)
    public static let uri = ADType(rawValue: 0x24)
    public static let leSupportedFeatures = ADType(rawValue: 0x27)
    public static let broadcastName = ADType(rawValue: 0x30)
    public static let manufacturerSpecificData = ADType(rawValue: 0xFF)

    /// The Assigned Numbers name, or nil for a type this table does not know.
    public var name: String? {
        switch rawValue {
        case 0x01: return "Flags"
        case 0x02: return "Incomplete List of 16-bit Service Class UUIDs"
        case 0x03: return "Complete List of 16-bit Service Class UUIDs"
        case 0x04: return "Incomplete List of 32-bit Service Class UUIDs"
        case 0x05: return "Complete List of 32-bit Service Class UUIDs"
        case 0x06: return "Incomplete List of 128-bit Service Class UUIDs"
        case 0x07: return "Complete List of 128-bit Service Class UUIDs"
        case 0x08: return "Shortened Local Name"
        case 0x09: return "Complete Local Name"
        case 0x0A: return "Tx Power Level"
        case 0x0D: return "Class of Device"
        case 0x0E: return "Simple Pairing Hash C-192"
        case 0x0F: return "Simple Pairing Randomizer R-192"
        case 0x10: return "Device ID"
        case 0x11: return "Security Manager Out of Band Flags"
        case 0x12: return "Peripheral Connection Interval Range"
        case 0x14: return "List of 16-bit Service Solicitation UUIDs"
        case 0x15: return "List of 128-bit Service Solicitation UUIDs"
        case 0x16: return "Service Data - 16-bit UUID"
        case 0x17: return "Public Target Address"
        case 0x18: return "Random Target Address"
        case 0x19: return "Appearance"
        case 0x1A: return "Advertising Interval"
        case 0x1B: return "LE Bluetooth Device Address"
        case 0x1C: return "LE Role"
        case 0x1D: return "Simple Pairing Hash C-256"
        case 0x1E: return "Simple Pairing Randomizer R-256"
        case 0x1F: return "List of 32-bit Service Solicitation UUIDs"
        case 0x20: return "Service Data - 32-bit UUID"
        case 0x21: return "Service Data - 128-bit UUID"
        case 0x22: return "LE Secure Connections Confirmation Value"
        case 0x23: return "LE Secure Connections Random Value"
        case 0x24: return "URI"
        case 0x25: return "Indoor Positioning"
        case 0x26: return "Transport Discovery Data"
        case 0x27: return "LE Supported Features"
        case 0x28: return "Channel Map Update Indication"
        case 0x29: return "PB-ADV"
        case 0x2A: return "Mesh Message"
        case 0x2B: return "Mesh Beacon"
        case 0x2C: return "BIGInfo"
        case 0x2D: return "Broadcast_Code"
        case 0x2E: return "Resolvable Set Identifier"
        case 0x2F: return "Advertising Interval - long"
        case 0x30: return "Broadcast Name"
        case 0x31: return "Encrypted Advertising Data"
        case 0x32: return "Periodic Advertising Response Timing Information"
        case 0x34: return "Electronic Shelf Label"
        case 0x3D: return "3D Information Data"
        case 0xFF: return "Manufacturer Specific Data"
        default: return nil
        }
    }

    /// `Flags (0x01)` or `unknown AD type (0x77)`.
    public var description: String { "\(name ?? "unknown AD type") (0x\(paddedHex(UInt32(rawValue), 2)))" }
}

/// A Bluetooth SIG company identifier (Assigned Numbers §7.1), carried little-endian at the
/// start of Manufacturer Specific Data. Open value set.
public struct CompanyIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let ericsson = CompanyIdentifier(rawValue: 0x0000)
    public static let intel = CompanyIdentifier(rawValue: 0x0002)
    public static let microsoft = CompanyIdentifier(rawValue: 0x0006)
    public static let texasInstruments = CompanyIdentifier(rawValue: 0x000D)
    public static let broadcom = CompanyIdentifier(rawValue: 0x000F)
    public static let apple = CompanyIdentifier(rawValue: 0x004C)
    public static let nordicSemiconductor = CompanyIdentifier(rawValue: 0x0059)
    public static let samsung = CompanyIdentifier(rawValue: 0x0075)
    public static let google = CompanyIdentifier(rawValue: 0x00E0)
    public static let ruuvi = CompanyIdentifier(rawValue: 0x0499)
    /// Reserved for tests and internal use by the SIG ("Bluetooth SIG Specified").
    public static let testing = CompanyIdentifier(rawValue: 0xFFFF)

    public var name: String? {
        switch rawValue {
        case 0x0000: return "Ericsson AB"
        case 0x0002: return "Intel Corp."
        case 0x0006: return "Microsoft"
        case 0x000D: return "Texas Instruments Inc."
        case 0x000F: return "Broadcom Corporation"
        case 0x004C: return "Apple, Inc."
        case 0x0059: return "Nordic Semiconductor ASA"
        case 0x0075: return "Samsung Electronics Co. Ltd."
        case 0x00E0: return "Google"
        case 0x0499: return "Ruuvi Innovations Ltd."
        case 0xFFFF: return "Bluetooth SIG Specified (test)"
        default: return nil
        }
    }

    /// `Apple, Inc. (0x004C)` or `unknown company (0x1234)`.
    public var description: String { "\(name ?? "unknown company") (0x\(paddedHex(UInt32(rawValue), 4)))" }
}

/// Why AD structures cannot be encoded.
public enum AdvertisingDataError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The encoded data is `length` bytes; the limit is `limit` (31 for legacy advertising,
    /// Core 5.4 Vol 4 Part E §7.8.7). Never truncated.
    case tooLong(length: Int, limit: Int)
    /// One structure's data is `count` bytes; a length octet can cover at most 254 (+ type).
    case structureTooLong(type: ADType, count: Int)

    public var description: String {
        switch self {
        case .tooLong(let length, let limit):
            return
                "advertising data is \(length) bytes, the limit is \(limit); remove or shorten AD structures (e.g. the name)"
        case .structureTooLong(let type, let count):
            return "\(type) carries \(count) bytes; one AD structure holds at most 254"
        }
    }
}

/// One AD structure: Length, AD Type, AD Data (Core 5.4 Vol 3 Part C §11).
public struct ADStructure: Hashable, Sendable, CustomStringConvertible {
    public var type: ADType
    /// The AD data after the type octet.
    public var data: [UInt8]

    public init(type: ADType, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    /// Legacy advertising and scan response data hold at most 31 octets
    /// (Core 5.4 Vol 4 Part E §7.8.7, Vol 3 Part C §11).
    public static let legacyLimit = 31

    /// Splits advertising or scan response data into AD structures, unknown types kept.
    ///
    /// Core 5.4 Vol 3 Part C §11: "The data consists of a significant part and a non-significant
    /// part … The non-significant part … shall contain all-zero octets. If the Length field is set
    /// to zero, then the Data field has zero octets. This shall only occur to allow an early
    /// termination." So a zero length ends the significant part, and anything after it must be
    /// zero padding. Any input length is accepted (extended advertising data is longer than 31).
    public static func parse(_ bytes: [UInt8]) throws(DecodingError) -> [ADStructure] {
        var reader = ByteReader(bytes)
        var out: [ADStructure] = []
        while !reader.isAtEnd {
            let start = reader.offset
            let length = try reader.readUInt8("AD structure length")
            if length == 0 {
                let padding = reader.readRest()
                if let k = padding.firstIndex(where: { $0 != 0 }) {
                    throw .invalidValue(
                        what:
                            "advertising data byte at offset \(start + 1 + k), after the zero-length terminator at offset \(start) "
                            + "(non-significant part must be zero, Core 5.4 Vol 3 Part C §11)",
                        value: Int(padding[k]), allowed: "0")
                }
                break
            }
            let type = ADType(rawValue: try reader.readUInt8("AD type"))
            let data = try reader.readBytes(
                Int(length) - 1, "AD structure \(type) at offset \(start) (length \(length))")
            out.append(ADStructure(type: type, data: data))
        }
        return out
    }

    /// Concatenates structures (no padding). Throws rather than truncate when the result is
    /// longer than `limit`.
    public static func encode(_ structures: [ADStructure], limit: Int = legacyLimit) throws(AdvertisingDataError)
        -> [UInt8]
    {
        var w = ByteWriter()
        for s in structures {
            guard s.data.count <= 254 else { throw .structureTooLong(type: s.type, count: s.data.count) }
            w.uint8(UInt8(s.data.count + 1))
            w.uint8(s.type.rawValue)
            w.append(s.data)
        }
        guard w.bytes.count <= limit else { throw .tooLong(length: w.bytes.count, limit: limit) }
        return w.bytes
    }

    /// The Flags AD data bits (Core Specification Supplement v11 Part A §1.3).
    public static func flagNames(_ flags: UInt8) -> [String] {
        let names = [
            "LE Limited Discoverable Mode", "LE General Discoverable Mode", "BR/EDR Not Supported",
            "Simultaneous LE and BR/EDR (Controller)", "Simultaneous LE and BR/EDR (Host)",
        ]
        var out: [String] = []
        for bit in 0..<8 where flags & (1 << bit) != 0 {
            out.append(bit < names.count ? names[bit] : "reserved bit \(bit)")
        }
        return out
    }

    /// One line for people: `Flags: LE General Discoverable Mode, BR/EDR Not Supported (0x06)`.
    public var summary: String {
        let hexData = data.hexString(separator: " ")
        switch type {
        case .flags where data.count == 1:
            let names = ADStructure.flagNames(data[0])
            let list = names.isEmpty ? "none" : names.joined(separator: ", ")
            return "Flags: \(list) (0x\(paddedHex(UInt32(data[0]), 2)))"
        case .completeLocalName, .shortenedLocalName, .broadcastName:
            if let s = String(validating: data, as: UTF8.self) {
                return "\(type.name ?? ""): \(JSONWriter.quoted(s))"
            }
            return "\(type.name ?? ""): (not UTF-8) \(hexData)"
        case .txPowerLevel where data.count == 1:
            return "Tx Power Level: \(Int8(bitPattern: data[0])) dBm"
        case .incompleteList16BitServiceUUIDs, .completeList16BitServiceUUIDs, .list16BitServiceSolicitationUUIDs:
            guard data.count % 2 == 0 else { break }
            let uuids = stride(from: 0, to: data.count, by: 2).map {
                "0x" + paddedHex(UInt32(data[$0]) | UInt32(data[$0 + 1]) << 8, 4)
            }
            return "\(type.name ?? ""): \(uuids.joined(separator: ", "))"
        case .serviceData16BitUUID where data.count >= 2:
            let uuid = UInt32(data[0]) | UInt32(data[1]) << 8
            let rest = Array(data.dropFirst(2)).hexString(separator: " ")
            return "Service Data - 16-bit UUID: 0x\(paddedHex(uuid, 4)) \(rest)"
        case .manufacturerSpecificData where data.count >= 2:
            let company = CompanyIdentifier(rawValue: UInt16(data[0]) | UInt16(data[1]) << 8)
            if let beacon = IBeacon(manufacturerData: data) {
                return "Manufacturer Specific Data: \(company) \(beacon)"
            }
            return "Manufacturer Specific Data: \(company) \(Array(data.dropFirst(2)).hexString(separator: " "))"
        default:
            break
        }
        return "\(type): \(data.isEmpty ? "(empty)" : hexData)"
    }

    public var description: String { summary }
}
