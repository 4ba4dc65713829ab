/// An AD type (Assigned Numbers §2.3). An open value set: unknown types survive decoding.
public struct ADType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let flags = ADType(rawValue: 0x01)
    public static let incompleteList16BitUUIDs = ADType(rawValue: 0x02)
    public static let completeList16BitUUIDs = ADType(rawValue: 0x03)
    public static let incompleteList32BitUUIDs = ADType(rawValue: 0x04)
    public static let completeList32BitUUIDs = ADType(rawValue: 0x05)
    public static let incompleteList128BitUUIDs = ADType(rawValue: 0x06)
    public static let completeList128BitUUIDs = ADType(rawValue: 0x07)
    public static let shortenedLocalName = ADType(rawValue: 0x08)
    public static let completeLocalName = ADType(rawValue: 0x09)
    public static let txPowerLevel = ADType(rawValue: 0x0A)
    public static let classOfDevice = ADType(rawValue: 0x0D)
    public static let peripheralConnectionIntervalRange = ADType(rawValue: 0x12)
    public static let serviceData16BitUUID = ADType(rawValue: 0x16)
    public static let publicTargetAddress = ADType(rawValue: 0x17)
    public static let appearance = ADType(rawValue: 0x19)
    public static let advertisingInterval = ADType(rawValue: 0x1A)
    public static let serviceData32BitUUID = ADType(rawValue: 0x20)
    public static let serviceData128BitUUID = ADType(rawValue: 0x21)
    public static let uri = ADType(rawValue: 0x24)
    public static let manufacturerSpecificData = ADType(rawValue: 0xFF)

    public var name: String? {
        switch self {
        case .flags: "Flags"
        case .incompleteList16BitUUIDs: "Incomplete List of 16-bit Service UUIDs"
        case .completeList16BitUUIDs: "Complete List of 16-bit Service UUIDs"
        case .incompleteList32BitUUIDs: "Incomplete List of 32-bit Service UUIDs"
        case .completeList32BitUUIDs: "Complete List of 32-bit Service UUIDs"
        case .incompleteList128BitUUIDs: "Incomplete List of 128-bit Service UUIDs"
        case .completeList128BitUUIDs: "Complete List of 128-bit Service UUIDs"
        case .shortenedLocalName: "Shortened Local Name"
        case .completeLocalName: "Complete Local Name"
        case .txPowerLevel: "Tx Power Level"
        case .classOfDevice: "Class of Device"
        case .peripheralConnectionIntervalRange: "Peripheral Connection Interval Range"
        case .serviceData16BitUUID: "Service Data - 16-bit UUID"
        case .publicTargetAddress: "Public Target Address"
        case .appearance: "Appearance"
        case .advertisingInterval: "Advertising Interval"
        case .serviceData32BitUUID: "Service Data - 32-bit UUID"
        case .serviceData128BitUUID: "Service Data - 128-bit UUID"
        case .uri: "URI"
        case .manufacturerSpecificData: "Manufacturer Specific Data"
        default: nil
        }
    }

    public var description: String {
        "\(name ?? "unknown AD type") (0x\([rawValue].hexString.uppercased()))"
    }
}

/// A Bluetooth SIG company identifier (Assigned Numbers §7). Open value set.
public struct CompanyIdentifier: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt16
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    public static let ericsson = CompanyIdentifier(rawValue: 0x0000)
    public static let nokia = CompanyIdentifier(rawValue: 0x0001)
    public static let intel = CompanyIdentifier(rawValue: 0x0002)
    public static let ibm = CompanyIdentifier(rawValue: 0x0003)
    public static let microsoft = CompanyIdentifier(rawValue: 0x0006)
    public static let broadcom = CompanyIdentifier(rawValue: 0x000F)
    public static let qualcomm = CompanyIdentifier(rawValue: 0x001D)
    public static let apple = CompanyIdentifier(rawValue: 0x004C)
    public static let nordic = CompanyIdentifier(rawValue: 0x0059)
    public static let realtek = CompanyIdentifier(rawValue: 0x005D)
    public static let samsung = CompanyIdentifier(rawValue: 0x0075)
    public static let cypress = CompanyIdentifier(rawValue: 0x0131)
    public static let google = CompanyIdentifier(rawValue: 0x00E0)
    public static let linuxFoundation = CompanyIdentifier(rawValue: 0x05F1)

    public var name: String? {
        switch self {
        case .ericsson: "Ericsson"
        case .nokia: "Nokia"
        case .intel: "Intel"
        case .ibm: "IBM"
        case .microsoft: "Microsoft"
        case .broadcom: "Broadcom"
        case .qualcomm: "Qualcomm"
        case .apple: "Apple"
        case .nordic: "Nordic Semiconductor"
        case .realtek: "Realtek"
        case .samsung: "Samsung"
        case .cypress: "Cypress Semiconductor"
        case .google: "Google"
        case .linuxFoundation: "The Linux Foundation"
        default: nil
        }
    }

    public var description: String {
        let hex = String(rawValue, radix: 16, uppercase: true)
        return "\(name ?? "unknown company") (0x\(String(repeating: "0", count: 4 - hex.count))\(hex))"
    }
}

