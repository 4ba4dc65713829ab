// Controller & Baseband (OGF 0x03) and Informational (OGF 0x04) commands, plus the LE
// controller-wide commands that are not about advertising or scanning.

// Single-value return parameters, so `execute` hands back the value itself.

extension Int8: ReturnParametersDecodable {
    /// One signed byte (a power in dBm).
    public init(decoding reader: inout ByteReader) throws(DecodingError) {
        self = try reader.readInt8("TX power")
    }
}

extension UInt8: ReturnParametersDecodable {
    public init(decoding reader: inout ByteReader) throws(DecodingError) {
        self = try reader.readUInt8("return parameter")
    }
}

extension UInt16: ReturnParametersDecodable {
    /// Little-endian, as every HCI integer.
    public init(decoding reader: inout ByteReader) throws(DecodingError) {
        self = try reader.readUInt16LE("return parameter")
    }
}

extension BDAddress: ReturnParametersDecodable {
    public init(decoding reader: inout ByteReader) throws(DecodingError) {
        self = try BDAddress.read(from: &reader, "BD_ADDR")
    }
}

/// HCI_Set_Event_Mask: which events the controller may send. Core 5.4 Vol 4 Part E §7.3.1.
/// LE Meta events need bit 61 (`EventMask.leMeta`), which the default mask does not have.
public struct SetEventMask: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x03, ocf: 0x0001, "Set Event Mask", supportedCommandsBit: (5, 6))
    /// Event_Mask, 8 octets.
    public var eventMask: EventMask

    public init(eventMask: EventMask) { self.eventMask = eventMask }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.uint64LE(eventMask.rawValue)
    }
}

/// HCI_Reset: resets the controller and the link manager. Core 5.4 Vol 4 Part E §7.3.2.
public struct Reset: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x03, ocf: 0x0003, "Reset", supportedCommandsBit: (5, 7))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

/// HCI_Read_Local_Version_Information. Core 5.4 Vol 4 Part E §7.4.1.
public struct ReadLocalVersionInformation: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x04, ocf: 0x0001, "Read Local Version Information", supportedCommandsBit: (14, 3))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: ReturnParametersDecodable, Hashable {
        /// HCI_Version, 1 octet (Assigned Numbers: 0x0D = Core 5.4).
        public var hciVersion: UInt8
        /// HCI_Subversion, 2 octets.
        public var hciSubversion: UInt16
        /// LMP_Version (LL version for LE-only controllers), 1 octet.
        public var lmpVersion: UInt8
        /// Company_Identifier, 2 octets (Assigned Numbers).
        public var companyIdentifier: UInt16
        /// LMP_Subversion, 2 octets.
        public var lmpSubversion: UInt16

        public init(
            hciVersion: UInt8, hciSubversion: UInt16, lmpVersion: UInt8, companyIdentifier: UInt16,
            lmpSubversion: UInt16
        ) {
            self.hciVersion = hciVersion
            self.hciSubversion = hciSubversion
            self.lmpVersion = lmpVersion
            self.companyIdentifier = companyIdentifier
            self.lmpSubversion = lmpSubversion
        }

        public init(decoding r: inout ByteReader) throws(DecodingError) {
            hciVersion = try r.readUInt8("HCI_Version")
            hciSubversion = try r.readUInt16LE("HCI_Subversion")
            lmpVersion = try r.readUInt8("LMP_Version")
            companyIdentifier = try r.readUInt16LE("Company_Identifier")
            lmpSubversion = try r.readUInt16LE("LMP_Subversion")
        }

        /// The Core specification version a version number stands for (`5.4`), per
        /// Assigned Numbers §2.1; nil for numbers this table does not know.
        public static func coreVersionName(_ version: UInt8) -> String? {
            let names = [
                "1.0b", "1.1", "1.2", "2.0+EDR", "2.1+EDR", "3.0+HS", "4.0", "4.1", "4.2", "5.0", "5.1", "5.2", "5.3",
                "5.4", "6.0",
            ]
            return Int(version) < names.count ? names[Int(version)] : nil
        }
    }
}