/// One AD structure: length, type, data (Core 5.4 Vol 3 Part C §11).
public struct ADStructure: Hashable, Sendable {
    public var type: ADType
    public var data: [UInt8]

    public init(type: ADType, data: [UInt8]) {
        self.type = type
        self.data = data
    }

    /// Splits advertising data into AD structures, keeping unknown types.
    ///
    /// Core 5.4 Vol 3 Part C §11: "If the Length field is set to zero, then the Data field has
    /// zero octets. This shall only occur to allow an early termination of the Advertising or
    /// Scan Response data." What follows a zero length must therefore be zero padding.
    public static func parse(_ bytes: [UInt8]) throws(DecodingError) -> [ADStructure] {
        var out: [ADStructure] = []
        var r = ByteReader(bytes)
        while !r.isAtEnd {
            let start = r.offset
            let length = Int(try r.readUInt8("AD length"))
            if length == 0 {
                let rest = r.readRest()
                if let bad = rest.firstIndex(where: { $0 != 0 }) {
                    throw .invalidValue(
                        what: "padding after the AD terminator at offset \(start) (byte at offset \(start + 1 + bad))",
                        value: Int(rest[bad]), allowed: "0")
                }
                break
            }
            guard r.remaining >= length else {
                throw .truncated(what: "AD structure at offset \(start) (length \(length))", needed: length, available: r.remaining)
            }
            let type = ADType(rawValue: try r.readUInt8("AD type"))
            let data = try r.readBytes(length - 1, "AD data")
            out.append(ADStructure(type: type, data: data))
        }
        return out
    }

    /// The encoded structures. Throws rather than truncate when they exceed `limit` bytes
    /// (31 for legacy advertising data, Core 5.4 Vol 4 Part E §7.8.7).
    public static func encode(_ structures: [ADStructure], limit: Int = 31) throws(DecodingError) -> [UInt8] {
        var w = ByteWriter()
        for s in structures {
            guard s.data.count <= 254 else {
                throw .invalidValue(what: "AD structure \(s.type) data length", value: s.data.count, allowed: "0…254")
            }
            w.uint8(UInt8(s.data.count + 1))
            w.uint8(s.type.rawValue)
            w.append(s.data)
        }
        guard w.bytes.count <= limit else {
            throw .invalidValue(what: "advertising data length", value: w.bytes.count, allowed: "0…\(limit)")
        }
        return w.bytes
    }

    /// A one-line human description of the structure's content.
    public var summary: String {
        switch type {
        case .flags:
            let bits = data.first ?? 0
            let names = [
                (0x01, "LE Limited Discoverable"), (0x02, "LE General Discoverable"), (0x04, "BR/EDR Not Supported"),
                (0x08, "LE and BR/EDR Controller"), (0x10, "LE and BR/EDR Host"),
            ].filter { Int(bits) & $0.0 != 0 }.map(\.1)
            return "0x\(data.hexString): \(names.isEmpty ? "none" : names.joined(separator: ", "))"
        case .shortenedLocalName, .completeLocalName:
            return "\"\(String(decoding: data, as: UTF8.self))\""
        case .txPowerLevel:
            return data.count == 1 ? "\(Int8(bitPattern: data[0])) dBm" : "malformed (\(data.count) bytes)"
        case .manufacturerSpecificData:
            guard data.count >= 2 else { return "malformed (\(data.count) bytes): \(data.hexString)" }
            let company = CompanyIdentifier(rawValue: UInt16(data[0]) | UInt16(data[1]) << 8)
            return "\(company): \(Array(data.dropFirst(2)).hexString)"
        default:
            return data.hexString
        }
    }
}