/// HCI_Read_Local_Supported_Commands. Core 5.4 Vol 4 Part E §7.4.2.
public struct ReadLocalSupportedCommands: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x04, ocf: 0x0002, "Read Local Supported Commands", supportedCommandsBit: nil)
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    /// Supported_Commands, 64 octets: one bit per command, numbered by octet and bit
    /// (Core 5.4 Vol 4 Part E §6.27).
    public struct ReturnParameters: ReturnParametersDecodable, Hashable {
        public var octets: [UInt8]

        /// Pads or cuts nothing: anything but 64 octets is an error.
        public init(octets: [UInt8]) throws(DecodingError) {
            guard octets.count == 64 else {
                throw .invalidValue(what: "Supported_Commands length", value: octets.count, allowed: "64")
            }
            self.octets = octets
        }

        public init(decoding r: inout ByteReader) throws(DecodingError) {
            octets = try r.readBytes(64, "Supported_Commands")
        }

        /// Whether bit `bit` (0…7) of octet `octet` (0…63) is set; false outside those ranges.
        public func supports(octet: Int, bit: Int) -> Bool {
            guard (0..<octets.count).contains(octet), (0..<8).contains(bit) else { return false }
            return octets[octet] & (1 << UInt8(bit)) != 0
        }

        /// Whether the controller lists `opcode`; nil when this package does not know the
        /// opcode's position in the table (`HCICommandSpec.supportedCommandsBit`).
        public func supports(_ opcode: HCIOpcode) -> Bool? {
            guard let position = opcode.spec?.supportedCommandsBit else { return nil }
            return supports(octet: position.octet, bit: position.bit)
        }

        public static func == (a: Self, b: Self) -> Bool { a.octets == b.octets }
        public func hash(into h: inout Hasher) { h.combine(octets) }
    }
}

/// HCI_Read_BD_ADDR: the controller's public address. Core 5.4 Vol 4 Part E §7.4.6.
/// An LE-only controller without a public address returns 00:00:00:00:00:00.
public struct ReadBDAddr: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x04, ocf: 0x0009, "Read BD_ADDR", supportedCommandsBit: (15, 1))
    public typealias ReturnParameters = BDAddress
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

/// HCI_LE_Set_Event_Mask: which LE Meta subevents the controller may send.
/// Core 5.4 Vol 4 Part E §7.8.1. Extended Advertising Reports need bit 12, not in the default.
public struct LESetEventMask: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0001, "LE Set Event Mask", supportedCommandsBit: (25, 0))
    /// LE_Event_Mask, 8 octets.
    public var leEventMask: LEEventMask

    public init(leEventMask: LEEventMask) { self.leEventMask = leEventMask }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.uint64LE(leEventMask.rawValue)
    }
}

/// HCI_LE_Read_Local_Supported_Features. Core 5.4 Vol 4 Part E §7.8.3.
/// Returns LE_Features, 8 octets.
public struct LEReadLocalSupportedFeatures: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0003, "LE Read Local Supported Features", supportedCommandsBit: (25, 2))
    public typealias ReturnParameters = LEFeatures
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}
}

extension LEFeatures: ReturnParametersDecodable {
    public init(decoding reader: inout ByteReader) throws(DecodingError) {
        self.init(rawValue: try reader.readUInt64LE("LE_Features"))
    }
}

/// HCI_LE_Set_Random_Address: the random address used with `OwnAddressType.random` by
/// legacy advertising and scanning. Core 5.4 Vol 4 Part E §7.8.4.
public struct LESetRandomAddress: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x0005, "LE Set Random Address", supportedCommandsBit: (25, 4))
    /// Random_Address, 6 octets.
    public var randomAddress: BDAddress

    public init(randomAddress: BDAddress) { self.randomAddress = randomAddress }

    public func encodeParameters(into writer: inout ByteWriter) {
        writer.append(randomAddress.bytes)
    }
}

/// HCI_LE_Read_Transmit_Power: the minimum and maximum TX power the controller supports.
/// Core 5.4 Vol 4 Part E §7.8.74.
public struct LEReadTransmitPower: HCICommand, Hashable {
    public static let spec = HCICommandSpec(
        ogf: 0x08, ocf: 0x004B, "LE Read Transmit Power", supportedCommandsBit: (38, 7))
    public init() {}
    public func encodeParameters(into writer: inout ByteWriter) {}

    public struct ReturnParameters: ReturnParametersDecodable, Hashable {
        /// Min_TX_Power, 1 octet, dBm (−127…+20).
        public var min: Int8
        /// Max_TX_Power, 1 octet, dBm (−127…+20).
        public var max: Int8

        public init(min: Int8, max: Int8) {
            self.min = min
            self.max = max
        }

        public init(decoding r: inout ByteReader) throws(DecodingError) {
            min = try r.readInt8("Min_TX_Power")
            max = try r.readInt8("Max_TX_Power")
        }
    }
}
